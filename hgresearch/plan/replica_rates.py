"""Per-replica class rates for the planner: the SLO-safe request rate of one replica of each
candidate configuration for each traffic class, from the simulator.

The planner needs, for every configuration × length class × SLO class, the highest request
rate one replica serves with the class's SLO met — with an interval. Any object with the
:class:`ReplicaRateProvider` interface can supply it; :class:`SimulatedReplicaRates` computes it
with the fleet simulator (:mod:`hgresearch.sim`), using the SLO-rate helpers of
:mod:`hgresearch.sim.slo_rate`:

* **burst throughput**: a burst of ``num_requests`` requests (at least
  :data:`BURST_BATCHES` × ``max_num_seqs``) of the class's lengths at t = 0; completions
  per second between the 10th and the 90th percentile completion (ramp-up and drain
  excluded; :func:`~hgresearch.sim.slo_rate.middle_completion_rate_rps`);
* **batch classes** (no latency SLO): ``batch_utilisation`` × the burst throughput;
* **latency classes**: per seed of the Poisson arrivals, the highest rate ≤ the burst
  throughput at which the class's TTFT and TPOT percentiles hold, by bisection
  (:func:`~hgresearch.sim.slo_rate.highest_rate_within`, ``bisection_steps`` halvings; 0 when
  even ``min_rate_fraction`` × throughput misses). The point is the median over seeds, the
  interval their minimum and maximum.

Step times: the candidate's ``step_time`` coefficients, else those given to the provider per
configuration label, else **the roofline floor alone** (a physical lower bound: optimistic
latencies, overstated rates; ``step_time_source`` says which). A configuration the model
does not fit (weights larger than memory) or whose KV cache cannot hold one request of the
class gets rate 0 (``limited_by = "memory"``).

:func:`replica_rate_table` evaluates every combination and caches the table by a hash of its
inputs and of the simulator's and planner's code (:func:`hgresearch.cache.cached`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
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

#: A throughput burst holds at least this many full batches of ``max_num_seqs`` requests.
BURST_BATCHES = 4
#: ``step_time_source`` of a replica running on the roofline floor alone.
ROOFLINE_ONLY = "roofline floor only (uncalibrated)"


@dataclass(frozen=True)
class ClassRate:
    """SLO-safe request rate (req/s) of one replica for one traffic class, with an interval,
    and what limits it (``slo``, ``throughput`` or ``memory``)."""

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


def _percentile(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else float("nan")


def slo_holds(ttft_ms: np.ndarray, tpot_ms: np.ndarray, slo: SLOClass) -> bool:
    """Whether requests with these TTFTs and TPOTs meet the class's SLO."""
    if slo.ttft_ms is not None and not _percentile(ttft_ms, slo.ttft_percentile) <= slo.ttft_ms:
        return False
    tpot = tpot_ms[np.isfinite(tpot_ms)]
    return slo.tpot_ms is None or not len(tpot) \
        or _percentile(tpot, slo.tpot_percentile) <= slo.tpot_ms


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
        num_requests: requests per simulation.
        seeds: seeds of the Poisson arrivals (the interval is over them).
        bisection_steps: halvings of the rate interval.
        batch_utilisation: fraction of the burst throughput a batch class may use.
        min_rate_fraction: below this fraction of the throughput a missed SLO gives 0.
        source: how the step times were obtained (reported with the plan).
    """

    def __init__(self, step_times: Mapping[str, Mapping[str, float]] | None = None, *,
                 fits: Mapping[str, Calibration] | None = None,
                 ttft_offsets_ms: Mapping[str, float] | None = None, num_requests: int = 300,
                 seeds: tuple[int, ...] = (0, 1, 2),
                 bisection_steps: int = 7, batch_utilisation: float = 0.9,
                 min_rate_fraction: float = 0.02, source: str | None = None) -> None:
        if num_requests < 20:
            raise InputError("expected at least 20 requests per simulation",
                             field="num_requests")
        if not seeds:
            raise InputError("expected at least one seed", field="seeds")
        if not 0 < batch_utilisation <= 1:
            raise InputError("expected a fraction in (0, 1]", field="batch_utilisation")
        self.step_times = {k: dict(v) for k, v in (step_times or {}).items()}
        self.ttft_offsets_ms = {k: float(v) for k, v in (ttft_offsets_ms or {}).items()}
        self.fits: dict[str, Calibration] = dict(fits or {})
        self.num_requests = num_requests
        self.seeds = tuple(seeds)
        self.bisection_steps = bisection_steps
        self.batch_utilisation = batch_utilisation
        self.min_rate_fraction = min_rate_fraction
        self.source = source or ("calibrated" if fits else "given step-time coefficients"
                                 if step_times else ROOFLINE_ONLY)
        # A class's throughput depends on the replica and the lengths, not on its SLO: each
        # (model, candidate, length) is simulated once, however many SLO classes ask.
        self._throughput_rps: dict[tuple[str, Candidate, LengthClass], float] = {}

    def describe(self) -> dict[str, object]:
        """Settings that change the result."""
        return {"provider": "SimulatedReplicaRates", "step_times": self.step_times,
                "ttft_offsets_ms": self.ttft_offsets_ms,
                "fits": {label: [repr(fit.coefficients), repr(fit.replica.config)]
                         for label, fit in sorted(self.fits.items())},
                "num_requests": self.num_requests, "seeds": list(self.seeds),
                "bisection_steps": self.bisection_steps,
                "batch_utilisation": self.batch_utilisation,
                "min_rate_fraction": self.min_rate_fraction}

    def step_time(self, model: str, candidate: Candidate) -> dict[str, float] | None:
        """The candidate's coefficients, else the provider's for its label, else None."""
        if candidate.step_time is not None:
            return dict(candidate.step_time)
        return self.step_times.get(candidate.label(model))

    def ttft_offset_ms(self, model: str, candidate: Candidate) -> float:
        """The calibration's request-path delay where the candidate runs its calibration, else
        the offset given for its label, else 0."""
        label = candidate.label(model)
        if self.step_time(model, candidate) is None and label in self.fits:
            return float(self.fits[label].coefficients.ttft_offset_s) * 1e3
        return self.ttft_offsets_ms.get(label, 0.0)

    def replica(self, model: str, candidate: Candidate) -> SimReplica | None:
        """One simulated replica of ``candidate`` (None when the model does not fit)."""
        from hgresearch.plan.fleetfile import fleet_spec
        from hgresearch.sim.fleet import sim_replicas
        from hgresearch.sim.fleet_spec import Fleet

        spec = fleet_spec(model, candidate, 1, self.step_time(model, candidate))
        try:
            return sim_replicas(Fleet(replicas=[spec]), fits=self.fits)[0]
        except InputError as err:
            if "no room for KV cache" in err.reason:
                return None
            raise

    def _simulate(self, replica: SimReplica, arrivals_s: np.ndarray, length: LengthClass
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """TTFT (ms), TPOT (ms) and completion time (s) of every request of one run."""
        from hgresearch.sim.simulator import make_requests, run_replica

        n = len(arrivals_s)
        requests = make_requests(replica.config, arrivals_s, [length.prompt_tokens] * n,
                                 [length.output_tokens] * n)
        run_replica(replica.config, replica.step_model, requests)
        first = np.array([r.first_token_s - r.arrival_s for r in requests])
        done = np.array([r.done_s for r in requests])
        decode_s = np.array([r.done_s - r.first_token_s for r in requests])
        tpot = np.where(length.output_tokens > 1, decode_s / max(length.output_tokens - 1, 1),
                        np.nan)
        return first * 1e3, tpot * 1e3, done

    def burst_throughput_rps(self, replica: SimReplica, length: LengthClass) -> float:
        """Completions per second in the middle 80% of a burst of ``num_requests`` requests,
        at least :data:`BURST_BATCHES` full batches (``max_num_seqs``): a burst that fits one
        batch finishes at once and says nothing about the sustained rate."""
        from hgresearch.sim.slo_rate import middle_completion_rate_rps

        size = max(self.num_requests, BURST_BATCHES * replica.config.max_num_seqs)
        _, _, done = self._simulate(replica, np.zeros(size), length)
        return middle_completion_rate_rps(done)

    def class_rate(self, model: str, candidate: Candidate, length: LengthClass,
                   slo: SLOClass) -> ClassRate:
        """See the module docstring."""
        from hgresearch.sim.slo_rate import highest_rate_within
        from hgresearch.traffic.arrivals import arrival_offsets_ns

        replica = self.replica(model, candidate)
        offset_ms = self.ttft_offset_ms(model, candidate)
        if replica is None or length.tokens - 1 > replica.config.kv_cache_tokens:
            return ClassRate(0.0, 0.0, 0.0, "memory")
        key = (model, candidate, length)
        if key not in self._throughput_rps:
            self._throughput_rps[key] = self.burst_throughput_rps(replica, length)
        throughput = self._throughput_rps[key]
        if slo.is_batch:
            rate = self.batch_utilisation * throughput
            return ClassRate(rate, rate, rate, "throughput")
        rates, limits = [], []
        for seed in self.seeds:
            unit = arrival_offsets_ns(self.num_requests, 1.0, seed=seed) / 1e9

            def holds(rate: float, unit: np.ndarray = unit, replica: SimReplica = replica
                      ) -> bool:
                ttft, tpot, _ = self._simulate(replica, unit / rate, length)
                return slo_holds(ttft + offset_ms, tpot, slo)

            rate = highest_rate_within(holds, throughput, min_fraction=self.min_rate_fraction,
                                       steps=self.bisection_steps)
            rates.append(rate)
            limits.append("throughput" if rate == throughput else "slo")
        return ClassRate(float(np.median(rates)), float(min(rates)), float(max(rates)),
                         max(set(limits), key=limits.count))


class ReplicaSettings(TypedDict):
    """What a plan carries from its rate provider (:func:`replica_settings`): keyword options of
    :func:`hgresearch.plan.solve.solve`."""

    capacity_source: str
    step_times: dict[str, dict[str, float]]
    ttft_offsets_ms: dict[str, float]
    fits: dict[str, Calibration]


def replica_settings(problem: PlanProblem, provider: ReplicaRateProvider) -> ReplicaSettings:
    """What a plan must carry from the provider so that its check and its fleet file run the
    replicas its rates assumed: keyword options of :func:`hgresearch.plan.solve.solve`
    (``capacity_source``, ``step_times``, ``ttft_offsets_ms``, ``fits``)."""
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
            "ttft_offsets_ms": offsets, "fits": fits}


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
