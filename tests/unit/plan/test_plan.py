"""Fleet planner: optimality against brute force, infeasibility explained, caps respected, the
fleet file round-trips into the simulator and the bench, the simulated check and re-planning.

Most tests give the program a constructed capacity table (numbers chosen so the optimum is not
obvious): the table is the planner's input, and the solver, caps and economics are the real
ones. The simulator-backed provider is tested on one small configuration.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import linprog

from hgresearch.errors import InputError
from hgresearch.plan import (
    Candidate,
    CarbonSettings,
    Demand,
    LengthClass,
    PlanProblem,
    PriceScenario,
    SimulatedReplicaRates,
    SLOClass,
    check_plan,
    pareto_front,
    plan_and_check,
    replica_rate_table,
    solve,
    write_fleet_file,
)
from hgresearch.plan.economics import price_usd_per_gpu_h, replica_carbon_g_per_h
from hgresearch.plan.baselines import baselines
from hgresearch.plan.matrices import matrices
from hgresearch.traffic.routing import ClassWeightedSplit, ReplicaState, RouteRequest

MODEL = "DeepSeek-R1-Distill-Qwen-14B"
CANDIDATES = (Candidate("H100-PCIe", 1), Candidate("RTX-4090", 2), Candidate("RTX-4090", 4))
LENGTHS = (LengthClass("short", 256, 128, 0.7), LengthClass("long", 2048, 256, 0.3))
SLOS = (SLOClass("chat", 0.6, ttft_ms=500), SLOClass("batch", 0.4))


def table(problem: PlanProblem, caps: dict[tuple[str, str], float]) -> pd.DataFrame:
    """A capacity table with the given rates (req/s per replica) per (class, hardware)."""
    rows = []
    for c in problem.candidates:
        for s in problem.slo_classes:
            for length in problem.length_classes:
                rate = caps[(f"{s.name}/{length.name}", c.hardware)]
                rows.append({"config": c.label(problem.model), "gpu_name": c.gpu_name,
                             "num_gpus": c.num_gpus, "class": f"{s.name}/{length.name}",
                             "slo_class": s.name, "length_class": length.name,
                             "rate_rps": rate, "low_rps": rate, "high_rps": rate,
                             "limited_by": "slo", "step_time_source": "test"})
    return pd.DataFrame(rows)


def random_caps(rng: np.random.Generator, problem: PlanProblem) -> dict:
    return {(f"{s.name}/{length.name}", c.hardware): float(rng.uniform(0.5, 6.0))
            * c.num_gpus ** rng.uniform(0.3, 1.0)
            for c in problem.candidates for s in problem.slo_classes
            for length in problem.length_classes}


def brute_force(problem: PlanProblem, caps_table: pd.DataFrame, objective: str,
                limit: int) -> float:
    """Lowest objective over every replica vector up to ``limit`` per configuration (each
    checked for a feasible routing by an LP), under the problem's caps."""
    m = matrices(problem, caps_table)
    costs = np.nan_to_num(m.cost_usd_per_h)
    carbon = m.carbon_g_per_h[:, 0]
    best = np.inf
    k_count, j_count = m.cap_rps.shape
    for n in itertools.product(range(limit + 1), repeat=j_count):
        n = np.array(n)
        if any((n > m.max_replicas[:, 0]) & (n > 0)):
            continue
        if any(members @ n > caps[0] for _, members, caps in m.gpu_caps):
            continue
        # routing LP: x[k, j] >= 0, sum_j x = d_k, sum_k x / cap <= n_j
        pairs = [(k, j) for k in range(k_count) for j in range(j_count) if m.cap_rps[k, j] > 0]
        a_eq = np.zeros((k_count, len(pairs)))
        a_ub = np.zeros((j_count, len(pairs)))
        for i, (k, j) in enumerate(pairs):
            a_eq[k, i] = 1.0
            a_ub[j, i] = 1.0 / m.cap_rps[k, j]
        result = linprog(np.zeros(len(pairs)), A_ub=a_ub, b_ub=n, A_eq=a_eq,
                         b_eq=m.demand_rps[:, 0], method="highs")
        if result.status != 0:
            continue
        value = costs @ n if objective == "cost" else carbon @ n
        best = min(best, float(value))
    return best


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("objective", ["cost", "carbon"])
def test_plan_is_optimal_against_brute_force(seed: int, objective: str) -> None:
    rng = np.random.default_rng(seed)
    problem = PlanProblem(MODEL, Demand.steady(float(rng.uniform(3, 12))), LENGTHS, SLOS,
                          CANDIDATES, gpu_caps=(("H100-PCIe", 3),))
    caps_table = table(problem, random_caps(rng, problem))
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
        solve(problem, table(problem, caps))
    message = str(err.value)
    assert "demand of 50 req/s" in message and "at most 12 req/s" in message
    assert "H100-PCIe <= 2 GPUs" in message and "2x RTX-4090 <= 1 replicas" in message
    assert err.value.field == "caps"


