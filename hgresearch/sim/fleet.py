"""Fleets: several vLLM replicas of different configurations behind one routing policy.

A fleet file (:mod:`hgresearch.sim.fleet_spec`: :func:`~hgresearch.sim.fleet_spec.load_fleet`)
becomes simulated replicas here (:func:`sim_replicas`: each from its calibration, its fleet-file
coefficients or the roofline floor, with its price).

:func:`run_fleet` simulates the fleet with ONE event loop over all replicas (one clock, one
heap; :func:`hgresearch.sim.simulator.run_replicas`): the router
(:class:`hgresearch.traffic.routing.Router`) picks a replica at each arrival from the replicas'
outstanding work at that instant, and a replica's completions release it at the instant they
happen, so state-dependent policies (JSQ, least tokens, spill-over) see what a
live router would. Each replica is a :class:`~hgresearch.sim.scheduler.VllmV1Scheduler`;
:func:`~hgresearch.sim.simulator.run_replica` is the same loop with one replica (a test checks
that a one-replica fleet gives the same table).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hgresearch.errors import InputError
from hgresearch.executors import Executor
from hgresearch.identity import config_label
from hgresearch.sim.calibrate import Calibration
from hgresearch.sim.entities import ReplicaConfig, SimRequest
from hgresearch.sim.fleet_spec import Fleet, FleetReplicaSpec
from hgresearch.sim.run import add_request_path_delay
from hgresearch.sim.simulator import ReplicaRun, make_requests, requests_frame, run_replicas
from hgresearch.sim.step_time import LinearStepTimeModel, StepTimeModel
from hgresearch.traffic.routing import ReplicaState, Router, RoutingPolicy

#: ``SimReplica.step_time_source``: coefficients from the fleet file, the configuration's
#: calibration (:func:`fleet_calibrations`), or the roofline floor alone (no calibration).
FLEET_FILE, CALIBRATED, ROOFLINE_ONLY = "fleet file", "calibrated", "roofline floor only"
#: ``SimReplica.step_time_source`` of a replica calibrated by a calibration file (a user's
#: runs: ``hgresearch sim calibrate``).
CALIBRATION_FILE = "calibration file"
#: ``step_time_source`` of a configuration never measured, predicted by the shared model.
PREDICTED = "predicted by the shared model (configuration not measured)"
#: The decode step that defines a replica's default capacity weight: this many sequences, each
#: attending to this many tokens (a moderately loaded engine).
WEIGHT_DECODE_SEQS, WEIGHT_CONTEXT_TOKENS = 32, 1024


@dataclass
class SimReplica:
    """A replica ready to simulate: its scheduler limits, step time, and what the router and
    the cost accounting need."""

    name: str
    config: ReplicaConfig
    step_model: StepTimeModel
    capacity_weight: float = 1.0
    gpu_name: str = ""
    num_gpus: int = 1
    price_usd_per_gpu_h: float = math.nan
    max_outstanding: int | None = None
    #: :data:`FLEET_FILE` (given coefficients), :data:`CALIBRATED` or :data:`ROOFLINE_ONLY`.
    step_time_source: str = "given"
    #: Constant request-path delay (HTTP, tokenisation) added to every request's first token
    #: and completion: the calibration's fitted ``ttft_offset_s`` (0 otherwise).
    ttft_offset_s: float = 0.0
    #: Whether the step times are the shared step-time model's (a measured configuration's or
    #: a prediction): the replicas whose predictions the reference intervals
    #: (:func:`hgresearch.sim.intervals.reference_intervals`, its held-out residuals) cover.
    shared_model: bool = False

    @property
    def price_usd_per_h(self) -> float:
        """What the replica costs per hour (every GPU)."""
        return self.price_usd_per_gpu_h * self.num_gpus

    def state(self) -> ReplicaState:
        """A fresh router state for this replica (no outstanding work)."""
        price = self.price_usd_per_h
        return ReplicaState(capacity_weight=self.capacity_weight,
                            price_usd_per_h=0.0 if math.isnan(price) else price,
                            max_outstanding=self.max_outstanding)


def default_capacity_weight(step_model: StepTimeModel) -> float:
    """Decode tokens/s of a moderately loaded engine (:data:`WEIGHT_DECODE_SEQS` sequences at
    :data:`WEIGHT_CONTEXT_TOKENS` tokens of context): the relative speed routers weigh by."""
    step_s = step_model.step_time_s(0, WEIGHT_DECODE_SEQS,
                                    WEIGHT_DECODE_SEQS * WEIGHT_CONTEXT_TOKENS)
    return WEIGHT_DECODE_SEQS / step_s


def fleet_calibrations(build_dir: str | Path | None = "build",
                       reference: str | Path | None = None, *,
                       executor: Executor | None = None) -> dict[str, Calibration]:
    """Every calibrated configuration (``label -> calibration``): the configurations of the
    reference data and ``data/raw/cpu-tiny`` calibrated on all their rates
    (:func:`hgresearch.sim.run.calibrations`), cached under ``<build_dir>/cache/models`` — the
    first call fits every configuration and takes minutes (on ``executor``: default two
    processes)."""
    from hgresearch.sim.run import calibration_runs, calibrations

    return calibrations(calibration_runs(reference), build_dir, n_jobs=2, executor=executor)


def sim_replicas(fleet: Fleet, fits: Mapping[str, Calibration] | None = None, *,
                 build_dir: str | Path | None = "build",
                 reference: str | Path | None = None,
                 candidates: Mapping[str, Calibration] | None = None,
                 prices_usd_per_gpu_h: Mapping[str, float] | None = None) -> list[SimReplica]:
    """The fleet's replicas as simulator inputs.

    Step time, in order of precedence: the fleet file's ``step_time`` coefficients (above the
    roofline floor); else the configuration's calibration in ``fits`` (its step-time model,
    fitted request-path delay ``ttft_offset_s`` and the KV capacity it was calibrated with);
    else **the roofline floor alone** (a physical lower bound: optimistic latencies;
    ``step_time_source = "roofline floor only"``). ``fits=None`` loads
    :func:`fleet_calibrations` (``build_dir``, ``reference``) when a replica needs one;
    ``fits={}`` uses none. KV blocks: the file's ``num_kv_blocks``, else the calibration's, else
    the catalogs' (:func:`~hgresearch.sim.replica_limits.replica_config_from_catalogs`); the file's
    other scheduler limits replace the calibration's. Prices: the file's, else
    ``prices_usd_per_gpu_h`` (by GPU), else ``hgresearch/data/catalogs/prices.csv`` (the fleet's
    scenario; NaN for a GPU it does not price).

    Calibrations of a user's runs (``hgresearch sim calibrate``) come from a replica's
    ``calibration`` file or from ``candidates`` (by configuration label) and win over ``fits``
    (``step_time_source = "calibration file"``); configurations they cover need no
    :func:`fleet_calibrations`.
    """
    from hgresearch.data.catalogs import normalize_gpu_name, price_catalog
    from hgresearch.sim.replica_limits import (
        replica_config_from_catalogs,
        roofline_floor_from_catalogs,
    )

    user = _user_calibrations(fleet, candidates)
    chosen = fits is not None
    if fits is None and any(not spec.step_time and _label(spec) not in user
                            for spec in fleet.replicas):
        fits = fleet_calibrations(build_dir, reference)
    # An unmeasured configuration gets the shared step-time model's prediction
    # (hgresearch.sim.step_model.calibration_for) instead of the roofline floor alone, when
    # the reference calibrations loaded here come from that model (not when the caller chose
    # the calibrations, possibly none).
    from hgresearch.sim.step_model import PREDICTED_UNMEASURED, SHARED_MODEL

    predict_unmeasured = not chosen and any(
        fit.extra.get("source") == SHARED_MODEL for fit in (fits or {}).values())
    fits = {**(fits or {}), **user}
    prices = price_catalog()
    prices = prices[prices.scenario == fleet.price_scenario]
    price_map = dict(zip(prices.gpu_name, prices.price_usd_per_gpu_h, strict=True))
    price_map.update(prices_usd_per_gpu_h or {})
    out = []
    for spec in fleet.replicas:
        label = _label(spec)
        fit = None if spec.step_time else fits.get(label)
        predicted = False
        if fit is None and not spec.step_time and predict_unmeasured:
            fit = _predicted_calibration(spec, build_dir, reference)
            predicted = fit is not None
        try:
            if fit is not None:
                config = replace(fit.replica.config, **spec.scheduler)
            else:
                config = replica_config_from_catalogs(
                    spec.model, spec.gpu_name, num_gpus=spec.num_gpus,
                    **{k: v for k, v in spec.scheduler.items() if k != "num_kv_blocks"})
                if "num_kv_blocks" in spec.scheduler:
                    config = replace(config, num_kv_blocks=spec.scheduler["num_kv_blocks"])
                floor = roofline_floor_from_catalogs(spec.model, spec.gpu_name,
                                                     num_gpus=spec.num_gpus)
        except InputError as err:
            raise InputError(f"{spec.name}: {err.reason}", file=spec.file, line=spec.line,
                             field=err.field or "config") from None
        ttft_offset_s = 0.0
        shared_model = (fit is not None and label not in user
                        and fit.extra.get("source") in (SHARED_MODEL, PREDICTED_UNMEASURED))
        if fit is not None:
            step: StepTimeModel = fit.coefficients.step_model(fit.replica)
            ttft_offset_s = fit.coefficients.ttft_offset_s
            source = (PREDICTED if predicted
                      else CALIBRATION_FILE if label in user else CALIBRATED)
        elif spec.step_time:
            coefficients = {"c0_s": 0.0, **spec.step_time}
            step = LinearStepTimeModel(**coefficients, floor=floor)
            source = FLEET_FILE
        else:
            step = LinearStepTimeModel(c0_s=0.0, floor=floor)
            source = ROOFLINE_ONLY
        price = spec.price_usd_per_gpu_h
        if price is None:
            price = price_map.get(_gpu_key(spec.gpu_name, normalize_gpu_name), math.nan)
        out.append(SimReplica(
            name=spec.name, config=config, step_model=step,
            capacity_weight=spec.capacity_weight or default_capacity_weight(step),
            gpu_name=spec.gpu_name, num_gpus=spec.num_gpus, price_usd_per_gpu_h=float(price),
            max_outstanding=spec.max_outstanding, step_time_source=source,
            ttft_offset_s=ttft_offset_s, shared_model=shared_model))
    return out


def with_slower_steps(replicas: list[SimReplica], step_time_factor: float
                      ) -> list[SimReplica]:
    """The replicas with every engine step and request-path delay ``step_time_factor`` times
    as long (the slow end of a step-time interval), as
    :meth:`Calibration.scaled <hgresearch.sim.calibrate.Calibration.scaled>` scales a
    calibration: the linear coefficients times the factor, the roofline floor's bandwidth and
    peak FLOPs divided by it. Capacity weights stay: every replica slows down alike, so their
    ratios, which the routers weigh by, do not change.

    Raises:
        InputError: for a factor that is not a positive number, or a replica whose step model
            is not linear (nothing to scale).
    """
    if not (math.isfinite(step_time_factor) and step_time_factor > 0):
        raise InputError(f"expected a positive step-time factor, got {step_time_factor}",
                         field="step_time_factor")
    out = []
    for replica in replicas:
        model = replica.step_model
        if not isinstance(model, LinearStepTimeModel):
            raise InputError(f"{replica.name}: its step model "
                             f"({type(model).__name__}) cannot be slowed down",
                             field="step_model")
        floor = model.floor
        if floor is not None:
            floor = replace(floor,
                            bandwidth_bytes_per_s=floor.bandwidth_bytes_per_s / step_time_factor,
                            peak_flops_per_s=floor.peak_flops_per_s / step_time_factor)
        slower = LinearStepTimeModel(
            c0_s=model.c0_s * step_time_factor,
            c_prefill_s_per_token=model.c_prefill_s_per_token * step_time_factor,
            c_decode_s_per_seq=model.c_decode_s_per_seq * step_time_factor,
            c_kv_s_per_token=model.c_kv_s_per_token * step_time_factor, floor=floor)
        out.append(replace(replica, step_model=slower,
                           ttft_offset_s=replica.ttft_offset_s * step_time_factor))
    return out


def _predicted_calibration(spec: FleetReplicaSpec, build_dir: str | Path | None,
                           reference: str | Path | None) -> Calibration | None:
    """The shared model's calibration of an unmeasured configuration, or None where it has
    no fit for the GPU type (then the roofline floor alone, as before)."""
    from hgresearch.sim.step_model import calibration_for

    try:
        return calibration_for(spec.model, spec.gpu_name, spec.num_gpus, build_dir=build_dir,
                               reference=reference)
    except InputError:
        return None


def _label(spec: FleetReplicaSpec) -> str:
    return config_label({"model": spec.model, "gpu_name": spec.gpu_name,
                         "gpu_count": spec.num_gpus})


def _gpu_key(gpu_name: str, normalize: Callable[[str], str]) -> str:
    """The catalogs' name of a GPU, or the name as given for one outside them."""
    from hgresearch.data.catalogs import CatalogKeyError

    try:
        return normalize(gpu_name)
    except CatalogKeyError:
        return gpu_name


