"""Latency versus load: tail latency as a function of utilisation ρ = λ/μ.

Two forms, both linear in their coefficients so statsmodels gives standard errors and bands:

* ``queue`` (default): ``L(ρ) = a + b·ρ/(1−ρ)`` — the M/M/1 waiting-time shape: a is the
  unloaded latency, b scales the queueing delay. Weighted least squares with weights 1/L²
  (relative errors, since latencies span three orders of magnitude).
* ``loglinear``: ``ln L(ρ) = α + β·ρ`` — no pole at ρ = 1; the alternative when ``queue``
  fits badly.

Only runs below saturation (``ρ < rho_max`` with μ from the capacity model) are used: above
it a fixed-count run has no steady state and its latency grows with the run length, not the
load. The fitted curve's band is the 95 % interval of the mean; ``predict`` also returns an
interval for a single run (mean uncertainty plus the relative residual scatter).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy.stats import t as student_t

from hgresearch.fits.common import (
    CONFIG_KEYS,
    ModelInputError,
    config_label,
    require_columns,
    warn,
)

#: Runs at ρ ≥ this (from the capacity model) count as overloaded and are not fitted.
DEFAULT_RHO_MAX = 0.95
LATENCY_FORMS = ("queue", "loglinear")


def load_regressor(rho: np.ndarray, form: str) -> np.ndarray:
    """The x of each form: ρ/(1−ρ) for ``queue``, ρ for ``loglinear``."""
    rho = np.asarray(rho, float)
    if form == "queue":
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(rho < 1.0, rho / (1.0 - rho), np.inf)
    if form == "loglinear":
        return rho
    raise ValueError(f"latency form must be one of {LATENCY_FORMS}, got {form!r}")


@dataclass
class LatencyFit:
    """Fitted latency curve of one configuration and one metric (e.g. ``p90_ttft_ms``)."""

    config: dict[str, Any]
    metric: str
    form: str
    capacity_rps: float
    coef: tuple[float, float]
    cov: np.ndarray
    resid_scale: float
    df_resid: float
    n_points: int
    rho_max_fitted: float
    warnings: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        """Usable for planning: latency grows with load (b > 0) from a positive unloaded
        value. Fits of non-monotone data fail this and are kept only for the record."""
        a, b = self.coef
        return b > 0 and (self.form != "queue" or a > 0)

    def predict(self, rate_qps: np.ndarray, alpha: float = 0.05) -> pd.DataFrame:
        """Predicted latency at offered rates: ``mean``, band of the mean (``mean_low``,
        ``mean_high``) and of a single run (``obs_low``, ``obs_high``). NaN where ρ ≥ 1."""
        rate = np.atleast_1d(np.asarray(rate_qps, float))
        rho = rate / self.capacity_rps
        x = load_regressor(rho, self.form)
        ok = np.isfinite(x)
        xs = np.where(ok, x, 0.0)
        exog = np.column_stack([np.ones_like(xs), xs])
        mean = exog @ np.asarray(self.coef)
        se = np.sqrt(np.einsum("ij,jk,ik->i", exog, self.cov, exog))
        q = student_t.ppf(1 - alpha / 2, self.df_resid) if self.df_resid > 0 else np.nan
        if self.form == "queue":
            low, high = mean - q * se, mean + q * se
            spread = np.sqrt(se ** 2 + (self.resid_scale * mean) ** 2)
            obs_low, obs_high = mean - q * spread, mean + q * spread
        else:
            spread = np.sqrt(se ** 2 + self.resid_scale ** 2)
            low, high = np.exp(mean - q * se), np.exp(mean + q * se)
            obs_low, obs_high = np.exp(mean - q * spread), np.exp(mean + q * spread)
            mean = np.exp(mean)
        out = pd.DataFrame({"rate_qps": rate, "rho": rho, "mean": mean, "mean_low": low,
                            "mean_high": high, "obs_low": obs_low, "obs_high": obs_high})
        out.loc[~ok, ["mean", "mean_low", "mean_high", "obs_low", "obs_high"]] = np.nan
        return out

    def max_rate_within(self, limit: float) -> float:
        """Highest offered rate whose predicted mean latency is ≤ ``limit`` (0 if none).

        Always below capacity; the curve is increasing when b > 0 (else capacity is returned
        as the only limit)."""
        a, b = self.coef
        if self.form == "queue":
            if a > limit:
                return 0.0
            if b <= 0:
                return self.capacity_rps
            x = (limit - a) / b
            rho = x / (1.0 + x)
        else:
            if math.exp(a) > limit:
                return 0.0
            if b <= 0:
                return self.capacity_rps
            rho = min((math.log(limit) - a) / b, 1.0)
        return float(rho * self.capacity_rps)

    def as_row(self) -> dict[str, Any]:
        """One row of the latency-fit table."""
        return {**self.config, "configuration": config_label(self.config),
                "metric": self.metric, "form": self.form, "capacity_rps": self.capacity_rps,
                "a": self.coef[0], "b": self.coef[1],
                "a_se": math.sqrt(self.cov[0, 0]), "b_se": math.sqrt(self.cov[1, 1]),
                "resid_scale": self.resid_scale, "n_points": self.n_points,
                "rho_max_fitted": self.rho_max_fitted, "valid": self.valid,
                "warnings": "; ".join(self.warnings)}


def fit_latency(runs: pd.DataFrame, capacity_rps: float, metric: str = "p90_ttft_ms",
                form: str = "loglinear", rho_max: float = DEFAULT_RHO_MAX) -> LatencyFit:
    """Fit ``metric`` against load for the runs of one configuration.

    Raises :class:`ModelInputError` when the metric column is missing or fewer than two runs
    lie below saturation; warns when the fit cannot be trusted (no spare degrees of freedom,
    latency falling with load, negative unloaded latency).
    """
    require_columns(runs, ["request_rate_qps", metric], "latency fit")
    if not (capacity_rps > 0 and math.isfinite(capacity_rps)):
        raise ModelInputError(f"latency fit needs a positive finite capacity, got {capacity_rps}")
    config = {k: runs.iloc[0][k] for k in CONFIG_KEYS if k in runs.columns}
    label = config_label(config) if len(config) == len(CONFIG_KEYS) else "configuration"
    rate = runs.request_rate_qps.to_numpy(float)
    y = runs[metric].to_numpy(float)
    rho = rate / capacity_rps
    use = (rho < rho_max) & np.isfinite(y) & (y > 0)
    if use.sum() < 2 or len(np.unique(rate[use])) < 2:
        raise ModelInputError(
            f"{label}: {metric} needs runs at ≥ 2 offered rates below saturation "
            f"(ρ < {rho_max}); got {int(use.sum())} run(s) at rates {np.unique(rate[use])}")
    x = load_regressor(rho[use], form)
    exog = sm.add_constant(x, has_constant="add")
    notes: list[str] = []
    with np.errstate(divide="ignore", invalid="ignore"):
        # statsmodels divides by df_resid = 0 for an exact fit; handled just below
        if form == "queue":
            result = sm.WLS(y[use], exog, weights=1.0 / y[use] ** 2).fit()
        else:
            result = sm.OLS(np.log(y[use]), exog).fit()
        # queue: relative scatter (weights 1/y²); loglinear: scatter of ln L
        resid_scale = float(math.sqrt(result.scale)) if result.df_resid > 0 else math.nan
        cov = np.asarray(result.cov_params())
    if result.df_resid < 1:
        notes.append(f"{metric}: as many points as parameters; no uncertainty band")
        cov = np.full((2, 2), np.nan)
    a, b = (float(v) for v in result.params)
    if b < 0:
        notes.append(f"{metric} falls as load grows (b = {b:.3g}); the {form} form cannot "
                     "represent it")
    if form == "queue" and a <= 0:
        notes.append(f"{metric}: negative unloaded latency a = {a:.3g} ms")
    order = np.argsort(rate[use])
    ys = y[use][order]
    if np.any(np.diff(ys) < -0.10 * ys[:-1]):
        notes.append(f"{metric} is not monotone in load below saturation")
    for note in notes:
        warn(f"{label}: {note}")
    return LatencyFit(config=config, metric=metric, form=form, capacity_rps=capacity_rps,
                      coef=(a, b), cov=cov, resid_scale=resid_scale,
                      df_resid=float(result.df_resid), n_points=int(use.sum()),
                      rho_max_fitted=float(rho[use].max()), warnings=notes)
