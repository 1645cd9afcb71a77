"""Fleet planner (decide layer): how many replicas of each GPU configuration, and which
requests go where, to meet latency SLOs at the lowest cost or carbon. See docs/planner.md.

* :mod:`~hgresearch.plan.inputs`: the typed problem (model, demand, length and SLO classes,
  candidates with caps, price scenario, carbon settings);
* :mod:`~hgresearch.plan.replica_rates`: the SLO-safe rate of one replica per traffic class
  from the simulator (the :class:`~hgresearch.plan.replica_rates.ReplicaRateProvider`
  interface), cached;
* :mod:`~hgresearch.plan.economics`: cost and carbon of a replica-hour from the catalogs;
* :mod:`~hgresearch.plan.matrices`: the program's numbers;
  :mod:`~hgresearch.plan.solve`: the mixed-integer program (``scipy.optimize.milp``);
  :mod:`~hgresearch.plan.fleet_plan`: the solved :class:`~hgresearch.plan.fleet_plan.Plan`;
* :mod:`~hgresearch.plan.baselines`: single-hardware baselines and the cost–carbon Pareto
  front;
* :mod:`~hgresearch.plan.check`: the plan simulated at its demand, re-planned until it meets
  its SLOs;
* :mod:`~hgresearch.plan.fleetfile`: the plan as a fleet file for ``hgresearch sim fleet`` and
  ``hgresearch bench --fleet``;
* :mod:`~hgresearch.plan.hybrid_study`: the studies of notebook 08 (plans against baselines
  over demands, a day, the checked Pareto front);
* :mod:`~hgresearch.report.plan`: tables of a plan, its check and its baselines.

Imports the simulator, the catalogs, costs, energy, carbon and routing; never the measurement
side (``hgresearch.bench``) or the NVML sampler (tests/rules/test_layers.py).
"""

from hgresearch.plan.baselines import baselines, pareto_front, restricted
from hgresearch.plan.check import CheckedPlan, CheckResult, check_plan, plan_and_check
from hgresearch.plan.fleet_plan import Plan
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
    length_extrapolation_notes,
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
from hgresearch.plan.solve import solve

__all__ = [
    "ROOFLINE_ONLY", "Candidate", "CarbonSettings", "CheckResult", "CheckedPlan", "ClassRate",
    "Demand", "LengthClass", "Plan", "PlanProblem", "PriceScenario", "ReplicaRateProvider",
    "SLOClass", "SimulatedReplicaRates", "baselines", "check_plan", "class_name",
    "fleet_document", "length_extrapolation_notes", "pareto_front", "plan_and_check",
    "replica_rate_table", "replica_settings", "restricted", "solve", "validate", "write_fleet_file",
]
