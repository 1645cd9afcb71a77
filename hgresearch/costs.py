"""Cost of benchmark runs: cost per run, per 1M tokens (input+output, as the paper) and per 1M
output tokens, tokens per dollar, under a price scenario from ``data/prices.csv``."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hgresearch.catalogs import price_catalog

SECONDS_PER_HOUR = 3600.0


def run_cost_usd(duration_s: float, gpu_count: int, price_usd_per_gpu_h: float,
                 replicas: int = 1) -> float:
    """Rental cost of a run: every GPU of every replica billed for the run's duration."""
    return duration_s / SECONDS_PER_HOUR * gpu_count * replicas * price_usd_per_gpu_h


def cost_per_million_tok_usd(cost_usd: float, tokens: float) -> float:
    """Cost divided by tokens in millions (NaN when there are no tokens)."""
    return cost_usd / (tokens / 1e6) if tokens else float("nan")


def add_costs(runs: pd.DataFrame, scenario: str = "alternative",
              prices_usd_per_gpu_h: dict[str, float] | None = None) -> pd.DataFrame:
    """Return ``runs`` with cost columns added.

    Args:
        runs: the runs table (:func:`hgresearch.ingest.read_runs`).
        scenario: price scenario of ``data/prices.csv`` (``alternative`` is the paper's).
        prices_usd_per_gpu_h: overrides per normalized GPU name (e.g. ``{"RTX-4090": 0.30}``).

    Adds ``price_usd_per_gpu_h``, ``cost_usd`` (per run), ``cost_usd_per_1m_tok``
    (input+output tokens), ``cost_usd_per_1m_output_tok``, ``tok_per_usd``,
    ``output_tok_per_usd`` and ``price_scenario``. GPUs without a price get NaN costs.
    """
    prices = price_catalog()
    prices = prices[prices.scenario == scenario]
    if prices.empty:
        raise KeyError(f"unknown price scenario {scenario!r}; known: "
                       f"{sorted(set(price_catalog().scenario))}")
    price_map = dict(zip(prices.gpu_name, prices.price_usd_per_gpu_h, strict=True))
    price_map.update(prices_usd_per_gpu_h or {})
    out = runs.copy()
    out["price_scenario"] = scenario
    out["price_usd_per_gpu_h"] = out.gpu_name.map(price_map).astype(float)
    gpu_hours = out.duration_s / SECONDS_PER_HOUR * out.gpu_count * out.replicas
    out["gpu_hours"] = gpu_hours
    out["cost_usd"] = gpu_hours * out.price_usd_per_gpu_h
    total_tok = out.total_input_tok + out.total_output_tok
    out["cost_usd_per_1m_tok"] = out.cost_usd / (total_tok.replace(0, np.nan) / 1e6)
    out["cost_usd_per_1m_output_tok"] = out.cost_usd / (
        out.total_output_tok.replace(0, np.nan) / 1e6)
    out["tok_per_usd"] = total_tok / out.cost_usd
    out["output_tok_per_usd"] = out.total_output_tok / out.cost_usd
    return out


def cost_per_million_tok_at_rate_usd(tok_per_s: float, gpu_count: int,
                                     price_usd_per_gpu_h: float, replicas: int = 1) -> float:
    """Cost per 1M tokens of a configuration kept busy at a sustained token rate."""
    hourly = gpu_count * replicas * price_usd_per_gpu_h
    return hourly / (tok_per_s * SECONDS_PER_HOUR / 1e6)
