"""Variants of one planning problem, each solved by :func:`hgresearch.plan.solve.solve`: the
single-hardware baselines a plan is compared with, and the cost–carbon Pareto front.
"""

from __future__ import annotations

import dataclasses
from typing import Unpack

import numpy as np
import pandas as pd

from hgresearch.errors import InputError
from hgresearch.plan.fleet_plan import Plan
from hgresearch.plan.inputs import PlanProblem
from hgresearch.plan.solve import PlanSettings, solve


def restricted(problem: PlanProblem, keep: list[int], *, drop_caps: bool = True
               ) -> PlanProblem:
    """The problem with only the candidates ``keep`` (indices); ``drop_caps`` removes every
    availability cap (a baseline: what the demand costs on that hardware alone)."""
    candidates = tuple(problem.candidates[i] for i in keep)
    if drop_caps:
        candidates = tuple(dataclasses.replace(c, max_replicas=None, max_replicas_by_hour=None)
                           for c in candidates)
    return dataclasses.replace(problem, candidates=candidates,
                               gpu_caps=() if drop_caps else problem.gpu_caps)


def baselines(problem: PlanProblem, capacities: pd.DataFrame, *, objective: str = "cost",
              drop_caps: bool = True, **settings: Unpack[PlanSettings]
              ) -> dict[str, Plan | InputError]:
    """Plans on one GPU type only (``H100-PCIe only``: every candidate on that GPU) and on each
    single configuration (``only 2x RTX-4090``), by default without the availability caps;
    an infeasible one maps to its error. ``best single configuration`` is the single
    configuration with the lowest objective."""
    singles = {f"only {c.hardware}": _try(restricted(problem, [i], drop_caps=drop_caps),
                                          capacities, objective, settings)
               for i, c in enumerate(problem.candidates)}
    out: dict[str, Plan | InputError] = {}
    gpus = list(dict.fromkeys(c.gpu_name for c in problem.candidates))
    for gpu in gpus:
        keep = [i for i, c in enumerate(problem.candidates) if c.gpu_name == gpu]
        # a GPU type with one configuration is that configuration's plan: solved once
        out[f"{gpu} only"] = (singles[f"only {problem.candidates[keep[0]].hardware}"]
                              if len(keep) == 1 else
                              _try(restricted(problem, keep, drop_caps=drop_caps), capacities,
                                   objective, settings))
    out.update(singles)
    feasible = {k: v for k, v in singles.items() if isinstance(v, Plan)}
    if feasible:
        best = min(feasible, key=lambda k: _objective_value(feasible[k], objective, settings))
        out["best single configuration"] = feasible[best]
    return out


def _try(problem: PlanProblem, capacities: pd.DataFrame, objective: str,
         settings: PlanSettings) -> Plan | InputError:
    """The plan, or the error that says why there is none."""
    try:
        return solve(problem, capacities, objective=objective, **settings)
    except InputError as err:
        return err


def _objective_value(plan: Plan, objective: str, settings: PlanSettings) -> float:
    if objective == "cost":
        return float(plan.cost_usd_per_h.sum())
    if objective == "carbon":
        return float(plan.carbon_g_per_h.sum())
    price = float(settings.get("carbon_price_usd_per_kg", 0.0))
    return float(plan.cost_usd_per_h.sum() + price * plan.carbon_g_per_h.sum() / 1000.0)


def pareto_front(problem: PlanProblem, capacities: pd.DataFrame, *, points: int = 6,
                 **settings: Unpack[PlanSettings]) -> list[Plan]:
    """Cost–carbon Pareto front by the ε-constraint method: the cheapest plan, the
    lowest-carbon plan, and the cheapest plan under ``points - 2`` carbon budgets evenly
    between them; dominated and repeated plans are dropped; ordered by carbon."""
    cheapest = solve(problem, capacities, objective="cost", **settings)
    greenest = solve(problem, capacities, objective="carbon", **settings)
    plans = [cheapest, greenest]
    high, low = float(cheapest.carbon_g_per_h.sum()), float(greenest.carbon_g_per_h.sum())
    for budget in np.linspace(low, high, points)[1:-1]:
        plans.append(solve(problem, capacities, objective="cost",
                           carbon_budget_g=float(budget) * (1 + 1e-9), **settings))
    return nondominated(plans)


def nondominated(plans: list[Plan]) -> list[Plan]:
    """The plans no other plan beats on both total cost and total carbon, by carbon (of equal
    plans, the first)."""
    front: list[Plan] = []
    for plan in sorted(plans, key=lambda p: (float(p.carbon_g_per_h.sum()),
                                             float(p.cost_usd_per_h.sum()))):
        cost = float(plan.cost_usd_per_h.sum())
        if front and cost >= float(front[-1].cost_usd_per_h.sum()) - 1e-9:
            continue  # dominated by (or equal to) a lower-carbon plan
        front.append(plan)
    return front
