"""The hybrid-fleet study for the paper's open question (notebook ``08_fleet``): the planner's
setting (:func:`fleet_study`: the problem, simulated capacities, the check every plan gets),
the hybrid against single-hardware fleets over a range of demands (:func:`demand_sweep`), the
checked cost–carbon Pareto front (:func:`pareto_study`) and a day with idle consumer GPUs only
at night (:func:`day_study`); their tables (:data:`FLEET_TABLES`, written by
:func:`hgresearch.report.writers.write_tables`) and headline numbers (:func:`fleet_headline`).

Every plan is sized at the slow end of the simulator's step-time interval with headroom
(:func:`fleet_study`'s ``confidence`` and ``headroom``), checked by simulation for ten minutes
of traffic, nominal and stressed, and re-planned until it passes
(:func:`hgresearch.plan.check.plan_and_check`); a plan that still fails is reported as such
(``passed`` false in the tables, counted in the headline) and never counts as a result: the
hybrid's advantage compares passing plans only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from hgresearch.executors import Executor
from hgresearch.identity import hardware_label
from hgresearch.plan import (
    Candidate,
    CarbonSettings,
    Demand,
    LengthClass,
    PlanProblem,
    PriceScenario,
    SimulatedReplicaRates,
    SLOClass,
    plan_and_check,
    replica_rate_table,
    replica_settings,
)
from hgresearch.plan.check import CHECK_DURATION_S, CheckedPlan
from hgresearch.plan.fleet_plan import Plan
from hgresearch.plan.hybrid_study import (
    HYBRID_PLAN,
    SINGLE_HARDWARE_PLANS,
    HybridAdvantageSummary,
    checked_pareto_front,
    compare_at_rates,
    day_table,
    hourly_checks,
    hybrid_advantage,
    summarize_hybrid_advantage,
)
from hgresearch.plan.solve import DEFAULT_HEADROOM
from hgresearch.report.writers import TableSpec
from hgresearch.sim.fleet import fleet_calibrations

#: The consumer and the enterprise GPU of the study.
CONSUMER_GPU = "RTX-4090"
ENTERPRISE_GPU = "H100-PCIe"
#: The hybrid-advantage table's file stem (the audit reads it: claim C10's evidence).
HYBRID_ADVANTAGE_TABLE = "fleet_hybrid_advantage"
#: Columns of the day's table.
DAY_COLUMNS = ["objective", "hour", "config", "replicas", "gpus", "rate_rps", "demand_rps",
               "grid_g_per_kwh", "cost_usd_per_h", "carbon_g_per_h"]


@dataclass
class FleetStudy:
    """The planner's setting: the base problem (demand set per study), the interactive SLO
    classes (one scenario each) and the batch class, the capacities of one replica per class,
    where their step times come from, the keyword arguments of every plan's check, and the
    candidate groups compared (``None``: every candidate, the hybrid)."""

    base: PlanProblem
    interactive: tuple[SLOClass, ...]
    batch: SLOClass
    capacities: pd.DataFrame
    source: str
    check: dict[str, Any]
    groups: dict[str, list[int] | None]
    settings: dict[str, Any]


def fleet_study(model: str, candidates: Sequence[Sequence[Any]],
                length_classes: Sequence[Sequence[Any]], ttft_limits_ms: Sequence[float], *,
                interactive_share: float, price_scenario: str = "alternative",
                grid_region: str = "EU-27", tdp: str = "datasheet", rtx_gpu_cap: int = 8,
                step_times: str = "calibrated", build_dir: str | Path | None = None,
                reference_dir: str | Path | None = None, check_seeds: int = 2,
                check_duration_s: float = CHECK_DURATION_S, confidence: float = 0.9,
                headroom: float = DEFAULT_HEADROOM) -> FleetStudy:
    """The study's setting from notebook 08's parameters: ``candidates`` [GPU, GPU count],
    ``length_classes`` [name, prompt tokens, output tokens, fraction], one interactive class per
    p99 TTFT limit (``interactive_share`` of the requests) plus a batch class; capacities from
    the simulator (``step_times``: ``calibrated`` on the reference runs, cached in
    ``build_dir``, or the ``roofline`` floor alone) at the slow end of the step-time interval
    at ``confidence`` (:func:`hgresearch.sim.intervals.reference_intervals`), every replica
    loaded to at most ``1 - headroom`` of it; every plan checked on ``check_seeds`` seeds of
    ``check_duration_s`` seconds of traffic, nominal and stressed."""
    from hgresearch.sim.intervals import reference_intervals

    factor = reference_intervals(build_dir, reference_dir).step_time_factor(confidence)
    configs = tuple(Candidate(str(g), int(n)) for g, n in candidates)
    lengths = tuple(LengthClass(str(name), int(p), int(o), float(f))
                    for name, p, o, f in length_classes)
    interactive = tuple(SLOClass(f"ttft{limit:g}ms", interactive_share, ttft_ms=float(limit))
                        for limit in ttft_limits_ms)
    batch = SLOClass("batch", 1.0 - interactive_share)
    base = PlanProblem(model, Demand.steady(1.0), lengths, (*interactive, batch), configs,
                       prices=PriceScenario(price_scenario),
                       carbon=CarbonSettings(grid_region=grid_region, tdp=tdp),
                       gpu_caps=((CONSUMER_GPU, rtx_gpu_cap),))
    if step_times == "calibrated":
        provider = SimulatedReplicaRates(fits=fleet_calibrations(build_dir, reference_dir),
                                         source="calibrated on the reference runs (notebook 07)",
                                         step_time_factor=factor)
    else:
        provider = SimulatedReplicaRates(step_time_factor=factor)
    capacities = replica_rate_table(base, provider, build_dir=build_dir,
                                    executor=Executor.for_jobs(2))
    # every plan's check: these seeds and arrivals, on the replicas the capacities assumed
    check = dict(seeds=tuple(range(check_seeds)), duration_s=check_duration_s,
                 headroom=headroom, **replica_settings(base, provider))
    rtx = [i for i, c in enumerate(configs) if c.gpu_name == CONSUMER_GPU]
    h100 = [i for i, c in enumerate(configs) if c.gpu_name == ENTERPRISE_GPU]
    return FleetStudy(base=base, interactive=interactive, batch=batch, capacities=capacities,
                      source=provider.source, check=check,
                      groups={HYBRID_PLAN: None, SINGLE_HARDWARE_PLANS[0]: h100,
                              SINGLE_HARDWARE_PLANS[1]: rtx},
                      settings={"model": model, "price_scenario": price_scenario,
                                "grid_region": grid_region, "tdp": tdp,
                                "rtx_gpu_cap": rtx_gpu_cap,
                                "interactive_share": interactive_share,
                                "confidence": confidence, "headroom": headroom,
                                "step_time_factor": factor,
                                "check_duration_s": check_duration_s})


def capacity_view(study: FleetStudy) -> pd.DataFrame:
    """The capacities of one replica per class, its configuration by label."""
    capacities = study.capacities
    return capacities.assign(config=[hardware_label(g, n) for g, n in
                                     zip(capacities.gpu_name, capacities.num_gpus,
                                         strict=True)])[
        ["config", "class", "rate_rps", "low_rps", "limited_by"]]


@dataclass
class DemandSweep:
    """The hybrid against the single-hardware fleets at every demand and interactive SLO
    (``sweep``), the hybrid's saving per point (``advantage``) and its summary (``gain``)."""

    sweep: pd.DataFrame
    advantage: pd.DataFrame
    gain: HybridAdvantageSummary


