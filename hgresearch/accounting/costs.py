"""Cost of benchmark runs: cost per run, per 1M tokens (input+output, as the paper) and per 1M
output tokens, tokens per dollar, under a price scenario from
``hgresearch/data/catalogs/prices.csv``."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from hgresearch.data.catalogs import price_scenario_rows
from hgresearch.identity import total_gpus
from hgresearch.units import SECONDS_PER_HOUR, TOKENS_PER_MILLION, Number, tokens_per_h


def gpu_hours(duration_s: Number, gpu_count: Number, replicas: Number | int = 1) -> Number:
    """GPU-hours billed for a run: every GPU of every replica for the run's duration."""
    gpus: Number = total_gpus(gpu_count, replicas)
    return duration_s / SECONDS_PER_HOUR * gpus


def hourly_cost_usd(gpu_count: Number, price_usd_per_gpu_h: Number,
                    replicas: Number | int = 1) -> Number:
    """Rental cost per hour of a configuration: every GPU of every replica."""
    gpus: Number = total_gpus(gpu_count, replicas)
    return gpus * price_usd_per_gpu_h


def run_cost_usd(duration_s: Number, gpu_count: Number, price_usd_per_gpu_h: Number,
                 replicas: Number | int = 1) -> Number:
    """Rental cost of a run: :func:`gpu_hours` times the price per GPU-hour."""
    cost: Number = gpu_hours(duration_s, gpu_count, replicas) * price_usd_per_gpu_h
    return cost


def cost_per_million_tok_usd(cost_usd: Number, tokens: Number) -> Number:
    """Cost divided by tokens in millions; NaN (never infinite) where there are no tokens."""
    per_million: Number
    if isinstance(tokens, pd.Series):  # a column keeps its index
        per_million = cost_usd / (tokens.replace(0, np.nan) / TOKENS_PER_MILLION)
    elif isinstance(tokens, np.ndarray):
        per_million = cost_usd / (np.where(tokens == 0, np.nan, tokens) / TOKENS_PER_MILLION)
    else:
        per_million = cost_usd / (tokens / TOKENS_PER_MILLION) if tokens else math.nan
    return per_million


def add_costs(runs: pd.DataFrame, scenario: str = "alternative",
              prices_usd_per_gpu_h: dict[str, float] | None = None) -> pd.DataFrame:
    """Return ``runs`` with cost columns added.

    Args:
        runs: the runs table (:func:`hgresearch.data.ingest.read_runs`).
        scenario: price scenario of ``hgresearch/data/catalogs/prices.csv`` (``alternative`` is the
            paper's).
        prices_usd_per_gpu_h: overrides per normalized GPU name (e.g. ``{"RTX-4090": 0.30}``).

    Adds ``price_usd_per_gpu_h``, ``cost_usd`` (per run), ``cost_usd_per_1m_tok``
    (input+output tokens), ``cost_usd_per_1m_output_tok``, ``tok_per_usd``,
    ``output_tok_per_usd`` and ``price_scenario``. GPUs without a price get NaN costs.
    """
    prices = price_scenario_rows(scenario)
    price_map = dict(zip(prices.gpu_name, prices.price_usd_per_gpu_h, strict=True))
    price_map.update(prices_usd_per_gpu_h or {})
    out = runs.copy()
    out["price_scenario"] = scenario
    out["price_usd_per_gpu_h"] = out.gpu_name.map(price_map).astype(float)
    out["gpu_hours"] = gpu_hours(out.duration_s, out.gpu_count, out.replicas)
    out["cost_usd"] = run_cost_usd(out.duration_s, out.gpu_count, out.price_usd_per_gpu_h,
                                   out.replicas)
    total_tok = out.total_input_tok + out.total_output_tok
    out["cost_usd_per_1m_tok"] = cost_per_million_tok_usd(out.cost_usd, total_tok)
    out["cost_usd_per_1m_output_tok"] = cost_per_million_tok_usd(out.cost_usd,
                                                                 out.total_output_tok)
    out["tok_per_usd"] = total_tok / out.cost_usd
    out["output_tok_per_usd"] = out.total_output_tok / out.cost_usd
    return out


def cost_per_million_tok_at_rate_usd(tok_per_s: Number, gpu_count: Number,
                                     price_usd_per_gpu_h: Number, replicas: Number | int = 1
                                     ) -> Number:
    """Cost per 1M tokens of a configuration kept busy at a sustained token rate."""
    return cost_per_million_tok_usd(hourly_cost_usd(gpu_count, price_usd_per_gpu_h, replicas),
                                    tokens_per_h(tok_per_s))
