"""Ingest of the result files users have: newer ``vllm bench serve``, guidellm and aiperf
exports (small files written here in each tool's format, see the docstrings of
hgresearch.data.ingest.vllm/guidellm/aiperf for the version read), folders, duplicates, and every
bad input as one InputError."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from ingest_fixtures import ITLS_S, vllm_bench_serve_record

from hgresearch.data.ingest import (
    REQUESTS_TABLE_COLUMNS,
    Hardware,
    discover,
    parse_hardware_label,
    read_runs,
    read_tables,
)
from hgresearch.data.summary import describe
from hgresearch.errors import InputError
from hgresearch.paths import REPO_ROOT
from hgresearch.report.writers import write_frame


def write_json(path: Path, document: object, *, indent: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=indent) + "\n")
    return path


# --- vLLM bench serve ------------------------------------------------------------------------

def test_bench_serve_percentiles_from_median_and_per_request_arrays(tmp_path):
    path = write_json(tmp_path / "openai-4.0qps-Qwen2.5-7B-Instruct-20260101-120000.json",
                      vllm_bench_serve_record())
    tables = read_tables(path, hardware="2x RTX-4090")
    row = tables.runs.iloc[0]
    assert (row.gpu_name, row.gpu_count, row.hardware) == ("RTX-4090", 2, "2x RTX-4090")
    assert row.source_format == "vllm-bench-serve"
    # The file's own values win; p50 is its median; p90/p95/p100 come from the arrays.
    assert row.p99_ttft_ms == pytest.approx(29.9) and row.p50_ttft_ms == row.median_ttft_ms
    assert row.p90_ttft_ms == pytest.approx(np.percentile([20.0, 30.0], 90))
    gaps = np.array(ITLS_S[0] + ITLS_S[2]) * 1000
    assert row.p90_itl_ms == pytest.approx(describe(gaps)["p90"])
    tpot = [(200 - 20) / 3, (330 - 30) / 4]
    assert row.p95_tpot_ms == pytest.approx(np.percentile(tpot, 95))
    # No e2el statistic in the file: all of them from the latencies of successful requests.
    assert row.mean_e2el_ms == pytest.approx(265.0) and row.p100_e2el_ms == pytest.approx(330)
    requests = tables.requests
    assert list(requests.columns) == REQUESTS_TABLE_COLUMNS
    assert len(requests) == 3 and set(requests.run_id) == {row.run_id}
    assert requests.success.tolist() == [True, False, True]
    assert requests.error.isna().tolist() == [True, False, True]
    assert requests.error.iloc[1] == "Bad Request"
    assert requests.ttft_ms.iloc[0] == pytest.approx(20.0) and math.isnan(requests.ttft_ms[1])
    assert requests.tpot_ms.iloc[2] == pytest.approx(75.0)
    assert requests.event_t_ns.iloc[0][1] - requests.event_t_ns.iloc[0][0] == \
        pytest.approx(10e6, abs=1)


def test_bench_serve_without_arrays_leaves_unknown_percentiles_missing(tmp_path):
    path = write_json(tmp_path / "bench.json", vllm_bench_serve_record(detailed=False))
    tables = read_tables(path, hardware="1x H100-PCIe")
    row = tables.runs.iloc[0]
    assert row.p50_tpot_ms == 60.0 and row.p99_tpot_ms == 60.0
    # Never interpolated from p50/p99. vLLM keeps `latencies` by default, but without `errors`
    # the failed request (latency 0) cannot be told apart: e2el stays missing too.
    assert math.isnan(row.p90_ttft_ms) and math.isnan(row.p95_itl_ms)
    assert math.isnan(row.p100_e2el_ms)
    # When every request completed, the latencies are all successful ones.
    all_ok = vllm_bench_serve_record(detailed=False) | {
        "completed": 3, "failed": 0, "latencies": [0.2, 0.25, 0.33]}
    path = write_json(tmp_path / "all-ok.json", all_ok)
    tables = read_tables(path, hardware="1x H100-PCIe")
    assert tables.runs.iloc[0].p100_e2el_ms == pytest.approx(330)
    assert math.isnan(tables.runs.iloc[0].p90_ttft_ms)
    assert tables.requests.e2el_ms.tolist() == pytest.approx([200, 250, 330])


def test_vllm_06_benchmark_serving_record(tmp_path):
    """vLLM 0.6 ``benchmark_serving.py --save-result``: arrays but no ``latencies``, no
    ``failed``, ``best_of``/``use_beam_search``; E2EL and TPOT percentiles cannot be known."""
    record = vllm_bench_serve_record()
    for key in ("endpoint_type", "label", "burstiness", "max_concurrency", "failed",
                "request_goodput", "latencies", "start_times", "queue_times",
                "max_output_tokens_per_s", "max_concurrent_requests", "rtfx"):
        del record[key]
    record.update(best_of=1, use_beam_search=False, backend="vllm")
    path = write_json(tmp_path / "vllm-4.0qps-Qwen2.5-7B-Instruct-20241001-120000.json", record)
    tables = read_tables(path, hardware="1x H100-PCIe")
    row = tables.runs.iloc[0]
    assert row.source_format == "vllm-benchmark-serving" and row.failed == 1
    assert row.p90_ttft_ms == pytest.approx(29.0)
    assert math.isnan(row.p90_tpot_ms) and math.isnan(row.mean_e2el_ms)
    assert row.p99_tpot_ms == 60.0  # the file's own
    assert tables.requests.e2el_ms.isna().all() and tables.requests.t_sent_ns.isna().all()


def test_the_files_own_statistics_win_over_computed_ones(tmp_path):
    record = vllm_bench_serve_record() | {"p99_ttft_ms": 31.0, "mean_itl_ms": 99.0}
    path = write_json(tmp_path / "bench.json", record)
    row = read_runs(path, hardware="1x H100-PCIe").iloc[0]
    assert row.p99_ttft_ms == 31.0 and row.mean_itl_ms == 99.0
    assert row.p90_ttft_ms == pytest.approx(29.0)  # not in the file: computed


REAL_VLLM_FILE = (REPO_ROOT / "data" / "raw" / "peer-cpu" / "vllm-bench"
                  / "vllm-bench_100prompts_qps4-a.json")


def test_real_vllm_bench_serve_file_stripped_to_the_default_layout(tmp_path):
    """A file `vllm bench serve` wrote (scripts/peer_vllm_bench.py), without the metadata and
    percentiles that run asked for: what a default `--save-result` holds. p50 comes from the
    median; E2EL percentiles recomputed from its `latencies` match the ones vLLM wrote."""
    original = json.loads(REAL_VLLM_FILE.read_text())
    record = {k: v for k, v in original.items()
              if k not in ("gpu_name", "gpu_count", "dataset", "tensor_parallel_size", "client")
              and not (k.startswith(("p50_", "p90_", "p95_", "p100_")))}
    path = write_json(tmp_path / "vllm-4.0qps-tiny-llama-cpu-20260101-000000.json", record)
    row = read_runs(path, hardware="1x CPU").iloc[0]
    assert row.p50_ttft_ms == original["median_ttft_ms"] and math.isnan(row.p90_ttft_ms)
    for stat in ("p50", "p90", "p95", "p100"):
        assert row[f"{stat}_e2el_ms"] == pytest.approx(original[f"{stat}_e2el_ms"], rel=1e-9)
    assert row.p99_itl_ms == original["p99_itl_ms"] and row.hardware == "1x CPU"


def test_all_missing_fields_in_one_error(tmp_path):
    record = vllm_bench_serve_record(detailed=False)
    for key in ("duration", "total_input_tokens", "mean_ttft_ms", "median_itl_ms"):
        del record[key]
    path = write_json(tmp_path / "bench.json", record)
    with pytest.raises(InputError) as info:
        read_runs(path)
    message = str(info.value)
    assert "\n" not in message and "5 required fields are missing" in message
    for field in ("duration", "total_input_tokens", "mean_ttft_ms", "median_itl_ms",
                  "gpu_name"):
        assert field in message


def test_hardware_sidecar_and_disagreement(tmp_path):
    write_json(tmp_path / "run1.json", vllm_bench_serve_record(detailed=False))
    write_json(tmp_path / "run1.hardware.json", {"hardware": "4 x (2x RTX-4090)"})
    row = read_runs(tmp_path, hardware="1x H100-PCIe").iloc[0]  # the sidecar wins
    assert (row.gpu_count, row.replicas, row.hardware) == (2, 4, "4 x (2x RTX-4090)")
    folder = tmp_path / "other"
    write_json(folder / "run2.json", vllm_bench_serve_record(detailed=False))
    write_json(folder / "hardware.json", {"gpu_name": "NVIDIA H100 PCIe", "gpu_count": 2})
    assert read_runs(folder).iloc[0].hardware == "2x H100-PCIe"
    record = vllm_bench_serve_record(detailed=False) | {"gpu_name": "NVIDIA-H100-PCIe"}
    named = write_json(tmp_path / "named" / "run3.json", record)
    # --hardware is for files that name none: the record's own is kept, with a warning
    with pytest.warns(UserWarning, match="names its own hardware, 1x H100-PCIe, which is kept"):
        assert read_runs(named, hardware="2x RTX-4090").iloc[0].hardware == "1x H100-PCIe"
    # a sidecar beside the file is the file's own statement: a disagreement is an error
    write_json(tmp_path / "named" / "hardware.json", {"gpu_name": "RTX-4090", "gpu_count": 2})
    with pytest.raises(InputError, match="the record says 1x H100-PCIe") as info:
        read_runs(named)
    assert info.value.field == "gpu_name"


@pytest.mark.parametrize(("label", "expected"), [
    ("2x RTX-4090", Hardware("RTX-4090", 2, 1)),
    ("2 x NVIDIA GeForce RTX 4090", Hardware("RTX-4090", 2, 1)),
    ("H100-PCIe", Hardware("H100-PCIe", 1, 1)),
    ("4 x (2x RTX-4090)", Hardware("RTX-4090", 2, 4)),
])
def test_hardware_labels_round_trip(label, expected):
    assert parse_hardware_label(label) == expected
    assert parse_hardware_label(expected.label) == expected


@pytest.mark.parametrize("label", ["", "2x Voodoo-5", "0x RTX-4090", "2x (RTX-4090"])
def test_bad_hardware_label(label):
    with pytest.raises(InputError, match="hardware"):
        parse_hardware_label(label)


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"completed": -1}, "completed", "negative"),
        ({"duration": -1.5}, "duration", "negative"),
        ({"completed": 4}, "completed", "more than num_prompts"),
        ({"mean_ttft_ms": float("inf")}, "mean_ttft_ms", "impossible"),
        ({"p99_itl_ms": float("nan")}, "p99_itl_ms", "impossible"),
        ({"ttfts": [0.02, float("inf"), 0.03]}, "ttfts", "impossible"),
        ({"output_throughput": "Infinity"}, "output_throughput", "impossible"),
    ],
)
def test_impossible_values_name_file_line_field(tmp_path, change, field, words):
    good = json.dumps(vllm_bench_serve_record())
    bad = json.dumps(vllm_bench_serve_record() | change | {"date": "other"})  # NaN/Infinity
    path = tmp_path / "appended.jsonl"
    path.write_text(good + "\n" + bad + "\n")
    with pytest.raises(InputError) as info:
        read_runs(path, hardware="1x RTX-4090")
    assert (info.value.file, info.value.line, info.value.field) == (str(path), 2, field)
    assert words in str(info.value)


# --- guidellm and aiperf (their own files, tests/data/tools; field checks: test_ingest_tools) --

TOOLS = REPO_ROOT / "tests" / "data" / "tools"


def _guidellm_report() -> dict:
    path = TOOLS / "guidellm-0.8.1" / "two-rates-errors" / "benchmarks.json"
    return json.loads(path.read_text())


def test_guidellm_missing_fields_listed_together(tmp_path):
    report = _guidellm_report()
    del report["benchmarks"][0]["config"]["backend"]["model"]
    del report["config"]["spec"]["backend"]["model"]
    del report["benchmarks"][0]["metrics"]["time_to_first_token_ms"]
    path = write_json(tmp_path / "benchmarks.json", report)
    with pytest.raises(InputError) as info:
        read_runs(path)
    message = str(info.value)
    assert "\n" not in message and "3 required fields are missing" in message, message
    assert "config.backend.model" in message and "time_to_first_token_ms" in message
    assert "hardware" in message


def test_guidellm_bad_benchmark_is_named_by_position_and_skippable(tmp_path):
    report = _guidellm_report()
    totals = report["benchmarks"][1]["metrics"]["request_totals"]
    totals["successful"] = totals["total"] + 1  # more than were sent
    path = write_json(tmp_path / "benchmarks.json", report, indent=2)
    with pytest.raises(InputError, match="more than num_prompts") as info:
        read_runs(path, hardware="1x H100-PCIe")
    assert (info.value.line, info.value.field) == (2, "completed")
    with pytest.warns(UserWarning, match=f"{path}:2"):
        assert len(read_runs(path, hardware="1x H100-PCIe", on_error="skip")) == 1


def test_aiperf_export_found_below_a_folder_with_its_records(tmp_path):
    source = TOOLS / "aiperf-0.13.0" / "errors"
    run = tmp_path / "artifacts" / "run"
    run.mkdir(parents=True)
    for name in ("profile_export_aiperf.json", "profile_export.jsonl"):
        (run / name).write_bytes((source / name).read_bytes())
    write_json(run / "hardware.json", {"hardware": "1x RTX-4090"})
    tables = read_tables(tmp_path)  # profile_export.jsonl is not a run of its own
    assert len(tables.runs) == 1 and tables.runs.iloc[0].hardware == "1x RTX-4090"
    records = (source / "profile_export.jsonl").read_text().splitlines()
    assert len(tables.requests) == len(records)


# --- folders, duplicates, dataset ------------------------------------------------------------

def test_sub_folders_are_read_and_reported(tmp_path):
    write_json(tmp_path / "a" / "run.json", vllm_bench_serve_record(detailed=False))
    write_json(tmp_path / "a" / "b" / "run.json",
               vllm_bench_serve_record(detailed=False) | {"duration": 2.0})
    write_json(tmp_path / "_sweep" / "status.json", {"not": "a run"})
    tables = read_tables(tmp_path, hardware="1x RTX-4090")
    assert len(tables.runs) == 2
    assert tables.files_read == [tmp_path / "a" / "b" / "run.json", tmp_path / "a" / "run.json"]
    found, ignored = discover(tmp_path)
    assert len(found) == 2 and ignored == []


def test_same_run_twice_is_kept_once_with_a_warning(tmp_path):
    record = vllm_bench_serve_record(detailed=False)
    first = write_json(tmp_path / "runs" / "x.json", record)
    copy = write_json(tmp_path / "runs" / "sub" / "x-copy.json", record)
    for paths in ([first, first], [tmp_path / "runs", tmp_path / "runs" / "sub"]):
        with pytest.warns(UserWarning, match="given twice") as caught:
            runs = read_runs(paths, hardware="1x RTX-4090")
        assert len(runs) == 1 and runs.repeat_count.iloc[0] == 1
        assert str(first) in str(caught[0].message) or str(copy) in str(caught[0].message)


def test_dataset_comes_from_the_content(tmp_path):
    record = vllm_bench_serve_record(detailed=False) | {"dataset_name": "sharegpt"}
    path = write_json(tmp_path / "renamed.json", record)
    assert read_runs(path, hardware="1x RTX-4090").iloc[0].dataset == "sharegpt"


# --- crashes that are now errors -------------------------------------------------------------

def test_binary_file_is_an_error_or_skipped(tmp_path):
    good = write_json(tmp_path / "good.json", vllm_bench_serve_record(detailed=False))
    binary = tmp_path / "image.json"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    with pytest.raises(InputError, match="not a UTF-8 text file") as info:
        read_runs(binary)
    assert info.value.file == str(binary) and "\n" not in str(info.value)
    with pytest.warns(UserWarning, match="image.json"):
        runs = read_runs([good, binary], on_error="skip", hardware="1x RTX-4090")
    assert len(runs) == 1


def test_empty_folder_missing_path_and_nothing_left(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="no result files") as info:
        read_runs(empty)
    assert info.value.file == str(empty)
    with pytest.raises(InputError, match="no such file or folder") as info:
        read_runs(tmp_path / "typo.json")
    assert info.value.file == str(tmp_path / "typo.json")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"truncated": \n')
    with pytest.warns(UserWarning, match="skipped 1 bad line"), \
            pytest.raises(InputError, match="every line was skipped"):
        read_runs(bad, on_error="skip")


def test_no_paths():
    with pytest.raises(InputError, match="no result files or folders given"):
        read_runs([])


def test_unknown_output_suffix(tmp_path):
    with pytest.raises(InputError, match="unsupported table format '.xlsx'") as info:
        write_frame(pd.DataFrame({"a": [1]}), tmp_path / "runs.xlsx")
    assert info.value.file == str(tmp_path / "runs.xlsx")