def _user_calibrations(fleet: Fleet, candidates: Mapping[str, Calibration] | None
                       ) -> dict[str, Calibration]:
    """Calibrations of a user's runs by configuration label: ``candidates``, and the
    ``calibration`` files the fleet file names (read once each)."""
    from hgresearch.sim.calibration_file import read_calibration_file

    out = dict(candidates or {})
    read: dict[str, Calibration] = {}
    for spec in fleet.replicas:
        if spec.calibration is not None:
            if spec.calibration not in read:
                read[spec.calibration] = read_calibration_file(spec.calibration).calibration()
            out[_label(spec)] = read[spec.calibration]
    return out


@dataclass
class FleetRun:
    """What a simulated fleet run did: every request with the replica that served it."""

    requests: list[SimRequest]
    replica_of: list[int]
    runs: list[ReplicaRun]

    @property
    def num_events(self) -> int:
        """Arrivals + steps + completions over all replicas."""
        return sum(run.num_events for run in self.runs)


def run_fleet(replicas: list[SimReplica], policy: RoutingPolicy, requests: list[SimRequest],
              *, skip_quiet_steps: bool = True,
              on_completions: Callable[[int], object] | None = None) -> FleetRun:
    """Simulate ``requests`` (indices 0..n-1) arriving at a fleet routed by ``policy``: one
    clock and one heap for every replica (:func:`~hgresearch.sim.simulator.run_replicas`, the
    loop :func:`~hgresearch.sim.simulator.run_replica` runs with one replica);
    ``on_completions``: a progress bar, as there."""
    router = Router(policy, [r.state() for r in replicas])
    runs, replica_of = run_replicas([r.config for r in replicas],
                                    [r.step_model for r in replicas], requests, router,
                                    skip_quiet_steps=skip_quiet_steps,
                                    on_completions=on_completions)
    return FleetRun(requests=requests, replica_of=replica_of, runs=runs)


