"""Uncertainty of measured numbers.

* Reference data (summaries only): repeated runs of the same operating point give the
  run-to-run spread (:func:`run_to_run_spread`).
* Our own runs (one record per request): bootstrap confidence intervals for any percentile
  and for cost per 1M tokens (:func:`bootstrap_ci`, :func:`bootstrap_request_cis`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from hgresearch.accounting.costs import cost_per_million_tok_usd, run_cost_usd
from hgresearch.data.summary import CI_LEVEL, bootstrap_intervals
from hgresearch.fits.common import ModelInputError, require_columns
from hgresearch.identity import POINT_KEYS

SPREAD_COLUMNS = ("request_throughput_rps", "total_token_throughput_tok_per_s",
                  "p90_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "cost_usd_per_1m_tok")


def run_to_run_spread(runs: pd.DataFrame, columns: Sequence[str] = SPREAD_COLUMNS
                      ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Spread of repeated runs: per operating point (mean, relative std, relative range) and a
    summary per column (points, median and maximum relative std / range, in %).

    Columns missing from ``runs`` are skipped; points need ≥ 2 repeats."""
    columns = [c for c in columns if c in runs.columns]
    require_columns(runs, ["repeat_count"], "run-to-run spread")
    keys = [k for k in POINT_KEYS if k in runs.columns]
    repeated = runs[runs.repeat_count > 1]
    rows = []
    for key, group in repeated.groupby(keys, dropna=False, sort=True):
        point = dict(zip(keys, key, strict=True))
        for column in columns:
            values = group[column].astype(float).dropna()
            if len(values) < 2:
                continue
            mean = float(values.mean())
            rows.append({"model": point.get("model"), "gpu_name": point.get("gpu_name"),
                         "gpu_count": point.get("gpu_count"),
                         "request_rate_qps": point.get("request_rate_qps"), "metric": column,
                         "n_repeats": len(values), "mean": mean,
                         "rel_std_pct": 100.0 * float(values.std(ddof=1)) / mean,
                         "rel_range_pct": 100.0 * float(values.max() - values.min()) / mean})
    points = pd.DataFrame(rows)
    if points.empty:
        return points, pd.DataFrame(columns=["metric", "n_points", "median_rel_std_pct",
                                             "max_rel_std_pct", "max_rel_range_pct"])
    summary = points.groupby("metric", sort=False).agg(
        n_points=("mean", "size"), median_rel_std_pct=("rel_std_pct", "median"),
        max_rel_std_pct=("rel_std_pct", "max"), max_rel_range_pct=("rel_range_pct", "max"),
    ).reset_index()
    return points, summary


def bootstrap_ci(values: Sequence[float] | np.ndarray,
                 statistic: Callable[[np.ndarray], float] = np.mean, n_boot: int = 2000,
                 confidence: float = CI_LEVEL, seed: int = 0) -> tuple[float, float, float]:
    """(estimate, low, high): percentile bootstrap interval of ``statistic`` of the finite
    ``values`` (:func:`hgresearch.data.summary.bootstrap_intervals`, seeded).

    Raises :class:`ModelInputError` for fewer than two finite values."""
    data = np.asarray(values, float)
    data = data[np.isfinite(data)]
    if data.size < 2:
        raise ModelInputError(f"bootstrap needs ≥ 2 finite values, got {data.size}")
    [interval] = bootstrap_intervals(
        lambda idx: np.apply_along_axis(statistic, 1, data[idx]), data.size, n_boot, seed,
        confidence)
    low, high = interval if interval is not None else (np.nan, np.nan)
    return float(statistic(data)), float(low), float(high)


def bootstrap_request_cis(requests: pd.DataFrame, latency_columns: Sequence[str],
                          percentiles: Sequence[float] = (50, 90, 99), *, duration_s: float,
                          gpu_count: int, price_usd_per_gpu_h: float, replicas: int = 1,
                          token_columns: Sequence[str] = ("prompt_tokens", "output_tokens"),
                          n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Bootstrap intervals from one run's per-request records: every percentile of every
    latency column, and cost per 1M tokens (the run's GPU-hours over resampled token totals).

    ``requests`` has one row per successful request (the requests table)."""
    require_columns(requests, [*latency_columns, *token_columns], "request bootstrap")
    rows = []
    for column in latency_columns:
        for q in percentiles:
            def percentile(x: np.ndarray, q: float = q) -> float:
                return float(np.percentile(x, q))

            est, low, high = bootstrap_ci(requests[column].to_numpy(float), percentile, n_boot,
                                          seed=seed)
            rows.append({"quantity": f"p{q:g}_{column}", "estimate": est, "low": low,
                         "high": high})
    tokens = requests[list(token_columns)].sum(axis=1).to_numpy(float)
    cost_usd = run_cost_usd(duration_s, gpu_count, price_usd_per_gpu_h, replicas)
    scale = len(tokens)
    est, low, high = bootstrap_ci(tokens,
                                  lambda x: cost_per_million_tok_usd(cost_usd, x.mean() * scale),
                                  n_boot, seed=seed)
    rows.append({"quantity": "cost_usd_per_1m_tok", "estimate": est, "low": low,
                 "high": high})
    return pd.DataFrame(rows)


def run_request_cis(runs: pd.DataFrame, price_usd_per_gpu_h: float,
                    latency_columns: Sequence[str] = ("ttft_ms", "tpot_ms", "e2el_ms"),
                    percentiles: Sequence[float] = (50, 90, 99), *, n_boot: int = 2000,
                    seed: int = 0) -> pd.DataFrame:
    """Bootstrap intervals for every run of ``runs`` that has per-request records (our own
    run folders, column ``run_dir``): one row per run and quantity, with the run's id, offered
    rate and repeat. Runs without records (the paper's summaries) are left out; for those
    :func:`run_to_run_spread` is the only estimate of noise."""
    from hgresearch.data.runfolder import read_requests

    frames = []
    for run in runs[runs.run_dir.notna()].itertuples():
        requests = read_requests(run.run_dir)
        requests = requests[requests.success & ~requests.warmup]
        if len(requests) < 2:
            continue
        cis = bootstrap_request_cis(requests, latency_columns, percentiles,
                                    duration_s=run.duration_s, gpu_count=run.gpu_count,
                                    replicas=run.replicas,
                                    price_usd_per_gpu_h=price_usd_per_gpu_h, n_boot=n_boot,
                                    seed=seed)
        cis.insert(0, "repeat_index", run.repeat_index)
        cis.insert(0, "request_rate_qps", run.request_rate_qps)
        cis.insert(0, "run_id", run.run_id)
        frames.append(cis)
    if not frames:
        raise ModelInputError("no run of the table has per-request records (run_dir)")
    return pd.concat(frames, ignore_index=True)
