"""Prediction intervals of the simulator, calibrated on held-out residuals.

The simulator's error is measured, not assumed: leave-one-out validation (a configuration or a
rate removed from the fit, then predicted) gives, per metric, relative residuals
``predicted / measured - 1``. Split-conformal intervals take their empirical quantiles: a
nominal ``confidence`` interval around a prediction ``p`` is
``[p / (1 + q_high), p / (1 + q_low)]`` where ``q_low``/``q_high`` are the
``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of the residuals (widened to
include 0, so that the interval contains the prediction). The
validation tables report how often such intervals cover held-out measurements.

The planner needs one number from this: the *slow end* of the step time,
:meth:`PredictionIntervals.step_time_factor` — how much slower than predicted every engine
step may be at the given confidence; :meth:`Calibration.scaled
<hgresearch.sim.calibrate.Calibration.scaled>` applies it.

Interface note (shared by the model and the planner): the planner uses only
:func:`reference_intervals`, :meth:`PredictionIntervals.interval` and
:meth:`PredictionIntervals.step_time_factor`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

#: Metrics with intervals: request throughput, mean TPOT, p90 TTFT (columns of the validation
#: tables, relative residual = predicted / measured - 1); :func:`reference_intervals` also has
#: p50 and p99 TTFT.
METRICS = ("throughput_rps", "mean_tpot_ms", "p90_ttft_ms")


@dataclass(frozen=True)
class PredictionIntervals:
    """Relative held-out residuals per metric (``predicted / measured - 1``) and where they
    came from (e.g. ``"leave-one-configuration-out, 112 points"``)."""

    residuals: Mapping[str, Sequence[float]]
    source: str

    def _residuals(self, metric: str) -> np.ndarray:
        if metric not in self.residuals:
            raise KeyError(f"no residuals for metric {metric!r}; have {sorted(self.residuals)}")
        values: np.ndarray = np.asarray(self.residuals[metric], dtype=float)
        values = values[np.isfinite(values)]
        if values.size == 0:
            raise ValueError(f"no finite residuals for metric {metric!r}")
        return values

    def residual_quantiles(self, metric: str, confidence: float) -> tuple[float, float]:
        """``(q_low, q_high)``: the ``(1 - confidence)/2`` and ``(1 + confidence)/2`` empirical
        quantiles of ``metric``'s relative residuals (finite-sample conformal rank)."""
        if not 0.0 < confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), not {confidence}")
        values = np.sort(self._residuals(metric))
        n = values.size
        alpha = 1.0 - confidence
        # Conformal rank: the ceil((n+1)(1-alpha/2))-th smallest for the upper end.
        hi_rank = min(int(np.ceil((n + 1) * (1 - alpha / 2))), n) - 1
        lo_rank = max(int(np.floor((n + 1) * (alpha / 2))) - 1, 0)
        return float(values[lo_rank]), float(values[hi_rank])

    def interval(self, metric: str, predicted: float, confidence: float) -> tuple[float, float]:
        """The ``confidence`` interval of the true value of ``metric`` given the prediction
        ``predicted``: ``[p / (1 + q_high), p / (1 + q_low)]``."""
        q_low, q_high = self.residual_quantiles(metric, confidence)
        # A prediction is always a possible value: with few residuals of one sign the
        # quantiles alone would give an interval that excludes it.
        q_low, q_high = min(q_low, 0.0), max(q_high, 0.0)
        return predicted / (1.0 + q_high), predicted / max(1.0 + q_low, 1e-9)

    def step_time_factor(self, confidence: float) -> float:
        """Slow end of the step time at ``confidence`` (one-sided): how many times slower than
        predicted every step may be. Read from mean TPOT, whose residual is the step time's
        (a decode step emits one token per sequence): ``1 / (1 + q)`` with ``q`` the
        ``1 - confidence`` quantile of the TPOT residuals; never below 1."""
        values = np.sort(self._residuals("mean_tpot_ms"))
        n = values.size
        rank = max(int(np.floor((n + 1) * (1.0 - confidence))) - 1, 0)
        return max(1.0, 1.0 / max(1.0 + float(values[rank]), 1e-9))


#: Interval metric -> validation (runs-table) metric it is measured on.
VALIDATION_METRIC = {"throughput_rps": "request_throughput_rps", "mean_tpot_ms": "mean_tpot_ms",
                     "p50_ttft_ms": "p50_ttft_ms", "p90_ttft_ms": "p90_ttft_ms",
                     "p99_ttft_ms": "p99_ttft_ms"}
#: Nominal confidences whose coverage the validation reports.
COVERAGE_CONFIDENCES = (0.8, 0.9)


