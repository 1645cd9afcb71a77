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


def test_a_missed_class_lowers_every_class_on_the_replicas_where_it_missed(small_plan) -> None:
    """Classes share a replica's steps: when the chat class misses on a configuration, the
    batch class served there is lowered too (its prefills delay chat's first tokens), and
    nothing is lowered on a configuration where no class missed."""
    import dataclasses

    import pandas as pd

    from hgresearch.plan import SLOClass, replica_rate_table
    from hgresearch.plan.check import CheckResult, classes_to_lower

    problem, caps, provider = small_plan
    two = dataclasses.replace(problem, slo_classes=(SLOClass("chat", 0.5, ttft_ms=300),
                                                    SLOClass("batch", 0.5)))
    plan = solve(two, replica_rate_table(two, provider))
    served = {(plan.classes[k], plan.labels[j]) for k in range(len(plan.classes))
              for j in range(len(plan.labels)) if plan.traffic_rps[k, j, 0] > 0}
    missing = next(label for name, label in served if name.startswith("chat"))
    rows = [{"slo_class": name.split("/", 1)[0], "config": label,
             "passed": not (name.startswith("chat") and label == missing)}
            for name, label in served]
    by_config = pd.DataFrame(rows)
    by_class = by_config.groupby("slo_class", as_index=False).passed.all()
    result = CheckResult(hour=0, rate_rps=40.0, num_requests=0, seeds=(0,), by_class=by_class,
                         by_config=by_config)
    lowered = classes_to_lower(plan, {0: result})
    assert lowered == {(name, label) for name, label in served if label == missing}
    # this plan serves both classes on the replica where chat missed: both are lowered
    assert {name.split("/", 1)[0] for name, _ in lowered} == {"chat", "batch"}
