"""Check a plan by simulating it, and re-plan until the simulation meets every SLO.

:func:`check_plan` simulates the plan's fleet in one hour (every replica from the fleet file
the plan writes, :mod:`hgresearch.plan.fleetfile`) behind the plan's class-aware routing
(:class:`hgresearch.traffic.routing.ClassWeightedSplit`), at the hour's demand: Poisson arrivals
for a simulated **duration** (default :data:`CHECK_DURATION_S`, ten minutes: long enough for
steady state; the request count follows from it — a larger demand simulates more requests,
never a fixed count it outruns), the first :data:`CHECK_WARMUP_FRACTION` of it dropped, each
request's traffic class drawn from the class shares, its lengths the class's. For every SLO
class it reports the achieved TTFT and TPOT percentiles over the seeds (mean, minimum,
maximum) and whether the SLO holds in every seed; per configuration too, to find where a miss
comes from. TTFTs include the plan's constant offset per configuration (``ttft_offsets_ms``).

:func:`robust_check` runs it twice: at the nominal step times and **stressed**, every step
``plan.step_time_factor`` times as long (the slow end of the simulator's step-time interval at
the plan's confidence); a plan passes when both hold.

:func:`plan_and_check` solves, checks, and when an SLO class misses (nominal or stressed),
lowers the capacity of every class served on the configurations that missed it (all that serve
it if none alone did: classes share a replica's steps) by ``derate`` and solves again, up to
``max_rounds`` rounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Unpack

import numpy as np
import pandas as pd

from hgresearch.errors import InputError
from hgresearch.plan.fleet_plan import Plan
from hgresearch.plan.fleetfile import fleet_spec
from hgresearch.plan.inputs import PlanProblem
from hgresearch.plan.replica_rates import slo_holds, slow_end_replicas
from hgresearch.plan.solve import SolveOptions, solve
from hgresearch.traffic.routing import ClassWeightedSplit

if TYPE_CHECKING:
    from hgresearch.sim.fleet import SimReplica


def plan_replicas(plan: Plan, hour: int = 0, step_time_factor: float = 1.0
                  ) -> tuple[list[SimReplica], list[int]]:
    """The simulated replicas of the plan's fleet in ``hour`` (every step ``step_time_factor``
    times as long: :func:`hgresearch.plan.replica_rates.slow_end_replicas`) and each one's
    configuration index (copies of a configuration consecutively)."""
    from hgresearch.sim.fleet_spec import Fleet

    specs, config_of = [], []
    for j, candidate in enumerate(plan.problem.candidates):
        for copy in range(int(plan.replicas[j, hour])):
            specs.append(fleet_spec(plan.problem.model, candidate, copy + 1,
                                    plan.step_times.get(plan.labels[j])))
            config_of.append(j)
    if not specs:
        raise InputError(f"hour {hour}: the plan has no replicas", field="hour")
    return slow_end_replicas(Fleet(replicas=specs), plan.fits, step_time_factor), config_of


def plan_policy(plan: Plan, config_of: list[int], hour: int = 0) -> ClassWeightedSplit:
    """The plan's routing: per class, each configuration's share split evenly over its
    replicas; requests of unknown class follow the overall split."""
    counts = np.bincount(config_of, minlength=len(plan.labels))
    shares = {}
    for k, name in enumerate(plan.classes):
        per_config = plan.traffic_rps[k, :, hour]
        if per_config.sum() > 0:
            shares[name] = [float(per_config[j] / counts[j]) for j in config_of]
    overall = plan.traffic_rps[:, :, hour].sum(axis=0)
    return ClassWeightedSplit(shares, default_shares=[float(overall[j] / counts[j])
                                                      for j in config_of])


#: Simulated seconds of arrivals of a plan's check (ten minutes: steady state at every rate
#: the planner uses; the request count follows from the demand).
CHECK_DURATION_S = 600.0
#: The first this fraction of a check's arrivals is its warm-up (the empty fleet): dropped.
CHECK_WARMUP_FRACTION = 0.1
#: Fewest requests a check simulates (a percentile needs some), whatever the demand.
MIN_CHECK_REQUESTS = 400


def check_requests(rate_rps: float, duration_s: float = CHECK_DURATION_S) -> int:
    """Requests one seed of a check simulates: the demand × the duration, at least
    :data:`MIN_CHECK_REQUESTS`."""
    return max(MIN_CHECK_REQUESTS, math.ceil(rate_rps * duration_s))


@dataclass
class CheckResult:
    """Achieved percentiles per SLO class (and per SLO class × configuration), over seeds, with
    every step ``step_time_factor`` times as long; ``stress``: the same check at the slow end
    (:func:`robust_check`), None when not run."""

    hour: int
    rate_rps: float
    num_requests: int
    seeds: tuple[int, ...]
    by_class: pd.DataFrame
    by_config: pd.DataFrame
    duration_s: float = CHECK_DURATION_S
    step_time_factor: float = 1.0
    stress: CheckResult | None = None

    @property
    def passed(self) -> bool:
        """Every SLO class met its SLO in every seed (and in the stress check, if run)."""
        return bool(self.by_class.passed.all()) and (self.stress is None
                                                      or self.stress.passed)

    def missed_classes(self) -> list[str]:
        """SLO classes that missed in at least one seed (of either check)."""
        missed = list(self.by_class.loc[~self.by_class.passed, "slo_class"])
        if self.stress is not None:
            missed += [c for c in self.stress.missed_classes() if c not in missed]
        return missed

    def missed_configs(self, slo_class: str) -> set[str]:
        """Configurations on which ``slo_class`` missed (of either check)."""
        rows = self.by_config[self.by_config.slo_class == slo_class]
        missed = set(rows.loc[~rows.passed, "config"])
        if self.stress is not None:
            missed |= self.stress.missed_configs(slo_class)
        return missed


def check_plan(plan: Plan, *, hour: int = 0, seeds: tuple[int, ...] = (0, 1, 2),
               duration_s: float = CHECK_DURATION_S, step_time_factor: float = 1.0,
               progress: Callable[[str], None] | None = None) -> CheckResult:
    """Simulate the plan in ``hour`` (see the module docstring) for ``duration_s`` of arrivals
    per seed (:func:`check_requests`), every step ``step_time_factor`` times as long;
    ``progress`` gets a line per seed."""
    from hgresearch.sim.fleet import run_fleet
    from hgresearch.sim.simulator import make_requests
    from hgresearch.traffic.arrivals import arrival_offsets_ns

    problem = plan.problem
    rate = float(problem.demand.rate_rps[hour])
    replicas, config_of = plan_replicas(plan, hour, step_time_factor)
    keys = problem.class_keys()
    weights = np.array([plan.traffic_rps[k, :, hour].sum() for k in range(len(keys))])
    probabilities = weights / weights.sum()
    n = check_requests(rate, duration_s)
    smallest = min((r.config for r in replicas), key=lambda c: c.kv_cache_tokens)
    per_seed: list[pd.DataFrame] = []
    for seed in seeds:
        if progress is not None:
            progress(f"check hour {hour}, seed {seed}: {n:,} requests on {len(replicas)} "
                     f"replicas" + (f", steps x{step_time_factor:.3g}"
                                    if step_time_factor != 1.0 else ""))
        rng = np.random.default_rng(seed)
        classes = rng.choice(len(keys), size=n, p=probabilities)
        arrivals = arrival_offsets_ns(n, rate, seed=seed) / 1e9
        prompts = [keys[k][1].prompt_tokens for k in classes]
        outputs = [keys[k][1].output_tokens for k in classes]
        requests = make_requests(smallest, arrivals, prompts, outputs)
        for request, k in zip(requests, classes, strict=True):
            request.request_class = plan.classes[k]
        run = run_fleet(replicas, plan_policy(plan, config_of, hour), requests)
        offsets = np.array([replicas[i].ttft_offset_s * 1e3 if replicas[i].ttft_offset_s
                            else plan.ttft_offsets_ms.get(plan.labels[config_of[i]], 0.0)
                            * step_time_factor for i in run.replica_of])
        ttft = np.array([(r.first_token_s - r.arrival_s) * 1e3 for r in requests]) + offsets
        decode = np.array([r.done_s - r.first_token_s for r in requests])
        tpot = np.where(np.array(outputs) > 1, decode / np.maximum(np.array(outputs) - 1, 1),
                        np.nan) * 1e3
        # the warm-up (an empty fleet at the start) is dropped
        keep = arrivals >= CHECK_WARMUP_FRACTION * arrivals[-1]
        per_seed.append(pd.DataFrame({
            "seed": seed, "slo_class": [keys[k][0].name for k in classes[keep]],
            "config": [plan.labels[config_of[i]] for i in np.asarray(run.replica_of)[keep]],
            "ttft_ms": ttft[keep], "tpot_ms": tpot[keep]}))
        del requests, run  # a large check holds one seed's requests at a time
    frame = pd.concat(per_seed, ignore_index=True)
    return CheckResult(hour=hour, rate_rps=rate, num_requests=n, seeds=tuple(seeds),
                       by_class=_achieved(frame, problem, ["slo_class"]),
                       by_config=_achieved(frame, problem, ["slo_class", "config"]),
                       duration_s=duration_s, step_time_factor=step_time_factor)


def robust_check(plan: Plan, *, hour: int = 0, seeds: tuple[int, ...] = (0, 1, 2),
                 duration_s: float = CHECK_DURATION_S,
                 progress: Callable[[str], None] | None = None) -> CheckResult:
    """:func:`check_plan` at the nominal step times, with the stress check at the plan's slow
    end (``plan.step_time_factor``; none when it is 1) as its ``stress``."""
    result = check_plan(plan, hour=hour, seeds=seeds, duration_s=duration_s,
                        progress=progress)
    if plan.step_time_factor != 1.0:
        result.stress = check_plan(plan, hour=hour, seeds=seeds, duration_s=duration_s,
                                   step_time_factor=plan.step_time_factor, progress=progress)
    return result


def _achieved(frame: pd.DataFrame, problem: PlanProblem, by: list[str]) -> pd.DataFrame:
    slos = {s.name: s for s in problem.slo_classes}
    rows = []
    for key, group in frame.groupby(by, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        slo = slos[key[0]]
        row = dict(zip(by, key, strict=True))
        row["slo"] = slo.describe()
        row["requests"] = len(group)
        passes = []
        for metric, percentile, limit in (("ttft", slo.ttft_percentile, slo.ttft_ms),
                                          ("tpot", slo.tpot_percentile, slo.tpot_ms)):
            values = [float(np.nanpercentile(g[f"{metric}_ms"], percentile))
                      for _, g in group.groupby("seed")]
            name = f"p{percentile:g}_{metric}_ms"
            row[name] = float(np.mean(values))
            row[f"{name}_low"] = float(np.min(values))
            row[f"{name}_high"] = float(np.max(values))
            row[f"{metric}_limit_ms"] = limit
        for _, g in group.groupby("seed"):
            passes.append(slo_holds(g.ttft_ms.to_numpy(), g.tpot_ms.to_numpy(), slo))
        row["passed"] = all(passes)
        rows.append(row)
    return pd.DataFrame(rows)


@dataclass
class CheckedPlan:
    """A plan whose simulation met every SLO (or the last try), the checks of every round, and
    the capacity scale factors it ended with."""

    plan: Plan
    checks: list[dict[int, CheckResult]]
    capacity_scale: dict[tuple[str, str], float] = field(default_factory=dict)

    @property
    def rounds(self) -> int:
        """Solve-and-simulate rounds it took (1: the first plan passed)."""
        return len(self.checks)

    @property
    def passed(self) -> bool:
        """The final plan met every SLO in every checked hour."""
        return all(c.passed for c in self.checks[-1].values())


def classes_to_lower(plan: Plan, results: dict[int, CheckResult]) -> set[tuple[str, str]]:
    """The (class, configuration) capacities :func:`plan_and_check` lowers after a failed
    check: every class served, in a checked hour, on a configuration where an SLO class missed
    (on every configuration serving that SLO class when none alone missed).

    Every class on a missing replica, not only the class that missed: the classes share the
    replica's steps (a batch class's long prefills delay an interactive class's first tokens),
    and the capacities were measured one class at a time. Lowering only the missed class let
    the solver move it between two configurations that both missed, round after round, while
    the other class's load stayed where it was."""
    lowered: set[tuple[str, str]] = set()
    for h, result in results.items():
        for slo_name in result.missed_classes():
            serving = set(result.by_config.loc[result.by_config.slo_class == slo_name, "config"])
            missed = result.missed_configs(slo_name) or serving
            for k, name in enumerate(plan.classes):
                for j, label in enumerate(plan.labels):
                    if label in missed and plan.traffic_rps[k, j, h] > 0:
                        lowered.add((name, label))
    return lowered


