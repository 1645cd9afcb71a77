"""Per-request latency distributions of our own runs: the requests of a runs table, the
empirical CDF with its DKW band, and the ECDF figure (committed CPU sweep, real vLLM-CPU runs)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from hgresearch.accounting.crosscheck import REQUEST_RUN_COLUMNS, ecdf_band, requests_of_runs
from hgresearch.data.ingest import read_runs
from hgresearch.errors import InputError
from hgresearch.paths import REPO_ROOT
from hgresearch.report.figures.serving import latency_ecdf_per_qps

CPU_SWEEP = REPO_ROOT / "data" / "raw" / "cpu-tiny"


@pytest.fixture(scope="module")
def cpu_runs() -> pd.DataFrame:
    return read_runs(CPU_SWEEP, relative_to=CPU_SWEEP)


def test_requests_of_runs_has_every_measured_request_with_its_run(cpu_runs):
    requests = requests_of_runs(cpu_runs)
    assert list(requests.columns[:4]) == REQUEST_RUN_COLUMNS
    assert len(requests) == int(cpu_runs.completed.sum()) == 1000
    assert requests.success.all() and not requests.warmup.any()
    per_run = requests.groupby("run_id").size()
    assert per_run.to_dict() == dict(zip(cpu_runs.run_id, cpu_runs.completed, strict=True))
    assert sorted(requests.request_rate_qps.unique()) == [1.0, 4.0, 8.0, 16.0, 32.0]


def test_requests_of_runs_without_run_folders_is_an_input_error(cpu_runs):
    with pytest.raises(InputError, match="no run of the table has per-request records"):
        requests_of_runs(cpu_runs.assign(run_dir=None))


def test_ecdf_band_steps_and_half_width():
    x, level, low, high = ecdf_band(pd.Series([3.0, np.nan, 1.0, 2.0]))
    assert x.tolist() == [1.0, 2.0, 3.0]
    assert level.tolist() == pytest.approx([1 / 3, 2 / 3, 1.0])
    half = math.sqrt(math.log(2 / 0.05) / 6)
    assert high.tolist() == pytest.approx(np.minimum(level + half, 1).tolist())
    assert low.tolist() == pytest.approx(np.maximum(level - half, 0).tolist())
    with pytest.raises(InputError):
        ecdf_band([np.nan])


def test_ecdf_band_covers_the_true_cdf_at_its_confidence():
    """Uniform draws (true CDF F(x) = x): on each step [x_i, x_i+1) the band [low_i, high_i]
    must hold F, which runs from x_i to x_i+1. DKW with Massart's constant is close to exact
    for n = 100, so about 95 % of samples are covered: not much fewer (band too narrow), not
    nearly all (band too wide). A fixed seed keeps the count exact."""
    rng = np.random.default_rng(7)
    covered = 0
    for _ in range(1000):
        x, _, low, high = ecdf_band(rng.uniform(size=100))
        step_end = np.append(x[1:], 1.0)
        covered += bool(np.all(low <= x) and np.all(step_end <= high))
    assert 0.93 <= covered / 1000 <= 0.98


def test_latency_ecdf_figure_draws_one_curve_and_band_per_rate(cpu_runs):
    requests = requests_of_runs(cpu_runs)
    fig = latency_ecdf_per_qps(requests, "CPU sweep", slo_ms={"ttft_ms": 2000.0})
    ttft, tpot = fig.axes[:2]
    assert len(ttft.lines) == 5 + 1 and len(tpot.lines) == 5  # + the TTFT target
    assert len(ttft.collections) == 5  # one band per rate
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts[0] == "1 QPS (200 requests)" and "latency target" in texts
    assert ttft.get_xscale() == "log" and "(ms)" in ttft.get_xlabel()
    plt.close(fig)