def simulate_fleet(replicas: list[SimReplica], policy: RoutingPolicy,
                   arrivals_s: np.ndarray | list[float], prompt_tokens: np.ndarray | list[int],
                   output_tokens: np.ndarray | list[int], *,
                   on_completions: Callable[[int], object] | None = None) -> pd.DataFrame:
    """Simulate a fleet serving the given requests (``on_completions``: a progress bar, called
    with the requests each engine step finished); returns their requests table (as
    :func:`~hgresearch.sim.simulator.simulate_replica`'s) with ``endpoint`` (the replica's
    name) and ``replica`` (its index). Each replica's ``ttft_offset_s`` is added to its
    requests' first-token and completion times afterwards (as for one calibrated replica,
    :func:`hgresearch.sim.run.simulate_run`): the router releases a request that much earlier
    than a live one would.

    Every request must fit the smallest KV cache of the fleet (any replica may be chosen).
    """
    if not replicas:
        raise InputError("a fleet needs at least one replica", field="replicas")
    smallest = min((r.config for r in replicas), key=lambda c: c.kv_cache_tokens)
    requests = make_requests(smallest, arrivals_s, prompt_tokens, output_tokens)
    run = run_fleet(replicas, policy, requests, on_completions=on_completions)
    frame = requests_frame(ReplicaRun(requests=run.requests, num_arrivals=0, num_steps=0,
                                      num_completions=0, num_preemptions=0, end_s=0.0))
    replica = [run.replica_of[i] for i in frame["index"]]
    frame["replica"] = replica
    frame["endpoint"] = [replicas[i].name for i in replica]
    offsets_s = np.array([replicas[i].ttft_offset_s for i in replica], dtype=float)
    if offsets_s.any():
        frame = add_request_path_delay(frame, offsets_s)
    return frame


