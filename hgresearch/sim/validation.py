"""Validation: leave-one-QPS-out for every configuration, and the fits on all points.

For each configuration (the runs table's :data:`~hgresearch.identity.CONFIG_KEYS`;
repeated runs of a rate averaged into one point), each offered rate in turn is held out: the
coefficients are fitted on the other rates only (:func:`hgresearch.sim.calibrate.calibrate`,
whose start is computed from those rates too), then the held-out rate is simulated and compared
with its measurement. The held-out row never reaches the fit (a test checks it).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from hgresearch.cache import source_digest
from hgresearch.data.ingest import select_repeats
from hgresearch.executors import Executor
from hgresearch.identity import CONFIG_KEYS, config_label
from hgresearch.sim.calibrate import (
    Calibration,
    calibrate,
    replica_for_runs,
    simulate_summary,
)
from hgresearch.sim.replay import Workload, run_workload

#: Metrics the validation reports (runs-table names), and the goal on each (MAPE, %).
VALIDATION_METRICS = ("request_throughput_rps", "output_throughput_tok_per_s", "mean_tpot_ms",
                      "p50_ttft_ms", "p90_ttft_ms", "p99_ttft_ms")
GOALS_PCT = {"request_throughput_rps": 5.0, "output_throughput_tok_per_s": 5.0,
             "mean_tpot_ms": 10.0, "p90_ttft_ms": 25.0}
#: Column of the validation table holding each metric's MAPE (%).
MAPE_COLUMNS = {"request_throughput_rps": "request_throughput_mape_pct",
                "output_throughput_tok_per_s": "output_throughput_mape_pct",
                "mean_tpot_ms": "mean_tpot_mape_pct", "p50_ttft_ms": "p50_ttft_mape_pct",
                "p90_ttft_ms": "p90_ttft_mape_pct", "p99_ttft_ms": "p99_ttft_mape_pct"}
#: The p90 TTFT goal applies where the measured TTFT exceeds this (ms).
TTFT_GOAL_ABOVE_MS = 50.0


#: Modules whose source decides the calibration, validation and SLO results (the cache key).
_RESULT_MODULES = ("calibrate", "replica_limits", "entities", "events", "scheduler", "simulator",
                   "slo_rate", "step_time", "validation", "replay")


def code_digest() -> str:
    """SHA-256 of the source that decides the simulator's results (:data:`_RESULT_MODULES`,
    the shared length/arrival code and the catalogs it reads): part of every cache key, so a
    changed simulator never reuses old results (and a changed report or CLI does not
    recompute them)."""
    return source_digest(*(f"sim/{name}.py" for name in _RESULT_MODULES),
                         "traffic/lengths.py", "traffic/arrivals.py", "data/catalogs/*.csv")


def configuration_points(runs: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """``(label, points)`` per configuration: one row per offered rate (repeats averaged),
    sorted by rate. The label is :func:`hgresearch.identity.config_label`'s."""
    points = select_repeats(runs, "mean")
    out = []
    for _, group in points.groupby(CONFIG_KEYS, sort=True, dropna=False):
        group = group.sort_values("request_rate_qps").reset_index(drop=True)
        out.append((config_label(group.iloc[0]), group))
    return out


def _workloads(points: pd.DataFrame) -> list[Workload]:
    return [run_workload(row) for _, row in points.iterrows()]


def calibrate_configuration(points: pd.DataFrame) -> Calibration:
    """Calibrate one configuration on all its points."""
    return calibrate(replica_for_runs(points), points, _workloads(points))


def _validate_one(item: tuple[str, pd.DataFrame]) -> list[dict[str, Any]]:
    label, points = item
    replica = replica_for_runs(points)
    workloads = _workloads(points)
    rows = []
    for held in range(len(points)):
        keep = [i for i in range(len(points)) if i != held]
        fit = calibrate(replica, points.iloc[keep].reset_index(drop=True),
                        [workloads[i] for i in keep], uncertainty=False)
        predicted = simulate_summary(replica, fit.coefficients, workloads[held])
        measured = points.iloc[held]
        for metric in VALIDATION_METRICS:
            rows.append({"configuration": label, "gpu_name": str(measured.gpu_name),
                         "gpu_count": int(measured.gpu_count),
                         "held_out_qps": float(measured.request_rate_qps),
                         "metric": metric, "measured": float(measured[metric]),
                         "predicted": float(predicted[metric]),
                         "error_pct": 100.0 * (predicted[metric] / float(measured[metric]) - 1.0),
                         "lengths_source": workloads[held].lengths_source})
    return rows


