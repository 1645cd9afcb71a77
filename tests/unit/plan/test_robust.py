"""Plans that hold when the model is wrong (issue 18 item 4, issue 20 item 2): replicas sized at
the slow end of the step-time interval with headroom, checked nominal and stressed for a
simulated duration (the request count follows the demand), so a plan loaded to saturation
fails its check however large the demand."""

from __future__ import annotations

import pytest
from plan_fixtures import MODEL, QUICK, rate_table

from hgresearch.plan import (
    Candidate,
    Demand,
    LengthClass,
    PlanProblem,
    SimulatedReplicaRates,
    SLOClass,
    replica_rate_table,
    replica_settings,
    solve,
)
from hgresearch.plan.check import check_plan, check_requests, plan_and_check, robust_check
from hgresearch.plan.replica_rates import slow_end_replicas
from hgresearch.sim.fleet_spec import Fleet, FleetReplicaSpec

#: A fast made-up replica (coefficients given): hundreds of requests/s, so a 10,000 req/s
#: fleet is a few dozen replicas and simulates in seconds.
FAST_STEP = (("c0_s", 0.002), ("c_prefill_s_per_token", 2e-6), ("c_decode_s_per_seq", 2e-5))
FAST = Candidate("H100-PCIe", 1, step_time=FAST_STEP)
SHORT = LengthClass("short", 32, 4)


def test_slow_end_rates_are_lower_and_the_plan_carries_them(small_plan) -> None:
    problem, _, _ = small_plan
    slow = SimulatedReplicaRates(steady=QUICK, step_time_factor=1.3)
    rates = replica_rate_table(problem, slow)
    assert (rates.low_rps < rates.rate_rps).all() and (rates.high_rps == rates.rate_rps).all()
    settings = replica_settings(problem, slow)
    assert settings["step_time_factor"] == pytest.approx(1.3)
    plan = solve(problem, rates, headroom=0.1, **settings)
    fleet = plan.fleet()
    # loaded to at most 90 % of the slow end, and less of the nominal rate
    assert (fleet.load_fraction <= 1 + 1e-9).all()
    assert (fleet.load_vs_slow_end <= 0.9 + 1e-9).all()
    assert (fleet.load_vs_nominal < fleet.load_vs_slow_end).all()
    assert plan.step_time_factor == pytest.approx(1.3)


def test_slow_end_replicas_take_longer_per_step() -> None:
    spec = FleetReplicaSpec(name="a", model=MODEL, gpu_name="H100-PCIe", num_gpus=1,
                            step_time=dict(FAST_STEP))
    nominal = slow_end_replicas(Fleet(replicas=[spec]), {}, 1.0)[0]
    slow = slow_end_replicas(Fleet(replicas=[spec]), {}, 1.5)[0]
    for args in ((0, 8, 4096), (512, 0, 512)):
        assert slow.step_model.step_time_s(*args) == pytest.approx(
            1.5 * nominal.step_model.step_time_s(*args))


def test_the_stress_check_runs_at_the_slow_end(small_plan) -> None:
    problem, caps, provider = small_plan
    plan = solve(problem, caps, step_time_factor=1.5, **{
        k: v for k, v in replica_settings(problem, provider).items() if k != "step_time_factor"})
    result = robust_check(plan, seeds=(0,), duration_s=20.0)
    assert result.stress is not None and result.stress.step_time_factor == 1.5
    nominal_p99 = float(result.by_class.p99_ttft_ms.iloc[0])
    assert float(result.stress.by_class.p99_ttft_ms.iloc[0]) > nominal_p99
    assert result.passed == (bool(result.by_class.passed.all())
                             and bool(result.stress.by_class.passed.all()))


def test_check_length_follows_the_demand() -> None:
    """Never a fixed count a large demand outruns: ten minutes at 10,000 req/s are 6 M."""
    assert check_requests(10_000.0) == 6_000_000
    assert check_requests(20.0) == 12_000
    assert check_requests(0.1) == 400


def test_a_plan_at_10000_rps_loaded_to_saturation_fails_its_check() -> None:
    """Sized at the replicas' burst throughput (what a short run calls capacity) with no
    headroom, a 10,000 req/s fleet is loaded to ~1.0: the queue grows, and a check of enough
    simulated time sees it miss p99 TTFT ≤ 100 ms. A check of 4,000 requests (0.4 s of traffic,
    the old fixed count) sees nothing."""
    problem = PlanProblem(MODEL, Demand.steady(10_000.0), (SHORT,),
                          (SLOClass("chat", ttft_ms=100.0),), (FAST,))
    provider = SimulatedReplicaRates(steady=QUICK)
    replica = provider.replica(MODEL, FAST)
    assert replica is not None
    burst = provider.burst_throughput_rps(replica, SHORT)
    replicas = round(10_000.0 / burst)
    assert 5 <= replicas <= 200
    table = rate_table(problem, {("chat/short", FAST.hardware): 10_000.0 / replicas / 0.9998})
    plan = solve(problem, table, headroom=0.0, step_times={FAST.label(MODEL): dict(FAST_STEP)})
    assert int(plan.replicas.sum()) == replicas
    assert plan.fleet().load_fraction.iloc[0] == pytest.approx(0.9998, abs=1e-3)
    short = check_plan(plan, seeds=(0,), duration_s=0.4)
    assert short.num_requests == 4000 and short.passed
    long = check_plan(plan, seeds=(0,), duration_s=30.0)
    assert long.num_requests == 300_000
    assert not long.passed and float(long.by_class.p99_ttft_ms.iloc[0]) > 100.0


