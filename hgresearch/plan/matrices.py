"""The numbers the planner's mixed-integer program is built from (:mod:`hgresearch.plan.solve`):
per traffic class and candidate configuration the SLO-safe rate of one replica, per candidate its
cost and carbon per hour, per class and hour the demand, and the availability caps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hgresearch.data.catalogs import normalize_gpu_name
from hgresearch.errors import InputError
from hgresearch.plan.economics import replica_carbon_g_per_h, replica_cost_usd_per_h
from hgresearch.plan.inputs import PlanProblem, class_name, validate


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
    #: (K, J) the capacity column before the headroom, and the nominal ``rate_rps``
    slow_rps: np.ndarray | None = None
    nominal_rps: np.ndarray | None = None
    #: (K, J) what limits each rate (the capacity table's ``limited_by``; None without one)
    limited_by: np.ndarray | None = None


def matrices(problem: PlanProblem, capacities: pd.DataFrame, *,
             capacity_column: str = "low_rps",
             capacity_scale: dict[tuple[str, str], float] | None = None,
             headroom: float = 0.0) -> Matrices:
    """The program's numbers: per-replica rates from ``capacities`` (a
    :func:`~hgresearch.plan.replica_rates.replica_rate_table`, column ``capacity_column``, times
    ``capacity_scale[(class, config)]`` × ``1 - headroom``), prices and carbon from the
    catalogs, caps from the problem."""
    validate(problem)
    hours = problem.demand.hours
    labels = [c.label(problem.model) for c in problem.candidates]
    keys = problem.class_keys()
    classes = [class_name(s, length) for s, length in keys]
    indexed = capacities.set_index(["class", "config"])
    table = indexed[capacity_column]
    nominal_table = indexed["rate_rps"] if "rate_rps" in indexed else table
    cap = np.zeros((len(classes), len(labels)))
    nominal = np.zeros_like(cap)
    limits = indexed["limited_by"] if "limited_by" in indexed else None
    limited_by = np.full(cap.shape, "", dtype=object)
    for k, name in enumerate(classes):
        for j, label in enumerate(labels):
            if (name, label) not in table.index:
                raise InputError(f"the capacity table has no row for class {name!r} on "
                                 f"{label!r}", field="capacities")
            cap[k, j] = float(table[(name, label)]) * (capacity_scale or {}).get((name, label),
                                                                                 1.0)
            nominal[k, j] = float(nominal_table[(name, label)])
            if limits is not None:
                limited_by[k, j] = str(limits[(name, label)])
    slow = cap.copy()
    cap = cap * (1.0 - headroom)
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
                    gpu_caps=gpu_caps, cap_notes=notes, slow_rps=slow, nominal_rps=nominal,
                    limited_by=limited_by if limits is not None else None)
