"""Steady-state SLO rates (hgresearch.sim.steady_state; issue 18 item 1): right on a queue whose
steady state is known in closed form (M/D/1), where a short run is not; unstable queues fail;
runs long enough that doubling them moves the rate by less than 2 %."""

from __future__ import annotations

import math
from decimal import Decimal, getcontext

import numpy as np
import pytest

from hgresearch.sim.entities import ReplicaConfig
from hgresearch.sim.simulator import make_requests, run_replica
from hgresearch.sim.slo_rate import highest_rate_within
from hgresearch.sim.steady_state import (
    LIMITED_BY,
    LoadPoint,
    SteadyStateSettings,
    is_stable,
    load_point,
    percentile_ratio,
    steady_state_rates,
    unit_arrivals_s,
)
from hgresearch.sim.step_time import ConstantStepTimeModel

#: Service time of the M/D/1 replica: one step of this length per request.
STEP_S = 0.01
#: One sequence at a time, prompt of one token, one output token: every request is exactly one
#: step, served in arrival order: an M/D/1 queue whose sojourn time is the TTFT.
MD1 = ReplicaConfig(num_kv_blocks=64, block_size=16, max_num_seqs=1, max_num_batched_tokens=16)


def md1_simulate(arrivals_s: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """TTFT (ms) of every request on the M/D/1 replica; TPOT NaN (one output token)."""
    n = len(arrivals_s)
    requests = make_requests(MD1, arrivals_s, [1] * n, [1] * n)
    run_replica(MD1, ConstantStepTimeModel(STEP_S), requests)
    ttft = np.array([(r.first_token_s - r.arrival_s) * 1e3 for r in requests])
    return ttft, np.full(n, np.nan)


def md1_wait_cdf(t_s: float, rate_rps: float, service_s: float = STEP_S) -> float:
    """P(queueing delay ≤ t) of M/D/1 (Erlang): ``(1-ρ) Σ_{k≤t/D} (λ(kD-t))^k/k! e^{-λ(kD-t)}``,
    in 60-digit decimals (the alternating sum cancels catastrophically in floats)."""
    getcontext().prec = 60
    lam, d, t = Decimal(float(rate_rps)), Decimal(service_s), Decimal(float(t_s))
    total = Decimal(0)
    for k in range(int(math.floor(t_s / service_s + 1e-12)) + 1):
        x = lam * (k * d - t)
        total += (x ** k if k else Decimal(1)) / math.factorial(k) * (-x).exp()
    return float((1 - lam * d) * total)


def md1_rate_for(percentile: float, ttft_limit_s: float) -> float:
    """The arrival rate at which the ``percentile`` of M/D/1 sojourn time (wait + D) equals
    ``ttft_limit_s``, by bisection on the closed form."""
    lo, hi = 1e-6, 1 / STEP_S * (1 - 1e-9)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if md1_wait_cdf(ttft_limit_s - STEP_S, mid) >= percentile / 100 \
            else (lo, mid)
    return lo


def test_md1_closed_form_matches_its_textbook_mean() -> None:
    """The closed form itself: ∫ P(W > t) dt is Pollaczek–Khinchine's ρD / (2(1-ρ))."""
    rate = 70.0
    rho = rate * STEP_S
    grid = np.linspace(0, 0.4, 4001)
    mean = float(np.trapezoid([1 - md1_wait_cdf(t, rate) for t in grid], grid))
    assert mean == pytest.approx(rho * STEP_S / (2 * (1 - rho)), rel=0.01)


def test_steady_state_percentiles_match_md1() -> None:
    """At ρ = 0.8 the simulated steady-state mean and p90 TTFT are M/D/1's."""
    rate = 80.0
    point = load_point(md1_simulate, rate, SteadyStateSettings(seeds=(0, 1, 2)))
    rho = rate * STEP_S
    assert point.stable
    assert np.mean(point.ttft_ms) / 1e3 == pytest.approx(
        STEP_S + rho * STEP_S / (2 * (1 - rho)), rel=0.06)
    p90_s = float(np.percentile(point.ttft_ms, 90)) / 1e3
    assert md1_wait_cdf(p90_s - STEP_S, rate) == pytest.approx(0.9, abs=0.015)


@pytest.mark.parametrize("limit_ms", [100.0, 200.0])
def test_steady_state_rate_is_md1s_and_the_short_run_is_not(limit_ms: float) -> None:
    """p99 TTFT ≤ limit: the steady-state rate is the closed form's within 5 %; the paper's
    protocol (200 requests from an empty replica, capped at the throughput of a burst) is
    more than 5 % above it (at 200 ms: the full service rate, where the queue has no steady
    state at all) — the transient it measures is not sustained load."""
    exact = md1_rate_for(99, limit_ms / 1e3)
    search = steady_state_rates(md1_simulate, [percentile_ratio("ttft", 99, limit_ms)],
                                top_rps=1 / STEP_S)
    steady = search.rates[0].rate_rps
    assert steady == pytest.approx(exact, rel=0.05)
    assert search.rates[0].limited_by == "latency"  # below the service rate: a stable miss

    unit = unit_arrivals_s(200, 42)

    def short_run_holds(rate: float) -> bool:
        ttft, _ = md1_simulate(unit / rate, 0)
        return float(np.percentile(ttft, 99)) <= limit_ms

    transient = highest_rate_within(short_run_holds, 1 / STEP_S)
    assert transient > exact * 1.05


def test_an_overloaded_queue_is_unstable_and_fails_every_slo() -> None:
    """Above the service rate the queue grows: the second half of the window waits longer
    (unstable), so even a loose SLO fails; below it the halves agree."""
    over = load_point(md1_simulate, 1.05 / STEP_S, SteadyStateSettings(seeds=(0,)))
    under = load_point(md1_simulate, 0.5 / STEP_S, SteadyStateSettings(seeds=(0,)))
    assert not over.stable and under.stable
    assert is_stable([np.ones(100)]) and not is_stable([np.arange(1.0, 101.0)])
    search = steady_state_rates(md1_simulate, [percentile_ratio("ttft", 99, 1e6)],
                                top_rps=1.05 / STEP_S)
    assert search.rates[0].rate_rps < 1 / STEP_S
    # the loose SLO holds up to where the queue stops keeping up: stability, not latency
    assert search.rates[0].limited_by == "stability"


def test_doubling_the_run_moves_the_rate_by_less_than_two_percent() -> None:
    """The default length is long enough: doubling warm-up and window changes each rate by
    < 2 % (a tight and a loose SLO, where the queue is short and long)."""
    slos = [percentile_ratio("ttft", 99, 50.0), percentile_ratio("ttft", 99, 300.0)]
    settings = SteadyStateSettings()
    base = steady_state_rates(md1_simulate, slos, 1 / STEP_S, settings)
    double = steady_state_rates(md1_simulate, slos, 1 / STEP_S, settings.doubled())
    for a, b in zip(base.rates, double.rates, strict=True):
        assert a.rate_rps == pytest.approx(b.rate_rps, rel=0.02)


def test_percentile_ratio_adds_the_offset_and_ignores_missing_tpot() -> None:
    point = LoadPoint(1.0, np.array([10.0, 20.0]), np.array([np.nan, np.nan]), True)
    assert percentile_ratio("ttft", 50, 30.0, offset_ms=15.0)(point) == pytest.approx(1.0)
    assert percentile_ratio("tpot", 99, 1.0)(point) == 0.0


def test_slow_end_is_the_nominal_run_in_slow_motion() -> None:
    """The identity behind :func:`rates_with_slow_end`: with every step (and the request-path
    delay) f times as long (:meth:`Calibration.scaled`) and the rate ÷ f, every TTFT and TPOT
    is f × the nominal one — so the slow end's rate for an SLO is the nominal rate for its
    limit ÷ f, ÷ f; and the search built on it agrees with a search on the scaled calibration."""
    from hgresearch.sim.calibrate import Calibration, StepCoefficients, replica_for
    from hgresearch.sim.slo_rate import reference_simulate, steady_slo_rates

    fit = Calibration(replica=replica_for("DeepSeek-R1-Distill-Qwen-14B", "H100-PCIe", 1),
                      coefficients=StepCoefficients(0.018, 3e-5, 1.5e-4, 0.004),
                      rel_se=(0.0, 0.0, 0.0), rates_qps=(2.0,), rms_log_error=0.0,
                      num_simulations=0)
    factor = 1.37
    unit = unit_arrivals_s(600, 3)
    ttft, tpot = reference_simulate(fit, 200.0, 180.0, 600)(unit / 12.0, 0)
    slow_ttft, slow_tpot = reference_simulate(fit.scaled(factor), 200.0, 180.0, 600)(
        unit / (12.0 / factor), 0)
    np.testing.assert_allclose(slow_ttft, factor * ttft, rtol=1e-9)
    np.testing.assert_allclose(slow_tpot, factor * tpot, rtol=1e-9)
    quick = SteadyStateSettings(warmup_requests=100, window_requests=400, seeds=(0,))
    slos = [("p99_ttft_ms", 300.0), ("p90_ttft_ms", 1000.0)]
    _, slow = steady_slo_rates(fit, slos, 200.0, 180.0, 18.0, factor, quick)
    direct, _ = steady_slo_rates(fit.scaled(factor), slos, 200.0, 180.0, 18.0 / factor, 1.0,
                                 quick)
    for a, b in zip(slow, direct, strict=True):
        assert a.rate_rps == pytest.approx(b.rate_rps, rel=1e-6)


#: A short search for the toy replicas below (their TTFT does not depend on the run length).
TOY = SteadyStateSettings(warmup_requests=0, window_requests=200, seeds=(0, 1))


def toy_simulate(stable_below_rps: float, ttft_ms_per_rps: float):
    """A replica whose TTFT (ms) is ``ttft_ms_per_rps`` × the offered rate, the same for every
    request, up to ``stable_below_rps``; above it the queue grows (every request waits 1 ms
    more than the one before: unstable). The rate is read off the arrivals exactly: they are
    the seed's unit-rate arrivals ÷ the rate."""
    def simulate(arrivals_s: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
        n = len(arrivals_s)
        rate = float(unit_arrivals_s(n, seed)[-1] / arrivals_s[-1])
        ttft = np.full(n, ttft_ms_per_rps * rate)
        if rate > stable_below_rps:
            ttft = ttft + np.arange(n, dtype=float)
        return ttft, np.full(n, np.nan)
    return simulate


def test_limited_by_tells_an_unstable_queue_from_a_latency_miss() -> None:
    """Unstable above 50 req/s, TTFT 1 ms per req/s below: p99 ≤ 1 s holds up to 50 req/s,
    where the queue stops keeping up (``stability``); p99 ≤ 30 ms misses its limit at a stable
    30 req/s first (``latency``). The ends keep their meanings: ``capacity`` (holds at the
    top) and ``slo`` (fails at the bottom)."""
    simulate = toy_simulate(stable_below_rps=50.0, ttft_ms_per_rps=1.0)
    slos = [percentile_ratio("ttft", 99, 1000.0), percentile_ratio("ttft", 99, 30.0)]
    stability, latency = steady_state_rates(simulate, slos, top_rps=100.0, settings=TOY).rates
    assert stability.limited_by == "stability"
    assert stability.rate_rps == pytest.approx(50.0, rel=0.02)
    assert stability.rate_rps <= 50.0 < stability.fails_at_rps
    assert latency.limited_by == "latency"
    assert latency.rate_rps == pytest.approx(30.0, rel=0.02)
    assert latency.fails_at_rps < 50.0  # the rate above it was stable
    ends = steady_state_rates(toy_simulate(200.0, 1.0),
                              [percentile_ratio("ttft", 99, 1000.0),
                               percentile_ratio("ttft", 99, 1.0)], top_rps=100.0,
                              settings=TOY).rates
    assert [r.limited_by for r in ends] == ["capacity", "slo"]
    assert {r.limited_by for r in (stability, latency, *ends)} == set(LIMITED_BY)
