"""SLO capacity table, Pareto frontier and roofline bounds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from fit_fixtures import synthetic_runs

from hgresearch.accounting.costs import cost_per_million_tok_at_rate_usd
from hgresearch.fits.fit_all import fit_models
from hgresearch.fits.roofline import decode_step_min_s, gpu_constants, model_constants
from hgresearch.fits.saturation import Schedule
from hgresearch.fits.slo import Slo, fitted_slo_rate_table, pareto_frontier


def model_set():
    runs = synthetic_runs(mu=8.0, d0=6.0, noise=0.0)
    runs["p90_ttft_ms"] = np.exp(np.log(40.0) + 2.0 * runs.request_rate_qps / 8.0)
    return fit_models(runs, metrics=("p90_ttft_ms",), form="loglinear",
                      schedule=Schedule(0.95))


def test_slo_rows_cost_and_limits():
    models = model_set()
    fit = next(iter(models.capacity_fits.values()))
    table = fitted_slo_rate_table(models, [Slo("p90_ttft_ms", 30.0), Slo("p90_ttft_ms", 60.0),
                                           Slo("p90_ttft_ms", 5000.0)])
    assert list(table.limited_by) == ["infeasible", "slo", "capacity"]
    row = table.iloc[1]
    lat = models.latency_fits[(next(iter(models.capacity_fits)), "p90_ttft_ms")]
    assert float(lat.predict(np.array([row.slo_rate_qps]))["mean"].iloc[0]) == pytest.approx(
        60.0, rel=1e-6)
    expected = cost_per_million_tok_at_rate_usd(row.slo_rate_qps * fit.total_tok_per_request,
                                                1, 0.25)
    assert row.cost_usd_per_1m_tok == pytest.approx(expected)
    assert row.tok_per_usd == pytest.approx(1e6 / expected)
    assert table.iloc[2].slo_rate_qps == pytest.approx(0.95 * fit.capacity_rps)
    assert np.isnan(table.iloc[0].cost_usd_per_1m_tok)
    # the SLO-free cost at the rate cap is on every row, even the infeasible one
    at_cap = cost_per_million_tok_at_rate_usd(0.95 * fit.capacity_rps * fit.total_tok_per_request,
                                              1, 0.25)
    assert table.cost_at_cap_usd_per_1m_tok.tolist() == pytest.approx([at_cap] * 3)
    assert table.iloc[2].cost_usd_per_1m_tok == pytest.approx(at_cap)


def test_pareto_frontier_keeps_non_dominated_points():
    points = pd.DataFrame({"latency_ms": [10, 20, 30, 15, 40],
                           "cost_usd_per_1m_tok": [5.0, 3.0, 1.0, 6.0, 2.0]})
    front = pareto_frontier(points)
    assert front.latency_ms.tolist() == [10, 20, 30]


def test_decode_bound_by_hand():
    model = model_constants("DeepSeek-R1-Distill-Llama-8B")
    gpu = gpu_constants("H100-PCIe")
    # batch 1, no context: weights (8.03e9 − 128256·4096 embedding) × 2 bytes over 2 TB/s
    expected = (8.03e9 - 128256 * 4096) * 2 / 2000e9
    assert float(decode_step_min_s(1.0, 0.0, 1, model, gpu)) == pytest.approx(expected)
    # tensor parallel halves the time of a memory-bound step
    assert float(decode_step_min_s(1.0, 0.0, 2, model, gpu)) == pytest.approx(expected / 2)


def test_unknown_model_is_a_clear_error():
    from hgresearch.fits.common import ModelInputError

    with pytest.raises(ModelInputError, match="model_architectures.csv"):
        model_constants("no-such-model")