def demand_sweep(study: FleetStudy, rates_rps: Sequence[float]) -> DemandSweep:
    """Every group's plan (and the best single configuration) at every demand of
    ``rates_rps``, one scenario per interactive SLO with the batch class; each checked by
    simulation. A baseline may have no plan at all (its ``fleet`` names why)."""
    frames = []
    for slo in study.interactive:
        problem = dataclasses.replace(study.base, slo_classes=(slo, study.batch))
        frames.append(compare_at_rates(problem, study.capacities, list(rates_rps),
                                       study.groups, **study.check)
                      .assign(scenario=f"p99 TTFT ≤ {slo.ttft_ms:g} ms + batch"))
    sweep = pd.concat(frames, ignore_index=True)
    sweep = sweep[["scenario", *[c for c in sweep.columns if c != "scenario"]]]
    advantage = hybrid_advantage(sweep)
    return DemandSweep(sweep=sweep, advantage=advantage,
                       gain=summarize_hybrid_advantage(advantage))


def advantage_reading(gain: HybridAdvantageSummary) -> str:
    """The hybrid's advantage in words."""
    return (f"hybrid cheaper than both at {gain.cheaper_than_both} of {gain.points} points"
            + (f"; by up to {gain.max_saving:.1%}" if gain.max_saving is not None else "")
            + f"; cheaper than H100-only by {gain.saving_vs_h100_min:.0%} to "
              f"{gain.saving_vs_h100_max:.0%}")


