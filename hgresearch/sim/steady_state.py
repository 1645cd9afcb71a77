"""Steady-state SLO rates: the highest Poisson request rate a replica sustains with a latency
SLO met — a property of sustained load, not of a short run.

A short run (the paper's 200 requests, or a burst) starts on an empty replica and ends before
the queue has built up: below saturation it understates latency, above it a loose SLO passes
only because the run ends. Here a rate is judged by runs that reach steady state:

* **Long runs, warm-up dropped.** Per seed, ``warmup_requests + window_requests`` Poisson
  arrivals (:class:`SteadyStateSettings`); the first ``warmup_requests`` (the empty start) are
  dropped and the percentiles are taken over the window's requests, pooled over the seeds.
  The length is chosen by a convergence test (``tests/unit/sim/test_steady_state.py``):
  doubling both moves the rate by less than 2 %.
* **Stability.** A queue that grows has no steady state, however long the run: a rate is
  unstable when, in any seed, the mean TTFT of the second half of the window exceeds
  :data:`STABILITY_RATIO` × that of the first half (a growing backlog raises every later
  request's wait; a stable queue's halves differ by noise only). An unstable rate fails every
  SLO; an SLO rate whose next simulated rate failed that way is ``limited_by = "stability"``
  (the SLO holds up to where the replica stops keeping up), one whose next rate was stable but
  missed the limit ``latency`` (:class:`SteadyStateRate`).
* **Several seeds**, each a fixed stream of unit-rate Poisson gaps scaled by ``1 / rate``
  (common random numbers: the same requests at every rate, so the percentile is a smooth,
  nearly monotone function of the rate and the search below converges).

:func:`steady_state_rates` finds, for several SLOs at once (all sharing the simulations), the
highest rate at which each holds, to a relative precision of ``rate_tolerance``: a bracket
[passes, fails] per SLO, narrowed by safeguarded secant steps on the log of the achieved
percentile over its limit (bisection when a bracket end is unstable or the same end moved
twice in a row); every simulated rate narrows every SLO's bracket it falls in.

**The slow end for free.** Every time in the simulation is a sum of step times (and a constant
request-path delay); with every step ``f`` times as long and every arrival ``f`` times as late
(the rate ÷ ``f``) the run is the same run, every time × ``f``. So the rate at which an SLO
holds with steps ``f`` times slower is the nominal rate of the same SLO with its limit ÷ ``f``,
divided by ``f`` (:func:`rates_with_slow_end`: one search serves both; a test checks the
identity against :meth:`Calibration.scaled <hgresearch.sim.calibrate.Calibration.scaled>`).

One implementation serves the SLO-capacity table (:mod:`hgresearch.sim.slo_rate`) and the
planner's per-replica rates (:mod:`hgresearch.plan.replica_rates`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from hgresearch.traffic.arrivals import arrival_offsets_ns

#: A rate is unstable when the window's second-half mean TTFT exceeds this × the first half's.
STABILITY_RATIO = 1.5
#: Defaults of :class:`SteadyStateSettings` (chosen by the convergence test: doubling the run
#: moves the rate by < 2 %).
WARMUP_REQUESTS = 1000
WINDOW_REQUESTS = 4000
SEEDS = (0, 1, 2, 3, 4, 5)
RATE_TOLERANCE = 0.02
MIN_RATE_FRACTION = 0.02
#: Most simulated rates per search (a safeguard; the brackets close long before).
MAX_EVALUATIONS = 200


@dataclass(frozen=True)
class SteadyStateSettings:
    """How long, how often and how precisely a rate is simulated (see the module docstring).

    Attributes:
        warmup_requests: requests dropped at the start of every run (the empty replica).
        window_requests: requests measured after the warm-up, per seed.
        seeds: seeds of the Poisson arrivals (and of anything else the simulation draws).
        rate_tolerance: the search stops when a bracket's ends are within this relative width.
        min_rate_fraction: below this fraction of the top rate a missed SLO gives rate 0.
    """

    warmup_requests: int = WARMUP_REQUESTS
    window_requests: int = WINDOW_REQUESTS
    seeds: tuple[int, ...] = SEEDS
    rate_tolerance: float = RATE_TOLERANCE
    min_rate_fraction: float = MIN_RATE_FRACTION

    def __post_init__(self) -> None:
        if self.warmup_requests < 0 or self.window_requests < 20:
            raise ValueError("expected warmup_requests >= 0 and window_requests >= 20")
        if not self.seeds:
            raise ValueError("expected at least one seed")
        if not 0 < self.rate_tolerance < 0.5 or not 0 < self.min_rate_fraction < 1:
            raise ValueError("expected rate_tolerance in (0, 0.5), min_rate_fraction in (0, 1)")

    @property
    def num_requests(self) -> int:
        """Requests simulated per seed (warm-up + window)."""
        return self.warmup_requests + self.window_requests

    def doubled(self) -> SteadyStateSettings:
        """The same with warm-up and window twice as long (the convergence test)."""
        return replace(self, warmup_requests=2 * self.warmup_requests,
                       window_requests=2 * self.window_requests)


@dataclass(frozen=True)
class LoadPoint:
    """What the runs at one rate gave: TTFT and TPOT (ms) of the window's requests, pooled over
    the seeds (arrival order within each seed), and whether every seed's queue was stable."""

    rate_rps: float
    ttft_ms: np.ndarray
    tpot_ms: np.ndarray
    stable: bool