def test_class_no_configuration_can_serve_is_named() -> None:
    problem = PlanProblem(MODEL, Demand.steady(5.0), LENGTHS, SLOS, CANDIDATES)
    caps = random_caps(np.random.default_rng(0), problem)
    for c in CANDIDATES:
        caps[("chat/long", c.hardware)] = 0.0
    with pytest.raises(InputError, match=r"class 'chat/long': no candidate configuration meets "
                                         r"its SLO \(p99 TTFT <= 500 ms\)"):
        solve(problem, table(problem, caps))


def test_carbon_budget_below_the_greenest_plan_is_explained() -> None:
    problem = PlanProblem(MODEL, Demand.steady(5.0), LENGTHS, SLOS, CANDIDATES)
    caps_table = table(problem, random_caps(np.random.default_rng(1), problem))
    with pytest.raises(InputError, match="carbon budget is below the lowest-carbon plan"):
        solve(problem, caps_table, carbon_budget_g=1.0)


def test_hourly_caps_are_respected() -> None:
    night = tuple(8 if h < 6 else 0 for h in range(8))
    demand = Demand(tuple(4.0 + h for h in range(8)))
    problem = PlanProblem(MODEL, demand, LENGTHS, SLOS,
                          (Candidate("H100-PCIe", 1, max_replicas_by_hour=(8,) * 8),
                           Candidate("RTX-4090", 2), Candidate("RTX-4090", 4)),
                          gpu_caps=(("RTX-4090", night),))
    caps_table = table(problem, random_caps(np.random.default_rng(2), problem))
    plan = solve(problem, caps_table)
    gpus_4090 = 2 * plan.replicas[1] + 4 * plan.replicas[2]
    assert np.all(gpus_4090 <= np.array(night))
    assert np.all(plan.replicas[0] <= 8)
    assert gpus_4090[:6].sum() > 0  # the cheap GPUs are used where they may be
    assert plan.replicas.shape == (3, 8)


def test_pareto_front_trades_cost_for_carbon() -> None:
    problem = PlanProblem(MODEL, Demand.steady(10.0), LENGTHS, SLOS, CANDIDATES,
                          carbon=CarbonSettings(grid_region="PL"))
    caps = {(k, c.hardware): {"H100-PCIe": 6.0, "RTX-4090": 1.2}[c.gpu_name] * c.num_gpus
            for k in ("chat/short", "chat/long", "batch/short", "batch/long")
            for c in problem.candidates}
    front = pareto_front(problem, table(problem, caps), points=5)
    costs = [p.cost_usd_per_h.sum() for p in front]
    carbon = [p.carbon_g_per_h.sum() for p in front]
    assert len(front) >= 2
    assert carbon == sorted(carbon) and costs == sorted(costs, reverse=True)


def test_owned_hardware_pays_electricity_only() -> None:
    owned = PriceScenario(owned_gpus=("RTX-4090",), electricity_region="DE")
    # 450 W for an hour at the DE household price of the catalog
    assert price_usd_per_gpu_h("RTX-4090", owned) == pytest.approx(0.45 * 0.4268)
    assert price_usd_per_gpu_h("H100-PCIe", owned) == 2.0
    assert np.isnan(price_usd_per_gpu_h("RTX-4090", PriceScenario("hyperscaler")))
    with pytest.raises(InputError, match="unknown electricity region 'XX'"):
        price_usd_per_gpu_h("RTX-4090", PriceScenario(owned_gpus=("RTX-4090",),
                                                      electricity_region="XX"))
    sunk = CarbonSettings(grid_region="FR", hardware_scenario="idle_consumer")
    new = CarbonSettings(grid_region="FR")
    gpu = Candidate("RTX-4090", 2)
    assert replica_carbon_g_per_h(gpu, sunk, 1)[0] == pytest.approx(0.9 * 56)
    assert replica_carbon_g_per_h(gpu, new, 1)[0] > replica_carbon_g_per_h(gpu, sunk, 1)[0]


def test_baselines_are_single_hardware_plans() -> None:
    problem = PlanProblem(MODEL, Demand.steady(8.0), LENGTHS, SLOS, CANDIDATES,
                          gpu_caps=(("H100-PCIe", 1),))
    caps_table = table(problem, random_caps(np.random.default_rng(3), problem))
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