@dataclass
class ParetoStudy:
    """The checked cost–carbon front at one demand and grid, the single-hardware fleets beside
    it, and the setting (``rate_rps``, ``grid_region``, the interactive SLO's ``ttft_ms``)."""

    front: pd.DataFrame
    baselines: pd.DataFrame
    rate_rps: float
    grid_region: str
    ttft_ms: float


def pareto_study(study: FleetStudy, rate_rps: float, grid_region: str,
                 points: int) -> ParetoStudy:
    """The cheapest plan under ``points`` carbon budgets (ε-constraint) at ``rate_rps`` on the
    ``grid_region`` grid, under the first interactive SLO and the batch class, each checked and
    re-planned until it passes; beside the H100-only and RTX-4090-only fleets."""
    slo = study.interactive[0]
    problem = dataclasses.replace(study.base, slo_classes=(slo, study.batch),
                                  demand=Demand.steady(rate_rps),
                                  carbon=CarbonSettings(grid_region=grid_region,
                                                        tdp=study.settings["tdp"]))
    front = checked_pareto_front(problem, study.capacities, points=points, **study.check)
    baselines = compare_at_rates(problem, study.capacities, [rate_rps],
                                 {k: v for k, v in study.groups.items() if v is not None},
                                 best_single=False, **study.check)
    return ParetoStudy(front=front, baselines=baselines, rate_rps=rate_rps,
                       grid_region=grid_region, ttft_ms=float(slo.ttft_ms or 0.0))


@dataclass
class DayStudy:
    """A day's cost-optimal and carbon-optimal plans (by objective), their hourly checks,
    rounds of re-planning, the hours' tables and totals."""

    checked: dict[str, CheckedPlan]
    plans: dict[str, Plan]
    checks: pd.DataFrame
    tables: dict[str, pd.DataFrame]
    day: pd.DataFrame
    totals: pd.DataFrame

    @property
    def rounds(self) -> dict[str, int]:
        """Solves each objective took until every hour passed."""
        return {objective: checked.rounds for objective, checked in self.checked.items()}


