"""SLO rates from the simulator: the highest request rate at which a TTFT percentile SLO holds,
for every configuration × SLO (the paper's SLO-capacity table, ``sim_slo_capacity``).

* **Burst throughput** (column ``capacity_rps``): a burst of :data:`BURST_REQUESTS` requests at
  once, completions per second between the 10th and 90th percentile completion (the drain of
  the last long requests excluded; :func:`middle_completion_rate_rps`): the top of the search.
* **SLO rate** (``slo_rate_qps``): the **steady-state** rate (:mod:`hgresearch.sim.steady_state`):
  long Poisson runs of the configuration's length mix (ShareGPT-like lengths, one draw per
  seed), warm-up dropped, stability tested, several seeds; the highest rate at which the
  percentile holds, to 1 %. ``limited_by``: ``capacity`` (it holds even at the burst
  throughput), ``slo`` (0: it fails even at 2 % of it) or, between the ends, ``stability``
  (the next simulated rate above it had an unstable queue: the SLO holds up to where the
  replica stops keeping up) or ``latency`` (the next rate was stable but its percentile
  missed the limit) — :class:`hgresearch.sim.steady_state.SteadyStateRate`.
* **Interval** (``slo_rate_low_qps`` to ``slo_rate_high_qps``): one-sided — the low end is the
  same search with every step slower by the slow end of the step-time interval (the caller's
  ``step_time_factor``: for the paper's configurations, that of the leave-one-configuration-out
  residuals at :data:`CONFIDENCE`,
  :meth:`hgresearch.sim.intervals.PredictionIntervals.step_time_factor`;
  :meth:`~hgresearch.sim.calibrate.Calibration.scaled`), the rate a planner may rely on; the
  high end is the nominal rate.
* **The paper's protocol** (``paper_protocol_rate_qps``): what a 200-request run from an empty
  replica (vLLM 0.8.5's seeded arrivals) would have measured, capped at the burst throughput —
  a transient, kept to compare with the paper, never for planning (:func:`paper_protocol_rates`).

The planner's per-replica class rates (:mod:`hgresearch.plan.replica_rates`) use the same
steady-state search on its own traffic classes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from hgresearch.accounting.costs import cost_per_million_tok_at_rate_usd
from hgresearch.data.catalogs import gpu_price_or_nan
from hgresearch.executors import Executor
from hgresearch.sim.calibrate import Calibration, simulate_summary
from hgresearch.sim.replay import reference_workload
from hgresearch.sim.run import measured_mean_lengths
from hgresearch.sim.steady_state import (
    ScalableSlo,
    Simulate,
    SteadyStateRate,
    SteadyStateSettings,
    percentile_ratio,
    rates_with_slow_end,
)
from hgresearch.units import TOKENS_PER_MILLION

BURST_REQUESTS = 1000
BISECTION_STEPS = 10
MIN_RATE_FRACTION = 0.02
#: Confidence of the step-time interval whose slow end gives ``slo_rate_low_qps``.
CONFIDENCE = 0.9
#: Default SLOs: (column, limit ms), as the fitted models' table has them.
DEFAULT_SLO_LIMITS_MS = (50, 100, 200, 500, 1000, 2000, 5000)
DEFAULT_SLO_METRICS = ("p90_ttft_ms", "p99_ttft_ms")


def middle_completion_rate_rps(done_s: np.ndarray) -> float:
    """Completions per second between the 10th and the 90th percentile completion of a burst
    (ramp-up and drain excluded); all completions over the last one's time when the middle
    80 % finish at one instant (a burst that fits one batch)."""
    done = np.sort(np.asarray(done_s, dtype=float))
    lo, hi = int(0.1 * len(done)), int(0.9 * len(done)) - 1
    if done[hi] > done[lo]:
        return float((hi - lo) / (done[hi] - done[lo]))
    return float(len(done) / done[-1])


def highest_rate_within(holds: Callable[[float], bool], top_rps: float, *,
                        min_fraction: float = MIN_RATE_FRACTION,
                        steps: int = BISECTION_STEPS) -> float:
    """The highest rate ≤ ``top_rps`` at which ``holds(rate)``: ``top_rps`` itself when it
    holds there, 0 when it fails even at ``min_fraction`` × ``top_rps``, else the last passing
    rate of ``steps`` bisections between the two (assumes the SLO holds below some rate and
    fails above it)."""
    if holds(top_rps):
        return top_rps
    lo, hi = min_fraction * top_rps, top_rps
    if not holds(lo):
        return 0.0
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if holds(mid) else (lo, mid)
    return lo


def burst_throughput_rps(fit: Calibration, mean_prompt_tokens: float,
                         mean_output_tokens: float, *, length_seed: int = 0) -> float:
    """:func:`middle_completion_rate_rps` of a :data:`BURST_REQUESTS` burst of the
    configuration's length mix."""
    from hgresearch.sim.calibrate import simulate_times

    workload = reference_workload(float("inf"), BURST_REQUESTS, mean_prompt_tokens,
                                  mean_output_tokens, length_seed=length_seed)
    return middle_completion_rate_rps(simulate_times(fit.replica, fit.coefficients,
                                                     workload).done_s)


