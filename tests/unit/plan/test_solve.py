"""The mixed-integer program (hgresearch.plan.solve, plan.matrices): optimal against brute
force, infeasibility explained, hourly caps respected, hour by hour equal to one program."""

from __future__ import annotations

import numpy as np
import pytest
from plan_fixtures import (
    CANDIDATES,
    LENGTHS,
    MODEL,
    SLOS,
    brute_force,
    random_rates,
    rate_table,
)

from hgresearch.errors import InputError
from hgresearch.plan import (
    Candidate,
    CarbonSettings,
    Demand,
    PlanProblem,
    solve,
)
from hgresearch.plan.matrices import matrices


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("objective", ["cost", "carbon"])
def test_plan_is_optimal_against_brute_force(seed: int, objective: str) -> None:
    rng = np.random.default_rng(seed)
    problem = PlanProblem(MODEL, Demand.steady(float(rng.uniform(3, 12))), LENGTHS, SLOS,
                          CANDIDATES, gpu_caps=(("H100-PCIe", 3),))
    caps_table = rate_table(problem, random_rates(rng, problem))
    plan = solve(problem, caps_table, objective=objective)
    value = plan.cost_usd_per_h[0] if objective == "cost" else plan.carbon_g_per_h[0]
    expected = brute_force(problem, caps_table, objective, limit=int(plan.replicas.max()) + 3)
    assert value == pytest.approx(expected, rel=1e-6)
    # the routing serves every class's demand, within every replica's capacity
    m = matrices(problem, caps_table)
    np.testing.assert_allclose(plan.traffic_rps[:, :, 0].sum(axis=1), m.demand_rps[:, 0])
    load = (plan.traffic_rps[:, :, 0] / np.where(m.cap_rps > 0, m.cap_rps, np.inf)).sum(axis=0)
    assert np.all(load <= plan.replicas[:, 0] + 1e-6)


def test_infeasible_demand_names_the_binding_cap() -> None:
    problem = PlanProblem(MODEL, Demand.steady(50.0), LENGTHS, SLOS,
                          (Candidate("H100-PCIe", 1), Candidate("RTX-4090", 2, max_replicas=1)),
                          gpu_caps=(("H100-PCIe", 2),))
    caps = {(k, c.hardware): 4.0 for k in ("chat/short", "chat/long", "batch/short",
                                           "batch/long") for c in problem.candidates}
    with pytest.raises(InputError) as err:
        solve(problem, rate_table(problem, caps))
    message = str(err.value)
    assert "demand of 50 req/s" in message and "at most 12 req/s" in message
    assert "H100-PCIe <= 2 GPUs" in message and "2x RTX-4090 <= 1 replicas" in message
    assert err.value.field == "caps"


def test_class_no_configuration_can_serve_is_named() -> None:
    problem = PlanProblem(MODEL, Demand.steady(5.0), LENGTHS, SLOS, CANDIDATES)
    caps = random_rates(np.random.default_rng(0), problem)
    for c in CANDIDATES:
        caps[("chat/long", c.hardware)] = 0.0
    with pytest.raises(InputError, match=r"class 'chat/long': no candidate configuration meets "
                                         r"its SLO \(p99 TTFT <= 500 ms\)"):
        solve(problem, rate_table(problem, caps))


def test_a_class_no_candidate_can_serve_at_all_says_why() -> None:
    """Rate 0 because of memory or tensor parallelism (the capacity table's limited_by) is
    not "misses its SLO": the error names each candidate's reason."""
    problem = PlanProblem(MODEL, Demand.steady(5.0), LENGTHS, SLOS, CANDIDATES)
    caps = random_rates(np.random.default_rng(0), problem)
    for c in CANDIDATES:
        caps[("chat/long", c.hardware)] = 0.0
    table = rate_table(problem, caps)
    table["limited_by"] = "slo"
    long = table["class"] == "chat/long"
    table.loc[long, "limited_by"] = "tensor parallelism"
    table.loc[long & (table.config == CANDIDATES[0].label(MODEL)), "limited_by"] = "memory"
    with pytest.raises(InputError) as err:
        solve(problem, table)
    message = str(err.value)
    assert message.startswith("field 'candidates': class 'chat/long': no candidate "
                              "configuration can serve it: "
                              f"{CANDIDATES[0].label(MODEL)}: the weights leave no KV cache "
                              "room for one request; ")
    assert f"{CANDIDATES[1].label(MODEL)}: vLLM cannot split the model's attention heads" in (
        message)
    # one candidate that merely misses the SLO: the SLO message, with the others' reasons
    table.loc[long & (table.config == CANDIDATES[1].label(MODEL)), "limited_by"] = "slo"
    with pytest.raises(InputError, match=r"no candidate configuration meets its SLO .*; "
                                         + CANDIDATES[0].label(MODEL)):
        solve(problem, table)


def test_carbon_budget_below_the_greenest_plan_is_explained() -> None:
    problem = PlanProblem(MODEL, Demand.steady(5.0), LENGTHS, SLOS, CANDIDATES)
    caps_table = rate_table(problem, random_rates(np.random.default_rng(1), problem))
    with pytest.raises(InputError, match="carbon budget is below the lowest-carbon plan"):
        solve(problem, caps_table, carbon_budget_g=1.0)


def test_hourly_caps_are_respected() -> None:
    night = tuple(8 if h < 6 else 0 for h in range(8))
    demand = Demand(tuple(4.0 + h for h in range(8)))
    problem = PlanProblem(MODEL, demand, LENGTHS, SLOS,
                          (Candidate("H100-PCIe", 1, max_replicas_by_hour=(8,) * 8),
                           Candidate("RTX-4090", 2), Candidate("RTX-4090", 4)),
                          gpu_caps=(("RTX-4090", night),))
    caps_table = rate_table(problem, random_rates(np.random.default_rng(2), problem))
    plan = solve(problem, caps_table)
    gpus_4090 = 2 * plan.replicas[1] + 4 * plan.replicas[2]
    assert np.all(gpus_4090 <= np.array(night))
    assert np.all(plan.replicas[0] <= 8)
    assert gpus_4090[:6].sum() > 0  # the cheap GPUs are used where they may be
    assert plan.replicas.shape == (3, 8)


def test_hour_by_hour_equals_one_program_over_the_day() -> None:
    demand = Demand((3.0, 0.0, 9.0, 5.0))
    problem = PlanProblem(MODEL, demand, LENGTHS, SLOS, CANDIDATES,
                          gpu_caps=(("RTX-4090", (8, 8, 2, 0)),),
                          carbon=CarbonSettings(hourly_g_per_kwh=(50.0, 100.0, 400.0, 700.0)))
    caps_table = rate_table(problem, random_rates(np.random.default_rng(5), problem))
    by_hour = solve(problem, caps_table)
    joint = solve(problem, caps_table, carbon_budget_g=1e12)  # a budget couples the hours
    assert by_hour.cost_usd_per_h.sum() == pytest.approx(joint.cost_usd_per_h.sum())
    assert by_hour.replicas[:, 1].sum() == 0
    with pytest.raises(InputError, match=r"^field 'caps': hour 2: demand of 9 req/s .* "
                                         r"\(binding: RTX-4090 <= 2 GPUs\)"):
        solve(problem.__class__(**{**problem.__dict__, "candidates": CANDIDATES[1:]}),
              caps_table)