def plan_and_check(problem: PlanProblem, capacities: pd.DataFrame, *,
                   hours: list[int] | None = None, max_rounds: int = 5, derate: float = 0.85,
                   seeds: tuple[int, ...] = (0, 1, 2), duration_s: float = CHECK_DURATION_S,
                   progress: Callable[[str], None] | None = None,
                   **solve_options: Unpack[SolveOptions]) -> CheckedPlan:
    """Solve, check ``hours`` (default: every hour with demand) by simulation, nominal and
    stressed (:func:`robust_check`), and re-solve with lowered capacities until every SLO
    holds in both (see the module docstring)."""
    if not 0 < derate < 1:
        raise InputError("expected a factor in (0, 1)", field="derate")
    # the scale factors this loop lowers (the caller's, if any, are where it starts)
    scale: dict[tuple[str, str], float] = dict(solve_options.get("capacity_scale") or {})
    solve_options["capacity_scale"] = scale
    checks: list[dict[int, CheckResult]] = []
    hours = hours if hours is not None else [h for h, r in enumerate(problem.demand.rate_rps)
                                             if r > 0]
    plan = None
    for round_ in range(max_rounds):
        plan = solve(problem, capacities, **solve_options)
        if progress is not None:
            progress(f"round {round_ + 1}: {plan.describe()}")
        results = {h: robust_check(plan, hour=h, seeds=seeds, duration_s=duration_s,
                                   progress=progress) for h in hours}
        checks.append(results)
        if all(r.passed for r in results.values()):
            break
        lowered = classes_to_lower(plan, results)
        for key in sorted(lowered):
            scale[key] = scale.get(key, 1.0) * derate
    assert plan is not None
    return CheckedPlan(plan=plan, checks=checks, capacity_scale=scale)
