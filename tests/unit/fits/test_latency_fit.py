"""Latency-vs-load fits: parameter recovery on seeded synthetic data and degenerate input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hgresearch.fits.common import ModelInputError, ModelWarning
from hgresearch.fits.latency import fit_latency

MU = 10.0
RATES = np.array([0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])


def runs_with(latency: np.ndarray, rates: np.ndarray = RATES) -> pd.DataFrame:
    return pd.DataFrame({"model": "m", "dataset": "d", "gpu_name": "H100-PCIe", "gpu_count": 1,
                         "replicas": 1, "request_rate_qps": rates, "p90_ttft_ms": latency})


def test_queue_form_recovers_coefficients():
    rng = np.random.default_rng(1)
    rho = RATES / MU
    truth = 40.0 + 15.0 * rho / (1 - rho)
    fit = fit_latency(runs_with(truth * (1 + 0.02 * rng.standard_normal(len(RATES)))), MU,
                      form="queue")
    assert fit.coef[0] == pytest.approx(40.0, rel=0.05)
    assert fit.coef[1] == pytest.approx(15.0, rel=0.10)
    band = fit.predict(np.array([5.0]))
    assert band["mean_low"].iloc[0] <= 55.0 <= band["mean_high"].iloc[0]
    assert fit.valid


def test_loglinear_form_recovers_coefficients():
    rng = np.random.default_rng(2)
    rho = RATES / MU
    truth = np.exp(np.log(30.0) + 2.0 * rho)
    fit = fit_latency(runs_with(truth * np.exp(0.03 * rng.standard_normal(len(RATES)))), MU,
                      form="loglinear")
    assert np.exp(fit.coef[0]) == pytest.approx(30.0, rel=0.05)
    assert fit.coef[1] == pytest.approx(2.0, abs=0.15)


def test_max_rate_within_inverts_the_curve():
    rho = RATES / MU
    fit = fit_latency(runs_with(40.0 + 15.0 * rho / (1 - rho)), MU, form="queue")
    rate = fit.max_rate_within(100.0)
    assert float(fit.predict(np.array([rate]))["mean"].iloc[0]) == pytest.approx(100.0, rel=1e-6)
    assert fit.max_rate_within(10.0) == 0.0  # below the unloaded latency: infeasible


def test_saturated_runs_are_not_fitted():
    rates = np.array([1.0, 2.0, 4.0, 12.0, 20.0])
    fit = fit_latency(runs_with(np.array([10.0, 11.0, 13.0, 5000.0, 9000.0]), rates), MU)
    assert fit.n_points == 3


def test_too_few_points_below_saturation_is_an_error():
    with pytest.raises(ModelInputError, match="below saturation"):
        fit_latency(runs_with(np.array([10.0, 900.0]), np.array([1.0, 12.0])), MU)


def test_missing_metric_column_is_named():
    with pytest.raises(ModelInputError, match="p99_ttft_ms"):
        fit_latency(runs_with(np.ones(len(RATES))), MU, metric="p99_ttft_ms")


def test_latency_falling_with_load_warns_and_is_invalid():
    with pytest.warns(ModelWarning, match="falls as load grows"):
        fit = fit_latency(runs_with(np.linspace(900.0, 100.0, len(RATES))), MU)
    assert not fit.valid


def test_exact_fit_warns_about_missing_band():
    with pytest.warns(ModelWarning, match="as many points as parameters"):
        fit = fit_latency(runs_with(np.array([10.0, 12.0]), np.array([1.0, 2.0])), MU)
    assert np.isnan(fit.predict(np.array([1.5]))["mean_low"].iloc[0])
