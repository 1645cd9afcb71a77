"""Studies built from plans: the hybrid plan against single-hardware fleets over a range of
demands, a day's plan hour by hour, and the checked Pareto front (notebook 08_fleet)."""

from __future__ import annotations

import dataclasses
from typing import Unpack

import numpy as np
import pandas as pd

from hgresearch.errors import InputError
from hgresearch.plan.baselines import nondominated, restricted
from hgresearch.plan.check import CHECK_DURATION_S, CheckedPlan, plan_and_check
from hgresearch.plan.economics import grid_g_per_kwh_by_hour
from hgresearch.plan.fleet_plan import Plan
from hgresearch.plan.inputs import Demand, PlanProblem
from hgresearch.plan.solve import PlanSettings, SolveOptions, solve

#: Columns of :func:`compare_at_rates`.
COMPARISON_COLUMNS = ["rate_rps", "plan", "fleet", "gpus", "cost_usd_per_h",
                      "cost_usd_per_1m_tok", "g_co2_per_1m_tok", "rounds", "passed",
                      "worst_slo_ratio"]


def worst_slo_ratio(checked: CheckedPlan) -> float:
    """Largest achieved percentile over its limit, over every SLO and checked hour of the final
    round, nominal and stressed (≤ 1: every SLO met; NaN: only batch classes)."""
    ratios = []
    results = [r for result in checked.checks[-1].values()
               for r in (result, result.stress) if r is not None]
    for result in results:
        for row in result.by_class.itertuples():
            for metric in ("ttft", "tpot"):
                limit = getattr(row, f"{metric}_limit_ms")
                if limit is not None and not pd.isna(limit):
                    column = [c for c in result.by_class.columns
                              if c.endswith(f"_{metric}_ms_high")][0]
                    ratios.append(getattr(row, column) / limit)
    return float(max(ratios)) if ratios else float("nan")


def _row(rate: float, name: str, checked: CheckedPlan | InputError) -> dict[str, object]:
    if isinstance(checked, InputError):
        # the reason's first clause: the full message lists every candidate
        return {"rate_rps": rate, "plan": name,
                "fleet": f"infeasible: {checked.reason.split(' (')[0]}",
                "gpus": np.nan, "cost_usd_per_h": np.nan, "cost_usd_per_1m_tok": np.nan,
                "g_co2_per_1m_tok": np.nan, "rounds": 0, "passed": False,
                "worst_slo_ratio": np.nan}
    totals = checked.plan.totals()
    return {"rate_rps": rate, "plan": name, "fleet": checked.plan.describe(),
            "gpus": totals["gpus"], "cost_usd_per_h": totals["cost_usd_per_h"],
            "cost_usd_per_1m_tok": totals["cost_usd_per_1m_tok"],
            "g_co2_per_1m_tok": totals["g_co2_per_1m_tok"], "rounds": checked.rounds,
            "passed": checked.passed, "worst_slo_ratio": worst_slo_ratio(checked)}


def compare_at_rates(problem: PlanProblem, capacities: pd.DataFrame, rates: list[float],
                     groups: dict[str, list[int] | None], *, best_single: bool = True,
                     seeds: tuple[int, ...] = (0, 1), duration_s: float = CHECK_DURATION_S,
                     max_rounds: int = 5, **solve_options: Unpack[SolveOptions]) -> pd.DataFrame:
    """At every demand in ``rates``: each group's plan (``None``: every candidate under the
    problem's caps — the hybrid; a list: those candidates only, without caps — a baseline),
    and with ``best_single`` the cheapest single configuration (by the objective's value
    before checking), each solved, checked by simulation and re-planned until it passes
    (:func:`hgresearch.plan.check.plan_and_check`). Rows: :data:`COMPARISON_COLUMNS`; an
    infeasible plan's row names why."""
    rows = []
    for rate in rates:
        at_rate = dataclasses.replace(problem, demand=Demand.steady(rate))
        named: dict[str, PlanProblem] = {
            name: at_rate if keep is None else restricted(at_rate, keep)
            for name, keep in groups.items()}
        if best_single:
            values: dict[int, float] = {}
            for i in range(len(problem.candidates)):
                single = restricted(at_rate, [i])
                try:
                    plan = solve(single, capacities, **solve_options)
                except InputError:
                    continue
                values[i] = float(plan.cost_usd_per_h.sum()) \
                    if solve_options.get("objective", "cost") == "cost" \
                    else float(plan.carbon_g_per_h.sum())
            if values:
                named["best single configuration"] = restricted(
                    at_rate, [min(values, key=lambda i: values[i])])
        for name, sub in named.items():
            try:
                checked: CheckedPlan | InputError = plan_and_check(
                    sub, capacities, seeds=seeds, duration_s=duration_s,
                    max_rounds=max_rounds, **solve_options)
            except InputError as err:
                checked = err
            rows.append(_row(rate, name, checked))
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def day_table(plan: Plan) -> pd.DataFrame:
    """A day's plan hour by hour, long form: per hour and configuration the replicas and GPUs,
    with the hour's demand, grid intensity, cost and carbon."""
    grid = grid_g_per_kwh_by_hour(plan.problem.carbon, plan.hours)
    rows = []
    for h in range(plan.hours):
        for j, candidate in enumerate(plan.problem.candidates):
            rows.append({"hour": h, "config": candidate.hardware,
                         "gpu_name": candidate.gpu_name, "num_gpus": candidate.num_gpus,
                         "replicas": int(plan.replicas[j, h]),
                         "gpus": int(plan.replicas[j, h]) * candidate.num_gpus,
                         "rate_rps": float(plan.traffic_rps[:, j, h].sum()),
                         "demand_rps": float(plan.problem.demand.rate_rps[h]),
                         "grid_g_per_kwh": float(grid[h]),
                         "cost_usd_per_h": float(plan.cost_usd_per_h[h]),
                         "carbon_g_per_h": float(plan.carbon_g_per_h[h])})
    return pd.DataFrame(rows)


