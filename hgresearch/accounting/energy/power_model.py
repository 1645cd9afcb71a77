"""Utilisation-based power model, for runs without telemetry.

``P = P_idle + (P_max - P_idle) * f(u)`` per GPU, with ``u`` the run's token throughput relative
to the highest throughput of the same model on the same configuration, and ``P_idle``/``P_max``
from ``hgresearch/data/catalogs/power_model.csv``. A lower bound (low powers, linear ``f``) and
an upper bound (high powers, concave ``f``) bracket the energy per token.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hgresearch.accounting.energy.tdp import configuration_power_w, energy_per_tok_j, tokens_per_kwh
from hgresearch.data.catalogs import power_model_catalog
from hgresearch.identity import CONFIG_KEYS

#: Shapes of the load -> power curve, ``f(0) = 0``, ``f(1) = 1``.
LOAD_CURVES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    # Power proportional to load above idle: the classic linear server model.
    "linear": lambda u: u,
    # Fan, Weber & Barroso (ISCA 2007) empirical server curve 2u - u^1.4 (slightly concave).
    "fan2007": lambda u: 2 * u - u ** 1.4,
    # Strongly concave: power rises quickly with the first requests in flight, as GPU decode
    # keeps the memory system busy even at small batches.
    "sqrt": lambda u: np.sqrt(u),
    # Full P_max whenever anything runs.
    "busy": lambda u: np.where(u > 0, 1.0, 0.0),
}


@dataclass(frozen=True)
class PowerModel:
    """Settings of the utilisation-based model: curve shape and parameter column per bound."""

    lower_curve: str = "linear"
    central_curve: str = "fan2007"
    upper_curve: str = "sqrt"

    def curve(self, name: str) -> Callable[[np.ndarray], np.ndarray]:
        if name not in LOAD_CURVES:
            raise KeyError(f"unknown load curve {name!r}; known: {sorted(LOAD_CURVES)}")
        return LOAD_CURVES[name]


def load_fraction(runs: pd.DataFrame) -> pd.Series:
    """Load ``u`` in [0, 1] of each run: its token throughput over the highest token throughput
    of the same model on the same configuration among ``runs`` (the saturated point of the QPS
    sweep). A proxy for how busy the GPUs were: the reference runs have no utilisation data."""
    peak = runs.groupby(CONFIG_KEYS, dropna=False).total_token_throughput_tok_per_s.transform("max")
    return (runs.total_token_throughput_tok_per_s / peak).clip(0.0, 1.0)


def modelled_power_w(u: np.ndarray | float, p_idle_w: float, p_max_w: float,
                     curve: str = "linear") -> np.ndarray:
    """Power of one GPU at load ``u``: ``P_idle + (P_max - P_idle) * f(u)``."""
    load = np.clip(np.asarray(u, dtype=float), 0.0, 1.0)
    return p_idle_w + (p_max_w - p_idle_w) * LOAD_CURVES[curve](load)


def add_power_model(runs: pd.DataFrame, model: PowerModel | None = None,
                    parameters: pd.DataFrame | None = None,
                    load: pd.Series | None = None) -> pd.DataFrame:
    """Return ``runs`` with the utilisation-based power bracket added.

    Adds ``load_frac`` and, for each bound ``low``/``central``/``high`` of power,
    ``model_power_<b>_w`` (whole configuration), ``model_tok_per_kwh_<b>`` and
    ``model_energy_per_tok_<b>_j``. The ``low`` power uses the low parameters with the lower
    curve; ``high`` the high parameters with the upper curve, so the energy bracket is
    [``model_energy_per_tok_low_j``, ``model_energy_per_tok_high_j``]. GPUs missing from the
    parameter table get NaN. ``load`` overrides :func:`load_fraction` (e.g. measured
    utilisation).
    """
    model = model or PowerModel()
    params = power_model_catalog() if parameters is None else parameters
    params = params.set_index("gpu_name")
    out = runs.copy()
    out["load_frac"] = load_fraction(out) if load is None else load.astype(float)
    bounds = {"low": ("p_idle_low_w", "p_max_low_w", model.lower_curve),
              "central": ("p_idle_w", "p_max_w", model.central_curve),
              "high": ("p_idle_high_w", "p_max_high_w", model.upper_curve)}
    for bound, (idle_col, max_col, curve) in bounds.items():
        model.curve(curve)
        idle = out.gpu_name.map(params[idle_col]).astype(float)
        peak = out.gpu_name.map(params[max_col]).astype(float)
        per_gpu = idle + (peak - idle) * LOAD_CURVES[curve](out.load_frac.to_numpy())
        power_w = configuration_power_w(per_gpu, out.gpu_count, out.replicas)
        out[f"model_power_{bound}_w"] = power_w
        out[f"model_tok_per_kwh_{bound}"] = tokens_per_kwh(out.total_token_throughput_tok_per_s,
                                                           power_w)
        out[f"model_energy_per_tok_{bound}_j"] = energy_per_tok_j(
            power_w, out.total_token_throughput_tok_per_s)
    return out


def ratio_bracket(a: pd.Series, b: pd.Series) -> dict[str, float]:
    """Efficiency ratio of configuration A over B (tokens per kWh) under the power model.

    ``a`` and ``b`` are rows from :func:`add_power_model`. Returns ``central`` (both central),
    ``low``/``high``: the smallest and largest ratio over the four combinations of bounds (the
    two configurations' uncertainties treated as independent), and ``same_low``/``same_high``:
    both at their low-power or both at their high-power bound (correlated assumptions).
    """
    combos = [a[f"model_tok_per_kwh_{x}"] / b[f"model_tok_per_kwh_{y}"]
              for x in ("low", "high") for y in ("low", "high")]
    return {"central": float(a.model_tok_per_kwh_central / b.model_tok_per_kwh_central),
            "low": float(min(combos)), "high": float(max(combos)),
            "same_low": float(a.model_tok_per_kwh_low / b.model_tok_per_kwh_low),
            "same_high": float(a.model_tok_per_kwh_high / b.model_tok_per_kwh_high)}

