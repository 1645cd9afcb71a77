"""Variants of a problem (hgresearch.plan.baselines): single-hardware baselines and the
cost-carbon Pareto front."""

from __future__ import annotations

import numpy as np
from plan_fixtures import (
    CANDIDATES,
    LENGTHS,
    MODEL,
    SLOS,
    random_rates,
    rate_table,
)

from hgresearch.plan import (
    CarbonSettings,
    Demand,
    PlanProblem,
    pareto_front,
    solve,
)
from hgresearch.plan.baselines import baselines


def test_pareto_front_trades_cost_for_carbon() -> None:
    problem = PlanProblem(MODEL, Demand.steady(10.0), LENGTHS, SLOS, CANDIDATES,
                          carbon=CarbonSettings(grid_region="PL"))
    caps = {(k, c.hardware): {"H100-PCIe": 6.0, "RTX-4090": 1.2}[c.gpu_name] * c.num_gpus
            for k in ("chat/short", "chat/long", "batch/short", "batch/long")
            for c in problem.candidates}
    front = pareto_front(problem, rate_table(problem, caps), points=5)
    costs = [p.cost_usd_per_h.sum() for p in front]
    carbon = [p.carbon_g_per_h.sum() for p in front]
    assert len(front) >= 2
    assert carbon == sorted(carbon) and costs == sorted(costs, reverse=True)


def test_baselines_are_single_hardware_plans() -> None:
    problem = PlanProblem(MODEL, Demand.steady(8.0), LENGTHS, SLOS, CANDIDATES,
                          gpu_caps=(("H100-PCIe", 1),))
    caps_table = rate_table(problem, random_rates(np.random.default_rng(3), problem))
    hybrid = solve(problem, caps_table)
    out = baselines(problem, caps_table)
    assert set(out) >= {"H100-PCIe only", "RTX-4090 only", "best single configuration"}
    for name, gpu in (("H100-PCIe only", "H100-PCIe"), ("RTX-4090 only", "RTX-4090")):
        plan = out[name]
        assert {c.gpu_name for c in plan.problem.candidates} == {gpu}  # type: ignore[union-attr]
    # the uncapped H100 baseline uses more than the hybrid's cap of one H100
    assert out["H100-PCIe only"].replicas.sum() > 1  # type: ignore[union-attr]
    # baselines drop the caps; the capped hybrid can't beat the uncapped best of all
    everything = solve(problem.__class__(**{**problem.__dict__, "gpu_caps": ()}), caps_table)
    assert everything.cost_usd_per_h[0] <= hybrid.cost_usd_per_h[0] + 1e-9
