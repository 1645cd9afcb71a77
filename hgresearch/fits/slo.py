"""Capacity under a latency SLO: the highest offered rate a configuration sustains while its
fitted tail latency stays within a target, and what a token costs when run there.

Steady state below saturation means achieved = offered, so the throughput at the SLO rate is
the rate itself; cost per 1M tokens follows from the hourly price of the configuration
(:func:`hgresearch.accounting.costs.cost_per_million_tok_at_rate_usd`). The rate is capped at
``rho_max``·capacity; when the data never reached capacity the cap is the highest measured
offered rate instead (the model would otherwise extrapolate into the unknown).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hgresearch.accounting.costs import cost_per_million_tok_at_rate_usd
from hgresearch.data.catalogs import gpu_price_or_nan
from hgresearch.fits.common import config_label
from hgresearch.fits.fit_all import ModelSet
from hgresearch.fits.latency import DEFAULT_RHO_MAX
from hgresearch.fits.saturation import SaturationFit
from hgresearch.units import TOKENS_PER_MILLION

#: SLO targets of the planner table: TTFT p90 and p99 from 50 ms to 5 s.
DEFAULT_SLO_LIMITS_MS = (50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0)
DEFAULT_SLO_METRICS = ("p90_ttft_ms", "p99_ttft_ms")


@dataclass(frozen=True)
class Slo:
    """A latency target: ``metric`` (a runs-table latency column) ≤ ``limit_ms``."""

    metric: str
    limit_ms: float

    @property
    def label(self) -> str:
        return f"{self.metric.replace('_ms', '')} ≤ {self.limit_ms:g} ms"


def default_slos(limits_ms: Sequence[float] = DEFAULT_SLO_LIMITS_MS,
                 metrics: Sequence[str] = DEFAULT_SLO_METRICS) -> list[Slo]:
    """Every metric × limit combination, metric-major."""
    return [Slo(m, float(limit)) for m in metrics for limit in limits_ms]


def _rate_cap(fit: SaturationFit, rho_max: float) -> tuple[float, str]:
    if fit.capacity_reached:
        return rho_max * fit.capacity_rps, "capacity"
    return min(fit.max_offered_qps, rho_max * fit.capacity_rps), "measured range"


def _price(gpu_name: str, scenario: str, overrides: dict[str, float] | None) -> float:
    if overrides and gpu_name in overrides:
        return float(overrides[gpu_name])
    return gpu_price_or_nan(gpu_name, scenario)


def fitted_slo_rate_table(models: ModelSet, slos: list[Slo] | None = None,
                          scenario: str = "alternative", rho_max: float = DEFAULT_RHO_MAX,
                          prices_usd_per_gpu_h: dict[str, float] | None = None) -> pd.DataFrame:
    """One row per configuration × SLO: highest sustainable rate, what limits it, tokens/s,
    cost per 1M tokens and tokens per dollar at that rate.

    ``limited_by`` is ``slo`` (the latency target binds), ``capacity`` (ρ_max·μ binds),
    ``measured range`` (capacity never reached; capped at the highest measured rate),
    ``infeasible`` (even the unloaded latency misses the target), ``no latency model`` or
    ``latency model invalid`` (the fitted latency falls with load — non-monotone data; no
    number is given rather than a wrong one).
    ``slo_rate_conservative_qps`` uses the upper 95 % band of the fitted mean instead of the
    mean; ``extrapolated`` marks rates above the highest rate the latency curve was fitted on.
    Every row also carries the configuration's rate cap and its cost per 1M tokens and tokens
    per dollar there (``*_at_cap``): the SLO-free number, available even without a latency
    model.
    """
    slos = slos if slos is not None else default_slos()
    rows = []
    for key, cap in models.capacity_fits.items():
        price = _price(cap.config["gpu_name"], scenario, prices_usd_per_gpu_h)
        cap_rate, cap_reason = _rate_cap(cap, rho_max)
        count, replicas = int(cap.config["gpu_count"]), int(cap.config.get("replicas", 1))
        cost_at_cap = cost_per_million_tok_at_rate_usd(
            cap_rate * cap.total_tok_per_request, count, price, replicas)
        for slo in slos:
            row = {**cap.config, "configuration": config_label(cap.config), "slo": slo.label,
                   "slo_metric": slo.metric, "slo_limit_ms": slo.limit_ms,
                   "capacity_rps": cap.capacity_rps, "capacity_low_rps": cap.capacity_low_rps,
                   "capacity_reached": cap.capacity_reached,
                   # without any latency target: the rate cap, whatever the latency there
                   "cap_rate_qps": cap_rate, "cost_at_cap_usd_per_1m_tok": cost_at_cap,
                   "tok_per_usd_at_cap": TOKENS_PER_MILLION / cost_at_cap,
                   "price_usd_per_gpu_h": price, "price_scenario": scenario}
            lat = models.latency_fits.get((key, slo.metric))
            if lat is None or not lat.valid:
                reason = "no latency model" if lat is None else "latency model invalid"
                rows.append({**row, "limited_by": reason, "slo_rate_qps": math.nan,
                             "latency_form": lat.form if lat is not None else None})
                continue
            rate = lat.max_rate_within(slo.limit_ms)
            if rate <= 0:
                reason, rate = "infeasible", 0.0
            elif rate >= cap_rate:
                reason, rate = cap_reason, cap_rate
            else:
                reason = "slo"
            grid = np.linspace(0.0, cap_rate, 201)[1:]
            band = lat.predict(grid)
            ok = (band["mean_high"] <= slo.limit_ms).to_numpy()
            # contiguous from the lowest rate: first violation ends the admissible range
            conservative = float(grid[:np.argmin(ok)][-1]) if ok[0] and not ok.all() else (
                float(grid[-1]) if ok.all() else 0.0)
            tok_per_s = rate * cap.total_tok_per_request
            cost = (cost_per_million_tok_at_rate_usd(tok_per_s, count, price, replicas)
                    if tok_per_s > 0 else math.nan)
            fitted_top = lat.rho_max_fitted * lat.capacity_rps
            rows.append({**row, "limited_by": reason, "slo_rate_qps": rate,
                         "slo_rate_conservative_qps": conservative,
                         "slo_tok_per_s": tok_per_s,
                         "slo_output_tok_per_s": rate * cap.output_tok_per_request,
                         "cost_usd_per_1m_tok": cost,
                         "tok_per_usd": (TOKENS_PER_MILLION / cost
                                         if cost and math.isfinite(cost) else math.nan),
                         "extrapolated": bool(rate > fitted_top * 1.0001),
                         "latency_form": lat.form})
    return pd.DataFrame(rows)


def operating_curves(models: ModelSet, metric: str = "p90_ttft_ms",
                     scenario: str = "alternative", rho_max: float = DEFAULT_RHO_MAX,
                     points: int = 60,
                     prices_usd_per_gpu_h: dict[str, float] | None = None) -> pd.DataFrame:
    """For every configuration: predicted ``metric`` and cost per 1M tokens along offered
    rates from 2 % to the rate cap — the raw material of the cost–latency Pareto frontier.
    Configurations without a valid latency model (see ``LatencyFit.valid``) are left out."""
    rows = []
    for key, cap in models.capacity_fits.items():
        lat = models.latency_fits.get((key, metric))
        if lat is None or not lat.valid:
            continue
        price = _price(cap.config["gpu_name"], scenario, prices_usd_per_gpu_h)
        cap_rate, _ = _rate_cap(cap, rho_max)
        rates = np.linspace(0.02 * cap_rate, cap_rate, points)
        pred = lat.predict(rates)
        tok = rates * cap.total_tok_per_request
        cost = cost_per_million_tok_at_rate_usd(tok, cap.config["gpu_count"], price,
                                                cap.config.get("replicas", 1))
        for rate, latency, c in zip(rates, pred["mean"], cost, strict=True):
            rows.append({**cap.config, "configuration": config_label(cap.config),
                         "rate_qps": rate, "latency_ms": latency, "metric": metric,
                         "cost_usd_per_1m_tok": c})
    return pd.DataFrame(rows)


def pareto_frontier(points: pd.DataFrame, x: str = "latency_ms",
                    y: str = "cost_usd_per_1m_tok") -> pd.DataFrame:
    """Rows not dominated by any other (lower-or-equal x and y, one strictly lower), sorted
    by x. Rows with NaN or non-positive latency are ignored."""
    data = points[np.isfinite(points[x]) & np.isfinite(points[y]) & (points[x] > 0)]
    data = data.sort_values([x, y], kind="stable")
    keep, best = [], math.inf
    for index, value in zip(data.index, data[y], strict=True):
        if value < best:
            keep.append(index)
            best = value
    return data.loc[keep].reset_index(drop=True)
