"""Per-replica class rates from the simulator (hgresearch.plan.replica_rates): an interval,
0 where the model does not fit, a calibration or a TTFT offset carried into the plan's check."""

from __future__ import annotations

import pytest
from plan_fixtures import MODEL, QUICK

from hgresearch.plan import (
    Candidate,
    Demand,
    LengthClass,
    PlanProblem,
    SimulatedReplicaRates,
    SLOClass,
    check_plan,
    replica_rate_table,
    solve,
)


def test_simulated_replica_rates_have_an_interval(small_plan) -> None:
    _, caps, _ = small_plan
    assert (caps.low_rps <= caps.rate_rps).all() and (caps.rate_rps <= caps.high_rps).all()
    assert (caps.rate_rps > 0).all()
    assert set(caps.step_time_source) == {"roofline floor only (uncalibrated)"}


def test_rate_is_zero_where_the_model_does_not_fit() -> None:
    provider = SimulatedReplicaRates(steady=QUICK)
    cap = provider.class_rate(MODEL, Candidate("RTX-4090", 1), LengthClass("x", 100, 10),
                              SLOClass("chat", ttft_ms=500))
    assert cap.rate_rps == 0 and cap.limited_by == "memory"


def test_rate_is_zero_where_vllm_cannot_split_the_heads() -> None:
    """14B has 40 attention heads: vLLM refuses tensor parallelism over 3 GPUs, so the planner
    may not use 3x (the shared model would otherwise predict, or the roofline floor flatter,
    a configuration that cannot be served)."""
    provider = SimulatedReplicaRates(steady=QUICK)
    length, slo = LengthClass("x", 100, 10), SLOClass("chat", ttft_ms=500)
    cap = provider.class_rate("DeepSeek-R1-Distill-Qwen-14B", Candidate("RTX-4090", 3), length,
                              slo)
    assert cap.rate_rps == 0 and cap.limited_by == "tensor parallelism"


def test_calibrated_replicas_run_their_calibration_in_rates_and_check() -> None:
    """A calibration built from its parts (coefficients chosen, not fitted: fitting the
    reference runs takes minutes) makes the provider and the plan's check run that replica:
    its step time, its KV capacity and its request-path delay."""
    from hgresearch.plan import replica_settings
    from hgresearch.sim.calibrate import Calibration, StepCoefficients, replica_for

    label = f"{MODEL} on 2x RTX-4090"
    fit = Calibration(replica=replica_for(MODEL, "RTX-4090", 2),
                      coefficients=StepCoefficients(c0_s=0.02, c_prefill_s_per_token=2.5e-4,
                                                    c_decode_s_per_seq=4e-4, ttft_offset_s=0.1),
                      rel_se=(0.0, 0.0, 0.0), rates_qps=(1.0,), rms_log_error=0.0,
                      num_simulations=0)
    length, slo = LengthClass("short", 256, 64), SLOClass("chat", ttft_ms=500)
    candidate = Candidate("RTX-4090", 2)
    fast = SimulatedReplicaRates(steady=QUICK)
    slow = SimulatedReplicaRates(fits={label: fit}, steady=QUICK)
    assert slow.replica(MODEL, candidate).step_time_source == "calibrated"
    assert slow.ttft_offset_ms(MODEL, candidate) == pytest.approx(100.0)
    assert slow.class_rate(MODEL, candidate, length, slo).rate_rps \
        < fast.class_rate(MODEL, candidate, length, slo).rate_rps
    problem = PlanProblem(MODEL, Demand.steady(2.0), (length,), (SLOClass("chat", ttft_ms=500),),
                          (candidate,))
    settings = replica_settings(problem, slow)
    assert settings["fits"] == {label: fit} and settings["step_times"] == {}
    plan = solve(problem, replica_rate_table(problem, slow), **settings)
    result = check_plan(plan, seeds=(0,), duration_s=10.0)
    assert result.by_class.p99_ttft_ms.iloc[0] > 100  # the delay is in every TTFT


def test_ttft_offset_counts_in_rates_and_check(small_plan) -> None:
    problem, caps, _ = small_plan
    labels = [c.label(MODEL) for c in problem.candidates]
    late = SimulatedReplicaRates(ttft_offsets_ms=dict.fromkeys(labels, 400.0), steady=QUICK)
    # 400 ms outside the engine leave nothing of a 300 ms TTFT budget
    assert late.class_rate(MODEL, problem.candidates[0], problem.length_classes[0],
                           problem.slo_classes[0]).rate_rps == 0
    from hgresearch.plan import replica_settings

    settings = replica_settings(problem, late)
    assert settings["ttft_offsets_ms"] == dict.fromkeys(labels, 400.0)
    plan = solve(problem, caps, **settings)
    result = check_plan(plan, seeds=(0,), duration_s=10.0)
    assert not result.passed and result.by_class.p99_ttft_ms.iloc[0] > 400
