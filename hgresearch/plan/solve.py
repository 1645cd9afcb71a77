"""The fleet plan as a mixed-integer program (``scipy.optimize.milp``, HiGHS).

Variables, per hour ``h``: the integer replica count ``n[j,h]`` of every candidate ``j``, and
the continuous request rate ``x[k,j,h]`` (req/s) of traffic class ``k`` routed to ``j``
(only where ``j`` serves ``k`` at all: rate > 0). Constraints:

* demand: ``sum_j x[k,j,h] = d[k,h]`` (the class's share of the hour's rate);
* capacity: ``sum_k x[k,j,h] / cap[k,j] <= n[j,h]``: each replica's mix of classes, each as a
  fraction of the SLO-safe rate one replica sustains for it
  (:mod:`hgresearch.plan.replica_rates`), adds up to at most one replica (the load model of
  Mélange's ILP);
* availability: ``n[j,h] <= `` the candidate's cap (per hour if given), and per GPU type
  ``sum_j gpus_j × n[j,h] <= `` its GPU cap (per hour if given);
* optionally a carbon or cost budget (the ε-constraint of
  :func:`hgresearch.plan.baselines.pareto_front`).

Objective: cost (USD), carbon (g CO2e), or ``weighted`` = cost + carbon price × kg CO2e,
summed over the hours; a negligible multiple of the other metric breaks ties. A problem
without a solution is explained (:func:`explain_infeasible`) as an :class:`InputError` naming
the binding constraint, never a solver status.

The program's numbers come from :mod:`hgresearch.plan.matrices`, the result is a
:class:`~hgresearch.plan.fleet_plan.Plan`; the single-hardware baselines and the Pareto front
solve variants of the problem (:mod:`hgresearch.plan.baselines`).
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, TypedDict

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

from hgresearch.errors import InputError
from hgresearch.plan.fleet_plan import Plan
from hgresearch.plan.inputs import Demand, PlanProblem
from hgresearch.plan.matrices import Matrices, matrices
from hgresearch.units import SECONDS_PER_HOUR

if TYPE_CHECKING:
    from hgresearch.sim.calibrate import Calibration

OBJECTIVES = ("cost", "carbon", "weighted")
#: Fraction of its slow-end capacity a replica is kept free of (loaded to at most 90 %): the
#: capacities are estimates (the steady-state search stops within 1 % and its percentiles come
#: from finite runs; the check's routing split is not the single replica's Poisson stream),
#: and a replica planned to exactly its SLO rate misses its SLO half the time they err.
DEFAULT_HEADROOM = 0.1
#: Tie-break weight of the other metric, relative to the objective's scale.
TIE_BREAK = 1e-6


class PlanSettings(TypedDict, total=False):
    """The keyword options of :func:`solve` but the objective and the budgets: what the
    functions that solve variants of one problem pass on unchanged
    (:mod:`hgresearch.plan.baselines`, :mod:`hgresearch.plan.hybrid_study`)."""

    carbon_price_usd_per_kg: float
    capacity_column: str
    capacity_scale: dict[tuple[str, str], float] | None
    capacity_source: str
    step_times: dict[str, dict[str, float]] | None
    ttft_offsets_ms: dict[str, float] | None
    fits: dict[str, Calibration] | None
    step_time_factor: float
    headroom: float
    time_limit_s: float


class SolveOptions(PlanSettings, total=False):
    """Every keyword option of :func:`solve` (:func:`hgresearch.plan.check.plan_and_check`
    passes them on)."""

    objective: str
    carbon_budget_g: float | None
    cost_budget_usd: float | None


def _objective_vectors(m: Matrices, objective: str, carbon_price_usd_per_kg: float
                       ) -> np.ndarray:
    cost = np.nan_to_num(np.repeat(m.cost_usd_per_h[:, None], m.demand_rps.shape[1], axis=1))
    carbon = m.carbon_g_per_h
    if objective == "cost":
        main, other = cost, carbon
    elif objective == "carbon":
        main, other = carbon, cost
    elif objective == "weighted":
        main, other = cost + carbon_price_usd_per_kg * carbon / 1000.0, carbon
    else:
        raise InputError(f"unknown objective {objective!r}; expected one of "
                         f"{', '.join(OBJECTIVES)}", field="objective")
    scale = (main.max() or 1.0) / (other.max() or 1.0)
    vector: np.ndarray = (main + TIE_BREAK * scale * other).ravel()
    return vector


def solve(problem: PlanProblem, capacities: pd.DataFrame, *, objective: str = "cost",
          carbon_price_usd_per_kg: float = 0.0, carbon_budget_g: float | None = None,
          cost_budget_usd: float | None = None, capacity_column: str = "low_rps",
          capacity_scale: dict[tuple[str, str], float] | None = None,
          capacity_source: str = "", step_times: dict[str, dict[str, float]] | None = None,
          ttft_offsets_ms: dict[str, float] | None = None,
          fits: dict[str, Calibration] | None = None, step_time_factor: float = 1.0,
          headroom: float = 0.0, time_limit_s: float = 60.0) -> Plan:
    """The optimal plan (see the module docstring); budgets are totals over the hours.
    ``capacity_source``, ``step_times``, ``ttft_offsets_ms`` and ``fits`` describe the replicas the
    capacities assumed (:func:`hgresearch.plan.replica_rates.replica_settings`); the plan keeps them
    for its check and its fleet file; ``step_time_factor`` is the slow end the capacities'
    ``capacity_column`` assumed (the plan's stress check runs it). Every replica is loaded to at
    most ``1 - headroom`` of that capacity (0: the program as is; the command line and notebook
    08 use :data:`DEFAULT_HEADROOM`).

    Without a budget the hours do not interact (the objective is a sum over hours, every
    constraint is within an hour), so a profile is solved hour by hour: the same optimum,
    much faster than one program over the day.

    Raises :class:`InputError` naming the binding constraint when no plan meets the demand.
    """
    started = time.perf_counter()
    if not 0 <= headroom < 1:
        raise InputError(f"expected a headroom in [0, 1), got {headroom}", field="headroom")
    m = matrices(problem, capacities, capacity_column=capacity_column,
                 capacity_scale=capacity_scale, headroom=headroom)
    options: SolveOptions = {
        "objective": objective, "carbon_price_usd_per_kg": carbon_price_usd_per_kg,
        "capacity_column": capacity_column, "capacity_scale": capacity_scale,
        "capacity_source": capacity_source, "step_times": step_times,
        "ttft_offsets_ms": ttft_offsets_ms, "fits": fits, "step_time_factor": step_time_factor,
        "headroom": headroom, "time_limit_s": time_limit_s}
    if problem.demand.hours > 1 and carbon_budget_g is None and cost_budget_usd is None:
        return _solve_by_hour(problem, capacities, m, started, options)
    _check_servable(problem, m)
    num_classes, num_configs = m.cap_rps.shape
    hours = m.demand_rps.shape[1]
    num_n = num_configs * hours
    pairs = [(k, j, h) for h in range(hours) for k in range(num_classes)
             for j in range(num_configs) if m.cap_rps[k, j] > 0 and m.demand_rps[k, h] > 0]
    num_x = len(pairs)
    c = np.concatenate([_objective_vectors(m, objective, carbon_price_usd_per_kg),
                        np.zeros(num_x)])
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    lower: list[float] = []
    upper: list[float] = []
    row = 0
    demand_row: dict[tuple[int, int], int] = {}
    for h in range(hours):
        for k in range(num_classes):
            if m.demand_rps[k, h] > 0:
                demand_row[(k, h)] = row
                lower.append(m.demand_rps[k, h])
                upper.append(m.demand_rps[k, h])
                row += 1
    capacity_row: dict[tuple[int, int], int] = {}
    for h in range(hours):
        for j in range(num_configs):
            capacity_row[(j, h)] = row
            rows.append(row)
            cols.append(j * hours + h)
            vals.append(-1.0)
            lower.append(-np.inf)
            upper.append(0.0)
            row += 1
    for i, (k, j, h) in enumerate(pairs):
        rows += [demand_row[(k, h)], capacity_row[(j, h)]]
        cols += [num_n + i, num_n + i]
        vals += [1.0, 1.0 / m.cap_rps[k, j]]
    for _, members, caps in m.gpu_caps:
        for h in range(hours):
            for j in np.flatnonzero(members).tolist():
                rows.append(row)
                cols.append(j * hours + h)
                vals.append(members[j])
            lower.append(-np.inf)
            upper.append(caps[h])
            row += 1
    for budget, vector in ((carbon_budget_g, m.carbon_g_per_h.ravel()),
                           (cost_budget_usd, np.nan_to_num(np.repeat(
                               m.cost_usd_per_h[:, None], hours, axis=1)).ravel())):
        if budget is not None:
            for idx in range(num_n):
                rows.append(row)
                cols.append(idx)
                vals.append(vector[idx])
            lower.append(-np.inf)
            upper.append(budget)
            row += 1
    a = sparse.csr_array((vals, (rows, cols)), shape=(row, num_n + num_x))
    integrality = np.concatenate([np.ones(num_n), np.zeros(num_x)])
    bounds = Bounds(np.zeros(num_n + num_x),
                    np.concatenate([m.max_replicas.ravel(), np.full(num_x, np.inf)]))
    result = milp(c, constraints=LinearConstraint(a, lower, upper), integrality=integrality,
                  bounds=bounds, options={"time_limit": time_limit_s, "mip_rel_gap": 1e-7})
    if result.status == 1 and result.x is None:
        raise InputError(f"the solver found no plan within {time_limit_s:g} s",
                         field="time_limit_s")
    if result.x is None:
        raise explain_infeasible(problem, m, carbon_budget_g, cost_budget_usd)
    n = np.round(result.x[:num_n]).astype(int).reshape(num_configs, hours)
    traffic = np.zeros((num_classes, num_configs, hours))
    for i, (k, j, h) in enumerate(pairs):
        traffic[k, j, h] = max(result.x[num_n + i], 0.0)
    return _plan(problem, options, m, n, traffic, started)


def hour_problem(problem: PlanProblem, hour: int) -> PlanProblem:
    """The one-hour problem of ``hour`` of a profile (its demand, caps and grid intensity)."""
    def at(value: int | tuple[int, ...]) -> int:
        return value[hour] if isinstance(value, tuple) else value

    candidates = tuple(dataclasses.replace(
        c, max_replicas_by_hour=None if c.max_replicas_by_hour is None
        else (c.max_replicas_by_hour[hour],)) for c in problem.candidates)
    carbon = problem.carbon
    if carbon.hourly_g_per_kwh is not None:
        carbon = dataclasses.replace(carbon, hourly_g_per_kwh=(carbon.hourly_g_per_kwh[hour],))
    return dataclasses.replace(
        problem, demand=Demand((problem.demand.rate_rps[hour],)), candidates=candidates,
        carbon=carbon, gpu_caps=tuple((gpu, at(cap)) for gpu, cap in problem.gpu_caps))


def _solve_by_hour(problem: PlanProblem, capacities: pd.DataFrame, m: Matrices,
                   started: float, options: SolveOptions) -> Plan:
    num_classes, num_configs = m.cap_rps.shape
    hours = problem.demand.hours
    replicas = np.zeros((num_configs, hours), dtype=int)
    traffic = np.zeros((num_classes, num_configs, hours))
    for h in range(hours):
        if problem.demand.rate_rps[h] <= 0:
            continue
        try:
            part = solve(hour_problem(problem, h), capacities, **options)
        except InputError as err:
            raise InputError(f"hour {h}: {err.reason}", field=err.field) from None
        replicas[:, h] = part.replicas[:, 0]
        traffic[:, :, h] = part.traffic_rps[:, :, 0]
    return _plan(problem, options, m, replicas, traffic, started)


def _plan(problem: PlanProblem, options: SolveOptions, m: Matrices, n: np.ndarray,
          traffic: np.ndarray, started: float) -> Plan:
    cost_h = np.nan_to_num(m.cost_usd_per_h) @ n
    carbon_h = (m.carbon_g_per_h * n).sum(axis=0)
    tokens_h = (m.demand_rps * m.tokens_per_request[:, None]).sum(axis=0) * SECONDS_PER_HOUR
    return Plan(problem=problem, objective=options.get("objective", "cost"), labels=m.labels,
                classes=m.classes, replicas=n, traffic_rps=traffic, cap_rps=m.cap_rps,
                cost_usd_per_h=cost_h, carbon_g_per_h=carbon_h, tokens_per_h=tokens_h,
                replica_cost_usd_per_h=np.nan_to_num(m.cost_usd_per_h),
                replica_carbon_g_per_h=m.carbon_g_per_h,
                solve_s=time.perf_counter() - started,
                capacity_source=options.get("capacity_source", ""),
                step_times=dict(options.get("step_times") or {}),
                ttft_offsets_ms=dict(options.get("ttft_offsets_ms") or {}),
                fits=dict(options.get("fits") or {}),
                step_time_factor=float(options.get("step_time_factor", 1.0)),
                headroom=float(options.get("headroom", 0.0)),
                nominal_cap_rps=m.nominal_rps, slow_cap_rps=m.slow_rps)


#: Why a candidate cannot serve a class at any rate, by the capacity table's ``limited_by``
#: (:mod:`hgresearch.plan.replica_rates`): these say more than "misses its SLO".
CANNOT_SERVE = {"memory": "the weights leave no KV cache room for one request",
                "tensor parallelism": "vLLM cannot split the model's attention heads over "
                                      "its GPUs"}


def _check_servable(problem: PlanProblem, m: Matrices) -> None:
    """Every class with demand must be servable by some candidate at all; the error names why
    each candidate cannot (:data:`CANNOT_SERVE`) where the capacity table says."""
    for k, name in enumerate(m.classes):
        if m.demand_rps[k].max() > 0 and not (m.cap_rps[k] > 0).any():
            limits = m.limited_by[k] if m.limited_by is not None else [""] * len(m.labels)
            reasons = {m.labels[j]: CANNOT_SERVE[str(limit)]
                       for j, limit in enumerate(limits) if str(limit) in CANNOT_SERVE}
            if len(reasons) == len(m.labels):
                raise InputError(f"class {name!r}: no candidate configuration can serve it: "
                                 + "; ".join(f"{label}: {why}" for label, why in reasons.items()),
                                 field="candidates")
            slo = next(s for s in problem.slo_classes if s.name == m.slo_of_class[k])
            why = "".join(f"; {label}: {reason}" for label, reason in reasons.items())
            raise InputError(f"class {name!r}: no candidate configuration meets its SLO "
                             f"({slo.describe()}) even at a low rate, or holds one request in "
                             f"its KV cache (candidates: {', '.join(m.labels)}){why}",
                             field="slo_classes")


def max_servable_fraction(m: Matrices, hour: int) -> tuple[float, list[str]]:
    """Largest fraction of the hour's demand the candidates can serve within the SLOs under
    the caps (LP relaxation: replicas continuous), and the caps binding at that point."""
    num_classes, num_configs = m.cap_rps.shape
    pairs = [(k, j) for k in range(num_classes) for j in range(num_configs)
             if m.cap_rps[k, j] > 0 and m.demand_rps[k, hour] > 0]
    # variables: lambda, n_j, x_pairs; maximise lambda
    size = 1 + num_configs + len(pairs)
    c = np.zeros(size)
    c[0] = -1.0
    a_eq = np.zeros((num_classes, size))
    b_eq = np.zeros(num_classes)
    a_ub: list[np.ndarray] = []
    b_ub: list[float] = []
    for k in range(num_classes):
        a_eq[k, 0] = -m.demand_rps[k, hour]
    cap_rows = np.zeros((num_configs, size))
    for j in range(num_configs):
        cap_rows[j, 1 + j] = -1.0
    for i, (k, j) in enumerate(pairs):
        a_eq[k, 1 + num_configs + i] = 1.0
        cap_rows[j, 1 + num_configs + i] = 1.0 / m.cap_rps[k, j]
    a_ub.extend(cap_rows)
    b_ub.extend([0.0] * num_configs)
    for _, members, caps in m.gpu_caps:
        row = np.zeros(size)
        row[1:1 + num_configs] = members
        a_ub.append(row)
        b_ub.append(caps[hour])
    bounds = [(0, None)] + [(0, float(u)) for u in m.max_replicas[:, hour]] \
        + [(0, None)] * len(pairs)
    result = linprog(c, A_ub=np.array(a_ub), b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=bounds,
                     method="highs")
    if result.x is None:
        return 0.0, []
    n = result.x[1:1 + num_configs]
    binding = [f"{m.labels[j].split(' on ')[-1]} <= {m.max_replicas[j, hour]:g} replicas"
               for j in range(num_configs) if n[j] >= m.max_replicas[j, hour] - 1e-6]
    for gpu, members, caps in m.gpu_caps:
        if members @ n >= caps[hour] - 1e-6:
            binding.append(f"{gpu} <= {caps[hour]:g} GPUs")
    return float(result.x[0]), binding


def explain_infeasible(problem: PlanProblem, m: Matrices, carbon_budget_g: float | None,
                       cost_budget_usd: float | None) -> InputError:
    """An :class:`InputError` naming what makes the program infeasible."""
    for h in range(m.demand_rps.shape[1]):
        fraction, binding = max_servable_fraction(m, h)
        if fraction < 1 - 1e-9:
            total = float(m.demand_rps[:, h].sum())
            when = f"hour {h}: " if m.demand_rps.shape[1] > 1 else ""
            return InputError(
                f"{when}demand of {total:g} req/s exceeds what the candidates serve within the "
                f"SLOs under the availability caps: at most {fraction * total:.3g} req/s "
                f"(binding: {'; '.join(binding) or 'the caps'}); raise a cap or add a "
                f"candidate", field="caps")
    if carbon_budget_g is not None:
        return InputError(f"no plan emits at most {carbon_budget_g:.6g} g CO2e: the carbon "
                          "budget is below the lowest-carbon plan", field="carbon_budget_g")
    if cost_budget_usd is not None:
        return InputError(f"no plan costs at most {cost_budget_usd:.6g} USD: the cost budget is "
                          "below the cheapest plan", field="cost_budget_usd")
    return InputError("no plan meets the demand (integer replica counts under the caps)",
                      field="caps")
