"""Ingest of files written by the real tools (tests/data/tools, made by
scripts/make_tool_fixtures.py; PROVENANCE.json beside each says tool, version and command):
every runs-table field equals the tool's own number in its own file, the version is told from
content, and what cannot be read is one line."""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hgresearch.cli import app
from hgresearch.data.ingest import read_tables
from hgresearch.data.ingest.aiperf import SUMMARY_FILE
from hgresearch.errors import InputError
from hgresearch.paths import REPO_ROOT

TOOLS = REPO_ROOT / "tests" / "data" / "tools"
HARDWARE = "1x H100-PCIe"


def _cases(tool: str) -> list[Path]:
    return sorted(p for p in TOOLS.glob(f"{tool}-*/*") if (p / "PROVENANCE.json").is_file())


def _provenance(case: Path) -> dict[str, Any]:
    return json.loads((case / "PROVENANCE.json").read_text())


def _result(case: Path) -> Path:
    files = [case / name for name in _provenance(case)["files"] if name != "profile_export.jsonl"]
    assert len(files) == 1, files
    return files[0]


def _read(case: Path):  # noqa: ANN202
    return read_tables(case, hardware=HARDWARE)


def test_every_pinned_tool_version_has_real_files():
    found = {f"{_provenance(c)['tool']}-{_provenance(c)['version']}" for c in
             _cases("*")}
    assert {"aiperf-0.1.1", "aiperf-0.3.0", "aiperf-0.8.0", "aiperf-0.10.0", "aiperf-0.13.0",
            "guidellm-0.3.1", "guidellm-0.8.1", "vllm-benchmark-serving-0.4.0",
            "vllm-benchmark-serving-0.5.0", "vllm-benchmark-serving-0.6.0",
            "vllm-benchmark-serving-0.8.5", "vllm-bench-serve-0.32.0"} <= found


# --- aiperf ------------------------------------------------------------------------------------

_AIPERF_STATS = {"mean": "avg", "p50": "p50", "median": "p50", "p90": "p90", "p95": "p95",
                 "p99": "p99", "p100": "max", "std": "std"}
_AIPERF_METRICS = {"ttft": ("time_to_first_token", "ttft"), "tpot": ("inter_token_latency",),
                   "itl": ("inter_chunk_latency",), "e2el": ("request_latency",)}


