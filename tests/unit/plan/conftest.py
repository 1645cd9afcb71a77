"""The planner tests' one simulated plan (shared: simulating it takes seconds)."""

from __future__ import annotations

import pytest
from plan_fixtures import MODEL, QUICK

from hgresearch.plan import (
    Candidate,
    Demand,
    LengthClass,
    PlanProblem,
    SimulatedReplicaRates,
    SLOClass,
    replica_rate_table,
)


@pytest.fixture(scope="session")
def small_plan():
    """A real plan: capacities from the simulator (roofline step model), one SLO class."""
    problem = PlanProblem(MODEL, Demand.steady(40.0), (LengthClass("short", 256, 64),),
                          (SLOClass("chat", 1.0, ttft_ms=300),),
                          (Candidate("H100-PCIe", 1), Candidate("RTX-4090", 2)),
                          gpu_caps=(("RTX-4090", 4),))
    provider = SimulatedReplicaRates(steady=QUICK)
    caps = replica_rate_table(problem, provider)
    return problem, caps, provider
