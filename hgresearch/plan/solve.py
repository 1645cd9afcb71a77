"""The fleet plan as a mixed-integer program (``scipy.optimize.milp``, HiGHS).

Variables, per hour ``h``: the integer replica count ``n[j,h]`` of every candidate ``j``, and
the continuous request rate ``x[k,j,h]`` (req/s) of traffic class ``k`` routed to ``j``
(only where ``j`` serves ``k`` at all: capacity > 0). Constraints:

* demand: ``sum_j x[k,j,h] = d[k,h]`` (the class's share of the hour's rate);
* capacity: ``sum_k x[k,j,h] / cap[k,j] <= n[j,h]``: each replica's mix of classes, each as a
  fraction of the SLO-safe rate one replica sustains for it (:mod:`hgresearch.plan.replica_rates`),
  adds up to at most one replica (the load model of Mélange's ILP);
* availability: ``n[j,h] <= `` the candidate's cap (per hour if given), and per GPU type
  ``sum_j gpus_j × n[j,h] <= `` its GPU cap (per hour if given);
* optionally a carbon or cost budget (the ε-constraint of :func:`pareto_front`).

Objective: cost (USD), carbon (g CO2e), or ``weighted`` = cost + carbon price × kg CO2e,
summed over the hours; a negligible multiple of the other metric breaks ties. A problem
without a solution is explained (:func:`explain_infeasible`) as an :class:`InputError` naming
the binding constraint, never a solver status.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

from hgresearch.errors import InputError
from hgresearch.identity import hardware_label
from hgresearch.plan.economics import replica_carbon_g_per_h, replica_cost_usd_per_h
from hgresearch.plan.inputs import Demand, PlanProblem, class_name, validate
from hgresearch.units import SECONDS_PER_HOUR, TOKENS_PER_MILLION

OBJECTIVES = ("cost", "carbon", "weighted")
#: Tie-break weight of the other metric, relative to the objective's scale.
TIE_BREAK = 1e-6


@dataclass
class Matrices:
    """The numbers of a problem the program is built from."""

    labels: list[str]
    classes: list[str]
    slo_of_class: list[str]
    cap_rps: np.ndarray            # (K, J) SLO-safe req/s per replica
    cost_usd_per_h: np.ndarray     # (J,) NaN: not offered
    carbon_g_per_h: np.ndarray     # (J, H)
    demand_rps: np.ndarray         # (K, H)
    tokens_per_request: np.ndarray  # (K,)
    max_replicas: np.ndarray       # (J, H) upper bounds
    gpu_caps: list[tuple[str, np.ndarray, np.ndarray]]  # (gpu, member mask·gpus (J,), cap (H,))
    cap_notes: list[str]


def matrices(problem: PlanProblem, capacities: pd.DataFrame, *,
             capacity_column: str = "low_rps",
             capacity_scale: dict[tuple[str, str], float] | None = None) -> Matrices:
    """The program's numbers: capacities from ``capacities`` (:func:`hgresearch.plan.replica_rates.
    replica_rate_table`, column ``capacity_column``, times ``capacity_scale[(class, config)]``),
    prices and carbon from the catalogs, caps from the problem."""
    validate(problem)
    hours = problem.demand.hours
    labels = [c.label(problem.model) for c in problem.candidates]
    keys = problem.class_keys()
    classes = [class_name(s, length) for s, length in keys]
    table = capacities.set_index(["class", "config"])[capacity_column]
    cap = np.zeros((len(classes), len(labels)))
    for k, name in enumerate(classes):
        for j, label in enumerate(labels):
            if (name, label) not in table.index:
                raise InputError(f"the capacity table has no row for class {name!r} on "
                                 f"{label!r}", field="capacities")
            cap[k, j] = float(table[(name, label)]) * (capacity_scale or {}).get((name, label),
                                                                                 1.0)
    share = np.array([s.share * length.fraction for s, length in keys])
    share_total = sum(s.share for s in problem.slo_classes) \
        * sum(length.fraction for length in problem.length_classes)
    demand = np.outer(share / share_total, np.asarray(problem.demand.rate_rps, dtype=float))
    cost = np.array([replica_cost_usd_per_h(c, problem.prices, problem.carbon.tdp)
                     for c in problem.candidates])
    carbon = np.array([replica_carbon_g_per_h(c, problem.carbon, hours)
                       for c in problem.candidates])
    # An unlimited candidate never needs more replicas than serving every class alone takes.
    with np.errstate(divide="ignore", invalid="ignore"):
        alone = np.where(cap[:, :, None] > 0, demand[:, None, :] / cap[:, :, None], 0.0)
    enough = np.ceil(alone.sum(axis=0)) + 1  # (J, H)
    upper = enough.copy()
    notes = []
    for j, c in enumerate(problem.candidates):
        if c.max_replicas is not None:
            upper[j] = np.minimum(upper[j], c.max_replicas)
            notes.append(f"{c.hardware} <= {c.max_replicas} replicas")
        if c.max_replicas_by_hour is not None:
            upper[j] = np.minimum(upper[j], np.asarray(c.max_replicas_by_hour))
            notes.append(f"{c.hardware} <= {list(c.max_replicas_by_hour)} replicas by hour")
        if math.isnan(cost[j]):
            upper[j] = 0
            notes.append(f"{c.hardware} not offered under prices {problem.prices.describe()}")
    gpu_caps = []
    from hgresearch.data.catalogs import normalize_gpu_name
    for gpu, cap_value in problem.gpu_caps:
        name = normalize_gpu_name(gpu, field="gpu_caps")
        members = np.array([c.num_gpus if normalize_gpu_name(c.gpu_name) == name else 0
                            for c in problem.candidates], dtype=float)
        caps = np.asarray(cap_value if isinstance(cap_value, tuple) else (cap_value,) * hours,
                          dtype=float)
        gpu_caps.append((name, members, caps))
        notes.append(f"{name} <= {cap_value if isinstance(cap_value, int) else list(cap_value)}"
                     f" GPUs")
    tokens = np.array([length.tokens for _, length in keys], dtype=float)
    return Matrices(labels=labels, classes=classes, slo_of_class=[s.name for s, _ in keys],
                    cap_rps=cap, cost_usd_per_h=cost, carbon_g_per_h=carbon, demand_rps=demand,
                    tokens_per_request=tokens, max_replicas=np.maximum(upper, 0),
                    gpu_caps=gpu_caps, cap_notes=notes)


@dataclass
class Plan:
    """A solved plan: replicas per configuration and hour, traffic per class, configuration and
    hour, and what it costs and emits."""

    problem: PlanProblem
    objective: str
    labels: list[str]
    classes: list[str]
    replicas: np.ndarray        # (J, H) int
    traffic_rps: np.ndarray     # (K, J, H)
    cap_rps: np.ndarray         # (K, J) the capacities the plan assumed
    cost_usd_per_h: np.ndarray  # (H,)
    carbon_g_per_h: np.ndarray  # (H,)
    tokens_per_h: np.ndarray    # (H,)
    replica_cost_usd_per_h: np.ndarray  # (J,)
    replica_carbon_g_per_h: np.ndarray  # (J, H)
    solve_s: float
    capacity_source: str = ""
    step_times: dict[str, dict[str, float]] = field(default_factory=dict)
    #: Constant ms added to every TTFT per configuration label (the capacities assumed it).
    ttft_offsets_ms: dict[str, float] = field(default_factory=dict)
    #: Calibrations the capacities' replicas ran, by configuration label (the check runs them).
    fits: dict[str, object] = field(default_factory=dict)

    @property
    def hours(self) -> int:
        """Number of planning periods."""
        return self.replicas.shape[1]

    def fleet(self, hour: int = 0) -> pd.DataFrame:
        """Configurations in use in ``hour``: replicas, price, cost and carbon per hour, rate
        routed to them and their load (fraction of their SLO-safe capacity)."""
        rows = []
        for j, label in enumerate(self.labels):
            count = int(self.replicas[j, hour])
            if count == 0:
                continue
            candidate = self.problem.candidates[j]
            rate = float(self.traffic_rps[:, j, hour].sum())
            with np.errstate(divide="ignore", invalid="ignore"):
                load = float(np.nansum(np.where(self.cap_rps[:, j] > 0,
                                                self.traffic_rps[:, j, hour] / self.cap_rps[:, j],
                                                0.0)))
            rows.append({"config": label, "gpu_name": candidate.gpu_name,
                         "num_gpus": candidate.num_gpus, "replicas": count,
                         "price_usd_per_gpu_h": self.replica_cost_usd_per_h[j]
                         / candidate.num_gpus,
                         "cost_usd_per_h": count * self.replica_cost_usd_per_h[j],
                         "carbon_g_per_h": count * self.replica_carbon_g_per_h[j, hour],
                         "rate_rps": rate, "rate_per_replica_rps": rate / count,
                         "load_fraction": load / count})
        return pd.DataFrame(rows, columns=["config", "gpu_name", "num_gpus", "replicas",
                                           "price_usd_per_gpu_h", "cost_usd_per_h",
                                           "carbon_g_per_h", "rate_rps", "rate_per_replica_rps",
                                           "load_fraction"])

    def shares(self, hour: int = 0) -> pd.DataFrame:
        """Routing shares: per traffic class (rows), the fraction sent to each configuration
        (columns) in ``hour``; classes without demand have no row."""
        demand = self.traffic_rps[:, :, hour].sum(axis=1)
        rows = {name: self.traffic_rps[k, :, hour] / demand[k]
                for k, name in enumerate(self.classes) if demand[k] > 0}
        return pd.DataFrame(rows, index=self.labels).T

    def totals(self) -> dict[str, float]:
        """Cost and carbon per hour (mean over hours) and per 1M tokens (input + output) over
        the whole horizon."""
        tokens = float(self.tokens_per_h.sum())
        return {"cost_usd_per_h": float(self.cost_usd_per_h.mean()),
                "carbon_g_per_h": float(self.carbon_g_per_h.mean()),
                "cost_usd_per_1m_tok": float(self.cost_usd_per_h.sum())
                / (tokens / TOKENS_PER_MILLION),
                "g_co2_per_1m_tok": float(self.carbon_g_per_h.sum())
                / (tokens / TOKENS_PER_MILLION),
                "gpus": float((self.replicas * np.array(
                    [c.num_gpus for c in self.problem.candidates])[:, None]).sum(axis=0).max())}

    def describe(self, hour: int = 0) -> str:
        """``1x H100-PCIe + 3 x (2x RTX-4090)`` (:func:`hgresearch.identity.hardware_label`)."""
        fleet = self.fleet(hour)
        return " + ".join(hardware_label(r.gpu_name, r.num_gpus, r.replicas)
                          for r in fleet.itertuples()) or "(none)"


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
    return (main + TIE_BREAK * scale * other).ravel()


def solve(problem: PlanProblem, capacities: pd.DataFrame, *, objective: str = "cost",
          carbon_price_usd_per_kg: float = 0.0, carbon_budget_g: float | None = None,
          cost_budget_usd: float | None = None, capacity_column: str = "low_rps",
          capacity_scale: dict[tuple[str, str], float] | None = None,
          capacity_source: str = "", step_times: dict[str, dict[str, float]] | None = None,
          ttft_offsets_ms: dict[str, float] | None = None, fits: dict[str, object] | None = None,
          time_limit_s: float = 60.0) -> Plan:
    """The optimal plan (see the module docstring); budgets are totals over the hours.
    ``capacity_source``, ``step_times``, ``ttft_offsets_ms`` and ``fits`` describe the replicas the
    capacities assumed (:func:`hgresearch.plan.replica_rates.replica_settings`); the plan keeps them
    for its check and its fleet file.

    Without a budget the hours do not interact (the objective is a sum over hours, every
    constraint is within an hour), so a profile is solved hour by hour: the same optimum,
    much faster than one program over the day.

    Raises :class:`InputError` naming the binding constraint when no plan meets the demand.
    """
    started = time.perf_counter()
    m = matrices(problem, capacities, capacity_column=capacity_column,
                 capacity_scale=capacity_scale)
    kwargs = {"objective": objective, "carbon_price_usd_per_kg": carbon_price_usd_per_kg,
              "capacity_column": capacity_column, "capacity_scale": capacity_scale,
              "capacity_source": capacity_source, "step_times": step_times,
              "ttft_offsets_ms": ttft_offsets_ms, "fits": fits, "time_limit_s": time_limit_s}
    if problem.demand.hours > 1 and carbon_budget_g is None and cost_budget_usd is None:
        return _solve_by_hour(problem, capacities, m, started, kwargs)
    _check_servable(problem, m)
    num_classes, num_configs = m.cap_rps.shape
    hours = m.demand_rps.shape[1]
    num_n = num_configs * hours
    pairs = [(k, j, h) for h in range(hours) for k in range(num_classes)
             for j in range(num_configs) if m.cap_rps[k, j] > 0 and m.demand_rps[k, h] > 0]
    num_x = len(pairs)
    c = np.concatenate([_objective_vectors(m, objective, carbon_price_usd_per_kg),
                        np.zeros(num_x)])
    rows, cols, vals, lower, upper = [], [], [], [], []
    row = 0
    demand_row = {}
    for h in range(hours):
        for k in range(num_classes):
            if m.demand_rps[k, h] > 0:
                demand_row[(k, h)] = row
                lower.append(m.demand_rps[k, h])
                upper.append(m.demand_rps[k, h])
                row += 1
    capacity_row = {}
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
            for j in np.flatnonzero(members):
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
    return _plan(problem, kwargs, m, n, traffic, started)


def hour_problem(problem: PlanProblem, hour: int) -> PlanProblem:
    """The one-hour problem of ``hour`` of a profile (its demand, caps and grid intensity)."""
    def at(value):
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
                   started: float, kwargs: dict) -> Plan:
    num_classes, num_configs = m.cap_rps.shape
    hours = problem.demand.hours
    replicas = np.zeros((num_configs, hours), dtype=int)
    traffic = np.zeros((num_classes, num_configs, hours))
    for h in range(hours):
        if problem.demand.rate_rps[h] <= 0:
            continue
        try:
            part = solve(hour_problem(problem, h), capacities, **kwargs)
        except InputError as err:
            raise InputError(f"hour {h}: {err.reason}", field=err.field) from None
        replicas[:, h] = part.replicas[:, 0]
        traffic[:, :, h] = part.traffic_rps[:, :, 0]
    return _plan(problem, kwargs, m, replicas, traffic, started)


def _plan(problem: PlanProblem, kwargs: dict, m: Matrices, n: np.ndarray,
          traffic: np.ndarray, started: float) -> Plan:
    cost_h = np.nan_to_num(m.cost_usd_per_h) @ n
    carbon_h = (m.carbon_g_per_h * n).sum(axis=0)
    tokens_h = (m.demand_rps * m.tokens_per_request[:, None]).sum(axis=0) * SECONDS_PER_HOUR
    return Plan(problem=problem, objective=kwargs["objective"], labels=m.labels,
                classes=m.classes, replicas=n, traffic_rps=traffic, cap_rps=m.cap_rps,
                cost_usd_per_h=cost_h, carbon_g_per_h=carbon_h, tokens_per_h=tokens_h,
                replica_cost_usd_per_h=np.nan_to_num(m.cost_usd_per_h),
                replica_carbon_g_per_h=m.carbon_g_per_h,
                solve_s=time.perf_counter() - started,
                capacity_source=kwargs["capacity_source"],
                step_times=dict(kwargs["step_times"] or {}),
                ttft_offsets_ms=dict(kwargs["ttft_offsets_ms"] or {}),
                fits=dict(kwargs["fits"] or {}))


def _check_servable(problem: PlanProblem, m: Matrices) -> None:
    """Every class with demand must be servable by some candidate at all."""
    for k, name in enumerate(m.classes):
        if m.demand_rps[k].max() > 0 and not (m.cap_rps[k] > 0).any():
            slo = next(s for s in problem.slo_classes if s.name == m.slo_of_class[k])
            raise InputError(f"class {name!r}: no candidate configuration meets its SLO "
                             f"({slo.describe()}) even at a low rate, or holds one request in "
                             f"its KV cache (candidates: {', '.join(m.labels)})",
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
    a_ub, b_ub = [], []
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
              drop_caps: bool = True, **kwargs: object) -> dict[str, Plan | InputError]:
    """Plans on one GPU type only (``H100-PCIe only``: every candidate on that GPU) and on each
    single configuration (``only 2x RTX-4090``), by default without the availability caps;
    an infeasible one maps to its error. ``best single configuration`` is the single
    configuration with the lowest objective."""
    singles = {f"only {c.hardware}": _try(restricted(problem, [i], drop_caps=drop_caps),
                                          capacities, objective, kwargs)
               for i, c in enumerate(problem.candidates)}
    out: dict[str, Plan | InputError] = {}
    gpus = list(dict.fromkeys(c.gpu_name for c in problem.candidates))
    for gpu in gpus:
        keep = [i for i, c in enumerate(problem.candidates) if c.gpu_name == gpu]
        # a GPU type with one configuration is that configuration's plan: solved once
        out[f"{gpu} only"] = (singles[f"only {problem.candidates[keep[0]].hardware}"]
                              if len(keep) == 1 else
                              _try(restricted(problem, keep, drop_caps=drop_caps), capacities,
                                   objective, kwargs))
    out.update(singles)
    feasible = {k: v for k, v in singles.items() if isinstance(v, Plan)}
    if feasible:
        best = min(feasible, key=lambda k: _objective_value(feasible[k], objective, kwargs))
        out["best single configuration"] = feasible[best]
    return out


def _try(problem: PlanProblem, capacities: pd.DataFrame, objective: str,
         kwargs: dict) -> Plan | InputError:
    try:
        return solve(problem, capacities, objective=objective, **kwargs)  # type: ignore[arg-type]
    except InputError as err:
        return err


def _objective_value(plan: Plan, objective: str, kwargs: dict) -> float:
    if objective == "cost":
        return float(plan.cost_usd_per_h.sum())
    if objective == "carbon":
        return float(plan.carbon_g_per_h.sum())
    price = float(kwargs.get("carbon_price_usd_per_kg", 0.0))  # type: ignore[arg-type]
    return float(plan.cost_usd_per_h.sum() + price * plan.carbon_g_per_h.sum() / 1000.0)


def pareto_front(problem: PlanProblem, capacities: pd.DataFrame, *, points: int = 6,
                 **kwargs: object) -> list[Plan]:
    """Cost–carbon Pareto front by the ε-constraint method: the cheapest plan, the
    lowest-carbon plan, and the cheapest plan under ``points - 2`` carbon budgets evenly
    between them; dominated and repeated plans are dropped; ordered by carbon."""
    cheapest = solve(problem, capacities, objective="cost", **kwargs)  # type: ignore[arg-type]
    greenest = solve(problem, capacities, objective="carbon", **kwargs)  # type: ignore[arg-type]
    plans = [cheapest, greenest]
    high, low = float(cheapest.carbon_g_per_h.sum()), float(greenest.carbon_g_per_h.sum())
    for budget in np.linspace(low, high, points)[1:-1]:
        plans.append(solve(problem, capacities, objective="cost",  # type: ignore[arg-type]
                           carbon_budget_g=float(budget) * (1 + 1e-9), **kwargs))
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