def paper_protocol_rates(fit: Calibration, slos: Sequence[tuple[str, float]],
                         mean_prompt_tokens: float, mean_output_tokens: float,
                         throughput_rps: float, *, num_prompts: int = 200,
                         length_seed: int = 0) -> list[float]:
    """What the paper's protocol would call each ``(metric, limit_ms)``'s capacity: the highest
    rate (≤ ``throughput_rps``) at which a ``num_prompts``-request run from an empty replica
    meets it (:func:`highest_rate_within`; simulations shared between the SLOs). A transient:
    it overstates what the replica sustains (:func:`steady_slo_rates` is the sustained rate)."""
    cache: dict[float, dict[str, float]] = {}

    def summary(rate: float) -> dict[str, float]:
        if rate not in cache:
            workload = reference_workload(rate, num_prompts, mean_prompt_tokens,
                                          mean_output_tokens, length_seed=length_seed)
            cache[rate] = simulate_summary(fit.replica, fit.coefficients, workload)
        return cache[rate]

    def within(metric: str, limit_ms: float) -> float:
        return highest_rate_within(lambda rate: summary(rate)[metric] <= limit_ms,
                                   throughput_rps)

    return [within(metric, limit_ms) for metric, limit_ms in slos]


def reference_simulate(fit: Calibration, mean_prompt_tokens: float, mean_output_tokens: float,
                       num_requests: int) -> Simulate:
    """A :data:`~hgresearch.sim.steady_state.Simulate` of the calibrated replica on the
    configuration's length mix: ShareGPT-like lengths with the given means (one draw per seed,
    :func:`hgresearch.traffic.lengths.sharegpt_like_lengths`), TTFT with the calibration's
    request-path delay."""
    from hgresearch.sim.calibrate import simulate_times
    from hgresearch.sim.replay import SHAREGPT_LIKE, Workload
    from hgresearch.traffic.lengths import sharegpt_like_lengths

    lengths: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    offset_ms = fit.coefficients.ttft_offset_s * 1e3

    def simulate(arrivals_s: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
        if seed not in lengths:
            lengths[seed] = sharegpt_like_lengths(num_requests, mean_prompt_tokens,
                                                  mean_output_tokens, seed=seed)
        prompts, outputs = lengths[seed]
        times = simulate_times(fit.replica, fit.coefficients,
                               Workload(arrivals_s, prompts, outputs, 0.0, SHAREGPT_LIKE))
        ttft_ms = (times.first_token_s - times.arrivals_s) * 1e3 + offset_ms
        decode_s = times.done_s - times.first_token_s
        tpot_ms = np.where(outputs > 1, decode_s / np.maximum(outputs - 1, 1), np.nan) * 1e3
        return ttft_ms, tpot_ms

    return simulate


def steady_slo_rates(fit: Calibration, slos: Sequence[tuple[str, float]],
                     mean_prompt_tokens: float, mean_output_tokens: float,
                     throughput_rps: float, step_time_factor: float = 1.0,
                     settings: SteadyStateSettings | None = None
                     ) -> tuple[list[SteadyStateRate], list[SteadyStateRate]]:
    """The steady-state rate (≤ ``throughput_rps``) of each ``(metric, limit_ms)``
    (``p90_ttft_ms``...), nominal and with every step ``step_time_factor`` times as long
    (:func:`hgresearch.sim.steady_state.rates_with_slow_end`; simulations shared)."""
    settings = settings or SteadyStateSettings()
    simulate = reference_simulate(fit, mean_prompt_tokens, mean_output_tokens,
                                  settings.num_requests)

    def scalable(metric: str, limit: float) -> ScalableSlo:
        kind, percentile = metric.split("_")[1], float(metric.split("_")[0][1:])
        return lambda factor: percentile_ratio(kind, percentile, limit / factor)

    return rates_with_slow_end(simulate, [scalable(m, limit) for m, limit in slos],
                               throughput_rps, step_time_factor, settings)


def _configuration_rows(task: tuple[str, Calibration, pd.DataFrame, list[tuple[str, float]],
                                    str, float]) -> list[dict[str, object]]:
    """The rows of one configuration (one task of :func:`slo_rate_table`)."""
    label, fit, pts, slos, scenario, factor = task
    mean_in, mean_out = measured_mean_lengths(pts)
    price = gpu_price_or_nan(fit.replica.gpu_name, scenario)
    throughput = burst_throughput_rps(fit, mean_in, mean_out)
    steady, slow = steady_slo_rates(fit, slos, mean_in, mean_out, throughput, factor)
    paper = paper_protocol_rates(fit, slos, mean_in, mean_out, throughput)
    rows: list[dict[str, object]] = []
    for j, (metric, limit) in enumerate(slos):
        rate = steady[j].rate_rps
        tok_per_s = rate * (mean_in + mean_out)
        cost = (cost_per_million_tok_at_rate_usd(tok_per_s, fit.replica.num_gpus, price)
                if tok_per_s > 0 else math.nan)
        rows.append({
            "configuration": label,
            "slo": f"{metric.removesuffix('_ms')} ≤ {limit:g} ms",
            "capacity_rps": throughput,
            "slo_rate_qps": rate,
            # a slower replica never sustains more (bracket noise aside); the interval is
            # one-sided: a planner needs the slow end, the nominal rate is its top
            "slo_rate_low_qps": min(slow[j].rate_rps, rate),
            "slo_rate_high_qps": rate,
            "limited_by": steady[j].limited_by,
            "paper_protocol_rate_qps": paper[j],
            "best_measured_rps": float(pts.request_throughput_rps.max()),
            "slo_tok_per_s": tok_per_s,
            "cost_usd_per_1m_tok": cost,
            "tok_per_usd": TOKENS_PER_MILLION / cost if math.isfinite(cost) else math.nan,
        })
    return rows


def slo_rate_table(fits: dict[str, Calibration], points: dict[str, pd.DataFrame], *,
                   slo_limits_ms: Sequence[float] = DEFAULT_SLO_LIMITS_MS,
                   slo_metrics: Sequence[str] = DEFAULT_SLO_METRICS,
                   step_time_factor: float, scenario: str = "alternative",
                   executor: Executor | None = None) -> pd.DataFrame:
    """One row per configuration × SLO: ``capacity_rps`` (burst throughput), ``slo_rate_qps``
    (steady state), ``slo_rate_low_qps`` (steady state with every step ``step_time_factor``
    times slower: the slow end of the step-time interval, e.g.
    ``intervals.step_time_factor(CONFIDENCE)`` of the calibration's held-out residuals),
    ``limited_by``, ``paper_protocol_rate_qps`` (the
    200-request transient, for comparison with the paper), the best request throughput the
    configuration measured (``best_measured_rps``; ``points`` = its measured points by label,
    whose token totals set the length mix), and at the SLO rate the tokens per second
    (prompt + output) and their cost per 1M tokens and tokens per dollar under the
    ``scenario``'s hourly prices (NaN where the price catalog has no price, e.g. CPU).
    ``executor`` (default: this process) runs the configurations; the table is the same."""
    if not step_time_factor >= 1:
        raise ValueError(f"step_time_factor must be >= 1 (the slow end), got {step_time_factor}")
    slos = [(m, float(limit)) for m in slo_metrics for limit in slo_limits_ms]
    tasks = [(label, fit, points[label], slos, scenario, step_time_factor)
             for label, fit in fits.items()]
    parts = (executor or Executor()).map(_configuration_rows, tasks)
    return pd.DataFrame([row for part in parts for row in part])


def measured_agreement(fits: dict[str, Calibration], points: dict[str, pd.DataFrame], *,
                       slo_limits_ms: Sequence[float] = DEFAULT_SLO_LIMITS_MS,
                       slo_metrics: Sequence[str] = DEFAULT_SLO_METRICS) -> pd.DataFrame:
    """At each measured point and SLO: does the simulation (fit on all points) give the same
    verdict (SLO met or not) as the measurement? One row per point × SLO with ``measured_ms``,
    ``simulated_ms`` and ``agrees``."""
    from hgresearch.sim.replay import run_workload

    rows = []
    for label, fit in fits.items():
        for _, point in points[label].iterrows():
            sim = simulate_summary(fit.replica, fit.coefficients, run_workload(point))
            for metric in slo_metrics:
                for limit in slo_limits_ms:
                    measured_ok = float(point[metric]) <= limit
                    rows.append({"configuration": label,
                                 "request_rate_qps": float(point.request_rate_qps),
                                 "slo": f"{metric.removesuffix('_ms')} ≤ {limit:g} ms",
                                 "measured_ms": float(point[metric]),
                                 "simulated_ms": sim[metric],
                                 "agrees": measured_ok == (sim[metric] <= limit)})
    return pd.DataFrame(rows)


def agreement_table(agreement: pd.DataFrame,
                    held_out: pd.DataFrame | None = None) -> pd.DataFrame:
    """:func:`measured_agreement` per measured point and percentile (one row per
    configuration × rate × metric instead of × SLO): the measured and simulated percentile
    (ms), the simulation's error (%), in how many of the SLO limits the verdicts agree and at
    which limits they differ (``disagree_at_ms``, empty when none). With ``held_out`` (the
    leave-one-QPS-out points of :func:`hgresearch.sim.validation.simulated_leave_one_qps_out`), also
    the percentile predicted by a calibration that never saw the point (``held_out_ms``)."""
    data = agreement.copy()
    data["metric"] = data.slo.str.split(" ").str[0] + "_ms"
    data["limit_ms"] = data.slo.str.split(" ").str[2].astype(float)
    keys = ["configuration", "request_rate_qps", "metric"]
    rows = []
    for key, group in data.groupby(keys, sort=False):
        measured, simulated = float(group.measured_ms.iloc[0]), float(group.simulated_ms.iloc[0])
        rows.append({**dict(zip(keys, key, strict=True)), "measured_ms": measured,
                     "simulated_ms": simulated,
                     "error_pct": 100.0 * (simulated / measured - 1.0),
                     "verdicts_agree": f"{int(group.agrees.sum())}/{len(group)}",
                     "disagree_at_ms": " ".join(f"{v:g}" for v in
                                                group.limit_ms[~group.agrees])})
    out = pd.DataFrame(rows)
    if held_out is not None and len(held_out):
        predicted = held_out.rename(columns={"held_out_qps": "request_rate_qps",
                                             "predicted": "held_out_ms"})
        out = out.merge(predicted[keys + ["held_out_ms"]], on=keys, how="left")
    return out
