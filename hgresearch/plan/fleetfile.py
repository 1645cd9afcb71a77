"""A plan as a fleet file (docs/simulator.md "Fleet file"): what ``hgresearch sim fleet`` and
``hgresearch bench --fleet`` read (:func:`hgresearch.sim.fleet.load_fleet` checks it).

Every configuration of the plan is one entry with its replica count, its price under the
plan's scenario, the step-time coefficients the planner's capacities assumed, and a
``capacity_weight`` per replica equal to the request rate the plan routes to it: the
``weighted-random`` policy then splits traffic in the plan's overall shares (class-blind); the
class-aware split is :class:`hgresearch.traffic.routing.ClassWeightedSplit`, built by
:func:`hgresearch.plan.check.plan_policy`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from hgresearch.plan.inputs import Candidate

if TYPE_CHECKING:
    from hgresearch.plan.fleet_plan import Plan
    from hgresearch.sim.fleet_spec import FleetReplicaSpec


def fleet_spec(model: str, candidate: Candidate, index: int,
               step_time: dict[str, float] | None) -> FleetReplicaSpec:
    """One replica of ``candidate`` as the fleet simulator's spec."""
    from hgresearch.sim.fleet_spec import FleetReplicaSpec

    return FleetReplicaSpec(name=f"{candidate.label(model)} #{index}", model=model,
                            gpu_name=candidate.gpu_name, num_gpus=candidate.num_gpus,
                            step_time=dict(step_time) if step_time else None)


def fleet_document(plan: Plan, hour: int = 0,
                   base_urls: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """The fleet file's content for the plan's fleet in ``hour``; ``base_urls`` (per
    configuration label, one URL per replica) make it a live fleet for ``hgresearch bench
    --fleet``."""
    from hgresearch.errors import InputError

    entries = []
    for row in plan.fleet(hour).itertuples():
        entry: dict[str, Any] = {"config": row.config, "count": int(row.replicas),
                                 "price_usd_per_gpu_h": round(float(row.price_usd_per_gpu_h), 6),
                                 "capacity_weight": round(max(float(row.rate_per_replica_rps),
                                                              1e-6), 6)}
        steps = plan.step_times.get(row.config)
        if steps:
            entry["step_time"] = {k: float(v) for k, v in steps.items()}
        if base_urls is not None:
            urls = list(base_urls.get(row.config, []))
            if len(urls) != row.replicas:
                raise InputError(f"{row.config}: expected {row.replicas} base URL(s), got "
                                 f"{len(urls)}", field="base_urls")
            entry["base_url"] = urls[0] if len(urls) == 1 else urls
        entries.append(entry)
    return {"name": f"plan-{plan.objective}-hour{hour}",
            "description": (f"hgresearch plan: {plan.problem.model}, "
                            f"{plan.problem.demand.rate_rps[hour]:g} req/s, objective "
                            f"{plan.objective}; prices {plan.problem.prices.describe()}; "
                            f"capacities: {plan.capacity_source}"),
            "price_scenario": (plan.problem.prices.scenario
                               if plan.problem.prices.scenario in ("alternative", "hyperscaler")
                               else "alternative"),
            "replicas": entries}


def write_fleet_file(plan: Plan, path: str | Path, hour: int = 0,
                     base_urls: dict[str, list[str]] | None = None) -> Path:
    """Write the plan's fleet in ``hour`` as a fleet file (YAML; see :func:`fleet_document`);
    returns its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(fleet_document(plan, hour, base_urls), sort_keys=False,
                                   width=100),
                    encoding="utf-8")
    return path