def simulated_leave_one_qps_out(runs: pd.DataFrame, *, n_jobs: int = 1,
                                executor: Executor | None = None) -> pd.DataFrame:
    """Per held-out point and metric: measured, predicted and the signed error (%).

    Configurations with fewer than three rates are skipped (a fit needs two). ``executor``
    (default: ``n_jobs`` > 1 processes, see :meth:`Executor.for_jobs`) runs the
    configurations (results identical whichever runs them)."""
    items = [(label, pts) for label, pts in configuration_points(runs) if len(pts) >= 3]
    parts = (executor or Executor.for_jobs(n_jobs)).map(_validate_one, items)
    return pd.DataFrame([row for part in parts for row in part])


def simulated_validation_table(points: pd.DataFrame, spread_summary: pd.DataFrame | None = None
                               ) -> pd.DataFrame:
    """Per configuration: MAPE (%) of each metric over its held-out rates (p90 TTFT only where
    measured above :data:`TTFT_GOAL_ABOVE_MS`), then an ``all configurations`` row (mean over
    every held-out point), a ``worst configuration`` row and, when ``spread_summary``
    (:func:`hgresearch.fits.uncertainty.run_to_run_spread`'s summary) is given, the
    ``run-to-run spread`` row: the median relative std (%) of repeated measured points, the
    noise floor no prediction can beat."""
    data = points.copy()
    data["abs_error_pct"] = data.error_pct.abs()
    low_ttft = (data.metric == "p90_ttft_ms") & (data.measured <= TTFT_GOAL_ABOVE_MS)
    data = data[~low_ttft]
    table = data.pivot_table(index="configuration", columns="metric", values="abs_error_pct",
                             aggfunc="mean").reindex(columns=list(VALIDATION_METRICS))
    table = table.reset_index()
    overall = data.groupby("metric").abs_error_pct.mean().reindex(list(VALIDATION_METRICS))
    rows = [table,
            pd.DataFrame([{"configuration": "all configurations", **overall.to_dict()}]),
            pd.DataFrame([{"configuration": "worst configuration",
                           **table[list(VALIDATION_METRICS)].max().to_dict()}])]
    if spread_summary is not None and len(spread_summary):
        spread = spread_summary.set_index("metric").median_rel_std_pct
        rows.append(pd.DataFrame([{"configuration": "run-to-run spread (median rel. std)",
                                   **{m: float(spread.get(m, math.nan))
                                      for m in VALIDATION_METRICS}}]))
    out = pd.concat(rows, ignore_index=True)
    return out.rename(columns=MAPE_COLUMNS)


def goal_misses(table: pd.DataFrame) -> dict[str, float]:
    """The validation's numbers against the goals: throughput MAPE over all points and in the
    worst configuration, mean TPOT and p90 TTFT MAPE over all points (%)."""
    by = table.set_index("configuration")
    return {"throughput_mape_pct": float(by.loc["all configurations",
                                                "request_throughput_mape_pct"]),
            "throughput_worst_config_mape_pct": float(by.loc["worst configuration",
                                                             "request_throughput_mape_pct"]),
            "mean_tpot_mape_pct": float(by.loc["all configurations", "mean_tpot_mape_pct"]),
            "p90_ttft_mape_pct": float(by.loc["all configurations", "p90_ttft_mape_pct"])}


def calibrate_all(runs: pd.DataFrame, *, n_jobs: int = 1,
                  executor: Executor | None = None) -> dict[str, Calibration]:
    """Calibrations on all points of every configuration, by label (a progress bar on a
    terminal: the first, uncached call takes minutes); ``executor`` as in
    :func:`simulated_leave_one_qps_out`."""
    from tqdm import tqdm

    items = configuration_points(runs)
    bar = tqdm(total=len(items), desc="calibrating the simulator", unit="configuration",
               disable=None)
    with bar:
        fits = (executor or Executor.for_jobs(n_jobs)).map(
            calibrate_configuration, [pts for _, pts in items], on_result=lambda _: bar.update())
    return {label: fit for (label, _), fit in zip(items, fits, strict=True)}


def coefficient_table(fits: dict[str, Calibration]) -> pd.DataFrame:
    """One row per configuration: the fitted coefficients, their relative standard errors (%),
    the offset and the fit's RMS log-error."""
    rows = []
    for label, fit in fits.items():
        c = fit.coefficients
        rows.append({"configuration": label, "kv_blocks": fit.replica.config.num_kv_blocks,
                     "c0_ms": c.c0_s * 1e3, "c0_rel_se_pct": 100 * fit.rel_se[0],
                     "c_prefill_us_per_tok": c.c_prefill_s_per_token * 1e6,
                     "c_prefill_rel_se_pct": 100 * fit.rel_se[1],
                     "c_decode_us_per_seq": c.c_decode_s_per_seq * 1e6,
                     "c_decode_rel_se_pct": 100 * fit.rel_se[2],
                     "ttft_offset_ms": c.ttft_offset_s * 1e3,
                     "rms_log_error": fit.rms_log_error})
    return pd.DataFrame(rows)


