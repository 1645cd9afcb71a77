"""Latency targets (:class:`Slo`) and the fitted curves' cost against tail latency: predicted
latency and cost per 1M tokens along offered rates (:func:`operating_curves`) and their Pareto
frontier (:func:`pareto_frontier`).

Steady state below saturation means achieved = offered, so the throughput at a rate is the rate
itself; cost per 1M tokens follows from the hourly price of the configuration
(:func:`hgresearch.accounting.costs.cost_per_million_tok_at_rate_usd`). Rates are capped at
``rho_max``·capacity; when the data never reached capacity the cap is the highest measured
offered rate instead (the model would otherwise extrapolate into the unknown). The SLO-capacity
table (highest rate meeting each SLO) is the calibrated simulator's
(:func:`hgresearch.sim.slo_rate.slo_rate_table`), not these curve fits'.
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

#: SLO targets: TTFT p90 and p99 from 50 ms to 5 s.
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
