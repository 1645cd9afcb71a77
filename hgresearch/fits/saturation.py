"""Capacity (saturation) model: how many requests per second a configuration sustains.

The paper's runs send a *fixed count* of N requests (200) at offered rate λ and report
``achieved = completed / duration``. That stays below λ even far from saturation, because the
duration also contains the service time of the last requests. We **model** the artefact
instead of correcting the data. A run's duration is

    D(λ) = smoothmax_k( f·(N−1)/λ + drain(λ) ,  N/μ )

* ``f·(N−1)/λ`` — when the last request is *sent*: the sum of N−1 exponential gaps at rate λ.
  Its expectation is (N−1)/λ; the reference runs share one arrival seed, so their gaps sum to
  one fixed number f·(N−1) at unit rate (the *schedule factor*, one number per data set, see
  :func:`estimate_schedule`);
* ``drain(λ)`` — service time of the last requests after the last one was sent: ``d0``
  (``drain="constant"``, the default) or ``d0 + d1·ln(1 + λ/1 req/s)`` (``drain="log"``: more
  requests share the tail window as load grows), ``d0, d1 ≥ 0``;
* ``N/μ`` — a saturated, work-conserving server is busy from the first arrival to the last
  completion, so the whole run takes N/μ; the drain does **not** add to it;
* ``smoothmax_k(a, b) = (a^k + b^k)^(1/k)`` — a smooth switch between the two regimes.

So μ is the sustained completion rate of a saturated fixed-count run. It includes the run's
own ramp-up and tail, which makes it a *conservative* capacity: with ``drain="constant"`` a
tail that keeps growing with load is read as saturation. It is never below the best completion
rate a run of the configuration achieved (``N/D ≤ μ`` for every run: the fit's lower bound on
μ), so no published capacity contradicts a measurement. When the latency data show no
queueing at the highest rate, the capacity table says so (``capacity_is_lower_bound``).

Fits use :func:`scipy.optimize.least_squares` on relative duration errors (several starts);
the 95 % interval of μ is a profile-likelihood interval ``n·ln(SSR(μ)/SSR_min) ≤ χ²₁(0.95)``
(asymptotic — optimistic with five points). If the profile stays inside the threshold up to
1000× the highest offered rate, the upper bound is ``inf``: the data never saturated the
server and μ is only bounded below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.optimize import least_squares
from scipy.stats import chi2

from hgresearch.fits.common import (
    CONFIG_KEYS,
    ConfigKey,
    ModelInputError,
    config_groups,
    config_label,
    require_columns,
    warn,
)

SATURATION_COLUMNS = ["request_rate_qps", "num_prompts", "duration_s", "completed",
                    "total_input_tok", "total_output_tok"]
DRAIN_FORMS = ("constant", "log")
#: Sharpness k of the smooth maximum: at the knee the duration is 2^(1/k) (7 %) above the max.
DEFAULT_SHARPNESS = 10.0
#: Relative precision floor of a duration (timer and scheduling jitter), so a perfect fit of
#: few points does not give a zero-width interval.
REL_ERROR_FLOOR = 0.005
#: TTFT p90 at the highest rate below this multiple of its smallest value = no clear queueing,
#: so the fitted capacity is flagged as a lower bound (a heuristic; see docs/models.md).
QUEUEING_GROWTH = 3.0
#: Upper end of the μ search, as a multiple of the highest offered rate.
MU_SEARCH_FACTOR = 1000.0


@dataclass(frozen=True)
class Schedule:
    """Arrival schedule shared by a data set: unit-rate span factor f and switch sharpness."""

    factor: float = 1.0
    sharpness: float = DEFAULT_SHARPNESS


def arrival_span_s(rate_qps: np.ndarray, num_prompts: np.ndarray, factor: float) -> np.ndarray:
    """Time at which the last of N requests is sent at offered rate λ (0 for λ = inf)."""
    rate = np.asarray(rate_qps, float)
    n = np.asarray(num_prompts, float)
    with np.errstate(divide="ignore"):
        return np.where(np.isinf(rate), 0.0, factor * (n - 1.0) / rate)


def smoothmax(a: np.ndarray, b: np.ndarray, k: float) -> np.ndarray:
    """``(a^k + b^k)^(1/k)`` computed without overflow (a, b ≥ 0)."""
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    top = np.maximum(a, b)
    safe = np.where(top > 0, top, 1.0)
    return np.where(top > 0, safe * ((a / safe) ** k + (b / safe) ** k) ** (1.0 / k), 0.0)


def drain_s(rate_qps: np.ndarray, d0: float, d1: float) -> np.ndarray:
    """Drain time after the last request was sent: ``d0 + d1·ln(1 + λ)`` (λ in req/s)."""
    rate = np.asarray(rate_qps, float)
    growth = np.where(np.isinf(rate), 0.0, np.log1p(np.where(np.isinf(rate), 0.0, rate)))
    return d0 + d1 * growth


def duration_model_s(rate_qps: npt.ArrayLike, num_prompts: npt.ArrayLike, capacity_rps: float,
                     d0: float, d1: float, schedule: Schedule) -> np.ndarray:
    """Expected duration of a fixed-count run (the model of the module docstring)."""
    rate = np.asarray(rate_qps, float)
    n = np.asarray(num_prompts, float)
    arrival = arrival_span_s(rate, n, schedule.factor) + drain_s(rate, d0, d1)
    return smoothmax(arrival, n / capacity_rps, schedule.sharpness)


@dataclass
class SaturationFit:
    """Fitted capacity of one configuration (see the module docstring for the model)."""

    config: dict[str, Any]
    capacity_rps: float
    capacity_low_rps: float
    capacity_high_rps: float
    d0_s: float
    d1_s: float
    schedule: Schedule
    drain: str
    n_points: int
    rms_rel_error: float
    total_tok_per_request: float
    output_tok_per_request: float
    max_offered_qps: float
    max_achieved_rps: float
    ttft_growth: float = math.nan
    warnings: list[str] = field(default_factory=list)

    @property
    def capacity_reached(self) -> bool:
        """True when the data bound capacity from above (some run saturated the server)."""
        return math.isfinite(self.capacity_high_rps)

    @property
    def capacity_is_lower_bound(self) -> bool:
        """No clear sign of queueing at the highest rate (TTFT p90 there < 3× its smallest
        value at any rate) or no upper bound: the true capacity is likely higher than μ."""
        return (not self.capacity_reached) or (self.ttft_growth < QUEUEING_GROWTH)

    def predict_duration_s(self, rate_qps: npt.ArrayLike, num_prompts: npt.ArrayLike = 200
                           ) -> np.ndarray:
        """Expected duration of a fixed-count run at offered rate ``rate_qps``."""
        return duration_model_s(rate_qps, num_prompts, self.capacity_rps, self.d0_s,
                                self.d1_s, self.schedule)

    def predict_throughput_rps(self, rate_qps: npt.ArrayLike,
                               num_prompts: npt.ArrayLike = 200) -> np.ndarray:
        """Achieved requests/s of a fixed-count run (N / predicted duration)."""
        rps: np.ndarray = (np.asarray(num_prompts, float)
                           / self.predict_duration_s(rate_qps, num_prompts))
        return rps

    def as_row(self) -> dict[str, Any]:
        """One row of the capacity table."""
        return {
            **self.config,
            "configuration": config_label(self.config),
            "capacity_rps": self.capacity_rps,
            "capacity_low_rps": self.capacity_low_rps,
            "capacity_high_rps": self.capacity_high_rps,
            "capacity_reached": self.capacity_reached,
            "capacity_is_lower_bound": self.capacity_is_lower_bound,
            "capacity_tok_per_s": self.capacity_rps * self.total_tok_per_request,
            "capacity_low_tok_per_s": self.capacity_low_rps * self.total_tok_per_request,
            "capacity_high_tok_per_s": self.capacity_high_rps * self.total_tok_per_request,
            "capacity_output_tok_per_s": self.capacity_rps * self.output_tok_per_request,
            "max_offered_qps": self.max_offered_qps,
            "max_achieved_rps": self.max_achieved_rps,
            "ttft_p90_growth": self.ttft_growth,
            "drain_d0_s": self.d0_s,
            "drain_d1_s": self.d1_s,
            "drain_form": self.drain,
            "schedule_factor": self.schedule.factor,
            "n_points": self.n_points,
            "rms_rel_error_pct": 100.0 * self.rms_rel_error,
            "warnings": "; ".join(self.warnings),
        }


def _arrays(runs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    require_columns(runs, SATURATION_COLUMNS, "capacity fit")
    rate = runs.request_rate_qps.to_numpy(float)
    n = runs.num_prompts.to_numpy(float)
    duration = runs.duration_s.to_numpy(float)
    bad = ~np.isfinite(duration) | (duration <= 0) | ~(rate > 0) | ~(n >= 1)
    if bad.any():
        row = runs.iloc[int(np.argmax(bad))]
        where = row.get("run_id", row.name)
        raise ModelInputError(f"run {where}: duration_s, request_rate_qps and num_prompts must "
                              f"be positive numbers (got {row.duration_s}, "
                              f"{row.request_rate_qps}, {row.num_prompts})")
    return rate, n, duration


class _Problem:
    """Least squares of relative duration errors for one configuration."""

    def __init__(self, rate: np.ndarray, n: np.ndarray, duration: np.ndarray,
                 schedule: Schedule, drain: str) -> None:
        if drain not in DRAIN_FORMS:
            raise ValueError(f"drain must be one of {DRAIN_FORMS}, got {drain!r}")
        self.rate, self.n, self.duration = rate, n, duration
        self.schedule, self.drain = schedule, drain
        self.n_drain = 2 if drain == "log" else 1
        self.top = float((n / duration).max())
        finite = rate[np.isfinite(rate)]
        # A work-conserving server needs at least N/μ for N requests, so no fixed-count run can
        # complete faster than μ: the best measured completion rate bounds μ from below.
        self.mu_min = self.top
        self.mu_max = MU_SEARCH_FACTOR * (finite.max() if finite.size else self.top)
        self.d_max = 10.0 * float(duration.max())

    def residual(self, log_mu: float, drains: np.ndarray) -> np.ndarray:
        d1 = drains[1] if self.n_drain == 2 else 0.0
        model = duration_model_s(self.rate, self.n, math.exp(log_mu), drains[0], d1,
                                 self.schedule)
        relative: np.ndarray = (self.duration - model) / self.duration
        return relative

    def fit_full(self, start: np.ndarray | None = None) -> tuple[float, np.ndarray, float]:
        lower = [math.log(self.mu_min)] + [0.0] * self.n_drain
        upper = [math.log(self.mu_max)] + [self.d_max] * self.n_drain
        if start is not None:  # one warm start (cross-validation refits)
            starts = [np.clip(np.asarray(start, float), np.add(lower, 1e-9),
                              np.subtract(upper, 1e-9))]
        else:  # several starts: just above the best run, at 2x and far above
            starts = [[math.log(min(max(factor * self.top, self.mu_min * 1.01),
                                    self.mu_max * 0.99))] + [1.0] * self.n_drain
                      for factor in (1.05, 2.0, 30.0)]
        # A warm start is already near the optimum; capping its evaluations keeps the rare
        # slow fold (a drain term sliding along its bound) from dominating validation time.
        budget = 60 if start is not None else None
        # the lowest cost wins; of equal ones the first
        best = min((least_squares(lambda p: self.residual(p[0], p[1:]), start_point,
                                  bounds=(lower, upper), x_scale=1.0, max_nfev=budget)
                    for start_point in starts), key=lambda sol: sol.cost)
        return float(best.x[0]), best.x[1:], 2.0 * float(best.cost)

    def profile(self, log_mu: float, start: np.ndarray) -> tuple[float, np.ndarray]:
        sol = least_squares(lambda d: self.residual(log_mu, d), start,
                            bounds=([0.0] * self.n_drain, [self.d_max] * self.n_drain))
        return 2.0 * float(sol.cost), sol.x


def _bound(problem: _Problem, log_hat: float, drains: np.ndarray, threshold: float,
           edge: float) -> float:
    """Bisection for the μ where the profile SSR crosses ``threshold`` between μ̂ and
    ``edge`` (returns the edge when it never crosses)."""
    ssr_edge, _ = problem.profile(edge, drains)
    if ssr_edge <= threshold:
        return edge
    inside, outside = log_hat, edge
    for _ in range(10):
        mid = 0.5 * (inside + outside)
        ssr_mid, _ = problem.profile(mid, drains)
        if ssr_mid <= threshold:
            inside = mid
        else:
            outside = mid
    return 0.5 * (inside + outside)


def fit_saturation(runs: pd.DataFrame, schedule: Schedule | None = None,
                   drain: str = "constant", interval: bool = True,
                   start: SaturationFit | None = None) -> SaturationFit:
    """Fit the capacity model to the runs of **one** configuration (several offered rates).

    Raises :class:`ModelInputError` for fewer than two distinct offered rates, missing columns
    or bad values; warns (:class:`~hgresearch.fits.common.ModelWarning`) when the data
    cannot pin the model down. ``interval=False`` skips the profile interval (for speed in
    cross-validation; the bounds are then NaN). ``start`` warm-starts the optimiser from
    an earlier fit of the same configuration (one start instead of three).
    """
    schedule = schedule or Schedule()
    rate, n, duration = _arrays(runs)
    first = runs.iloc[0]
    config = {k: first[k] for k in CONFIG_KEYS if k in runs.columns}
    label = config_label(config) if len(config) == len(CONFIG_KEYS) else "configuration"
    distinct = np.unique(rate)
    if len(distinct) < 2:
        raise ModelInputError(f"{label}: capacity needs runs at ≥ 2 distinct offered rates "
                              f"(got {len(distinct)}: {distinct.tolist()})")
    notes: list[str] = []
    n_params = 2 if drain == "constant" else 3
    if len(rate) <= n_params:
        notes.append(f"{len(rate)} runs for {n_params} parameters: no residual degrees of "
                     "freedom, interval meaningless")
    achieved = n / duration
    finite = np.isfinite(rate)
    if finite.any() and np.all(achieved[finite] < 0.5 * rate[finite]):
        notes.append("every run is saturated (achieved < half the offered rate): the drain "
                     "cannot be estimated and capacity is the saturated completion rate")
    order = np.argsort(rate, kind="stable")
    mean_by_rate = pd.Series(achieved[order]).groupby(rate[order]).mean().to_numpy()
    drops = np.where(np.diff(mean_by_rate) < -0.05 * mean_by_rate[:-1])[0]
    if len(drops):
        where = ", ".join(f"{distinct[i]:g}→{distinct[i + 1]:g} req/s" for i in drops)
        notes.append(f"throughput falls as load grows ({where}); the saturating form cannot "
                     "follow overload degradation")

    problem = _Problem(rate, n, duration, schedule, drain)
    warm = None
    if start is not None and start.drain == drain:
        warm = np.array([math.log(start.capacity_rps), start.d0_s]
                        + ([start.d1_s] if drain == "log" else []))
    log_hat, drains, ssr_min = problem.fit_full(warm)
    low = high = math.nan
    if interval:
        floor = len(rate) * REL_ERROR_FLOOR ** 2
        threshold = max(ssr_min, floor) * math.exp(chi2.ppf(0.95, 1) / len(rate))
        log_high = _bound(problem, log_hat, drains, threshold, math.log(problem.mu_max))
        log_low = _bound(problem, log_hat, drains, threshold, math.log(problem.mu_min))
        high = math.inf if log_high >= math.log(problem.mu_max) - 1e-9 else math.exp(log_high)
        low = math.exp(log_low)
        if log_low <= math.log(problem.mu_min) + 1e-9:
            notes.append("capacity bounded below only by the best measured completion rate")
    rms = math.sqrt(ssr_min / len(rate))
    if rms > 0.05:
        notes.append(f"poor fit: rms relative duration error {100 * rms:.1f} %")
    for note in notes:
        warn(f"{label}: {note}")
    tokens = runs.total_input_tok.to_numpy(float) + runs.total_output_tok.to_numpy(float)
    completed = runs.completed.to_numpy(float)
    growth = math.nan
    if "p90_ttft_ms" in runs:
        by_rate = runs.groupby("request_rate_qps").p90_ttft_ms.mean()
        if by_rate.notna().sum() >= 2:
            growth = float(by_rate.iloc[-1] / by_rate.min())
    return SaturationFit(
        config=config, capacity_rps=math.exp(log_hat), capacity_low_rps=low,
        capacity_high_rps=high, d0_s=float(drains[0]),
        d1_s=float(drains[1]) if len(drains) > 1 else 0.0, schedule=schedule, drain=drain,
        n_points=len(rate), rms_rel_error=rms,
        total_tok_per_request=float(tokens.sum() / completed.sum()),
        output_tok_per_request=float(runs.total_output_tok.sum() / completed.sum()),
        max_offered_qps=float(rate[finite].max()) if finite.any() else math.inf,
        max_achieved_rps=float(achieved.max()), ttft_growth=growth, warnings=notes)


def estimate_schedule(runs: pd.DataFrame, sharpness: float = DEFAULT_SHARPNESS) -> Schedule:
    """Schedule factor f of a data set whose runs share one arrival seed.

    Every run's duration is at least its arrival span, so ``f ≤ D·λ/(N−1)`` for every run;
    the bound is tight for the run whose last request finishes fastest after it is sent.
    We take ``f = min over runs at each configuration's lowest rate of D·λ/(N−1)`` — the
    unit-rate span of the shared schedule, short by that one run's drain (≈ 0.5 % in the
    reference data, where the shortest 1 req/s run lasts 189.3 s against (N−1)/λ = 199 s).
    Runs with independent seeds should use ``Schedule(1.0)`` (the Poisson expectation).
    """
    require_columns(runs, SATURATION_COLUMNS, "schedule factor")
    finite = runs[np.isfinite(runs.request_rate_qps.astype(float))]
    if finite.empty:
        raise ModelInputError("schedule factor: no run has a finite offered rate")
    lowest = finite[finite.request_rate_qps == finite.groupby(CONFIG_KEYS)
                    .request_rate_qps.transform("min")]
    ratio = lowest.duration_s * lowest.request_rate_qps / (lowest.num_prompts - 1)
    factor = float(ratio.min())
    if not 0.8 <= factor <= 1.05:
        warn(f"schedule factor {factor:.3f} is far from 1: do these runs really share one "
             "arrival seed?")
    return Schedule(factor, sharpness)


def fit_saturations(runs: pd.DataFrame, schedule: Schedule | None = None,
                    drain: str = "constant", interval: bool = True
                    ) -> tuple[pd.DataFrame, dict[ConfigKey, SaturationFit]]:
    """Fit every configuration of a runs table; returns (capacity table, fits by config key).

    Configurations with runs at fewer than two offered rates are left out with a warning.
    """
    schedule = schedule or estimate_schedule(runs)
    fits: dict[ConfigKey, SaturationFit] = {}
    for key, group in config_groups(runs):
        if group.request_rate_qps.nunique() < 2:
            warn(f"{config_label(group.iloc[0])}: left out of the capacity table "
                 "(runs at a single offered rate)")
            continue
        fits[key] = fit_saturation(group, schedule, drain, interval)
    table = pd.DataFrame([fit.as_row() for fit in fits.values()])
    return table, fits
