"""Ingest of vLLM result files into the runs table, and its error reporting."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from hgresearch.data.ingest import (
    RUN_COLUMNS,
    parse_filename,
    read_result_file,
    read_runs,
    select_repeats,
)
from hgresearch.errors import InputError

H100_14B_16QPS = "vllm_200prompts16qps_DeepSeek-R1-Distill-Qwen-14B_sharegpt_1xNVIDIA-H100-PCIe.json"
R4090_14B_4QPS = "vllm_200prompts4qps_DeepSeek-R1-Distill-Qwen-14B_sharegpt_2xNVIDIA-GeForce-RTX-4090.json"


def test_whole_reference_set(reference_runs):
    runs = reference_runs
    assert len(runs) == 130
    assert runs.model.nunique() == 13
    assert list(runs.columns) == RUN_COLUMNS
    repeated = runs[runs.repeat_count > 1]
    assert len(repeated) == 20
    points = repeated.groupby(["model", "hardware", "request_rate_qps"]).size()
    assert len(points) == 10 and set(points) == {2}
    assert set(repeated.hardware) == {"1x H100-PCIe", "1x RTX-4090"}
    assert set(runs.gpu_name) == {"H100-PCIe", "RTX-4090"}
    assert set(runs.gpu_count) == {1, 2, 4, 8}
    assert set(runs.request_rate_qps) == {1.0, 4.0, 8.0, 16.0, 32.0}
    assert runs.run_id.is_unique
    # 0.8.5 stores no failure count: it is num_prompts - completed, never silently zero.
    assert (runs.failed == runs.num_prompts - runs.completed).all()
    assert runs.mean_e2el_ms.isna().all() and runs.energy_j.isna().all()


def test_repeats_follow_file_order(reference_dir, reference_runs):
    lines = (reference_dir / H100_14B_16QPS).read_text().splitlines()
    second = json.loads(lines[1])
    row = reference_runs[(reference_runs.source_file == H100_14B_16QPS)
                         & (reference_runs.source_line == 2)].iloc[0]
    assert row.repeat_index == 1 and row.repeat_count == 2
    assert row.duration_s == second["duration"]
    first = select_repeats(reference_runs, "first")
    assert len(first) == 120
    mean = select_repeats(reference_runs, "mean")
    point = mean[(mean.model == "DeepSeek-R1-Distill-Qwen-14B") & (mean.hardware == "1x H100-PCIe")
                 & (mean.request_rate_qps == 16)].iloc[0]
    expected = (json.loads(lines[0])["duration"] + second["duration"]) / 2
    assert point.duration_s == pytest.approx(expected)


def test_vllm_085_quirks(reference_dir):
    rows = read_result_file(reference_dir / R4090_14B_4QPS)
    assert len(rows) == 1
    raw = json.loads((reference_dir / R4090_14B_4QPS).read_text())
    row = rows[0]
    assert row["gpu_name"] == "RTX-4090" and row["gpu_count"] == 2
    assert row["request_goodput_rps"] == raw["request_goodput:"]
    assert row["hardware"] == "2x RTX-4090"
    assert row["total_tok"] == raw["total_input_tokens"] + raw["total_output_tokens"]


def test_filename_parsing():
    meta = parse_filename(R4090_14B_4QPS)
    assert meta == {"backend": "vllm", "num_prompts": 200, "request_rate_qps": 4.0,
                    "model": "DeepSeek-R1-Distill-Qwen-14B", "dataset": "sharegpt",
                    "gpu_count": 2, "gpu_name_raw": "NVIDIA-GeForce-RTX-4090"}
    assert parse_filename("summary.json") is None
    assert parse_filename("vllm_10promptsinfqps_m_random_1xCPU.json")["request_rate_qps"] == math.inf


def _copy(reference_dir: Path, tmp_path: Path, name: str = R4090_14B_4QPS) -> Path:
    target = tmp_path / name
    shutil.copy(reference_dir / name, target)
    return target


def _rewrite(path: Path, change) -> None:
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record) + "\n")


@pytest.mark.parametrize(
    ("change", "line", "field", "words"),
    [
        (lambda r: r.pop("duration"), 1, "duration", "missing"),
        (lambda r: r.update(completed="200"), 1, "completed", "expected int"),
        (lambda r: r.update(mean_ttft_ms=None), 1, "mean_ttft_ms", "expected"),
        (lambda r: r.update(gpu_name="NVIDIA-Voodoo-5"), 1, "gpu_name", "unknown GPU"),
        (lambda r: r.update(gpu_count="two"), 1, "gpu_count", "positive integer"),
        (lambda r: r.update(request_rate=8.0), 1, "request_rate", "file name says"),
        (lambda r: r.update(model_id="org/Other-Model"), 1, "model_id", "file name says"),
    ],
)
def test_bad_records_name_file_line_field(reference_dir, tmp_path, change, line, field, words):
    path = _copy(reference_dir, tmp_path)
    _rewrite(path, change)
    with pytest.raises(InputError) as info:
        read_runs(path)
    err = info.value
    assert (err.file, err.line, err.field) == (str(path), line, field)
    assert words in str(err) and str(path) in str(err)


def test_truncated_line_is_reported_with_its_line(reference_dir, tmp_path):
    path = _copy(reference_dir, tmp_path, H100_14B_16QPS)
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2] + "\n")
    with pytest.raises(InputError) as info:
        read_runs(path)
    assert info.value.line == 2 and "malformed JSON" in str(info.value)


def test_empty_file(tmp_path):
    path = tmp_path / R4090_14B_4QPS
    path.write_text("")
    with pytest.raises(InputError, match="empty") as info:
        read_runs(path)
    assert info.value.file == str(path)


def test_skip_option_warns_and_keeps_good_lines(reference_dir, tmp_path):
    good = _copy(reference_dir, tmp_path, H100_14B_16QPS)
    lines = good.read_text().splitlines()
    good.write_text(lines[0] + "\n{\"truncated\": \n")
    bad = _copy(reference_dir, tmp_path)
    _rewrite(bad, lambda r: r.pop("completed"))
    with pytest.warns(UserWarning, match="skipped 2 bad line") as record:
        runs = read_runs(tmp_path, on_error="skip")
    message = str(record[0].message)
    assert f"{good}:2" in message and "'completed'" in message
    assert len(runs) == 1


def test_newer_vllm_bench_serve_layout(reference_dir, tmp_path):
    record = json.loads((reference_dir / R4090_14B_4QPS).read_text())
    record["request_goodput"] = record.pop("request_goodput:")
    record.update(failed=3, completed=197, max_concurrency=16, gpu_count=2,
                  request_rate="inf", mean_e2el_ms=1234.5, p99_e2el_ms=2345.6)
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(record, indent=2))  # one pretty-printed object
    runs = read_runs(path)
    row = runs.iloc[0]
    assert row.source_format == "vllm-bench-serve"
    assert row.failed == 3 and row.max_concurrency == 16 and math.isinf(row.request_rate_qps)
    assert row.mean_e2el_ms == 1234.5 and row.p99_e2el_ms == 2345.6
    assert math.isnan(row.p90_e2el_ms)


def test_cli_ingest_writes_table_and_reports_errors(reference_dir, tmp_path):
    from typer.testing import CliRunner

    from hgresearch.cli import app
    from hgresearch.report.writers import read_frame

    out = tmp_path / "runs.csv"
    result = CliRunner().invoke(app, ["ingest", str(reference_dir), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert len(read_frame(out)) == 130
    bad = _copy(reference_dir, tmp_path)
    _rewrite(bad, lambda r: r.update(gpu_name="NVIDIA-Voodoo-5"))
    result = CliRunner().invoke(app, ["ingest", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}:1, field 'gpu_name'" in result.output


def test_run_folders_contribute_only_their_summary(reference_dir, tmp_path):
    record = json.loads((reference_dir / R4090_14B_4QPS).read_text())
    record["hgresearch_version"] = "0.1.0"
    run = tmp_path / "sweep" / "run-a"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps(record))
    (run / "requests.jsonl").write_text('{"request_id": 0}\n')
    (run / "config.json").write_text('{"seed": 1}')
    for target in (tmp_path / "sweep", run):
        runs = read_runs(target)
        assert len(runs) == 1
        assert runs.iloc[0].run_dir == str(run)
        assert runs.iloc[0].source_format == "hgresearch"
        assert runs.iloc[0].run_id.endswith("run-a")