@pytest.mark.parametrize("case", _cases("aiperf"), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_aiperf_fields_equal_aiperfs_own(case: Path):
    document = json.loads((case / SUMMARY_FILE).read_text())
    metrics = document.get("records", document)
    row = _read(case).runs.iloc[0]

    def own(name: str, key: str = "avg") -> float | None:
        return (metrics.get(name) or {}).get(key)

    assert row.source_format == "aiperf"
    assert row.completed == own("request_count")
    assert row.failed == (own("error_request_count") or 0)
    assert row.request_throughput_rps == own("request_throughput")
    assert row.output_throughput_tok_per_s == own("output_token_throughput")
    if own("total_token_throughput") is not None:
        assert row.total_token_throughput_tok_per_s == own("total_token_throughput")
    # duration_s is the window aiperf's throughputs are over
    assert row.request_throughput_rps * row.duration_s == pytest.approx(row.completed)
    if own("total_isl") is not None:
        assert (row.total_input_tok, row.total_output_tok) == (own("total_isl"), own("total_osl"))
        assert row.output_throughput_tok_per_s * row.duration_s == pytest.approx(
            row.total_output_tok)
    for metric, names in _AIPERF_METRICS.items():
        name = next((n for n in names if n in metrics), None)
        for stat, key in _AIPERF_STATS.items():
            if name is not None and own(name, key) is not None:
                assert row[f"{stat}_{metric}_ms"] == own(name, key), (metric, stat)
    version = _provenance(case)["version"]
    if "aiperf_version" in document:
        assert row.source_version == document["aiperf_version"] == version
    else:
        low, high = row.source_version.replace(".x", "").split("-") if "-" in \
            row.source_version else (row.source_version.replace(".x", ""),) * 2
        assert low <= version[: len(low)] <= high


@pytest.mark.parametrize("version", ["0.10.0", "0.13.0"])
def test_aiperf_load_comes_from_its_phases(version: str):
    poisson = _read(TOOLS / f"aiperf-{version}" / "poisson-10rps").runs.iloc[0]
    phase = json.loads((TOOLS / f"aiperf-{version}" / "poisson-10rps" / SUMMARY_FILE)
                       .read_text())["input_config"]["phases"][0]
    assert (phase["type"], phase["rate"]) == ("poisson", 10.0)
    assert (poisson.request_rate_qps, poisson.burstiness) == (10.0, 1.0)
    assert math.isnan(poisson.max_concurrency) and poisson.num_prompts == phase["requests"]
    capped = _read(TOOLS / f"aiperf-{version}" / "concurrency-4").runs.iloc[0]
    assert math.isinf(capped.request_rate_qps) and capped.max_concurrency == 4


def test_aiperf_0_13_server_died_midway_keeps_aiperfs_window():
    case = TOOLS / "aiperf-0.13.0" / "server-died"
    document = json.loads((case / SUMMARY_FILE).read_text())
    row = _read(case).runs.iloc[0]
    assert row.failed > 0 and row.completed + row.failed == row.num_prompts
    window = (datetime.fromisoformat(document["end_time"])
              - datetime.fromisoformat(document["start_time"])).total_seconds()
    assert row.duration_s == pytest.approx(window, abs=2e-6)
    # Not count / benchmark_duration (first request to last response), which is another window.
    assert row.request_throughput_rps != pytest.approx(
        row.completed / document["benchmark_duration"]["avg"], rel=1e-3)


def test_aiperf_errored_requests_keep_code_and_message():
    tables = _read(TOOLS / "aiperf-0.13.0" / "errors")
    failed = tables.requests[~tables.requests.success]
    assert len(failed) == tables.runs.iloc[0].failed
    assert failed.http_status.tolist() == [500] * len(failed)
    assert all("injected fault" in text for text in failed.error)


def test_aiperf_0_1_is_read_as_aiperf_not_vllm():
    row = _read(TOOLS / "aiperf-0.1.1" / "poisson-10rps").runs.iloc[0]
    records = json.loads((TOOLS / "aiperf-0.1.1" / "poisson-10rps" / SUMMARY_FILE)
                         .read_text())["records"]
    assert (row.source_format, row.source_version) == ("aiperf", "0.1.x")
    assert row.total_output_tok == round(records["output_sequence_length"]["avg"]
                                         * records["output_sequence_length"]["count"])


def test_aiperf_unknown_layout_names_the_version(tmp_path: Path):
    document = json.loads((TOOLS / "aiperf-0.13.0" / "poisson-10rps" / SUMMARY_FILE).read_text())
    document["aiperf_version"] = "0.14.0"
    del document["input_config"]["phases"]
    del document["input_config"]["models"]
    path = tmp_path / SUMMARY_FILE
    path.write_text(json.dumps(document))
    with pytest.raises(InputError) as info:
        read_tables(path, hardware=HARDWARE)
    message = str(info.value)
    assert "\n" not in message and "aiperf 0.14.0" in message and "0.1-0.13" in message


# --- guidellm ----------------------------------------------------------------------------------

@pytest.mark.parametrize("case", _cases("guidellm"), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_guidellm_fields_equal_guidellms_own(case: Path):
    report = json.loads(_result(case).read_text())
    runs = _read(case).runs.sort_values("source_line")
    assert len(runs) == len(report["benchmarks"])
    for (_, row), bench in zip(runs.iterrows(), report["benchmarks"], strict=True):
        metrics = bench["metrics"]
        totals = bench.get("request_totals") or metrics["request_totals"]
        assert (row.completed, row.num_prompts) == (totals["successful"], totals["total"])
        # Sums of floats: rounded, never truncated.
        assert row.total_input_tok == round(metrics["prompt_token_count"]["successful"]
                                            ["total_sum"])
        assert row.total_output_tok == round(metrics["output_token_count"]["successful"]
                                             ["total_sum"])
        assert row.duration_s == bench["duration"]
        ttft = metrics["time_to_first_token_ms"]["successful"]
        assert (row.mean_ttft_ms, row.median_ttft_ms, row.p99_ttft_ms, row.p100_ttft_ms) == (
            ttft["mean"], ttft["median"], ttft["percentiles"]["p99"], ttft["max"])
        e2el = metrics["request_latency"]["successful"]
        assert row.mean_e2el_ms == pytest.approx(e2el["mean"] * 1000)
        settings = bench.get("config") or bench["args"]
        strategy = settings["strategy"]
        if strategy["type_"] in ("constant", "poisson"):
            assert row.request_rate_qps == strategy["rate"]
            # guidellm's built-in ceiling (strategy.max_concurrency) is not a cap the user set
            assert math.isnan(row.max_concurrency)
        elif strategy["type_"] == "concurrent":
            assert row.max_concurrency == strategy["streams"]
        version = report.get("metadata", {}).get("guidellm_version")
        assert row.source_version == (version or "0.2-0.3")


def test_guidellm_errored_requests_keep_their_message():
    case = TOOLS / "guidellm-0.8.1" / "two-rates-errors"
    report = json.loads(_result(case).read_text())
    messages = [r["info"]["error"] for b in report["benchmarks"]
                for r in b["requests"]["errored"]]
    tables = _read(case)
    failed = tables.requests[~tables.requests.success]
    assert len(failed) == tables.runs.failed.sum() == len(messages) > 0
    assert sorted(failed.error) == sorted(messages)
    assert failed.http_status.tolist() == [500] * len(failed)


def test_guidellm_unknown_metadata_version_is_one_line(tmp_path: Path):
    report = json.loads(_result(TOOLS / "guidellm-0.3.1" / "constant-10rps").read_text())
    report["metadata"] = {"version": 3, "guidellm_version": "0.9.0"}
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(report))
    with pytest.raises(InputError) as info:
        read_tables(path, hardware=HARDWARE)
    assert "\n" not in str(info.value) and "guidellm 0.9.0" in str(info.value)
    assert "metadata version 3" in str(info.value)


# --- vLLM --------------------------------------------------------------------------------------

_VLLM_KEYS = {"num_prompts": "num_prompts", "completed": "completed", "duration": "duration_s",
              "total_input_tokens": "total_input_tok", "total_output_tokens": "total_output_tok",
              "request_throughput": "request_throughput_rps",
              "output_throughput": "output_throughput_tok_per_s",
              "total_token_throughput": "total_token_throughput_tok_per_s",
              "request_goodput": "request_goodput_rps", "request_goodput:": "request_goodput_rps",
              "failed": "failed", "burstiness": "burstiness",
              "max_concurrency": "max_concurrency", "request_rate": "request_rate_qps"}


@pytest.mark.parametrize("case", _cases("vllm"), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_vllm_fields_equal_vllms_own(case: Path):
    path = _result(case)
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    tables = _read(case)
    runs = tables.runs.sort_values("source_line")
    assert len(runs) == len(records)
    for (_, row), record in zip(runs.iterrows(), records, strict=True):
        for key, column in _VLLM_KEYS.items():
            if record.get(key) is not None:
                assert row[column] == pytest.approx(float(record[key]), rel=1e-12), key
        for key, value in record.items():
            if key.endswith("_ms") and value is not None:
                assert row[key] == value, key
        if "input_throughput" in record:  # 0.4-0.5: total = input + output throughput
            assert row.total_token_throughput_tok_per_s == pytest.approx(
                record["input_throughput"] + record["output_throughput"])
        if "failed" not in record:
            assert row.failed == record["num_prompts"] - record["completed"]
        if "errors" in record:
            failed = tables.requests[(tables.requests.run_id == row.run_id)
                                     & ~tables.requests.success]
            assert failed.error.tolist() == [e for e in record["errors"] if e]
    expected = {"0.4.0": "0.4", "0.5.0": "0.5", "0.6.0": "0.6.0-0.6.3", "0.8.5": "0.6.4-0.8",
                "0.32.0": "0.9+"}[_provenance(case)["version"]]
    assert set(runs.source_version) == {expected}


def test_vllm_before_0_6_4_is_poisson():
    row = _read(TOOLS / "vllm-benchmark-serving-0.4.0" / "poisson-10rps").runs.iloc[0]
    assert (row.request_rate_qps, row.burstiness) == (10.0, 1.0)


# --- any file ----------------------------------------------------------------------------------

def test_json_that_is_no_benchmark_is_not_a_recognised_format(tmp_path: Path):
    path = tmp_path / "config.yaml.json"
    path.write_text(json.dumps({"name": "x", "duration": 3, "layers": [1, 2]}, indent=2))
    with pytest.raises(InputError) as info:
        read_tables(path, hardware=HARDWARE)
    assert "not a recognised format" in str(info.value) and "required" not in str(info.value)


def test_cli_summary_counts_only_files_that_gave_runs(tmp_path: Path):
    good = [_result(TOOLS / "vllm-bench-serve-0.32.0" / "default"),
            TOOLS / "aiperf-0.13.0" / "errors" / SUMMARY_FILE]
    folder = tmp_path / "in"
    folder.mkdir()
    for i, path in enumerate(good):
        (folder / f"r{i}").mkdir()
        (folder / f"r{i}" / path.name).write_bytes(path.read_bytes())
    (folder / "junk.json").write_text(json.dumps({"hello": "world"}))
    (folder / "cut.jsonl").write_text('{"model_id": \n')
    out = tmp_path / "runs.csv"
    result = CliRunner().invoke(app, ["ingest", str(folder), "--hardware", HARDWARE,
                                      "--skip-bad-lines", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "2 runs from 2 file(s) (2 file(s) skipped)" in result.stdout