def day_study(study: FleetStudy, *, ttft_limit_ms: float, demand_rps: Sequence[float],
              grid_g_per_kwh: Sequence[float], rtx_gpus_at_night: int,
              night_hours: Sequence[int], electricity_region: str) -> DayStudy:
    """A day of hourly ``demand_rps`` and grid intensity: owned, idle RTX 4090s
    (``rtx_gpus_at_night`` GPUs in ``night_hours``; electricity at ``electricity_region``'s
    price; embodied carbon sunk) beside rented H100s, the cost-optimal and the carbon-optimal
    plan hour by hour, every hour checked by simulation."""
    night_caps = tuple(rtx_gpus_at_night if h in night_hours else 0 for h in range(24))
    slo = SLOClass(f"ttft{ttft_limit_ms:g}ms", study.settings["interactive_share"],
                   ttft_ms=ttft_limit_ms)
    problem = dataclasses.replace(
        study.base, slo_classes=(slo, study.batch), demand=Demand(tuple(demand_rps)),
        gpu_caps=((CONSUMER_GPU, night_caps),),
        prices=PriceScenario(study.settings["price_scenario"], (CONSUMER_GPU,),
                             electricity_region),
        carbon=CarbonSettings(hourly_g_per_kwh=tuple(grid_g_per_kwh),
                              hardware_scenario="idle_consumer", tdp=study.settings["tdp"]))
    checked = {objective: plan_and_check(problem, study.capacities, objective=objective,
                                         **study.check)
               for objective in ("cost", "carbon")}
    plans = {objective: result.plan for objective, result in checked.items()}
    checks = pd.concat([hourly_checks(result).assign(objective=objective)
                        for objective, result in checked.items()], ignore_index=True)
    tables = {objective: day_table(plan) for objective, plan in plans.items()}
    day = pd.concat([table.assign(objective=objective) for objective, table in tables.items()],
                    ignore_index=True)
    return DayStudy(checked=checked, plans=plans, checks=checks, tables=tables,
                    day=day[day.replicas > 0][DAY_COLUMNS],
                    totals=pd.DataFrame([{"objective": objective, **plan.totals()}
                                         for objective, plan in plans.items()]))


#: Notebook 08's tables (``paper/tables``); captions and notes name the study's settings
#: (:func:`fleet_context`).
FLEET_TABLES = (
    TableSpec("fleet_capacity",
              "SLO-safe requests/s of one replica of {model} per class (simulated; step times: "
              "{source})", "tab:fleet-capacity",
              decimals={"rate_rps": 2, "low_rps": 2, "high_rps": 2},
              notes=("Classes: SLO class/length class. Interactive classes: p99 TTFT within the "
                     "limit in the name; batch: 90% of the sustained throughput. rate_rps: the "
                     "steady-state rate at the nominal step times; low_rps: with every step "
                     "{step_time_factor:.3g}x as long (the slow end of the simulator's step-time "
                     "interval at {confidence:g} confidence), what the planner uses, less "
                     "{headroom:.0%} headroom.",)),
    TableSpec("fleet_vs_demand",
              "{model}: hybrid plan vs single-hardware fleets ({price_scenario} prices, "
              "{grid_region} grid)", "tab:fleet-vs-demand",
              decimals={"rate_rps": 0, "gpus": 0, "cost_usd_per_h": 2, "cost_usd_per_1m_tok": 4,
                        "g_co2_per_1m_tok": 2, "worst_slo_ratio": 2},
              notes=("Capacities from the simulator, step times: {source}; every replica sized "
                     "at the slow end ({step_time_factor:.3g}x step times) with {headroom:.0%} "
                     "headroom. Hybrid: at most {rtx_gpu_cap} RTX 4090 GPUs; baselines uncapped. "
                     "passed: the plan held its SLOs for {check_duration_s:g} s of simulated "
                     "traffic per seed, nominal and stressed (worst_slo_ratio over both); a plan "
                     "that failed is no result; 'infeasible' names why no plan exists.",)),
    TableSpec(HYBRID_ADVANTAGE_TABLE,
              "Cost per 1M tokens (USD): hybrid vs the cheaper single-hardware fleet",
              "tab:fleet-advantage", default_decimals=4,
              decimals={"rate_rps": 0, "saving": 3, "saving_vs_h100": 3},
              notes=("saving = 1 - hybrid / min(H100-only, RTX-4090-only) over plans that passed "
                     "their check; negative: a single hardware fleet is cheaper (the uncapped "
                     "RTX-4090 fleet can be); saving_vs_h100 = 1 - hybrid / H100-only.",)),
    TableSpec("fleet_pareto",
              "Cost-carbon Pareto front at {pareto_rate_rps:g} requests/s, p99 TTFT <= "
              "{pareto_ttft_ms:g} ms + batch, {pareto_grid_region} grid", "tab:fleet-pareto",
              decimals={"gpus": 0, "cost_usd_per_h": 2, "cost_usd_per_1m_tok": 4,
                        "g_co2_per_1m_tok": 2}),
    TableSpec("fleet_day",
              "A day's plans hour by hour: configurations on, their load and the hour's cost "
              "and carbon (owned RTX 4090s at night)", "tab:fleet-day",
              decimals={"hour": 0, "replicas": 0, "gpus": 0, "rate_rps": 2, "demand_rps": 1,
                        "grid_g_per_kwh": 0, "cost_usd_per_h": 3, "carbon_g_per_h": 1},
              notes=("Demand and hourly grid intensity are illustrative profiles, not "
                     "measurements; the hours that failed their simulated SLO check (nominal or "
                     "stressed), if any, are counted in the headline.",)),
)