def intervals_from_points(points: pd.DataFrame, *, scheme: str = "LOCO",
                          leave_out: str | None = None) -> PredictionIntervals:
    """:class:`PredictionIntervals` from the held-out rows of a validation
    (:func:`hgresearch.sim.validation.cross_validate`'s ``points``) of ``scheme``: per metric
    the relative residuals ``predicted / measured − 1`` of the rows not ``excluded``, without
    configuration ``leave_out`` (cross-fitting: the intervals a configuration is judged by never
    saw its own residuals)."""
    rows = points[points.scheme == scheme]
    if "excluded" in rows.columns:
        rows = rows[~rows.excluded.astype(bool)]
    if leave_out is not None:
        rows = rows[rows.configuration != leave_out]
    residuals = {name: (rows.predicted[rows.metric == metric]
                        / rows.measured[rows.metric == metric] - 1.0).tolist()
                 for name, metric in VALIDATION_METRIC.items()}
    configurations = rows.configuration.nunique()
    return PredictionIntervals(
        residuals=residuals,
        source=(f"{scheme} residuals of {configurations} configurations, "
                f"{len(residuals['mean_tpot_ms'])} points"))


def intervals_from_errors(rows: pd.DataFrame, source: str) -> PredictionIntervals:
    """:class:`PredictionIntervals` from validation rows with ``metric`` and ``error_pct``
    (``100 × (predicted / measured − 1)``, e.g. a user calibration's leave-one-rate-out rows,
    :func:`hgresearch.sim.user_calibration.leave_one_rate_out`): per metric, the relative
    residuals."""
    residuals = {str(metric): (group.error_pct.to_numpy(dtype=float) / 100.0).tolist()
                 for metric, group in rows.groupby("metric")}
    return PredictionIntervals(residuals=residuals, source=source)


def coverage_table(points: pd.DataFrame, *, scheme: str = "LOCO",
                   confidences: Sequence[float] = COVERAGE_CONFIDENCES) -> pd.DataFrame:
    """Empirical coverage of nominal ``confidences`` intervals on held-out points, measured
    honestly: each configuration's points are judged by intervals built from the *other*
    configurations' ``scheme`` residuals (:func:`intervals_from_points` with ``leave_out``).
    One row per metric × nominal level: ``coverage_pct``, ``points``, the median relative width
    of the interval (``median_width_pct``: (high − low) / prediction) and how many measured
    points fall below / above it."""
    rows = points[(points.scheme == scheme)]
    if "excluded" in rows.columns:
        rows = rows[~rows.excluded.astype(bool)]
    out = []
    for name, metric in VALIDATION_METRIC.items():
        for confidence in confidences:
            covered = below = above = 0
            widths = []
            for label, own in rows[rows.metric == metric].groupby("configuration"):
                intervals = intervals_from_points(points, scheme=scheme, leave_out=str(label))
                for predicted, measured in zip(own.predicted, own.measured, strict=True):
                    low, high = intervals.interval(name, float(predicted), confidence)
                    widths.append((high - low) / float(predicted))
                    if measured < low:
                        below += 1
                    elif measured > high:
                        above += 1
                    else:
                        covered += 1
            total = covered + below + above
            out.append({"scheme": scheme, "metric": name, "nominal_pct": 100 * confidence,
                        "coverage_pct": 100 * covered / total if total else math.nan,
                        "points": total, "below": below, "above": above,
                        "median_width_pct": 100 * float(np.median(widths)) if widths
                        else math.nan})
    return pd.DataFrame(out)


def held_out_intervals(points: pd.DataFrame) -> PredictionIntervals:
    """The intervals of a cross-validation's ``points``
    (:func:`hgresearch.sim.validation.cross_validate`) from its leave-one-configuration-out
    residuals: the one scheme every table, the CLI and the planner take their intervals from."""
    return intervals_from_points(points, scheme="LOCO")


def reference_intervals(build_dir: str | Path | None = "build",
                        reference: str | Path | None = None) -> PredictionIntervals:
    """Intervals of the reference (paper) calibration: the leave-one-configuration-out
    residuals of the shared step-time model on the reference runs
    (:func:`hgresearch.sim.validation.cached_cross_validation`, cached under
    ``<build_dir>/cache/models`` by the runs and the simulator's code; the first call runs the
    whole cross-validation, minutes). Their coverage on held-out configurations is the
    ``sim_interval_coverage`` table."""
    from hgresearch.sim.run import calibration_runs
    from hgresearch.sim.validation import cached_cross_validation

    validation = cached_cross_validation(calibration_runs(reference), build_dir)
    return held_out_intervals(validation.points)


#: Keys of a run summary (``summary.json``) with an interval -> the interval metric.
SUMMARY_INTERVAL_METRICS = {"request_throughput": "throughput_rps",
                            "mean_tpot_ms": "mean_tpot_ms", "p50_ttft_ms": "p50_ttft_ms",
                            "p90_ttft_ms": "p90_ttft_ms", "p99_ttft_ms": "p99_ttft_ms"}


def summary_intervals(intervals: PredictionIntervals, summary: Mapping[str, object],
                      confidence: float) -> dict[str, tuple[float, float]]:
    """The ``confidence`` interval of every simulated summary value that has residuals
    (:data:`SUMMARY_INTERVAL_METRICS`, e.g. ``request_throughput`` in req/s, ``p90_ttft_ms``),
    keyed by the summary's names; values that are missing or not finite are left out."""
    out: dict[str, tuple[float, float]] = {}
    for key, metric in SUMMARY_INTERVAL_METRICS.items():
        value = summary.get(key)
        if metric not in intervals.residuals or not isinstance(value, int | float):
            continue
        if math.isfinite(float(value)):
            out[key] = intervals.interval(metric, float(value), confidence)
    return out
