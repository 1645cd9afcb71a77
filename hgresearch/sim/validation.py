"""Validation of the simulator: the shared step-time model (:mod:`hgresearch.sim.step_model`)
predicting points it was not fitted on, three ways side by side.

* **LOCO** (leave one configuration out): each GPU configuration in turn is removed whole from
  its GPU type's fit (every rate), then predicted — how an unmeasured configuration is
  predicted (:func:`hgresearch.sim.step_model.calibration_for`).
* **LOQO** (leave one rate out): each offered rate is removed from *every* configuration of
  the GPU type at once, then predicted — stricter than removing one point at a time, as no
  configuration keeps a neighbour at that rate.
* **in-sample**: the fit on all points predicting its own points; beside the held-out errors
  it tells misfit (in-sample already large) from poor generalisation (only held-out large).

Every fold's fit starts from the same :data:`~hgresearch.sim.step_model.INITIAL` as the full
fit (not from the full fit's optimum, which has seen the held-out points). Configurations of a
GPU type without datasheet numbers (the CPU runs) keep the per-configuration calibration
(:func:`hgresearch.sim.calibrate.calibrate`): in-sample and one-point-at-a-time LOQO only —
there is no other configuration to predict them from. (point, metric) pairs that
:mod:`hgresearch.sim.anomalies` keeps out of the fit are flagged ``excluded`` and left out of
every error average and interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hgresearch.cache import source_digest
from hgresearch.data.ingest import select_repeats
from hgresearch.errors import InputError
from hgresearch.executors import Executor
from hgresearch.identity import CONFIG_KEYS, config_label
from hgresearch.sim.anomalies import anomalies, excluded_metrics
from hgresearch.sim.calibrate import (
    Calibration,
    calibrate,
    replica_for_runs,
    simulate_summary,
)
from hgresearch.sim.intervals import PredictionIntervals
from hgresearch.sim.replay import Workload, run_workload
from hgresearch.sim.step_model import (
    FIT_TARGETS,
    PARAMETERS,
    ConfigData,
    GpuFit,
    calibration_from_fit,
    config_physics,
    fit_gpu,
)

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
#: The issue's goals (MAPE, %) per validation scheme.
SCHEME_GOALS_PCT = {
    "LOCO": {"request_throughput_rps": 10.0, "mean_tpot_ms": 15.0, "p90_ttft_ms": 35.0},
    "LOQO": {"request_throughput_rps": 5.0, "mean_tpot_ms": 10.0, "p90_ttft_ms": 25.0},
}
#: Validation schemes, in the order the tables show them.
SCHEMES = ("LOCO", "LOQO", "in-sample")
#: The p90 TTFT goal applies where the measured TTFT exceeds this (ms).
TTFT_GOAL_ABOVE_MS = 50.0


#: Modules whose source decides the calibration, validation and SLO results (the cache key).
_RESULT_MODULES = ("calibrate", "replica_limits", "entities", "events", "scheduler", "simulator",
                   "slo_rate", "step_time", "validation", "replay", "step_model", "anomalies")


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
    """Calibrate one configuration on all its points, alone (the per-configuration model:
    configurations without datasheet numbers, and the comparison in docs/simulator.md)."""
    return calibrate(replica_for_runs(points), points, _workloads(points))


def has_physics(gpu_name: str, gpu_count: int, model: str) -> bool:
    """Whether the catalogs give the shared model what it needs for this configuration."""
    try:
        config_physics(model, gpu_name, gpu_count)
    except (InputError, KeyError, IndexError, ValueError):
        return False
    return True


def configuration_data(label: str, points: pd.DataFrame) -> ConfigData:
    """:class:`~hgresearch.sim.step_model.ConfigData` of one configuration's points; the fit
    mask leaves out what :func:`hgresearch.sim.anomalies.excluded_metrics` excludes."""
    first = points.iloc[0]
    excluded = excluded_metrics(points)
    mask = np.array([[metric not in excluded.get(float(rate), set()) for metric in FIT_TARGETS]
                     for rate in points.request_rate_qps], dtype=bool)
    return ConfigData(label=label, points=points.reset_index(drop=True),
                      replica=replica_for_runs(points), workloads=tuple(_workloads(points)),
                      physics=config_physics(str(first.model), str(first.gpu_name),
                                             int(first.gpu_count)),
                      mask=mask)


def _split(runs: pd.DataFrame) -> tuple[dict[str, list[ConfigData]],
                                         list[tuple[str, pd.DataFrame]]]:
    """Configurations by GPU type for the shared model, and the rest (no datasheet numbers)."""
    shared: dict[str, list[ConfigData]] = {}
    alone = []
    for label, points in configuration_points(runs):
        first = points.iloc[0]
        if has_physics(str(first.gpu_name), int(first.gpu_count), str(first.model)):
            shared.setdefault(str(first.gpu_name), []).append(configuration_data(label, points))
        else:
            alone.append((label, points))
    return shared, alone


def _prediction_rows(scheme: str, data: ConfigData, rows: list[int],
                     fit: GpuFit) -> list[dict[str, Any]]:
    calibration = calibration_from_fit(fit, data.replica)
    excluded = excluded_metrics(data.points)
    out = []
    for i in rows:
        measured = data.points.iloc[i]
        predicted = simulate_summary(data.replica, calibration.coefficients, data.workloads[i])
        for metric in VALIDATION_METRICS:
            out.append(_row(scheme, data.label, measured, metric, predicted[metric],
                            data.workloads[i].lengths_source,
                            metric in excluded.get(float(measured.request_rate_qps), set())))
    return out


def _row(scheme: str, label: str, measured: pd.Series, metric: str, predicted: float,
         lengths_source: str, excluded: bool) -> dict[str, Any]:
    return {"scheme": scheme, "configuration": label, "gpu_name": str(measured.gpu_name),
            "gpu_count": int(measured.gpu_count),
            "held_out_qps": float(measured.request_rate_qps), "metric": metric,
            "measured": float(measured[metric]), "predicted": float(predicted),
            "error_pct": 100.0 * (float(predicted) / float(measured[metric]) - 1.0),
            "lengths_source": lengths_source, "excluded": bool(excluded)}


#: One fold: (scheme, fold name, training data, [(held-out configuration, its held-out rows)]).
Fold = tuple[str, str, list[ConfigData], list[tuple[ConfigData, list[int]]]]


def _run_fold(fold: Fold) -> tuple[str, str, GpuFit, list[dict[str, Any]]]:
    scheme, name, training, held = fold
    fit = fit_gpu(training, uncertainty=scheme == "in-sample")
    rows = [row for data, indices in held for row in _prediction_rows(scheme, data, indices, fit)]
    return scheme, name, fit, rows


def _folds(gpu: str, configs: list[ConfigData]) -> list[Fold]:
    """In-sample, LOCO and LOQO folds of one GPU type (see the module docstring)."""
    every = [(d, list(range(len(d.points)))) for d in configs]
    folds: list[Fold] = [("in-sample", gpu, configs, every)]
    if len(configs) > 1:
        for d in configs:
            folds.append(("LOCO", d.label, [c for c in configs if c is not d],
                          [(d, list(range(len(d.points))))]))
    rates = sorted({float(r) for d in configs for r in d.points.request_rate_qps})
    for rate in rates if len(rates) > 2 else []:
        training = []
        held = []
        for d in configs:
            keep = [i for i, r in enumerate(d.points.request_rate_qps) if float(r) != rate]
            out = [i for i, r in enumerate(d.points.request_rate_qps) if float(r) == rate]
            if keep:
                training.append(_subset(d, keep))
            if out:
                held.append((d, out))
        folds.append(("LOQO", f"{gpu} at {rate:g} req/s", training, held))
    return folds


def _subset(data: ConfigData, rows: list[int]) -> ConfigData:
    return ConfigData(label=data.label, points=data.points.iloc[rows].reset_index(drop=True),
                      replica=data.replica, workloads=tuple(data.workloads[i] for i in rows),
                      physics=data.physics, mask=data.mask[rows])


@dataclass
class CrossValidation:
    """Result of :func:`cross_validate`: the per-point rows of every scheme (``scheme``,
    ``configuration``, ``held_out_qps``, ``metric``, ``measured``, ``predicted``,
    ``error_pct``, ``excluded``), the shared fits on all points by GPU type, every fold's fit
    (``(scheme, fold) -> GpuFit``), the per-configuration calibrations of configurations
    outside the shared model, and the excluded points (:func:`excluded_table`)."""

    points: pd.DataFrame
    fits: dict[str, GpuFit]
    fold_fits: dict[tuple[str, str], GpuFit]
    alone: dict[str, Calibration]
    excluded: pd.DataFrame


def cross_validate(runs: pd.DataFrame, *, n_jobs: int = 1, executor: Executor | None = None,
                   schemes: tuple[str, ...] = SCHEMES) -> CrossValidation:
    """Fit the shared model on all points and in every LOCO and LOQO fold; predict the
    held-out points (see the module docstring). ``executor`` (default ``n_jobs`` processes)
    runs the folds; the result does not depend on which runs them. ``schemes`` limits the
    folds (``fits`` then holds only the in-sample fits that ran)."""
    unknown = set(schemes) - set(SCHEMES)
    if unknown:
        raise InputError(f"unknown validation scheme(s) {sorted(unknown)}; known: {SCHEMES}",
                         field="schemes")
    shared, alone = _split(runs)
    folds = [fold for gpu, configs in sorted(shared.items()) for fold in _folds(gpu, configs)
             if fold[0] in schemes]
    jobs = executor or Executor.for_jobs(n_jobs)
    results = jobs.map(_run_fold, folds)
    rows = [row for *_, part in results for row in part]
    fits = {name: fit for scheme, name, fit, _ in results if scheme == "in-sample"}
    fold_fits = {(scheme, name): fit for scheme, name, fit, _ in results}
    alone_fits = {}
    for label, points in alone if "in-sample" in schemes or "LOQO" in schemes else []:
        alone_fits[label] = calibrate_configuration(points)
        fit = alone_fits[label]
        excluded = excluded_metrics(points)
        workloads = _workloads(points)
        for i, (_, measured) in enumerate(points.iterrows() if "in-sample" in schemes else []):
            predicted = simulate_summary(fit.replica, fit.coefficients, workloads[i])
            for metric in VALIDATION_METRICS:
                rows.append(_row("in-sample", label, measured, metric, predicted[metric],
                                 workloads[i].lengths_source,
                                 metric in excluded.get(float(measured.request_rate_qps), set())))
        if len(points) >= 3 and "LOQO" in schemes:
            for row in _validate_one((label, points)):
                rows.append({"scheme": "LOQO", **row, "excluded": row["metric"] in excluded.get(
                    row["held_out_qps"], set())})
    return CrossValidation(points=pd.DataFrame(rows), fits=fits, fold_fits=fold_fits,
                           alone=alone_fits, excluded=excluded_table(runs))


def cached_cross_validation(runs: pd.DataFrame, build_dir: str | Path | None, *,
                            n_jobs: int = 2, executor: Executor | None = None
                            ) -> CrossValidation:
    """:func:`cross_validate`, cached under ``<build_dir>/cache/models`` by the runs and the
    simulator's code (:func:`code_digest`); shared by notebook 07, ``hgresearch reproduce``
    and :func:`hgresearch.sim.intervals.reference_intervals`."""
    from hgresearch.cache import cached

    return cached(build_dir, "sim_cross_validation", runs, {"sim_code": code_digest()},
                  lambda: cross_validate(runs, n_jobs=n_jobs, executor=executor))


#: SLO limits (ms) and TTFT percentiles at which a prediction is checked against every
#: measured point (:func:`slo_contradictions`); the SLO-capacity table's grid.
CONTRADICTION_LIMITS_MS = (50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0)
CONTRADICTION_METRICS = ("p90_ttft_ms", "p99_ttft_ms")


def slo_contradictions(points: pd.DataFrame, intervals: PredictionIntervals, *,
                       scheme: str = "in-sample", confidence: float = 0.9,
                       excluded: pd.DataFrame | None = None,
                       unbounded_kv: pd.DataFrame | None = None) -> pd.DataFrame:
    """Where a prediction contradicts a measurement: a measured point met an SLO (its TTFT
    percentile within a limit of :data:`CONTRADICTION_LIMITS_MS`) while the ``confidence``
    interval of the prediction lies wholly above the limit, or missed it while the interval
    lies wholly below. One row per (point, metric, limit) with the measured value, the
    prediction, its interval and ``reason``: why the model is allowed to disagree (the point's
    TTFT is kept out of the fit: the ``excluded`` table's reason; or, for a met SLO, the
    simulated queue waits for KV blocks: with the KV cache unbounded, ``unbounded_kv`` from
    :func:`unbounded_kv_predictions`, the same interval no longer lies above the limit), empty
    when nothing explains it."""
    rows = points[(points.scheme == scheme) & points.metric.isin(CONTRADICTION_METRICS)]
    reasons: dict[tuple[str, float], str] = {}
    if excluded is not None:
        reasons = {(str(r.configuration), float(r.request_rate_qps)): str(r.reason)
                   for r in excluded.itertuples()}
    kv_free: dict[tuple[str, float, str], float] = {}
    if unbounded_kv is not None:
        kv_free = {(str(r.configuration), float(r.request_rate_qps), str(r.metric)):
                   float(r.predicted) for r in unbounded_kv.itertuples()}
    out = []
    for row in rows.itertuples():
        low, high = intervals.interval(str(row.metric), float(row.predicted), confidence)
        key = (str(row.configuration), float(row.held_out_qps))
        for limit in CONTRADICTION_LIMITS_MS:
            met = float(row.measured) <= limit
            if (met and low > limit) or (not met and high <= limit):
                reason = reasons.get(key, "")
                reason = f"TTFT kept out of the fit: {reason}" if reason else ""
                free = kv_free.get((*key, str(row.metric)), math.nan)
                if (not reason and met and math.isfinite(free)
                        and intervals.interval(str(row.metric), free, confidence)[0] <= limit):
                    reason = (f"the simulated queue waits for KV blocks: with an unbounded KV "
                              f"cache the prediction is {free:.0f} ms, its interval reaches the "
                              "limit (the KV capacity is the catalogs' estimate where the run "
                              "kept no server log)")
                out.append({"configuration": row.configuration,
                            "request_rate_qps": float(row.held_out_qps), "metric": row.metric,
                            "limit_ms": limit, "measured_met": met,
                            "measured_ms": float(row.measured),
                            "predicted_ms": float(row.predicted), "low_ms": low,
                            "high_ms": high, "reason": reason})
    columns = ["configuration", "request_rate_qps", "metric", "limit_ms", "measured_met",
               "measured_ms", "predicted_ms", "low_ms", "high_ms", "reason"]
    return pd.DataFrame(out, columns=columns)


def unbounded_kv_predictions(calibrations: dict[str, Calibration],
                             measured: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The TTFT percentiles of :data:`CONTRADICTION_METRICS` every measured point would have
    with its calibration but a KV cache that holds every request of the run at once (rows
    ``configuration``, ``request_rate_qps``, ``metric``, ``predicted``): the counterfactual
    :func:`slo_contradictions` uses to tell a KV-bound simulated queue from a slow step."""
    rows = []
    for label, points in measured.items():
        calibration = calibrations.get(label)
        if calibration is None:
            continue
        config = calibration.replica.config
        for (_, point), workload in zip(points.iterrows(), _workloads(points), strict=True):
            tokens = int(workload.prompt_tokens.sum() + workload.output_tokens.sum())
            blocks = tokens // config.block_size + len(workload.prompt_tokens) + 1
            replica = replace(calibration.replica, config=replace(config, num_kv_blocks=blocks))
            summary = simulate_summary(replica, calibration.coefficients, workload)
            for metric in CONTRADICTION_METRICS:
                rows.append({"configuration": label,
                             "request_rate_qps": float(point.request_rate_qps),
                             "metric": metric, "predicted": float(summary[metric])})
    return pd.DataFrame(rows, columns=["configuration", "request_rate_qps", "metric",
                                       "predicted"])


