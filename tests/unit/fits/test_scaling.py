"""Tensor-parallel scaling: USL and Amdahl recover their own parameters; AIC and
leave-one-count-out behave; too little data is refused."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hgresearch.fits.common import ModelInputError
from hgresearch.fits.scaling import (
    fit_scaling,
    leave_one_count_out,
    scaling_tables,
    scaling_validation_table,
    usl_peak_gpus,
    usl_throughput,
)

COUNTS = np.array([1, 2, 4, 8])


def table(sigma: float, kappa: float, noise: float = 0.01, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for model, x1 in (("a", 10.0), ("b", 6.0), ("c", 3.0)):
        values = usl_throughput(COUNTS, x1, sigma, kappa) * np.exp(
            noise * rng.standard_normal(len(COUNTS)))
        rows += [{"model": model, "gpu_name": "RTX-4090", "gpu_count": int(n),
                  "capacity_rps": float(v)} for n, v in zip(COUNTS, values, strict=True)]
    return pd.DataFrame(rows)


def test_usl_recovers_sigma_kappa_and_peak():
    fit = fit_scaling(table(0.10, 0.02), "RTX-4090", "usl", "capacity_rps")
    assert fit.sigma == pytest.approx(0.10, abs=0.04)
    assert fit.kappa == pytest.approx(0.02, abs=0.006)
    assert fit.x1["a"] == pytest.approx(10.0, rel=0.05)
    assert fit.peak_gpus == pytest.approx(usl_peak_gpus(0.10, 0.02), rel=0.3)


def test_amdahl_recovers_sigma_and_has_no_peak():
    fit = fit_scaling(table(0.3, 0.0), "RTX-4090", "amdahl", "capacity_rps")
    assert fit.sigma == pytest.approx(0.3, abs=0.05)
    assert math.isinf(fit.peak_gpus)


def test_aic_prefers_usl_when_capacity_falls():
    summary, points, _ = scaling_tables(table(0.05, 0.05), "capacity_rps")
    best = summary.sort_values("aic").iloc[0]
    assert best.form == "usl"
    assert (points.efficiency_per_gpu_usl <= 1.0 + 1e-9).all()


def test_leave_one_count_out_predicts_noiseless_points():
    loo = leave_one_count_out(table(0.1, 0.02, noise=0.0), "capacity_rps")
    usl = loo[loo.form == "usl"]
    assert len(usl) == 12
    assert usl.err_pct.abs().max() < 1.0
    summary = scaling_validation_table(loo)
    assert set(summary.form) == {"usl", "amdahl"}


def test_no_series_is_an_error():
    single = table(0.1, 0.02)
    single = single[single.gpu_count == 1]
    with pytest.raises(ModelInputError, match="≥ 2 GPU"):
        fit_scaling(single, "RTX-4090", "usl", "capacity_rps")


def test_more_parameters_than_points_is_an_error():
    tiny = table(0.1, 0.02)
    tiny = tiny[(tiny.model == "a") & (tiny.gpu_count <= 2)]
    with pytest.raises(ModelInputError, match="points for"):
        fit_scaling(tiny, "RTX-4090", "usl", "capacity_rps")
