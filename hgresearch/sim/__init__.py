"""Serving simulator (predict layer): one vLLM replica at iteration level, event-driven.

Layout after Vidur: :mod:`~hgresearch.sim.entities` (replica config, requests),
:mod:`~hgresearch.sim.events` (the event heap), :mod:`~hgresearch.sim.scheduler` (vLLM V1's
scheduling of one engine step), :mod:`~hgresearch.sim.step_time` (how long a step takes),
:mod:`~hgresearch.sim.replica_limits` (KV blocks and roofline from the catalogs) and
:mod:`~hgresearch.sim.simulator` (the event loop and the requests table);
:mod:`~hgresearch.sim.fleet` puts several replicas behind a routing policy
(:mod:`hgresearch.traffic.routing`). Typed Python and numpy, the hot path compiled with
mypyc where it can (:mod:`~hgresearch.sim.compiled`); reads the catalogs and the run-folder
layer's requests-table definition, never the measurement side (``hgresearch.bench``). See
docs/simulator.md.

``COMPILED``: whether the mypyc-compiled copies of the hot path run
(:mod:`hgresearch.sim.compiled`; decided here, before anything imports them).
"""

# ruff: noqa: E402 - the imports below must follow activate(): it decides what they load
from hgresearch.sim import compiled as _compiled

COMPILED: bool = _compiled.activate()

from hgresearch.sim.entities import ReplicaConfig, SimRequest
from hgresearch.sim.replica_limits import (
    kv_bytes_per_token,
    num_kv_blocks_from_memory,
    replica_config_from_catalogs,
    roofline_floor_from_catalogs,
    weights_bytes,
)
from hgresearch.sim.scheduler import VllmV1Scheduler
from hgresearch.sim.simulator import (
    SIMULATED,
    ReplicaRun,
    make_requests,
    requests_frame,
    run_replica,
    run_replicas,
    simulate_replica,
)
from hgresearch.sim.step_time import (
    ConstantStepTimeModel,
    LinearStepTimeModel,
    RooflineFloor,
    StepTimeModel,
)

__all__ = [
    "COMPILED", "SIMULATED", "ConstantStepTimeModel", "LinearStepTimeModel", "ReplicaConfig",
    "ReplicaRun",
    "RooflineFloor", "SimRequest", "StepTimeModel", "VllmV1Scheduler", "kv_bytes_per_token",
    "make_requests", "num_kv_blocks_from_memory", "replica_config_from_catalogs",
    "requests_frame", "roofline_floor_from_catalogs", "run_replica", "run_replicas",
    "simulate_replica",
    "weights_bytes",
]