def tdp_or_nan(gpu_name: str, tdp_w_by_gpu: Mapping[str, float] | None = None) -> float:
    """Power of one GPU (W) under the paper's TDP model
    (:func:`hgresearch.accounting.energy.tdp_per_gpu_w`), ``tdp_w_by_gpu`` first; NaN for a GPU
    with none (a CPU, one outside the catalogs)."""
    from hgresearch.accounting.energy import tdp_per_gpu_w
    from hgresearch.data.catalogs import CatalogKeyError, normalize_gpu_name

    try:
        return float(tdp_per_gpu_w(_gpu_key(gpu_name, normalize_gpu_name),
                                   overrides=dict(tdp_w_by_gpu or {})))
    except (CatalogKeyError, KeyError):
        return math.nan


def fleet_summary(frame: pd.DataFrame, replicas: list[SimReplica], *,
                  grid_g_per_kwh: float | None = None,
                  tdp_w_by_gpu: Mapping[str, float] | None = None) -> pd.DataFrame:
    """Per replica and overall (``replica = "all"``): requests, throughput, TTFT/TPOT/E2EL
    percentiles (:func:`hgresearch.data.summary.summarize` on each subset), cost per 1M tokens
    (:mod:`hgresearch.accounting.costs`), and energy and carbon per 1M tokens under the paper's TDP
    model
    (:mod:`hgresearch.accounting.energy`: every GPU at its TDP for the whole run; an upper bound,
    not a
    per-step power model), at ``grid_g_per_kwh`` (default: the paper's grid).

    Every replica is billed and powered for the whole run (first send to the fleet's last
    completion), idle or not, so a replica's figures per 1M tokens are its whole-run cost and
    energy over the tokens it served; the overall row sums them over the replicas.
    ``tdp_w_by_gpu`` gives the power of GPUs the catalogs give no TDP (or replaces theirs).
    """
    from hgresearch.accounting.costs import cost_per_million_tok_usd, run_cost_usd
    from hgresearch.accounting.energy import (
        PAPER_GRID_G_PER_KWH,
        configuration_power_w,
        g_co2_per_1m_tok,
        kwh_per_1m_tok,
        tokens_per_kwh_of_energy,
    )
    from hgresearch.data.summary import summarize

    grid = PAPER_GRID_G_PER_KWH if grid_g_per_kwh is None else grid_g_per_kwh
    overall = summarize(frame, bootstrap_reps=0)
    duration_s = overall["duration"] or 0.0

    def tdp_w(replica: SimReplica) -> float:
        return float(configuration_power_w(tdp_or_nan(replica.gpu_name, tdp_w_by_gpu),
                                           replica.num_gpus))

    def row(name: str, s: dict[str, Any], gpus: int, cost_usd: float,
            energy_j: float) -> dict[str, Any]:
        tokens = s["total_input_tokens"] + s["total_output_tokens"]
        tok_per_kwh = tokens_per_kwh_of_energy(tokens, energy_j) if energy_j else math.nan
        return {
            "replica": name, "gpus": gpus, "completed": s["completed"],
            **{key: s[key] for key in ("request_throughput", "output_throughput",
                                       "mean_ttft_ms", "p50_ttft_ms", "p90_ttft_ms",
                                       "p99_ttft_ms", "mean_tpot_ms", "p99_tpot_ms",
                                       "p99_e2el_ms")},
            "cost_usd": cost_usd,
            "cost_usd_per_1m_tok": cost_per_million_tok_usd(cost_usd, tokens),
            "tdp_energy_j": energy_j,
            "tdp_kwh_per_1m_tok": (kwh_per_1m_tok(energy_j / tokens) if tokens
                                   else math.nan),
            "tdp_g_co2_per_1m_tok": (g_co2_per_1m_tok(tok_per_kwh, grid) if tok_per_kwh
                                     else math.nan),
        }

    rows = []
    for i, replica in enumerate(replicas):
        part = frame[frame.replica == i]
        cost = run_cost_usd(duration_s, replica.num_gpus, replica.price_usd_per_gpu_h)
        rows.append(row(replica.name, summarize(part, bootstrap_reps=0), replica.num_gpus,
                        cost, tdp_w(replica) * duration_s))
    rows.append(row("all", overall, sum(r.num_gpus for r in replicas),
                    float(sum(r["cost_usd"] for r in rows)),
                    float(sum(r["tdp_energy_j"] for r in rows))))
    return pd.DataFrame(rows)