def hourly_checks(checked: CheckedPlan) -> pd.DataFrame:
    """The final round's simulated check of every hour: per hour and SLO class the achieved
    percentiles and the verdict."""
    return pd.concat([result.by_class.assign(hour=h, rate_rps=result.rate_rps)
                      for h, result in checked.checks[-1].items()], ignore_index=True)


def checked_pareto_front(problem: PlanProblem, capacities: pd.DataFrame, *, points: int = 6,
                         seeds: tuple[int, ...] = (0, 1),
                         duration_s: float = CHECK_DURATION_S,
                         max_rounds: int = 5, **settings: Unpack[PlanSettings]
                         ) -> pd.DataFrame:
    """The cost–carbon Pareto front (ε-constraint, as :func:`hgresearch.plan.baselines.
    pareto_front`) of plans that each passed their simulated check: the cheapest and the
    lowest-carbon plan and the cheapest under ``points - 2`` carbon budgets between them, each
    re-planned until its SLOs hold (a budget no passing plan meets is dropped); dominated plans
    dropped. One row per point, by carbon, with the rounds each took."""
    def run(objective: str, carbon_budget_g: float | None = None) -> CheckedPlan:
        return plan_and_check(problem, capacities, seeds=seeds, duration_s=duration_s,
                              max_rounds=max_rounds, objective=objective,
                              carbon_budget_g=carbon_budget_g, **settings)

    checked = [run(objective="cost"), run(objective="carbon")]
    high = float(checked[0].plan.carbon_g_per_h.sum())
    low = float(checked[1].plan.carbon_g_per_h.sum())
    for budget in np.linspace(low, high, points)[1:-1]:
        try:
            checked.append(run(objective="cost", carbon_budget_g=float(budget) * (1 + 1e-9)))
        except InputError:
            continue  # after re-planning no plan fits this budget
    passed = [c for c in checked if c.passed]
    rounds = {id(c.plan): c.rounds for c in passed}
    rows = []
    for i, plan in enumerate(nondominated([c.plan for c in passed])):
        totals = plan.totals()
        rows.append({"point": i + 1, "fleet": plan.describe() if plan.hours == 1 else "hourly",
                     "gpus": totals["gpus"], "cost_usd_per_h": totals["cost_usd_per_h"],
                     "cost_usd_per_1m_tok": totals["cost_usd_per_1m_tok"],
                     "g_co2_per_1m_tok": totals["g_co2_per_1m_tok"],
                     "rounds": rounds[id(plan)], "passed": True})
    return pd.DataFrame(rows)


#: Plan names of :func:`compare_at_rates`'s groups that :func:`hybrid_advantage` compares.
HYBRID_PLAN = "hybrid"
SINGLE_HARDWARE_PLANS = ("H100-PCIe only", "RTX-4090 only")
#: Columns of :func:`hybrid_advantage`.
ADVANTAGE_COLUMNS = ["scenario", "rate_rps", HYBRID_PLAN, *SINGLE_HARDWARE_PLANS, "saving",
                     "saving_vs_h100"]


def hybrid_advantage(sweep: pd.DataFrame) -> pd.DataFrame:
    """Per scenario and demand of a :func:`compare_at_rates` sweep (with a ``scenario``
    column): the cost per 1M tokens of the hybrid and of each single-hardware fleet, and the
    hybrid's ``saving = 1 - hybrid / min(single-hardware fleets)`` (> 0: cheaper than both) and
    ``saving_vs_h100 = 1 - hybrid / H100-only``. A fleet with no plan at a demand, or whose plan
    failed its simulated check, is NaN there (the cheaper of the others then counts): a plan
    that does not hold its SLOs is no price."""
    held = sweep.assign(cost_usd_per_1m_tok=sweep.cost_usd_per_1m_tok.where(
        sweep.passed.astype(bool)))
    wide = held.pivot_table(index=["scenario", "rate_rps"], columns="plan",
                            values="cost_usd_per_1m_tok", sort=False,
                            dropna=False).reset_index()
    for plan in (HYBRID_PLAN, *SINGLE_HARDWARE_PLANS):
        if plan not in wide:
            wide[plan] = np.nan
    cheapest_single = wide[list(SINGLE_HARDWARE_PLANS)].min(axis=1)
    wide["saving"] = 1 - wide[HYBRID_PLAN] / cheapest_single
    wide["saving_vs_h100"] = 1 - wide[HYBRID_PLAN] / wide[SINGLE_HARDWARE_PLANS[0]]
    return wide[ADVANTAGE_COLUMNS]


@dataclasses.dataclass(frozen=True)
class HybridAdvantageSummary:
    """:func:`summarize_hybrid_advantage`: at how many of the compared points the hybrid is
    cheaper than both single-hardware fleets, by how much at most, and its saving against the
    H100-only fleet (fractions)."""

    points: int
    cheaper_than_both: int
    max_saving: float | None
    saving_vs_h100_min: float
    saving_vs_h100_max: float


def summarize_hybrid_advantage(advantage: pd.DataFrame) -> HybridAdvantageSummary:
    """Summarise a :func:`hybrid_advantage` table (or the CSV it was written to)."""
    beats = advantage[advantage.saving > 1e-9]
    return HybridAdvantageSummary(
        points=len(advantage), cheaper_than_both=len(beats),
        max_saving=float(beats.saving.max()) if len(beats) else None,
        saving_vs_h100_min=float(advantage.saving_vs_h100.min()),
        saving_vs_h100_max=float(advantage.saving_vs_h100.max()))