#: Simulates the requests arriving at ``arrivals_s`` (s, non-decreasing) with draw seed
#: ``seed``; returns every request's TTFT and TPOT (ms; TPOT NaN for one-token outputs) in
#: arrival order.
Simulate = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]
#: An SLO as a function of a load point: achieved over allowed (≤ 1: holds).
SloRatio = Callable[[LoadPoint], float]


def unit_arrivals_s(num_requests: int, seed: int) -> np.ndarray:
    """Poisson arrival times (s) at 1 req/s: divided by a rate, the arrivals at that rate
    (:func:`hgresearch.traffic.arrivals.arrival_offsets_ns`, the live bench's schedule)."""
    unit: np.ndarray = arrival_offsets_ns(num_requests, 1.0, seed=seed) / 1e9
    return unit


def is_stable(window_ttft_ms: Sequence[np.ndarray], ratio: float = STABILITY_RATIO) -> bool:
    """Whether the runs' windows look stationary: the mean TTFT of their second halves, pooled
    over the runs, is at most ``ratio`` × that of their first halves (a growing queue makes
    later requests wait longer; pooled, because one run of a stable queue near saturation
    wanders by more than that)."""
    first = np.concatenate([w[: len(w) // 2] for w in window_ttft_ms])
    second = np.concatenate([w[len(w) // 2:] for w in window_ttft_ms])
    return bool(float(np.mean(second)) <= ratio * float(np.mean(first)))


def load_point(simulate: Simulate, rate_rps: float, settings: SteadyStateSettings
               ) -> LoadPoint:
    """Simulate every seed at ``rate_rps``; the window's requests pooled (see the module
    docstring)."""
    ttfts, tpots = [], []
    for seed in settings.seeds:
        arrivals = unit_arrivals_s(settings.num_requests, seed) / rate_rps
        ttft, tpot = simulate(arrivals, seed)
        window = slice(settings.warmup_requests, None)
        ttfts.append(np.asarray(ttft[window], dtype=float))
        tpots.append(np.asarray(tpot[window], dtype=float))
    return LoadPoint(rate_rps, np.concatenate(ttfts), np.concatenate(tpots), is_stable(ttfts))


def percentile_ratio(metric: str, percentile: float, limit_ms: float,
                     offset_ms: float = 0.0) -> SloRatio:
    """The SLO "``percentile`` of ``metric`` (``ttft`` or ``tpot``) + ``offset_ms`` ≤
    ``limit_ms``" as a :data:`SloRatio` (TPOT over the finite values; none: holds)."""
    def ratio(point: LoadPoint) -> float:
        values = point.ttft_ms if metric == "ttft" else point.tpot_ms
        values = values[np.isfinite(values)]
        if not len(values):
            return 0.0
        return (float(np.percentile(values, percentile)) + offset_ms) / limit_ms
    return ratio


#: Values of :attr:`SteadyStateRate.limited_by`.
LIMITED_BY = ("capacity", "slo", "stability", "latency")


@dataclass(frozen=True)
class SteadyStateRate:
    """One SLO's steady-state rate: the highest simulated rate at which it held (0: it failed
    even at the bottom of the range), the lowest at which it failed (NaN: it held at the top),
    and what limited it (:data:`LIMITED_BY`): ``capacity``: held at the top of the range;
    ``slo``: failed at the bottom; between, by why the rate above it (``fails_at_rps``)
    failed — ``stability``: its queue was unstable (the SLO holds up to where the replica
    stops keeping up), ``latency``: its queue was stable but the percentile missed the
    limit."""

    rate_rps: float
    fails_at_rps: float
    limited_by: str


@dataclass
class RateSearch:
    """Every SLO's :class:`SteadyStateRate` and the load points simulated on the way."""

    rates: list[SteadyStateRate]
    points: dict[float, LoadPoint]

    @property
    def num_evaluations(self) -> int:
        """Rates simulated (each over every seed)."""
        return len(self.points)


def steady_state_rates(simulate: Simulate, slos: Sequence[SloRatio], top_rps: float,
                       settings: SteadyStateSettings | None = None) -> RateSearch:
    """The highest rate ≤ ``top_rps`` at which each SLO of ``slos`` holds at steady state
    (see the module docstring), within ``settings.rate_tolerance``."""
    settings = settings or SteadyStateSettings()
    points: dict[float, LoadPoint] = {}

    def point(rate: float) -> LoadPoint:
        if rate not in points:
            points[rate] = load_point(simulate, rate, settings)
        return points[rate]

    def log_ratio(rate: float, i: int) -> float:
        p = point(rate)
        if not p.stable:
            return math.inf
        value = slos[i](p)
        return math.log(value) if value > 0 else -math.inf

    top, bottom = top_rps, settings.min_rate_fraction * top_rps
    n = len(slos)
    result: list[SteadyStateRate | None] = [None] * n
    # bracket per SLO: [passing rate, its log ratio, failing rate, its log ratio]
    brackets: dict[int, list[float]] = {}
    last_end: dict[int, int] = {}  # the end the last trial moved: -1 passing, 1 failing
    bisect_next: dict[int, bool] = {}
    for i in range(n):
        at_top = log_ratio(top, i)
        if at_top <= 0:
            result[i] = SteadyStateRate(top, math.nan, "capacity")
            continue
        at_bottom = log_ratio(bottom, i)
        if at_bottom > 0:
            result[i] = SteadyStateRate(0.0, bottom, "slo")
            continue
        brackets[i] = [bottom, at_bottom, top, at_top]
        last_end[i], bisect_next[i] = 0, False
    for _ in range(MAX_EVALUATIONS):
        open_ = [i for i, b in brackets.items() if b[2] > b[0] * (1 + settings.rate_tolerance)]
        if not open_:
            break
        i = max(open_, key=lambda k: brackets[k][2] / brackets[k][0])
        lo, y_lo, hi, y_hi = brackets[i]
        if math.isfinite(y_hi) and math.isfinite(y_lo) and not bisect_next[i]:
            trial = lo + (hi - lo) * (-y_lo) / (y_hi - y_lo)
            width = hi - lo
            trial = min(max(trial, lo + 0.05 * width), hi - 0.05 * width)
        else:
            trial = 0.5 * (lo + hi)
        for j, b in brackets.items():
            if b[0] < trial < b[2]:
                y = log_ratio(trial, j)
                end = -1 if y <= 0 else 1
                if end < 0:
                    b[0], b[1] = trial, y
                else:
                    b[2], b[3] = trial, y
                # the same end twice in a row: the secant creeps along a convex curve; bisect
                bisect_next[j] = end == last_end[j]
                last_end[j] = end
    for i, b in brackets.items():
        # why the rate above the SLO rate failed: an unstable queue, or a stable one's latency
        result[i] = SteadyStateRate(b[0], b[2],
                                    "latency" if points[b[2]].stable else "stability")
    return RateSearch(rates=[r for r in result if r is not None], points=points)


#: An SLO whose limits are divided by a time-scale factor (1: the SLO itself).
ScalableSlo = Callable[[float], SloRatio]


def rates_with_slow_end(simulate: Simulate, slos: Sequence[ScalableSlo], top_rps: float,
                        step_time_factor: float, settings: SteadyStateSettings | None = None
                        ) -> tuple[list[SteadyStateRate], list[SteadyStateRate]]:
    """Each SLO's steady-state rate at the nominal step times and with every step
    ``step_time_factor`` times as long (the slow end), from one search (see the module
    docstring: the slow end's rate for an SLO is the nominal rate for its limits ÷ the factor,
    ÷ the factor). ``slos``: each SLO as a function of that divisor."""
    nominal = [slo(1.0) for slo in slos]
    slow = [slo(step_time_factor) for slo in slos] if step_time_factor != 1.0 else []
    found = steady_state_rates(simulate, [*nominal, *slow], top_rps, settings).rates
    n = len(slos)
    if not slow:
        return found, list(found)
    return found[:n], [SteadyStateRate(r.rate_rps / step_time_factor,
                                       r.fails_at_rps / step_time_factor, r.limited_by)
                       for r in found[n:]]
