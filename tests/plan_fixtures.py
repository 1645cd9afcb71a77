"""Shared inputs of the planner's tests (tests/unit/plan): a small problem, a constructed
replica-rate table (numbers chosen so the optimum is not obvious: the table is the planner's
input, and the solver, caps and economics are the real ones) and a brute-force optimum."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from scipy.optimize import linprog

from hgresearch.plan import Candidate, LengthClass, PlanProblem, SLOClass
from hgresearch.plan.matrices import matrices
from hgresearch.sim.steady_state import SteadyStateSettings

MODEL = "DeepSeek-R1-Distill-Qwen-14B"
#: Short steady-state runs for tests (the default length is for results: minutes here).
QUICK = SteadyStateSettings(warmup_requests=100, window_requests=300, seeds=(0,),
                            rate_tolerance=0.03)
CANDIDATES = (Candidate("H100-PCIe", 1), Candidate("RTX-4090", 2), Candidate("RTX-4090", 4))
LENGTHS = (LengthClass("short", 256, 128, 0.7), LengthClass("long", 2048, 256, 0.3))
SLOS = (SLOClass("chat", 0.6, ttft_ms=500), SLOClass("batch", 0.4))


def rate_table(problem: PlanProblem, caps: dict[tuple[str, str], float]) -> pd.DataFrame:
    """A replica-rate table with the given rates (req/s per replica) per (class, hardware)."""
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


def random_rates(rng: np.random.Generator, problem: PlanProblem) -> dict:
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
