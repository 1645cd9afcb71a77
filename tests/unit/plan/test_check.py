"""The simulated check of a plan and re-planning (hgresearch.plan.check)."""

from __future__ import annotations

from hgresearch.plan import (
    check_plan,
    plan_and_check,
    solve,
)


def test_simulated_check_reports_percentiles_and_replans(small_plan) -> None:
    problem, caps, _ = small_plan
    plan = solve(problem, caps)
    result = check_plan(plan, seeds=(0, 1), duration_s=20.0)
    row = result.by_class.iloc[0]
    assert row.p99_ttft_ms_low <= row.p99_ttft_ms <= row.p99_ttft_ms_high
    assert row.passed == (row.p99_ttft_ms_high <= 300)
    # capacities inflated 3x make the first plan too small: re-planning must add replicas
    inflated = caps.assign(low_rps=caps.low_rps * 3)
    checked = plan_and_check(problem, inflated, seeds=(0,), duration_s=20.0, max_rounds=8,
                             derate=0.6)
    assert checked.rounds > 1
    assert checked.passed
    assert checked.plan.replicas.sum() >= plan.replicas.sum()
