"""Per-replica class rates for the planner: the SLO-safe request rate of one replica of each
candidate configuration for each traffic class, from the simulator.

The planner needs, for every configuration × length class × SLO class, the highest request
rate one replica serves with the class's SLO met — with an interval. Any object with the
:class:`ReplicaRateProvider` interface can supply it; :class:`SimulatedReplicaRates` computes it
with the fleet simulator (:mod:`hgresearch.sim`), using the SLO-rate helpers of
:mod:`hgresearch.sim.slo_rate`:

* **burst throughput**: a burst of at least 1,000 requests (and :data:`BURST_BATCHES` ×
  ``max_num_seqs``) of the class's lengths at t = 0; completions per second between the 10th
  and the 90th percentile completion (ramp-up and drain excluded;
  :func:`~hgresearch.sim.slo_rate.middle_completion_rate_rps`): the top of the search;
* **batch classes** (no latency SLO): ``batch_utilisation`` × the burst throughput;
* **latency classes**: the **steady-state** rate (:mod:`hgresearch.sim.steady_state`, the
  definition of the SLO-capacity table too): long Poisson runs, warm-up dropped, stability
  tested, several seeds; the highest rate at which the class's TTFT and TPOT percentiles hold,
  to 1 % (0 when even 2 % of the throughput misses).
* **the slow end** (``low_rps``, what the program uses): the same with every step
  ``step_time_factor`` times as long — the slow end of the simulator's step-time interval at
  the plan's confidence (:meth:`hgresearch.sim.intervals.PredictionIntervals.step_time_factor`;
  :func:`slow_end_replicas`). ``rate_rps`` = ``high_rps``: at the nominal step times.

Step times: the candidate's ``step_time`` coefficients, else those given to the provider per
configuration label, else **the roofline floor alone** (a physical lower bound: optimistic
latencies, overstated rates; ``step_time_source`` says which). A configuration the model
does not fit (weights larger than memory) or whose KV cache cannot hold one request of the
class gets rate 0 (``limited_by = "memory"``); so does one whose GPU count vLLM cannot split
the model's attention heads over (``limited_by = "tensor parallelism"``).

:func:`replica_rate_table` evaluates every combination and caches the table by a hash of its
inputs and of the simulator's and planner's code (:func:`hgresearch.cache.cached`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypedDict

import numpy as np
import pandas as pd

from hgresearch.cache import source_digest
from hgresearch.errors import InputError
from hgresearch.executors import Executor
from hgresearch.plan.inputs import Candidate, LengthClass, PlanProblem, SLOClass, class_name

if TYPE_CHECKING:
    from hgresearch.sim.calibrate import Calibration
    from hgresearch.sim.fleet import SimReplica
    from hgresearch.sim.fleet_spec import Fleet
    from hgresearch.sim.steady_state import Simulate, SloRatio, SteadyStateSettings

#: A throughput burst holds at least this many full batches of ``max_num_seqs`` requests.
BURST_BATCHES = 4
#: ``step_time_source`` of a replica running on the roofline floor alone.
ROOFLINE_ONLY = "roofline floor only (uncalibrated)"


@dataclass(frozen=True)
class ClassRate:
    """SLO-safe request rate (req/s) of one replica for one traffic class, with an interval,
    and what limits it (``slo``, ``throughput``, ``memory`` or ``tensor parallelism``; ``slo``
    covers every steady-state search that stopped below the burst throughput, whether the next
    rate missed the latency limit or had an unstable queue: ``SteadyStateRate.limited_by``
    tells them apart)."""

    rate_rps: float
    low_rps: float
    high_rps: float
    limited_by: str


class ReplicaRateProvider(Protocol):
    """Per-replica rate per traffic class, and the step times it assumed (the planner writes
    them into the fleet file, so the plan's simulated check runs the same replicas)."""

    def class_rate(self, model: str, candidate: Candidate, length: LengthClass,
                   slo: SLOClass) -> ClassRate:
        """The SLO-safe rate of one replica of ``candidate`` for (``slo``, ``length``)."""
        ...

    def step_time(self, model: str, candidate: Candidate) -> dict[str, float] | None:
        """Linear step-time coefficients of ``candidate`` (None: the roofline floor alone)."""
        ...

    def ttft_offset_ms(self, model: str, candidate: Candidate) -> float:
        """Constant time added to every TTFT of ``candidate`` (outside engine steps)."""
        ...

    def describe(self) -> dict[str, object]:
        """Settings that change the result (part of the cache key)."""
        ...


def slo_holds(ttft_ms: np.ndarray, tpot_ms: np.ndarray, slo: SLOClass) -> bool:
    """Whether requests with these TTFTs and TPOTs meet the class's SLO."""
    def percentile(values: np.ndarray, q: float) -> float:
        return float(np.percentile(values, q)) if len(values) else float("nan")

    if slo.ttft_ms is not None and not percentile(ttft_ms, slo.ttft_percentile) <= slo.ttft_ms:
        return False
    tpot = tpot_ms[np.isfinite(tpot_ms)]
    return slo.tpot_ms is None or not len(tpot) \
        or percentile(tpot, slo.tpot_percentile) <= slo.tpot_ms


class SimulatedReplicaRates:
    """:class:`ReplicaRateProvider` on the fleet simulator (see the module docstring).

    Args:
        step_times: linear step-time coefficients per configuration label
            (``MODEL on Nx GPU``), e.g. calibrated ones; a candidate's own ``step_time`` wins.
        fits: the simulator's calibrations by configuration label
            (:func:`hgresearch.sim.run.calibrations`): a configuration with one runs its
            calibrated step time, KV cache and request-path delay (as ``hgresearch sim
            fleet`` does, :func:`hgresearch.sim.fleet.sim_replicas`) unless it has explicit
            coefficients.
        ttft_offsets_ms: constant ms added to every TTFT per configuration label (time outside
            engine steps) for replicas without a calibration; default 0.
        steady: length, seeds and precision of the steady-state runs
            (:class:`hgresearch.sim.steady_state.SteadyStateSettings`).
        step_time_factor: the slow end of the simulator's step-time interval
            (:meth:`hgresearch.sim.intervals.PredictionIntervals.step_time_factor`): ``low_rps``
            is the rate with every step this many times as long (1: no interval).
        batch_utilisation: fraction of the burst throughput a batch class may use.
        source: how the step times were obtained (reported with the plan).
    """

    def __init__(self, step_times: Mapping[str, Mapping[str, float]] | None = None, *,
                 fits: Mapping[str, Calibration] | None = None,
                 ttft_offsets_ms: Mapping[str, float] | None = None,
                 steady: SteadyStateSettings | None = None, step_time_factor: float = 1.0,
                 batch_utilisation: float = 0.9, source: str | None = None) -> None:
        from hgresearch.sim.steady_state import SteadyStateSettings

        if not 0 < batch_utilisation <= 1:
            raise InputError("expected a fraction in (0, 1]", field="batch_utilisation")
        if not step_time_factor >= 1:
            raise InputError(f"expected a step-time factor >= 1, got {step_time_factor}",
                             field="step_time_factor")
        self.step_times = {k: dict(v) for k, v in (step_times or {}).items()}
        self.ttft_offsets_ms = {k: float(v) for k, v in (ttft_offsets_ms or {}).items()}
        self.fits: dict[str, Calibration] = dict(fits or {})
        # Predictions of the shared step-time model for configurations without a calibration
        # (derived from self.fits' model and the catalogs: not a setting of their own).
        self._predicted: dict[str, Calibration | None] = {}
        self.steady = steady or SteadyStateSettings()
        self.step_time_factor = float(step_time_factor)
        self.batch_utilisation = batch_utilisation
        self.source = source or ("calibrated" if fits else "given step-time coefficients"
                                 if step_times else ROOFLINE_ONLY)

    def describe(self) -> dict[str, object]:
        """Settings that change the result."""
        return {"provider": "SimulatedReplicaRates", "step_times": self.step_times,
                "ttft_offsets_ms": self.ttft_offsets_ms,
                "fits": {label: [repr(fit.coefficients), repr(fit.replica)]
                         for label, fit in sorted(self.fits.items())},
                "steady": repr(self.steady), "step_time_factor": self.step_time_factor,
                "batch_utilisation": self.batch_utilisation}

    def step_time(self, model: str, candidate: Candidate) -> dict[str, float] | None:
        """The candidate's coefficients, else the provider's for its label, else None."""
        if candidate.step_time is not None:
            return dict(candidate.step_time)
        return self.step_times.get(candidate.label(model))

    def fits_for(self, model: str, candidate: Candidate) -> Mapping[str, Calibration]:
        """The calibrations the candidate's replica runs with: ``fits``, plus — for a
        configuration none of them covers, when they come from the shared step-time model —
        that model's prediction for it (:func:`hgresearch.sim.step_model.calibration_for`,
        marked as a prediction for an unmeasured configuration) instead of the roofline floor
        alone, which is optimistic by orders of magnitude."""
        from hgresearch.sim.step_model import SHARED_MODEL, calibration_for

        label = candidate.label(model)
        if (self.step_time(model, candidate) is not None or label in self.fits
                or not any(fit.extra.get("source") == SHARED_MODEL
                           for fit in self.fits.values())):
            return self.fits
        if label not in self._predicted:
            try:
                self._predicted[label] = calibration_for(model, candidate.gpu_name,
                                                         candidate.num_gpus)
            except InputError:  # no shared fit for this GPU type: the roofline floor
                self._predicted[label] = None
        predicted = self._predicted[label]
        return self.fits if predicted is None else {**self.fits, label: predicted}

    def ttft_offset_ms(self, model: str, candidate: Candidate) -> float:
        """The calibration's request-path delay where the candidate runs its calibration (or
        the shared model's prediction), else the offset given for its label, else 0."""
        label = candidate.label(model)
        fits = self.fits_for(model, candidate)
        if self.step_time(model, candidate) is None and label in fits:
            return float(fits[label].coefficients.ttft_offset_s) * 1e3
        return self.ttft_offsets_ms.get(label, 0.0)

    def replica(self, model: str, candidate: Candidate, step_time_factor: float = 1.0
                ) -> SimReplica | None:
        """One simulated replica of ``candidate`` (None when the model does not fit), every
        step ``step_time_factor`` times as long (:func:`slow_end_replicas`)."""
        from hgresearch.plan.fleetfile import fleet_spec
        from hgresearch.sim.fleet_spec import Fleet

        spec = fleet_spec(model, candidate, 1, self.step_time(model, candidate))
        try:
            return slow_end_replicas(Fleet(replicas=[spec]), self.fits_for(model, candidate),
                                     step_time_factor)[0]
        except InputError as err:
            if "no room for KV cache" in err.reason:
                return None
            raise

    def _simulate(self, replica: SimReplica, length: LengthClass, offset_ms: float
                  ) -> Simulate:
        """The steady-state search's simulation of one replica on one length class."""
        from hgresearch.sim.simulator import make_requests, run_replica

        def simulate(arrivals_s: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
            n = len(arrivals_s)
            requests = make_requests(replica.config, arrivals_s, [length.prompt_tokens] * n,
                                     [length.output_tokens] * n)
            run_replica(replica.config, replica.step_model, requests)
            first = np.fromiter((r.first_token_s - r.arrival_s for r in requests), float, n)
            decode = np.fromiter((r.done_s - r.first_token_s for r in requests), float, n)
            tpot = decode / (length.output_tokens - 1) * 1e3 if length.output_tokens > 1 \
                else np.full(n, np.nan)
            return first * 1e3 + offset_ms, tpot
        return simulate

    def burst_throughput_rps(self, replica: SimReplica, length: LengthClass) -> float:
        """Completions per second in the middle 80% of a burst of at least
        :data:`BURST_BATCHES` full batches (``max_num_seqs``) and 1,000 requests: a burst that
        fits one batch finishes at once and says nothing about the sustained rate."""
        from hgresearch.sim.simulator import make_requests, run_replica
        from hgresearch.sim.slo_rate import BURST_REQUESTS, middle_completion_rate_rps

        size = max(BURST_REQUESTS, BURST_BATCHES * replica.config.max_num_seqs)
        requests = make_requests(replica.config, np.zeros(size), [length.prompt_tokens] * size,
                                 [length.output_tokens] * size)
        run_replica(replica.config, replica.step_model, requests)
        return middle_completion_rate_rps(np.array([r.done_s for r in requests]))

    def class_rate(self, model: str, candidate: Candidate, length: LengthClass,
                   slo: SLOClass) -> ClassRate:
        """The steady-state rate at the nominal step times (``rate_rps``, also ``high_rps``)
        and at the slow end (``low_rps``; one search serves both:
        :func:`hgresearch.sim.steady_state.rates_with_slow_end`)."""
        from hgresearch.sim.steady_state import percentile_ratio, rates_with_slow_end
        from hgresearch.sim.step_model import tensor_parallel_problem

        factor = self.step_time_factor
        if tensor_parallel_problem(model, candidate.num_gpus) is not None:
            return ClassRate(0.0, 0.0, 0.0, "tensor parallelism")
        replica = self.replica(model, candidate)
        if replica is None or length.tokens - 1 > replica.config.kv_cache_tokens:
            return ClassRate(0.0, 0.0, 0.0, "memory")
        throughput = self.burst_throughput_rps(replica, length)
        if slo.is_batch:
            # the slow end's throughput: every step, so every completion, factor times later
            rate = self.batch_utilisation * throughput
            return ClassRate(rate, rate / factor, rate, "throughput")
        offset_ms = replica.ttft_offset_s * 1e3 if replica.ttft_offset_s \
            else self.ttft_offset_ms(model, candidate)

        def scalable(divisor: float) -> SloRatio:
            parts = []
            if slo.ttft_ms is not None:
                parts.append(percentile_ratio("ttft", slo.ttft_percentile,
                                              slo.ttft_ms / divisor))
            if slo.tpot_ms is not None:
                parts.append(percentile_ratio("tpot", slo.tpot_percentile,
                                              slo.tpot_ms / divisor))
            return lambda point: max(part(point) for part in parts)

        nominal, slow = rates_with_slow_end(self._simulate(replica, length, offset_ms),
                                            [scalable], throughput, factor, self.steady)
        # the steady-state search's capacity is the burst throughput; every other outcome
        # (slo, stability, latency) is the class's SLO binding below it
        limited_by = "throughput" if nominal[0].limited_by == "capacity" else "slo"
        return ClassRate(nominal[0].rate_rps, min(slow[0].rate_rps, nominal[0].rate_rps),
                         nominal[0].rate_rps, limited_by)


def slow_end_replicas(fleet: Fleet, fits: Mapping[str, Calibration], step_time_factor: float
                      ) -> list[SimReplica]:
    """The fleet's replicas (:func:`hgresearch.sim.fleet.sim_replicas` with ``fits``) with every
    step ``step_time_factor`` times as long: a calibrated replica through
    :meth:`Calibration.scaled <hgresearch.sim.calibrate.Calibration.scaled>`, one with given
    coefficients or the roofline floor alone by the same scaling of its linear model
    (coefficients × factor, floor bandwidth and peak ÷ factor)."""
    from hgresearch.sim.fleet import sim_replicas
    from hgresearch.sim.step_time import LinearStepTimeModel

    if step_time_factor == 1.0:
        return sim_replicas(fleet, fits=dict(fits))
    scaled = {label: fit.scaled(step_time_factor) for label, fit in fits.items()}
    out = sim_replicas(fleet, fits=scaled)
    for replica in out:
        model = replica.step_model
        if replica.step_time_source != "calibrated" and isinstance(model, LinearStepTimeModel):
            floor = model.floor
            if floor is not None:
                floor = replace(floor,
                                bandwidth_bytes_per_s=floor.bandwidth_bytes_per_s
                                / step_time_factor,
                                peak_flops_per_s=floor.peak_flops_per_s / step_time_factor)
            replica.step_model = LinearStepTimeModel(
                c0_s=model.c0_s * step_time_factor,
                c_prefill_s_per_token=model.c_prefill_s_per_token * step_time_factor,
                c_decode_s_per_seq=model.c_decode_s_per_seq * step_time_factor,
                c_kv_s_per_token=model.c_kv_s_per_token * step_time_factor, floor=floor)
    return out


class ReplicaSettings(TypedDict):
    """What a plan carries from its rate provider (:func:`replica_settings`): keyword options of
    :func:`hgresearch.plan.solve.solve`."""

    capacity_source: str
    step_times: dict[str, dict[str, float]]
    ttft_offsets_ms: dict[str, float]
    fits: dict[str, Calibration]
    step_time_factor: float


def replica_settings(problem: PlanProblem, provider: ReplicaRateProvider) -> ReplicaSettings:
    """What a plan must carry from the provider so that its check and its fleet file run the
    replicas its rates assumed: keyword options of :func:`hgresearch.plan.solve.solve`
    (``capacity_source``, ``step_times``, ``ttft_offsets_ms``, ``fits``, ``step_time_factor``:
    the slow end its ``low_rps`` assumed, which the plan's stress check runs)."""
    steps: dict[str, dict[str, float]] = {}
    offsets: dict[str, float] = {}
    fits: dict[str, Calibration] = {}
    provider_fits: Mapping[str, Calibration] = getattr(provider, "fits", {})
    for candidate in problem.candidates:
        label = candidate.label(problem.model)
        coefficients = provider.step_time(problem.model, candidate)
        if coefficients is not None:
            steps[label] = dict(coefficients)
        elif label in provider_fits:
            fits[label] = provider_fits[label]
        offsets[label] = float(provider.ttft_offset_ms(problem.model, candidate))
    return {"capacity_source": str(getattr(provider, "source", "")), "step_times": steps,
            "ttft_offsets_ms": offsets, "fits": fits,
            "step_time_factor": float(getattr(provider, "step_time_factor", 1.0))}


#: Columns of :func:`replica_rate_table`.
REPLICA_RATE_COLUMNS = ["config", "gpu_name", "num_gpus", "class", "slo_class", "length_class",
                        "rate_rps", "low_rps", "high_rps", "limited_by", "step_time_source"]


def _code_digest() -> str:
    """The simulator's and the planner's source: a change to either invalidates the cache."""
    return source_digest("sim", "plan", "traffic/routing.py")


def _candidate_rows(task: tuple[PlanProblem, ReplicaRateProvider, Candidate]
                    ) -> list[dict[str, object]]:
    """The rows of one candidate (one rate search per traffic class)."""
    problem, provider, candidate = task
    if candidate.step_time is not None:
        source = "the candidate's step_time coefficients"
    elif provider.step_time(problem.model, candidate) is not None:
        source = str(getattr(provider, "source", "given step-time coefficients"))
    elif candidate.label(problem.model) in getattr(provider, "fits", {}):
        source = "calibrated"
    else:
        source = ROOFLINE_ONLY
    rows: list[dict[str, object]] = []
    for slo, length in problem.class_keys():
        rate = provider.class_rate(problem.model, candidate, length, slo)
        rows.append({"config": candidate.label(problem.model),
                     "gpu_name": candidate.gpu_name, "num_gpus": candidate.num_gpus,
                     "class": class_name(slo, length), "slo_class": slo.name,
                     "length_class": length.name, "rate_rps": rate.rate_rps,
                     "low_rps": rate.low_rps, "high_rps": rate.high_rps,
                     "limited_by": rate.limited_by, "step_time_source": source})
    return rows


def replica_rate_table(problem: PlanProblem, provider: ReplicaRateProvider, *,
                       build_dir: str | Path | None = None,
                       executor: Executor | None = None) -> pd.DataFrame:
    """The rate of one replica of every candidate for every traffic class (one row each,
    :data:`REPLICA_RATE_COLUMNS`), cached under ``<build_dir>/cache/models/`` by a hash of the
    inputs, the provider's settings and the code (``build_dir=None``: no cache). ``executor``
    (default: in this process) runs the candidates' searches; the table is the same."""
    from hgresearch.cache import cached

    def compute() -> pd.DataFrame:
        parts = (executor or Executor()).map(
            _candidate_rows, [(problem, provider, c) for c in problem.candidates])
        return pd.DataFrame([row for part in parts for row in part],
                            columns=REPLICA_RATE_COLUMNS)

    params = {"model": problem.model, "candidates": [repr(c) for c in problem.candidates],
              "classes": [repr(k) for k in problem.class_keys()],
              "provider": provider.describe(), "code": _code_digest()}
    # "plan-capacity": the cache files' name (docs/planner.md and notebook 08 point to it).
    return cached(build_dir, "plan-capacity", pd.DataFrame(), params, compute)
