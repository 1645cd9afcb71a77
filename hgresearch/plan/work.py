"""What a plan will cost to compute, estimated from its inputs before the work starts
(:mod:`hgresearch.bounds`): ``hgresearch plan`` refuses, with one line, a demand whose check or
fleet is too large to simulate unless ``--allow-large`` is given.

* The **check** simulates ``demand × duration`` requests per seed (never a fixed count, so a
  large demand is checked as long as a small one), nominal and stressed: its size is known
  from the demand alone, before any simulation.
* The **rates** (one steady-state search per configuration × class, nominal and slow end)
  do not depend on the demand.
* The **fleet**: about ``demand / (the largest per-replica rate)`` replicas at the least; known
  once the rates are, before the program is solved.

The constants are measurements on the development machine (2 shared cores; see
docs/planner.md "Speed"), rounded up.
"""

from __future__ import annotations

import math

import pandas as pd

from hgresearch.bounds import WorkEstimate
from hgresearch.plan.check import check_requests
from hgresearch.plan.inputs import PlanProblem
from hgresearch.sim.steady_state import SteadyStateSettings

#: Wall time of one simulated request in a fleet check (routing included), s.
CHECK_S_PER_REQUEST = 4e-5
#: Memory one simulated request of a check holds while its seed runs (the request, its route,
#: its row of the result), bytes.
CHECK_BYTES_PER_REQUEST = 1500.0
#: Memory of one simulated replica (scheduler state, router state), bytes.
BYTES_PER_REPLICA = 20_000.0
#: Wall time of one request of a steady-state search, s, and rates tried per search.
RATE_S_PER_REQUEST = 2.5e-5
EVALUATIONS_PER_SEARCH = 12
#: A fixed part of every command (imports, the program, the tables), bytes.
BASE_BYTES = 3e8


def check_work_estimate(rate_rps: float, duration_s: float, seeds: int, *,
                        replicas: float = 0.0, replicas_what: str = "",
                        max_rounds: int = 1) -> WorkEstimate:
    """The simulated check of a plan at ``rate_rps``: :func:`check_requests` per seed, nominal
    and stressed, ``max_rounds`` times; one seed's requests and every replica in memory."""
    per_seed = check_requests(rate_rps, duration_s)
    total = 2 * seeds * per_seed * max_rounds
    what = (f"checking a plan at {rate_rps:g} req/s (simulating {total:,} requests: "
            f"{seeds} seeds x {duration_s:g} s, nominal and stressed")
    what += f"; {replicas_what})" if replicas_what else ")"
    return WorkEstimate(what=what,
                        memory_bytes=BASE_BYTES + per_seed * CHECK_BYTES_PER_REQUEST
                        + replicas * BYTES_PER_REPLICA,
                        time_s=total * CHECK_S_PER_REQUEST)


def rates_work_estimate(problem: PlanProblem, steady: SteadyStateSettings) -> WorkEstimate:
    """The steady-state searches: every configuration × class, nominal and slow end."""
    searches = 2 * len(problem.candidates) * len(problem.class_keys())
    requests = searches * EVALUATIONS_PER_SEARCH * len(steady.seeds) * steady.num_requests
    return WorkEstimate(what=f"the per-replica rates ({searches} steady-state searches)",
                        memory_bytes=BASE_BYTES + steady.num_requests * CHECK_BYTES_PER_REQUEST,
                        time_s=requests * RATE_S_PER_REQUEST)


def replicas_estimate(problem: PlanProblem, rates: pd.DataFrame) -> tuple[float, str]:
    """About how many replicas the plan needs at the least — the demand over the largest
    per-replica rate the program may use (``low_rps``) per class, summed — and the reason in
    words (``"≥ 88,879 replicas: one serves at most 11.3 req/s of chat/default"``)."""
    from hgresearch.plan.inputs import class_name

    demand = max(problem.demand.rate_rps)
    share_total = sum(s.share for s in problem.slo_classes) \
        * sum(length.fraction for length in problem.length_classes)
    replicas, worst, worst_rate = 0.0, "", math.inf
    for slo, length in problem.class_keys():
        name = class_name(slo, length)
        best = float(rates.loc[rates["class"] == name, "low_rps"].max())
        if not best > 0:
            continue
        replicas += demand * slo.share * length.fraction / share_total / best
        if best < worst_rate:
            worst, worst_rate = name, best
    text = (f">= {math.ceil(replicas):,} replicas: one serves at most {worst_rate:.3g} req/s "
            f"of {worst}" if worst else "no class can be served")
    return replicas, text