def fleet_tables(study: FleetStudy, demand: DemandSweep, pareto: ParetoStudy,
                 day: DayStudy) -> dict[str, pd.DataFrame | None]:
    """The frames of :data:`FLEET_TABLES`, by file stem."""
    return {"fleet_capacity": capacity_view(study), "fleet_vs_demand": demand.sweep,
            HYBRID_ADVANTAGE_TABLE: demand.advantage, "fleet_pareto": pareto.front,
            "fleet_day": day.day}


def fleet_context(study: FleetStudy, pareto: ParetoStudy) -> dict[str, object]:
    """What the captions and notes of :data:`FLEET_TABLES` name."""
    return {**study.settings, "source": study.source, "pareto_rate_rps": pareto.rate_rps,
            "pareto_ttft_ms": pareto.ttft_ms, "pareto_grid_region": pareto.grid_region}


def fleet_headline(study: FleetStudy, demand: DemandSweep, pareto: ParetoStudy,
                   day: DayStudy) -> dict[str, object]:
    """Numbers ``hgresearch reproduce`` prints for notebook 08: where the hybrid is cheaper,
    the plans' cost per 1M tokens at the Pareto front's demand (first scenario), the front's
    size, the day's cost and carbon per 1M tokens, and how many plans were checked."""
    sweep, gain = demand.sweep, demand.gain
    at = sweep[sweep.rate_rps == pareto.rate_rps].set_index(["scenario", "plan"])
    first = sweep.scenario.iloc[0]

    def cost_at(plan: str) -> object:
        value = at.loc[(first, plan), "cost_usd_per_1m_tok"]
        return round(float(value), 4) if pd.notna(value) else "no plan"

    return {
        "fleet_capacity_source": study.source,
        "fleet_hybrid_cheaper_than_both_points": f"{gain.cheaper_than_both} of {gain.points}",
        "fleet_hybrid_max_saving_vs_single_hardware":
            round(gain.max_saving, 3) if gain.max_saving is not None
            else "none (never cheaper than both)",
        "fleet_hybrid_saving_vs_h100_range": [round(gain.saving_vs_h100_min, 3),
                                              round(gain.saving_vs_h100_max, 3)],
        f"fleet_at_{pareto.rate_rps:g}rps_usd_per_1m_tok": {
            plan: cost_at(plan) for plan in (HYBRID_PLAN, *SINGLE_HARDWARE_PLANS)},
        "fleet_pareto_points": len(pareto.front),
        "fleet_day_usd_per_1m_tok": {row.objective: round(row.cost_usd_per_1m_tok, 4)
                                     for row in day.totals.itertuples()},
        "fleet_day_g_co2_per_1m_tok": {row.objective: round(row.g_co2_per_1m_tok, 2)
                                       for row in day.totals.itertuples()},
        "fleet_plans_checked": int(len(sweep) + len(pareto.front) + day.checks.hour.nunique()),
        "fleet_plans_failed_check": int((sweep.cost_usd_per_h.notna() & ~sweep.passed).sum()
                                        + (~day.checks.groupby(["objective", "hour"])
                                           .passed.all()).sum()),
    }