def test_class_weighted_split_follows_the_shares() -> None:
    policy = ClassWeightedSplit({"a": [3.0, 1.0, 0.0], "b": [0.0, 0.0, 1.0]})
    states = [ReplicaState() for _ in range(3)]
    picks = [policy.choose(states, RouteRequest(10, 10, "a")) for _ in range(400)]
    assert np.bincount(picks, minlength=3).tolist() == [300, 100, 0]
    assert {policy.choose(states, RouteRequest(10, 10, "b")) for _ in range(10)} == {2}
    # unknown class: the summed shares (3:1:1)
    picks = [policy.choose(states, RouteRequest(10, 10)) for _ in range(500)]
    assert np.bincount(picks, minlength=3).tolist() == [300, 100, 100]
    with pytest.raises(InputError, match="one share per replica"):
        ClassWeightedSplit({"a": [1.0], "b": [1.0, 2.0]})


@pytest.fixture(scope="module")
def small_plan():
    """A real plan: capacities from the simulator (roofline step model), one SLO class."""
    problem = PlanProblem(MODEL, Demand.steady(40.0), (LengthClass("short", 256, 64),),
                          (SLOClass("chat", 1.0, ttft_ms=300),),
                          (Candidate("H100-PCIe", 1), Candidate("RTX-4090", 2)),
                          gpu_caps=(("RTX-4090", 4),))
    provider = SimulatedReplicaRates(num_requests=100, seeds=(0, 1), bisection_steps=5)
    caps = replica_rate_table(problem, provider)
    return problem, caps, provider


def test_simulated_capacity_has_an_interval(small_plan) -> None:
    _, caps, _ = small_plan
    assert (caps.low_rps <= caps.rate_rps).all() and (caps.rate_rps <= caps.high_rps).all()
    assert (caps.rate_rps > 0).all()
    assert set(caps.step_time_source) == {"roofline floor only (uncalibrated)"}


def test_capacity_is_zero_where_the_model_does_not_fit() -> None:
    provider = SimulatedReplicaRates(num_requests=50, seeds=(0,))
    cap = provider.class_rate(MODEL, Candidate("RTX-4090", 1), LengthClass("x", 100, 10),
                              SLOClass("chat", ttft_ms=500))
    assert cap.rate_rps == 0 and cap.limited_by == "memory"


def test_fleet_file_round_trips_into_simulator_and_bench(small_plan, tmp_path) -> None:
    from hgresearch.bench.options import validate_config
    from hgresearch.bench.runner import BenchConfig
    from hgresearch.sim.fleet import sim_replicas
    from hgresearch.sim.fleet_spec import bench_endpoints, load_fleet

    problem, caps, _ = small_plan
    plan = solve(problem, caps)
    path = write_fleet_file(plan, tmp_path / "fleet.yaml")
    fleet = load_fleet(path)
    replicas = sim_replicas(fleet, fits={})
    expected = [(c.gpu_name, c.num_gpus) for j, c in enumerate(problem.candidates)
                for _ in range(plan.replicas[j, 0])]
    assert [(r.gpu_name, r.num_gpus) for r in replicas] == expected
    prices = {r.gpu_name: r.price_usd_per_gpu_h for r in replicas}
    assert prices.get("H100-PCIe", 2.0) == 2.0
    urls = {row.config: [f"http://h{i}-{k}:8000" for k in range(row.replicas)]
            for i, row in enumerate(plan.fleet().itertuples())}
    live = write_fleet_file(plan, tmp_path / "live.yaml", base_urls=urls)
    endpoints = bench_endpoints(load_fleet(live), "my-model")
    assert len(endpoints) == len(replicas)
    validate_config(BenchConfig(base_url=endpoints[0]["base_url"], fleet=endpoints))
    with pytest.raises(InputError, match="base URL"):
        write_fleet_file(plan, tmp_path / "bad.yaml", base_urls={})


def test_simulated_check_reports_percentiles_and_replans(small_plan) -> None:
    problem, caps, _ = small_plan
    plan = solve(problem, caps)
    result = check_plan(plan, seeds=(0, 1), duration_s=20.0, min_requests=200)
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


def test_hour_by_hour_equals_one_program_over_the_day() -> None:
    demand = Demand((3.0, 0.0, 9.0, 5.0))
    problem = PlanProblem(MODEL, demand, LENGTHS, SLOS, CANDIDATES,
                          gpu_caps=(("RTX-4090", (8, 8, 2, 0)),),
                          carbon=CarbonSettings(hourly_g_per_kwh=(50.0, 100.0, 400.0, 700.0)))
    caps_table = table(problem, random_caps(np.random.default_rng(5), problem))
    by_hour = solve(problem, caps_table)
    joint = solve(problem, caps_table, carbon_budget_g=1e12)  # a budget couples the hours
    assert by_hour.cost_usd_per_h.sum() == pytest.approx(joint.cost_usd_per_h.sum())
    assert by_hour.replicas[:, 1].sum() == 0
    with pytest.raises(InputError, match=r"^field 'caps': hour 2: demand of 9 req/s .* "
                                         r"\(binding: RTX-4090 <= 2 GPUs\)"):
        solve(problem.__class__(**{**problem.__dict__, "candidates": CANDIDATES[1:]}),
              caps_table)


