"""Fleet planner (decide layer): how many replicas of each GPU configuration, and which
requests go where, to meet latency SLOs at the lowest cost or carbon. See docs/planner.md.

* :mod:`~hgresearch.plan.inputs`: the typed problem (model, demand, length and SLO classes,
  candidates with caps, price scenario, carbon settings);
* :mod:`~hgresearch.plan.replica_rates`: SLO-safe capacity of one replica per traffic class from
  the simulator (the :class:`~hgresearch.plan.replica_rates.ReplicaRateProvider` interface), cached;
* :mod:`~hgresearch.plan.economics`: cost and carbon of a replica-hour from the catalogs;
* :mod:`~hgresearch.plan.solve`: the mixed-integer program (``scipy.optimize.milp``),
  baselines and the cost–carbon Pareto front;
* :mod:`~hgresearch.plan.check`: the plan simulated at its demand, re-planned until it meets
  its SLOs;
* :mod:`~hgresearch.plan.fleetfile`: the plan as a fleet file for ``hgresearch sim fleet`` and
  ``hgresearch bench --fleet``;
* :mod:`~hgresearch.report.plan`: tables of a plan, its check and its baselines.

Imports the simulator, the catalogs, costs, energy, carbon and routing; never the measurement
side (``hgresearch.bench``) or the NVML sampler (tests/test_layers.py).
"""

from hgresearch.plan.check import CheckedPlan, CheckResult, check_plan, plan_and_check
from hgresearch.plan.fleetfile import fleet_document, write_fleet_file
from hgresearch.plan.inputs import (
    Candidate,
    CarbonSettings,
    Demand,
    LengthClass,
    PlanProblem,
    PriceScenario,
    SLOClass,
    class_name,
    validate,
)
from hgresearch.plan.replica_rates import (
    ROOFLINE_ONLY,
    ClassRate,
    ReplicaRateProvider,
    SimulatedReplicaRates,
    replica_rate_table,
    replica_settings,
)
from hgresearch.plan.solve import Plan, baselines, pareto_front, restricted, solve

__all__ = [
    "ROOFLINE_ONLY", "ReplicaRateProvider", "Candidate", "CarbonSettings", "CheckResult",
    "CheckedPlan", "ClassRate", "Demand", "LengthClass", "Plan", "PlanProblem",
    "PriceScenario", "SLOClass", "SimulatedReplicaRates", "baselines", "replica_rate_table",
    "check_plan", "class_name", "fleet_document", "pareto_front", "plan_and_check",
    "replica_settings", "restricted", "solve", "validate", "write_fleet_file",
]