def excluded_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Every measured point whose metrics are kept out of the fit, with the reason
    (:func:`hgresearch.sim.anomalies.anomalies`)."""
    parts = []
    for label, points in configuration_points(runs):
        table = anomalies(points)
        if len(table):
            parts.append(table.assign(configuration=label))
    columns = ["configuration", "request_rate_qps", "metrics", "reason"]
    return (pd.concat(parts, ignore_index=True)[columns] if parts
            else pd.DataFrame(columns=columns))


def _validate_one(item: tuple[str, pd.DataFrame]) -> list[dict[str, Any]]:
    """One-point-at-a-time LOQO of the per-configuration calibration (no scheme column)."""
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
    """The LOQO rows of :func:`cross_validate` (per held-out point and metric: measured,
    predicted, signed error %, ``excluded``), for ``hgresearch sim validate``."""
    points = cross_validate(runs, n_jobs=n_jobs, executor=executor, schemes=("LOQO",)).points
    if points.empty:
        return points
    return points[points.scheme == "LOQO"].drop(columns="scheme").reset_index(drop=True)


def simulated_validation_table(points: pd.DataFrame, spread_summary: pd.DataFrame | None = None
                               ) -> pd.DataFrame:
    """Per configuration: MAPE (%) of each metric over its held-out rates (p90 TTFT only where
    measured above :data:`TTFT_GOAL_ABOVE_MS`; points flagged ``excluded`` left out), then an
    ``all configurations`` row (mean over every held-out point), a ``worst configuration`` row
    and, when ``spread_summary`` (:func:`hgresearch.fits.uncertainty.run_to_run_spread`'s
    summary) is given, the ``run-to-run spread`` row: the median relative std (%) of repeated
    measured points, the noise floor no prediction can beat."""
    data = _scored(points)
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


def _scored(points: pd.DataFrame, *, with_excluded: bool = False) -> pd.DataFrame:
    """The rows an error average counts: not excluded (unless ``with_excluded``), p90 TTFT
    above the floor."""
    data = points.copy()
    data["abs_error_pct"] = data.error_pct.abs()
    low_ttft = (data.metric == "p90_ttft_ms") & (data.measured <= TTFT_GOAL_ABOVE_MS)
    keep = ~low_ttft
    if "excluded" in data.columns and not with_excluded:
        keep &= ~data.excluded.astype(bool)
    return data[keep]


#: Metrics of the side-by-side table and the goals summary.
HEADLINE_METRICS = ("request_throughput_rps", "mean_tpot_ms", "p90_ttft_ms")
_SHORT = {"request_throughput_rps": "throughput", "mean_tpot_ms": "mean_tpot",
          "p90_ttft_ms": "p90_ttft", "p50_ttft_ms": "p50_ttft", "p99_ttft_ms": "p99_ttft",
          "output_throughput_tok_per_s": "output_throughput"}


def schemes_table(points: pd.DataFrame) -> pd.DataFrame:
    """Per configuration, LOCO, LOQO and in-sample MAPE (%) of :data:`HEADLINE_METRICS` side by
    side (columns ``<scheme>_<metric>_mape_pct``), then the ``all configurations`` row (mean
    over points) and the ``worst configuration`` row; a configuration a scheme cannot
    validate has an empty cell (the CPU: no other CPU configuration for LOCO)."""
    data = _scored(points[points.metric.isin(HEADLINE_METRICS)])
    data = data.assign(column=data.scheme.str.replace("-", "_").str.lower() + "_"
                       + data.metric.map(_SHORT) + "_mape_pct")
    columns = [f"{s.replace('-', '_').lower()}_{_SHORT[m]}_mape_pct"
               for s in SCHEMES for m in HEADLINE_METRICS]
    table = data.pivot_table(index="configuration", columns="column", values="abs_error_pct",
                             aggfunc="mean").reindex(columns=columns).reset_index()
    overall = data.groupby("column").abs_error_pct.mean().reindex(columns)
    return pd.concat([table,
                      pd.DataFrame([{"configuration": "all configurations", **overall}]),
                      pd.DataFrame([{"configuration": "worst configuration",
                                     **table[columns].max().to_dict()}])], ignore_index=True)


def goals_table(points: pd.DataFrame) -> pd.DataFrame:
    """One row per scheme × headline metric: the MAPE (%) over the scheme's points (GPU
    configurations only for LOCO), its goal (:data:`SCHEME_GOALS_PCT`, empty for in-sample),
    whether it is met, the number of points, the worst configuration with its MAPE, and the
    MAPE with the excluded points counted too (``mape_with_excluded_pct``)."""
    data = _scored(points[points.metric.isin(HEADLINE_METRICS)])
    every = _scored(points[points.metric.isin(HEADLINE_METRICS)], with_excluded=True)
    rows = []
    for scheme in SCHEMES:
        for metric in HEADLINE_METRICS:
            sel = data[(data.scheme == scheme) & (data.metric == metric)]
            if sel.empty:
                continue
            per_config = sel.groupby("configuration").abs_error_pct.mean()
            goal = SCHEME_GOALS_PCT.get(scheme, {}).get(metric, math.nan)
            mape = float(sel.abs_error_pct.mean())
            rows.append({"scheme": scheme, "metric": metric, "mape_pct": mape,
                         "goal_pct": goal,
                         "met": "" if math.isnan(goal) else ("yes" if mape <= goal else "no"),
                         "points": len(sel), "worst_configuration": str(per_config.idxmax()),
                         "worst_mape_pct": float(per_config.max()),
                         "mape_with_excluded_pct": float(every[
                             (every.scheme == scheme) & (every.metric == metric)
                         ].abs_error_pct.mean())})
    return pd.DataFrame(rows)


def goal_misses(table: pd.DataFrame) -> dict[str, float]:
    """The validation's numbers against the goals: throughput MAPE over all points and in the
    worst configuration, mean TPOT and p90 TTFT MAPE over all points (%), from a
    :func:`simulated_validation_table`."""
    by = table.set_index("configuration")
    return {"throughput_mape_pct": float(by.loc["all configurations",
                                                "request_throughput_mape_pct"]),
            "throughput_worst_config_mape_pct": float(by.loc["worst configuration",
                                                             "request_throughput_mape_pct"]),
            "mean_tpot_mape_pct": float(by.loc["all configurations", "mean_tpot_mape_pct"]),
            "p90_ttft_mape_pct": float(by.loc["all configurations", "p90_ttft_mape_pct"])}


def calibrations_from(validation: CrossValidation, runs: pd.DataFrame) -> dict[str, Calibration]:
    """``label -> Calibration`` of every configuration of ``runs``: from the shared model's fit
    on all points of its GPU type, else its own per-configuration calibration."""
    out: dict[str, Calibration] = {}
    for label, points in configuration_points(runs):
        if label in validation.alone:
            out[label] = validation.alone[label]
            continue
        gpu = str(points.iloc[0].gpu_name)
        out[label] = calibration_from_fit(validation.fits[gpu], replica_for_runs(points),
                                          rates_qps=points.request_rate_qps.tolist())
    return out


def shared_model_fits(runs: pd.DataFrame, *, n_jobs: int = 1,
                      executor: Executor | None = None) -> tuple[dict[str, GpuFit],
                                                                 dict[str, Calibration]]:
    """The shared model fitted on all points of each GPU type, and the per-configuration
    calibrations of the configurations it does not cover (no datasheet numbers)."""
    shared, alone = _split(runs)
    jobs = executor or Executor.for_jobs(n_jobs)
    fits = jobs.map(fit_gpu, [configs for _, configs in sorted(shared.items())])
    alone_fits = jobs.map(calibrate_configuration, [points for _, points in alone])
    return ({gpu: fit for gpu, fit in zip(sorted(shared), fits, strict=True)},
            {label: fit for (label, _), fit in zip(alone, alone_fits, strict=True)})


def reference_shared_fits(build_dir: str | Path | None = "build",
                          reference: str | Path | None = None) -> dict[str, GpuFit]:
    """The shared model fitted on the reference runs (and ``data/raw/cpu-tiny``), by GPU type,
    cached under ``<build_dir>/cache/models``: what
    :func:`hgresearch.sim.step_model.calibration_for` predicts unmeasured configurations
    from."""
    from hgresearch.cache import cached
    from hgresearch.sim.run import calibration_runs

    runs = calibration_runs(reference)
    return cached(build_dir, "sim_shared_fits", runs, {"sim_code": code_digest()},
                  lambda: shared_model_fits(runs, n_jobs=2)[0])


def calibrate_all(runs: pd.DataFrame, *, n_jobs: int = 1,
                  executor: Executor | None = None) -> dict[str, Calibration]:
    """A calibration of every configuration of ``runs``, by label: derived from the shared
    model fitted on all points of its GPU type (:mod:`hgresearch.sim.step_model`), or — for a
    configuration without datasheet numbers — fitted on its own points; ``executor`` as in
    :func:`cross_validate`."""
    fits, alone = shared_model_fits(runs, n_jobs=n_jobs, executor=executor)
    out: dict[str, Calibration] = {}
    for label, points in configuration_points(runs):
        if label in alone:
            out[label] = alone[label]
        else:
            out[label] = calibration_from_fit(fits[str(points.iloc[0].gpu_name)],
                                              replica_for_runs(points),
                                              rates_qps=points.request_rate_qps.tolist())
    return out


def coefficient_table(fits: dict[str, Calibration]) -> pd.DataFrame:
    """One row per configuration: the step coefficients its calibration uses (derived from the
    shared model, or fitted alone: ``source``), the KV read cost, the offset, and the relative
    standard errors of c0 and c_prefill's parameters (%)."""
    rows = []
    for label, fit in fits.items():
        c = fit.coefficients
        model = c.step_model(fit.replica)
        rows.append({"configuration": label, "source": fit.extra.get("source", "alone"),
                     "kv_blocks": fit.replica.config.num_kv_blocks,
                     "max_num_seqs": fit.replica.config.max_num_seqs,
                     "max_num_batched_tokens": fit.replica.config.max_num_batched_tokens,
                     "c0_ms": c.c0_s * 1e3, "c0_rel_se_pct": 100 * fit.rel_se[0],
                     "c_prefill_us_per_tok": c.c_prefill_s_per_token * 1e6,
                     "c_prefill_rel_se_pct": 100 * fit.rel_se[1],
                     "c_decode_us_per_seq": c.c_decode_s_per_seq * 1e6,
                     "c_kv_ns_per_tok": model.c_kv_s_per_token * 1e9,
                     "ttft_offset_ms": c.ttft_offset_s * 1e3,
                     "rms_log_error": fit.rms_log_error})
    return pd.DataFrame(rows)


def gpu_coefficient_table(fits: dict[str, GpuFit]) -> pd.DataFrame:
    """One row per GPU type × shared parameter: value, relative standard error (%), status
    (``free``, on a bound, or fixed) and what it was fitted on."""
    rows = []
    for gpu, fit in sorted(fits.items()):
        for name in PARAMETERS:
            rows.append({"gpu_name": gpu, "parameter": name, "value": fit.values[name],
                         "rel_se_pct": 100 * fit.rel_se[name], "status": fit.status[name],
                         "configurations": len(fit.configurations), "points": fit.num_points,
                         "rms_log_error": fit.rms_log_error})
    return pd.DataFrame(rows)
