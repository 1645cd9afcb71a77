"""Measured energy end to end: the real measurement client writes a run folder while a fake
NVML (a documented test double: this machine has no GPU) replays known power traces; the
energy module must recover that power from the folder, with a confidence interval, and the
runs table must carry it."""

from __future__ import annotations

import math

import pytest
from fake_nvml import CONSTANT_TRACE, FakeNVML

from hgresearch.accounting import energy
from hgresearch.bench import telemetry
from hgresearch.bench.config import BenchConfig
from hgresearch.bench.runner import run_benchmark
from hgresearch.bench.server.mock import MockServerConfig, serve_in_thread
from hgresearch.data.ingest import read_runs


def test_bench_run_folder_gets_measured_energy_with_interval(tmp_path, monkeypatch):
    fake = FakeNVML([CONSTANT_TRACE, CONSTANT_TRACE], ["NVIDIA GeForce RTX 4090"] * 2)
    monkeypatch.setattr(telemetry, "_import_nvml", lambda: fake)
    config = BenchConfig(base_url="", model="test-model", request_rate_qps=80.0,
                         num_prompts=120, workload={"kind": "random", "input_len": 16,
                                                    "output_len": 12},
                         timeout_s=5.0, idle_baseline_s=0.3, bootstrap_reps=50,
                         telemetry=True, telemetry_hz=50, warmup_requests=4)
    with serve_in_thread(MockServerConfig(ttft_ms=4, itl_ms=2)) as url:
        config.base_url = url
        summary = run_benchmark(config, tmp_path, progress=False)
    assert summary["energy_source"] == "nvml_energy_counter"

    # A short test run: blocks of 0.1 s so that the bootstrap has blocks to resample.
    measured = energy.measure_run(tmp_path, block_s=0.1, n_boot=200, seed=1)
    # Two GPUs replaying a constant 100 W each.
    assert measured["measured_mean_power_w"] == pytest.approx(200.0, rel=0.03)
    assert measured["measured_idle_power_w"] == pytest.approx(200.0, rel=0.03)
    per_tok = measured["measured_energy_per_tok_j"]
    assert 0 < measured["measured_energy_per_tok_ci_low_j"] <= per_tok
    assert per_tok <= measured["measured_energy_per_tok_ci_high_j"]
    assert measured["measured_window_tok"] > 0

    runs = read_runs(tmp_path)
    assert runs.iloc[0].gpu_name == "RTX-4090" and runs.iloc[0].gpu_count == 2
    annotated = energy.add_measured_energy(runs)
    row = annotated.iloc[0]
    assert row.measured_energy_per_tok_j == pytest.approx(per_tok, rel=1e-6)
    # Measured 200 W against the datasheet's 2 x 450 W.
    assert row.measured_to_tdp_ratio == pytest.approx(200.0 / 900.0, rel=0.05)


def test_run_without_telemetry_stays_missing(tmp_path):
    config = BenchConfig(base_url="", model="test-model", request_rate_qps=200.0,
                         num_prompts=20, workload={"kind": "random", "input_len": 8,
                                                   "output_len": 4},
                         timeout_s=5.0, idle_baseline_s=0.0, bootstrap_reps=20,
                         telemetry=False)
    with serve_in_thread(MockServerConfig(ttft_ms=2, itl_ms=1)) as url:
        config.base_url = url
        run_benchmark(config, tmp_path, progress=False)
    row = energy.add_measured_energy(read_runs(tmp_path)).iloc[0]
    assert math.isnan(row.measured_energy_per_tok_j) and math.isnan(row.energy_j)
