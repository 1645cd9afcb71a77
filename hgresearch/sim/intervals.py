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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

#: Metrics with intervals: request throughput, mean TPOT, p90 TTFT (columns of the validation
#: tables, relative residual = predicted / measured - 1).
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


def reference_intervals() -> PredictionIntervals:
    """Intervals of the reference (paper) calibration.

    PROVISIONAL: residual spreads standing in until the cross-configuration validation lands
    (issue 18 item 3 replaces this with the leave-one-configuration-out residuals of the
    reference runs, computed and cached). Shape of the stand-in: TPOT under-predicted by up to
    ~25%, as the current leave-one-QPS-out table shows.
    """
    tpot = np.linspace(-0.25, 0.25, 41)
    return PredictionIntervals(
        residuals={"throughput_rps": np.linspace(-0.1, 0.1, 41).tolist(),
                   "mean_tpot_ms": tpot.tolist(),
                   "p90_ttft_ms": np.linspace(-0.6, 0.6, 41).tolist()},
        source="provisional stand-in (not yet measured)")
