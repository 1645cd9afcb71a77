"""Validation on a tiny fixture, the input-hash cache, bootstrap intervals and the notebook's
metadata."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from fit_fixtures import synthetic_runs

from hgresearch.cache import cache_path, cached, input_hash
from hgresearch.fits.common import ModelInputError
from hgresearch.fits.saturation import Schedule
from hgresearch.fits.uncertainty import bootstrap_ci, bootstrap_request_cis
from hgresearch.fits.validation import fitted_leave_one_qps_out, fitted_validation_table
from hgresearch.paths import REPO_ROOT

NOTEBOOK = REPO_ROOT / "notebooks" / "04_models.ipynb"


def tiny_runs() -> pd.DataFrame:
    a = synthetic_runs(mu=8.0, d0=6.0, noise=0.0, model="a")
    b = synthetic_runs(mu=4.0, d0=9.0, noise=0.0, model="b")
    runs = pd.concat([a, b], ignore_index=True)
    runs["price_usd_per_gpu_h"] = 0.25
    runs["cost_usd_per_1m_tok"] = (runs.duration_s / 3600 * 0.25
                                   / ((runs.total_input_tok + runs.total_output_tok) / 1e6))
    runs["p90_ttft_ms"] = np.exp(np.log(40.0) + 1.5 * runs.request_rate_qps / 8.0)
    return runs


def test_leave_one_qps_out_on_tiny_fixture():
    predictions = fitted_leave_one_qps_out(tiny_runs(), Schedule(0.95))
    assert len(predictions) == 12  # two configurations × six rates
    # noiseless data from the model itself: interior rates are predicted almost exactly
    interior = predictions[predictions.held_out_qps.between(2, 16)]
    assert interior.throughput_err_pct.abs().max() < 2.0
    assert (interior.cost_err_pct.abs() - interior.throughput_err_pct.abs()).abs().max() < 0.5
    table = fitted_validation_table(predictions)
    assert table.configuration.tolist()[-1] == "all configurations"
    assert {"throughput_mape_pct", "ttft_p90_mape_pct", "cost_mape_pct"} <= set(table.columns)


def test_cache_hits_and_misses(tmp_path):
    frame = pd.DataFrame({"x": [1.0, 2.0]})
    calls = []

    def compute():
        calls.append(1)
        return {"value": len(calls)}

    first = cached(tmp_path, "t", frame, {"p": 1}, compute)
    second = cached(tmp_path, "t", frame, {"p": 1}, compute)
    assert first == second == {"value": 1} and len(calls) == 1
    assert cache_path(tmp_path, "t", input_hash(frame, {"p": 1})).exists()
    cached(tmp_path, "t", frame.assign(x=[1.0, 3.0]), {"p": 1}, compute)
    cached(tmp_path, "t", frame, {"p": 2}, compute)
    assert len(calls) == 3


def test_bootstrap_is_seeded_and_covers_the_truth():
    rng = np.random.default_rng(0)
    values = rng.exponential(100.0, 2000)
    est, low, high = bootstrap_ci(values, lambda x: float(np.percentile(x, 90)), 500, seed=1)
    assert low < np.log(10) * 100.0 < high  # true p90 of Exp(100) = 230.3
    assert bootstrap_ci(values, np.mean, 200, seed=1) == bootstrap_ci(values, np.mean, 200,
                                                                          seed=1)
    with pytest.raises(ModelInputError):
        bootstrap_ci([1.0])


def test_bootstrap_request_cis_cost():
    requests = pd.DataFrame({"ttft_ms": np.linspace(10, 100, 50), "prompt_tokens": 100,
                             "output_tokens": 100})
    table = bootstrap_request_cis(requests, ["ttft_ms"], (90,), duration_s=3600, gpu_count=1,
                                  price_usd_per_gpu_h=1.0, n_boot=200)
    cost = table.set_index("quantity").loc["cost_usd_per_1m_tok"]
    assert cost.estimate == pytest.approx(1.0 / (50 * 200 / 1e6))


def test_notebook_is_flagged_parameterized_and_clean():
    notebook = json.loads(NOTEBOOK.read_text())
    assert notebook["metadata"]["hgresearch"]["reproduce"] is True
    first_code = next(c for c in notebook["cells"] if c["cell_type"] == "code")
    assert "parameters" in first_code["metadata"].get("tags", [])
    source = "".join(first_code["source"])
    for name in ("reference_dir", "build_dir", "paper_dir", "model", "configurations",
                 "slo_limits_ms", "price_scenario"):
        assert f"{name}:" in source
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            assert not cell.get("outputs") and cell.get("execution_count") is None
            assert "def " not in "".join(cell["source"])