def test_plan_and_check_replans_when_only_the_stress_check_fails(small_plan) -> None:
    """A plan sized on nominal rates, told its slow end is 2x: the stress check fails, so
    the loop derates and buys more replicas until the slow end holds too."""
    problem, caps, provider = small_plan
    settings = {**replica_settings(problem, provider), "step_time_factor": 2.0}
    nominal = caps.assign(low_rps=caps.rate_rps)
    checked = plan_and_check(problem, nominal, seeds=(0,), duration_s=20.0, max_rounds=8,
                             derate=0.7, headroom=0.0, **settings)
    first = checked.checks[0][0]
    assert first.stress is not None
    assert checked.passed and checked.rounds > 1
    first_plan = solve(problem, nominal, headroom=0.0, **settings)
    assert checked.plan.cost_usd_per_h.sum() > first_plan.cost_usd_per_h.sum()


def test_work_is_estimated_from_the_demand_and_the_rates() -> None:
    """Issue 20: 10^9 req/s is refused before anything runs; the fleet's size follows from the
    rates (demand / per-replica rate), before the program is solved."""
    from hgresearch.bounds import check_work
    from hgresearch.errors import InputError
    from hgresearch.plan.work import check_work_estimate, replicas_estimate

    with pytest.raises(InputError, match="--allow-large"):
        check_work(check_work_estimate(1e9, 600.0, 3))
    check_work(check_work_estimate(20.0, 600.0, 3))
    check_work(check_work_estimate(1e9, 600.0, 3), allow_large=True)
    problem = PlanProblem(MODEL, Demand.steady(1e6), (SHORT,), (SLOClass("chat", ttft_ms=500),),
                          (FAST, Candidate("RTX-4090", 2)))
    table = rate_table(problem, {("chat/short", FAST.hardware): 10.0,
                                 ("chat/short", "2x RTX-4090"): 4.0})
    replicas, why = replicas_estimate(problem, table)
    assert replicas == pytest.approx(1e5)
    assert "100,000 replicas" in why and "10 req/s of chat/short" in why
    with pytest.raises(InputError, match="replicas"):
        check_work(check_work_estimate(1e6, 1.0, 1, replicas=replicas, replicas_what=why),
                   memory_limit_bytes=1e9)


def test_absurd_baselines_are_flagged_with_their_reason() -> None:
    from hgresearch.report.plan import comparison_table

    problem = PlanProblem(MODEL, Demand.steady(100.0), (SHORT,),
                          (SLOClass("chat", ttft_ms=500),), (FAST, Candidate("RTX-4090", 2)))
    table = rate_table(problem, {("chat/short", FAST.hardware): 50.0,
                                 ("chat/short", "2x RTX-4090"): 0.5})
    plan = solve(problem, table)
    only_rtx = solve(PlanProblem(MODEL, Demand.steady(100.0), (SHORT,),
                                 (SLOClass("chat", ttft_ms=500),), (Candidate("RTX-4090", 2),)),
                     table)
    notes = comparison_table(plan, {"RTX only": only_rtx}).set_index("plan").note
    assert notes["plan"] == ""
    assert notes["RTX only"].startswith("absurd: 200 replicas (100x the plan's)")
    assert "one 2x RTX-4090 serves 0.5 req/s of chat/short" in notes["RTX only"]


def test_an_unmeasured_configuration_runs_the_shared_models_prediction(monkeypatch) -> None:
    """With shared-model calibrations, a candidate none of them covers runs that model's
    prediction (``calibration_for``, stood in here by a known calibration: the real one needs
    the reference cross-validation, minutes), not the roofline floor alone."""
    from hgresearch.sim import step_model
    from hgresearch.sim.calibrate import Calibration, StepCoefficients, replica_for

    def calibration(gpu: str, count: int, c0_s: float, source: str) -> Calibration:
        return Calibration(replica=replica_for(MODEL, gpu, count),
                           coefficients=StepCoefficients(c0_s, 1e-5, 1e-4, 0.02),
                           rel_se=(0.1, 0.1, 0.1), rates_qps=(1.0,), rms_log_error=0.1,
                           num_simulations=0, extra={"source": source})

    measured = Candidate("H100-PCIe", 1)
    unmeasured = Candidate("RTX-4090", 8)
    asked = []

    def predicted(model: str, gpu_name: str, gpu_count: int) -> Calibration:
        asked.append((model, gpu_name, gpu_count))
        return calibration(gpu_name, gpu_count, 0.05, step_model.PREDICTED_UNMEASURED)

    monkeypatch.setattr(step_model, "calibration_for", predicted)
    fits = {measured.label(MODEL): calibration("H100-PCIe", 1, 0.01, step_model.SHARED_MODEL)}
    provider = SimulatedReplicaRates(fits=fits, steady=QUICK)
    replica = provider.replica(MODEL, unmeasured)
    assert asked == [(MODEL, "RTX-4090", 8)]
    assert replica is not None and replica.step_model.step_time_s(0, 1, 0) >= 0.05
    assert provider.ttft_offset_ms(MODEL, unmeasured) == pytest.approx(20.0)
    # Calibrations the caller chose that are not the shared model's: left as they are.
    own = {measured.label(MODEL): calibration("H100-PCIe", 1, 0.01, "per configuration")}
    roofline = SimulatedReplicaRates(fits=own, steady=QUICK).replica(MODEL, unmeasured)
    assert roofline is not None and roofline.step_model.step_time_s(0, 1, 0) < 0.05
    assert asked == [(MODEL, "RTX-4090", 8)]