def test_fleet_figures_have_no_layout_problems() -> None:
    """The notebook's three figures on a small constructed study: readable (no overlapping
    labels, no legend over data, every numeric axis labelled)."""
    from hgresearch.plan.hybrid_study import day_table
    from hgresearch.report.figures import fleet as fleet_figures
    from hgresearch.report.figures.layout import layout_problems

    rows = [{"scenario": s, "rate_rps": r, "plan": p, "cost_usd_per_1m_tok": c * 10 / r,
             "g_co2_per_1m_tok": g * 10 / r}
            for s in ("p99 TTFT ≤ 500 ms + batch", "p99 TTFT ≤ 2000 ms + batch")
            for r in (1.0, 5.0, 20.0, 50.0)
            for p, c, g in (("hybrid", 0.1, 5.0), ("H100-PCIe only", 0.3, 2.0),
                            ("RTX-4090 only", 0.12, 8.0))]
    figures = [fleet_figures.cost_carbon_vs_demand(pd.DataFrame(rows), "cost and carbon")]
    front = pd.DataFrame({"g_co2_per_1m_tok": [5.0, 8.0, 17.0],
                          "cost_usd_per_1m_tok": [0.07, 0.05, 0.02]})
    base = pd.DataFrame({"plan": ["H100-PCIe only", "RTX-4090 only"],
                         "g_co2_per_1m_tok": [5.0, 17.0], "cost_usd_per_1m_tok": [0.07, 0.02]})
    figures.append(fleet_figures.pareto(front, base, "front"))
    problem = PlanProblem(MODEL, Demand(tuple(4.0 + h for h in range(24))), LENGTHS, SLOS,
                          CANDIDATES,
                          gpu_caps=(("RTX-4090", tuple(8 if h < 7 else 0 for h in range(24))),))
    plan = solve(problem, table(problem, random_caps(np.random.default_rng(7), problem)))
    figures.append(fleet_figures.day_plan({"cost-optimal": day_table(plan)}, "a day"))
    for fig in figures:
        assert layout_problems(fig) == []


def test_calibrated_replicas_run_their_calibration_in_capacity_and_check() -> None:
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
    fast = SimulatedReplicaRates(num_requests=100, seeds=(0,), bisection_steps=4)
    slow = SimulatedReplicaRates(fits={label: fit}, num_requests=100, seeds=(0,), bisection_steps=4)
    assert slow.replica(MODEL, candidate).step_time_source == "calibrated"
    assert slow.ttft_offset_ms(MODEL, candidate) == pytest.approx(100.0)
    assert slow.class_rate(MODEL, candidate, length, slo).rate_rps \
        < fast.class_rate(MODEL, candidate, length, slo).rate_rps
    problem = PlanProblem(MODEL, Demand.steady(2.0), (length,), (SLOClass("chat", ttft_ms=500),),
                          (candidate,))
    settings = replica_settings(problem, slow)
    assert settings["fits"] == {label: fit} and settings["step_times"] == {}
    plan = solve(problem, replica_rate_table(problem, slow), **settings)
    result = check_plan(plan, seeds=(0,), duration_s=10.0, min_requests=100)
    assert result.by_class.p99_ttft_ms.iloc[0] > 100  # the delay is in every TTFT


def test_ttft_offset_counts_in_capacity_and_check(small_plan) -> None:
    problem, caps, _ = small_plan
    labels = [c.label(MODEL) for c in problem.candidates]
    late = SimulatedReplicaRates(ttft_offsets_ms=dict.fromkeys(labels, 400.0), num_requests=100,
                                 seeds=(0,), bisection_steps=4)
    # 400 ms outside the engine leave nothing of a 300 ms TTFT budget
    assert late.class_rate(MODEL, problem.candidates[0], problem.length_classes[0],
                           problem.slo_classes[0]).rate_rps == 0
    from hgresearch.plan import replica_settings

    settings = replica_settings(problem, late)
    assert settings["ttft_offsets_ms"] == dict.fromkeys(labels, 400.0)
    plan = solve(problem, caps, **settings)
    result = check_plan(plan, seeds=(0,), duration_s=10.0, min_requests=100)
    assert not result.passed and result.by_class.p99_ttft_ms.iloc[0] > 400
