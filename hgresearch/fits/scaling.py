"""Tensor-parallel scaling: capacity against GPU count for one model on one GPU type.

* Universal Scalability Law (USL): ``X(n) = X₁·n / (1 + σ(n−1) + κ·n(n−1))`` — σ contention
  (the serial share), κ coherency (cost of keeping n GPUs in step, e.g. all-reduces over PCIe);
  capacity peaks at ``n* = √((1−σ)/κ)``.
* Amdahl: the same with κ = 0 (capacity never falls, only saturates at X₁/σ).

Each series has few GPU counts (the reference data: three per model), so the forms are fitted
**pooled per GPU type**: one X₁ per model, σ and κ shared by all models on that GPU. Fits use
:func:`scipy.optimize.curve_fit` on log capacity (relative errors); the two forms are compared
by AIC (Gaussian log-residuals) and by leave-one-GPU-count-out prediction error.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import OptimizeWarning, curve_fit

from hgresearch.fits.common import ModelInputError, mape_pct, require_columns, warn

SCALING_FORMS = ("usl", "amdahl")


def usl_throughput(n: np.ndarray, x1: float | np.ndarray, sigma: float, kappa: float
                   ) -> np.ndarray:
    """Capacity at ``n`` GPUs under the USL (Amdahl when ``kappa`` = 0)."""
    n = np.asarray(n, float)
    return x1 * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))


def usl_peak_gpus(sigma: float, kappa: float) -> float:
    """GPU count where USL capacity peaks (inf without coherency cost)."""
    if kappa <= 1e-9:  # numerically zero coherency cost: no peak
        return math.inf
    return math.sqrt(max(1.0 - sigma, 0.0) / kappa)


@dataclass
class ScalingFit:
    """Pooled scaling fit of one GPU type."""

    gpu_name: str
    form: str
    x1: dict[str, float]
    sigma: float
    kappa: float
    sigma_se: float
    kappa_se: float
    n_points: int
    n_params: int
    ssr_log: float
    warnings: list[str] = field(default_factory=list)

    @property
    def aic(self) -> float:
        """AIC of Gaussian log-residuals: n·ln(SSR/n) + 2p (floored SSR to avoid −inf)."""
        ssr = max(self.ssr_log, 1e-12)
        return self.n_points * math.log(ssr / self.n_points) + 2 * self.n_params

    @property
    def peak_gpus(self) -> float:
        return usl_peak_gpus(self.sigma, self.kappa)

    def predict(self, model: str, n: np.ndarray) -> np.ndarray:
        return usl_throughput(n, self.x1[model], self.sigma, self.kappa)

    def as_row(self) -> dict[str, Any]:
        return {"gpu_name": self.gpu_name, "form": self.form, "sigma": self.sigma,
                "sigma_se": self.sigma_se, "kappa": self.kappa, "kappa_se": self.kappa_se,
                "peak_gpus": self.peak_gpus, "n_points": self.n_points,
                "n_params": self.n_params, "aic": self.aic,
                "rms_log_error": math.sqrt(self.ssr_log / self.n_points),
                "models": ", ".join(sorted(self.x1)), "warnings": "; ".join(self.warnings)}


def _series(table: pd.DataFrame, column: str) -> pd.DataFrame:
    require_columns(table, ["model", "gpu_name", "gpu_count", column], "scaling fit")
    data = table[np.isfinite(table[column].astype(float)) & (table[column] > 0)]
    counts = data.groupby(["model", "gpu_name"]).gpu_count.transform("nunique")
    return data[counts >= 2].sort_values(["gpu_name", "model", "gpu_count"])


def fit_scaling(table: pd.DataFrame, gpu_name: str, form: str = "usl",
                column: str = "max_achieved_rps") -> ScalingFit:
    """Pooled USL/Amdahl fit over every model with ≥ 2 GPU counts on ``gpu_name``.

    ``table`` has one row per configuration (e.g. the capacity table) and the capacity in
    ``column``. Raises :class:`ModelInputError` when no model has two GPU counts or the
    fit would have no data left over for its parameters.
    """
    if form not in SCALING_FORMS:
        raise ValueError(f"form must be one of {SCALING_FORMS}, got {form!r}")
    data = _series(table, column)
    data = data[data.gpu_name == gpu_name]
    models = sorted(data.model.unique())
    if not models:
        raise ModelInputError(f"scaling on {gpu_name}: no model has capacities at ≥ 2 GPU "
                              f"counts in column {column!r}")
    n_params = len(models) + (2 if form == "usl" else 1)
    if len(data) < n_params:
        raise ModelInputError(f"scaling on {gpu_name}: {len(data)} points for {n_params} "
                              f"parameters ({form})")
    index = data.model.map({m: i for i, m in enumerate(models)}).to_numpy()
    n = data.gpu_count.to_numpy(float)
    y = np.log(data[column].to_numpy(float))

    def model_fn(_: np.ndarray, *p: float) -> np.ndarray:
        log_x1 = np.asarray(p[:len(models)])[index]
        kappa = p[len(models) + 1] if form == "usl" else 0.0
        log_y: np.ndarray = (log_x1 + np.log(n)
                             - np.log(1 + p[len(models)] * (n - 1) + kappa * n * (n - 1)))
        return log_y

    start = [float(np.max(y[index == i])) for i in range(len(models))] + [0.1] + (
        [0.01] if form == "usl" else [])
    lower = [-np.inf] * len(models) + [0.0] + ([0.0] if form == "usl" else [])
    upper = [np.inf] * len(models) + [1.0] + ([1.0] if form == "usl" else [])
    notes = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OptimizeWarning)
        params, cov = curve_fit(model_fn, n, y, p0=start, bounds=(lower, upper), maxfev=20000)
    resid = y - model_fn(n, *params)
    if len(data) == n_params:
        notes.append("as many points as parameters: exact fit, no uncertainty")
    se = np.sqrt(np.clip(np.diag(cov), 0, np.inf)) if np.all(np.isfinite(cov)) else (
        np.full(len(params), np.nan))
    for note in notes:
        warn(f"scaling on {gpu_name} ({form}): {note}")
    return ScalingFit(
        gpu_name=gpu_name, form=form,
        x1={m: float(math.exp(params[i])) for i, m in enumerate(models)},
        sigma=float(params[len(models)]),
        kappa=float(params[len(models) + 1]) if form == "usl" else 0.0,
        sigma_se=float(se[len(models)]),
        kappa_se=float(se[len(models) + 1]) if form == "usl" else 0.0,
        n_points=len(data), n_params=n_params, ssr_log=float(resid @ resid), warnings=notes)


def scaling_tables(table: pd.DataFrame, column: str = "max_achieved_rps"
                   ) -> tuple[pd.DataFrame, pd.DataFrame, dict[tuple[str, str], ScalingFit]]:
    """Fit both forms for every GPU type with a scaling series.

    Returns (fit summary: one row per GPU type × form with σ, κ, peak GPU count, AIC;
    per-point table: observed and fitted capacity and per-GPU efficiency; fits).
    """
    data = _series(table, column)
    fits: dict[tuple[str, str], ScalingFit] = {}
    for gpu in sorted(data.gpu_name.unique()):
        for form in SCALING_FORMS:
            try:
                fits[(gpu, form)] = fit_scaling(table, gpu, form, column)
            except ModelInputError as err:
                warn(str(err))
    summary = pd.DataFrame([f.as_row() for f in fits.values()])
    if not summary.empty:
        summary["delta_aic_vs_best"] = summary.aic - summary.groupby("gpu_name").aic.transform(
            "min")
    points = []
    for row in data.itertuples():
        out = {"model": row.model, "gpu_name": row.gpu_name, "gpu_count": int(row.gpu_count),
               "observed": float(getattr(row, column)), "capacity_column": column}
        for form in SCALING_FORMS:
            fit = fits.get((row.gpu_name, form))
            if fit is None:
                continue
            pred = float(fit.predict(row.model, np.array([row.gpu_count]))[0])
            out[f"fitted_{form}"] = pred
            out[f"efficiency_per_gpu_{form}"] = pred / (row.gpu_count * fit.x1[row.model])
        single = fits.get((row.gpu_name, "usl"))
        if single is not None:
            out["observed_efficiency_per_gpu"] = out["observed"] / (
                row.gpu_count * single.x1[row.model])
        points.append(out)
    return summary, pd.DataFrame(points), fits


def leave_one_count_out(table: pd.DataFrame, column: str = "max_achieved_rps"
                        ) -> pd.DataFrame:
    """Drop one (model, GPU count) point, refit the pooled form, predict it back.

    Skips a point when its model would be left with a single GPU count (its X₁ would then be
    fitted from one point and the prediction would only test σ, κ)."""
    data = _series(table, column)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for idx, row in data.iterrows():
            rest = data.drop(index=idx)
            if (rest.model == row.model).sum() < 2:
                continue
            for form in SCALING_FORMS:
                try:
                    fit = fit_scaling(rest, row.gpu_name, form, column)
                except ModelInputError:
                    continue
                pred = float(fit.predict(row.model, np.array([row.gpu_count]))[0])
                rows.append({"model": row.model, "gpu_name": row.gpu_name,
                             "held_out_gpu_count": int(row.gpu_count), "form": form,
                             "observed": float(row[column]), "predicted": pred,
                             "err_pct": 100.0 * (pred / float(row[column]) - 1.0)})
    out = pd.DataFrame(rows)
    return out


def scaling_validation_table(loo: pd.DataFrame) -> pd.DataFrame:
    """MAPE and worst error of leave-one-GPU-count-out predictions per GPU type and form."""
    if loo.empty:
        return pd.DataFrame(columns=["gpu_name", "form", "mape_pct", "worst_pct", "n"])
    rows = []
    for (gpu, form), part in loo.groupby(["gpu_name", "form"], sort=True):
        rows.append({"gpu_name": gpu, "form": form,
                     "mape_pct": mape_pct(part.predicted, part.observed),
                     "worst_pct": float(part.err_pct.abs().max()), "n": len(part)})
    return pd.DataFrame(rows)
