"""Calibrating a user's runs (issue 19, items 2 and 3): the committed CPU sweep calibrates with
the KV cache its server reported; the KV source falls back from the server's metrics to its log
to the catalogs; other tools' files calibrate where they hold the summaries, and an input that
cannot be calibrated says what is missing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from hgresearch.data.ingest.common import Hardware
from hgresearch.errors import InputError
from hgresearch.paths import REPO_ROOT
from hgresearch.sim.calibration_file import read_calibration_file, write_calibration_file
from hgresearch.sim.user_calibration import (
    available_targets,
    calibrate_runs,
    load_user_runs,
    parse_user_hardware,
    point_workload,
)
from hgresearch.sim.validation import VALIDATION_METRICS

SWEEP = REPO_ROOT / "data" / "raw" / "cpu-steady" / "protocol"
CONFIG_DIR = SWEEP / "tiny-llama-cpu" / "1xCPU"
TOOLS = REPO_ROOT / "tests" / "data" / "tools"


@pytest.fixture(scope="module")
def sweep_calibration():
    return calibrate_runs([SWEEP], label="1x CPU")


def test_the_committed_sweep_calibrates_with_the_servers_kv_cache(sweep_calibration,
                                                                  tmp_path: Path) -> None:
    f = sweep_calibration.file
    assert f.config_label == "tiny-llama-cpu on 1x CPU" and f.method == "summaries"
    # vllm:cache_config_info of the runs' server_metrics.json, not the catalogs' (no CPU memory)
    assert (f.kv_cache.source, f.kv_cache.num_blocks, f.kv_cache.block_size) == \
        ("server_metrics", 2048, 128)
    assert len(f.runs) == 10 and all(len(r.files) == 3 for r in f.runs)
    assert set(f.intervals) == {"c0_s", "c_prefill_s_per_token", "c_decode_s_per_seq"}
    for key, (low, high) in f.intervals.items():
        assert low < getattr(f.coefficients, key) < high
    validation = sweep_calibration.validation
    assert sorted(validation.held_out_qps.unique()) == [1.0, 4.0, 8.0, 16.0, 32.0]
    assert set(validation.metric) == set(VALIDATION_METRICS)
    assert set(f.validation) == set(VALIDATION_METRICS)
    # written and read back: the runs' hashes check out
    path = write_calibration_file(f, tmp_path / "cpu.calibration.yaml")
    assert read_calibration_file(path).coefficients == f.coefficients


def test_kv_source_falls_back_to_the_server_log_then_the_catalogs(tmp_path: Path) -> None:
    """Without server_metrics.json the block count comes from the server's start-up log (V1
    states tokens: 262,144); without a log, for a GPU the catalogs know, from its memory."""
    copy = tmp_path / "runs" / "1xCPU"
    for rate in ("qps1-rep0", "qps8-rep0", "qps32-rep0"):
        shutil.copytree(CONFIG_DIR / rate, copy / rate)
        (copy / rate / "server_metrics.json").unlink()
    shutil.copy(CONFIG_DIR / "server.log", copy / "server.log")
    logged = calibrate_runs([copy], validate=False).file.kv_cache
    assert (logged.source, logged.tokens) == ("server_log", 262144)
    assert logged.detail.endswith("server.log")
    for log in copy.rglob("server.log"):
        log.unlink()
    with pytest.raises(InputError, match=r"field '--kv-blocks': no KV cache size for 1x CPU"):
        calibrate_runs([copy], validate=False)
    given = calibrate_runs([copy], kv_blocks=500, block_size=32, validate=False).file.kv_cache
    assert (given.source, given.num_blocks, given.block_size) == ("given", 500, 32)


def test_a_vllm_bench_serve_file_calibrates_on_hardware_outside_the_catalogs() -> None:
    """`vllm bench serve --save-detailed` (vLLM 0.32): per-request send times and lengths are
    replayed; the label names a GPU no catalog knows, the KV cache is given."""
    path = TOOLS / "vllm-bench-serve-0.32.0" / "detailed-errors"
    result = calibrate_runs([path], label="1x MI300X", model="tiny-llama-cpu", kv_blocks=4096)
    f = result.file
    assert (f.gpu_name, f.gpu_count, f.floor) == ("MI300X", 1, None)
    assert any("not in hgresearch/data/catalogs/hardware.csv" in n for n in result.notes)
    assert any("validation needs 3 offered rates" in n for n in result.notes)
    assert f.runs[0].source_format == "vllm-bench-serve"


@pytest.mark.parametrize(("paths", "kwargs", "message"), [
    ([TOOLS / "vllm-bench-serve-0.32.0" / "default"], {},
     r"field 'gpu_name': required field is missing: gpu_name \(or --label 'Nx GPU'"),
    ([TOOLS / "guidellm-0.8.1" / "poisson-10rps"], {"label": "1x H200"},
     r"field 'model': model 'test-model' is not in .*pass --model NAME .* or --architecture"),
    ([TOOLS / "guidellm-0.8.1" / "poisson-10rps"],
     {"label": "1x H200", "model": "tiny-llama-cpu", "method": "steps"},
     r"--method steps needs per-token timestamps in every run"),
    ([SWEEP, REPO_ROOT / "data" / "raw" / "fleet-cpu" / "alone-small-llama-cpu"], {},
     r"the runs hold 2 configurations \(small-llama-cpu on 1x CPU \(2 runs\); tiny-llama"),
    ([SWEEP], {"label": "1x H200"}, r"the record says 1x CPU but the hardware given says"),
])
def test_an_input_that_cannot_be_calibrated_says_what_is_missing(paths, kwargs, message):
    with pytest.raises(InputError, match=message):
        calibrate_runs(paths, validate=False, **kwargs)


def test_missing_summaries_are_named_with_the_runs_that_lack_them() -> None:
    runs = load_user_runs([CONFIG_DIR / "qps1-rep0", CONFIG_DIR / "qps8-rep0"]).runs
    assert available_targets(runs) == ("duration_s", "request_throughput_rps",
                                       "output_throughput_tok_per_s", "mean_tpot_ms",
                                       "p50_ttft_ms", "p90_ttft_ms", "p99_ttft_ms")
    partial = runs.assign(p90_ttft_ms=[float("nan"), 12.0])
    assert "p90_ttft_ms" not in available_targets(partial)
    bare = runs.assign(p50_ttft_ms=float("nan"), p90_ttft_ms=float("nan"),
                       p99_ttft_ms=float("nan"))
    with pytest.raises(InputError, match=r"a TTFT percentile .* is missing in 2 run\(s\) "
                                         r"\(.*summary.json:1"):
        available_targets(bare)


def test_a_concurrency_capped_run_without_send_times_cannot_be_replayed() -> None:
    run = pd.Series({"request_rate_qps": float("inf"), "max_concurrency": 8,
                     "source_file": "x.json", "source_line": 1, "completed": 10,
                     "total_input_tok": 100, "total_output_tok": 100})
    with pytest.raises(InputError, match=r"x.json:1.*capped at 8 concurrent requests"):
        point_workload(run, None)
    workload = point_workload(pd.Series({**run.to_dict(), "max_concurrency": None,
                                         "request_rate_qps": 4.0}), None)
    assert workload.num_requests == 10 and workload.lengths_source == "sharegpt_like"
    # an unbounded rate without a cap (vllm bench serve's default) sends everything at once
    burst = point_workload(pd.Series({**run.to_dict(), "max_concurrency": None}), None)
    assert burst.num_requests == 10 and not burst.arrivals_s.any()


def test_hardware_labels_keep_gpus_outside_the_catalogs() -> None:
    assert parse_user_hardware("2x NVIDIA H100 PCIe") == Hardware("H100-PCIe", 2)
    assert parse_user_hardware("1x MI300X") == Hardware("MI300X", 1)
    with pytest.raises(InputError, match="field '--label': expected 'Nx GPU'"):
        parse_user_hardware("H200")


def test_your_plan_is_sized_at_the_slow_end_of_your_own_validation(sweep_calibration) -> None:
    """Notebook 10's plan uses the slow end of the calibration's own leave-one-rate-out TPOT
    error: a factor above 1 when some held-out rate ran slower than predicted, the planner's
    conformal rank of those residuals."""
    from hgresearch.report.user_hardware import slow_end_factor
    from hgresearch.sim.intervals import PredictionIntervals

    tpot = sweep_calibration.validation
    tpot = tpot[tpot.metric == "mean_tpot_ms"].error_pct.to_numpy() / 100
    expected = PredictionIntervals({"mean_tpot_ms": tpot.tolist()}, "t").step_time_factor(0.9)
    assert slow_end_factor(sweep_calibration, 0.9) == pytest.approx(expected)
    assert slow_end_factor(sweep_calibration, 0.9) == pytest.approx(1 / (1 + tpot.min()))
    assert (tpot < 0).any() and slow_end_factor(sweep_calibration, 0.9) > 1
