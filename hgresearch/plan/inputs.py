"""What a fleet plan is asked for: typed inputs, checked before anything is simulated or solved.

A :class:`PlanProblem` holds the model, the demand (one rate, or one per hour), the workload's
length classes, the SLO classes, the candidate configurations with their availability caps,
the price scenario and the carbon settings. Traffic classes are the pairs (SLO class, length
class): class ``"interactive/short"`` gets ``slo.share × length.fraction`` of the demand.

Prices come from ``hgresearch/data/catalogs/prices.csv`` (``alternative``, ``hyperscaler``);
hardware already owned (``PriceScenario.owned_gpus``) pays electricity only: its power (the
TDP model of :mod:`hgresearch.accounting.energy`) × the region's price in
``hgresearch/data/catalogs/electricity_prices.csv``. Carbon per replica-hour is operational (the
same power × the grid intensity of ``hgresearch/data/catalogs/grid_carbon.csv``, or an hourly
profile) plus embodied (:func:`hgresearch.accounting.carbon.embodied_g_per_serving_h`; sunk for the
GPU
classes of the hardware scenario, :data:`hgresearch.accounting.carbon.SCENARIOS`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hgresearch.errors import InputError
from hgresearch.identity import config_label, hardware_label

#: Percentiles an SLO may name.
SLO_PERCENTILES = (50.0, 90.0, 95.0, 99.0)


@dataclass(frozen=True)
class LengthClass:
    """Requests of one length bucket: their prompt and output tokens (the bucket's
    representative lengths) and the fraction of requests in it."""

    name: str
    prompt_tokens: int
    output_tokens: int
    fraction: float = 1.0

    @property
    def tokens(self) -> int:
        """Prompt + output tokens of one request."""
        return self.prompt_tokens + self.output_tokens


@dataclass(frozen=True)
class SLOClass:
    """A class of traffic with latency objectives: the ``ttft_percentile`` of TTFT within
    ``ttft_ms`` and the ``tpot_percentile`` of TPOT within ``tpot_ms`` (either may be None). A
    class with neither is a batch class: it needs throughput only. ``share`` is its fraction of
    the demand."""

    name: str
    share: float = 1.0
    ttft_ms: float | None = None
    ttft_percentile: float = 99.0
    tpot_ms: float | None = None
    tpot_percentile: float = 99.0

    @property
    def is_batch(self) -> bool:
        """No latency objective: only the throughput counts."""
        return self.ttft_ms is None and self.tpot_ms is None

    def describe(self) -> str:
        """``p99 TTFT <= 500 ms``, ``batch``, ..."""
        parts = []
        if self.ttft_ms is not None:
            parts.append(f"p{self.ttft_percentile:g} TTFT <= {self.ttft_ms:g} ms")
        if self.tpot_ms is not None:
            parts.append(f"p{self.tpot_percentile:g} TPOT <= {self.tpot_ms:g} ms")
        return ", ".join(parts) or "batch (no latency SLO)"


@dataclass(frozen=True)
class Candidate:
    """A configuration the planner may use: ``num_gpus`` × ``gpu_name`` serving the model
    (tensor parallel), at most ``max_replicas`` copies (None: no limit), or a cap per hour
    (``max_replicas_by_hour``, as long as the demand profile). ``step_time``: linear step-time
    coefficients (as a fleet file's ``step_time``) for the simulator; None: the capacity
    provider's own step model."""

    gpu_name: str
    num_gpus: int = 1
    max_replicas: int | None = None
    max_replicas_by_hour: tuple[int, ...] | None = None
    step_time: tuple[tuple[str, float], ...] | None = None

    def label(self, model: str) -> str:
        """``MODEL on Nx GPU`` (:func:`hgresearch.identity.config_label`)."""
        return config_label({"model": model, "gpu_name": self.gpu_name,
                             "gpu_count": self.num_gpus})

    @property
    def hardware(self) -> str:
        """``Nx GPU``."""
        return hardware_label(self.gpu_name, self.num_gpus)


@dataclass(frozen=True)
class Demand:
    """Request rate (req/s) per planning period: one value for a steady load, 24 for a day."""

    rate_rps: tuple[float, ...]

    @classmethod
    def steady(cls, rate_rps: float) -> Demand:
        """One period at ``rate_rps``."""
        return cls((float(rate_rps),))

    @property
    def hours(self) -> int:
        """Number of periods (hours)."""
        return len(self.rate_rps)


@dataclass(frozen=True)
class PriceScenario:
    """What a GPU-hour costs: the ``scenario`` of ``hgresearch/data/catalogs/prices.csv``; GPUs in
    ``owned_gpus`` pay electricity only (power × the price of ``electricity_region`` in
    ``hgresearch/data/catalogs/electricity_prices.csv``); ``overrides_usd_per_gpu_h`` win over
    both."""

    scenario: str = "alternative"
    owned_gpus: tuple[str, ...] = ()
    electricity_region: str = "EU-27"
    overrides_usd_per_gpu_h: tuple[tuple[str, float], ...] = ()

    def describe(self) -> str:
        """``alternative``, ``alternative; RTX-4090 owned (electricity, DE)``."""
        text = self.scenario
        if self.owned_gpus:
            text += f"; {', '.join(self.owned_gpus)} owned (electricity only, " \
                    f"{self.electricity_region})"
        return text


@dataclass(frozen=True)
class CarbonSettings:
    """Operational + embodied carbon of a replica-hour.

    ``grid_region``: a region of ``hgresearch/data/catalogs/grid_carbon.csv``;
    ``hourly_g_per_kwh``: an intensity per hour instead (as long as the demand profile).
    ``hardware_scenario``: ``new`` (every GPU's embodied carbon is charged) or
    ``idle_consumer`` (consumer GPUs exist anyway: theirs is sunk);
    ``lifetime_years``/``utilisation``: the serving hours embodied carbon is spread over.
    ``tdp``: the power assumption (:func:`hgresearch.accounting.energy.tdp_per_gpu_w`: ``paper`` or
    ``datasheet``); every GPU of a replica draws it for every hour the replica is on.
    ``tdp_overrides_w``: the power of one GPU (W) by GPU name, for GPUs the catalogs give none
    (a CPU, a GPU outside them; ``hgresearch plan --tdp GPU=W``); wins over ``tdp``.
    """

    grid_region: str = "EU-27"
    hourly_g_per_kwh: tuple[float, ...] | None = None
    hardware_scenario: str = "new"
    lifetime_years: float = 4.0
    utilisation: float = 0.5
    tdp: str = "datasheet"
    tdp_overrides_w: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class PlanProblem:
    """Everything a plan is computed from (see the module docstring).

    ``gpu_caps``: at most this many GPUs of a type over all configurations (e.g.
    ``{"H100-PCIe": 2}``), or one cap per hour (a tuple as long as the demand).
    """

    model: str
    demand: Demand
    length_classes: tuple[LengthClass, ...]
    slo_classes: tuple[SLOClass, ...]
    candidates: tuple[Candidate, ...]
    prices: PriceScenario = field(default_factory=PriceScenario)
    carbon: CarbonSettings = field(default_factory=CarbonSettings)
    gpu_caps: tuple[tuple[str, int | tuple[int, ...]], ...] = ()

    def class_keys(self) -> list[tuple[SLOClass, LengthClass]]:
        """Every traffic class, SLO class major."""
        return [(s, length) for s in self.slo_classes for length in self.length_classes]


def class_name(slo: SLOClass, length: LengthClass) -> str:
    """``interactive/short``: the traffic class's name (routing key)."""
    return f"{slo.name}/{length.name}"


def _positive(value: float) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) and value > 0


def _per_hour(values: Sequence[int | float], hours: int, what: str) -> None:
    if len(values) != hours:
        raise InputError(f"expected one value per hour of the demand ({hours}), got "
                         f"{len(values)}", field=what)


def validate(problem: PlanProblem) -> None:
    """Raise :class:`InputError` naming the field for anything the planner cannot use."""
    from hgresearch.accounting.carbon import SCENARIOS
    from hgresearch.accounting.energy import TdpAssumption

    hours = problem.demand.hours
    if hours < 1:
        raise InputError("expected a request rate or an hourly profile", field="demand")
    for h, rate in enumerate(problem.demand.rate_rps):
        if not (isinstance(rate, (int, float)) and math.isfinite(rate) and rate >= 0):
            raise InputError(f"hour {h}: expected a rate >= 0 req/s, got {rate!r}",
                             field="demand")
    if not any(rate > 0 for rate in problem.demand.rate_rps):
        raise InputError("the demand is 0 in every hour: nothing to plan", field="demand")
    if not problem.length_classes:
        raise InputError("expected at least one length class", field="length_classes")
    if not problem.slo_classes:
        raise InputError("expected at least one SLO class", field="slo_classes")
    if not problem.candidates:
        raise InputError("expected at least one candidate configuration", field="candidates")
    for what, items, weight in (("length_classes", problem.length_classes, "fraction"),
                                ("slo_classes", problem.slo_classes, "share")):
        names = [item.name for item in items]
        if len(set(names)) != len(names) or any(not n or "/" in n for n in names):
            raise InputError(f"names must be unique, non-empty and without '/': {names}",
                             field=what)
        if any(not _positive(getattr(item, weight)) for item in items):
            raise InputError(f"every {weight} must be > 0", field=what)
    for length in problem.length_classes:
        for key in ("prompt_tokens", "output_tokens"):
            value = getattr(length, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"length class {length.name!r}: expected an integer >= 1, got "
                                 f"{value!r}", field=key)
    for slo in problem.slo_classes:
        for key in ("ttft_ms", "tpot_ms"):
            value = getattr(slo, key)
            if value is not None and not _positive(value):
                raise InputError(f"SLO class {slo.name!r}: expected a limit > 0 ms, got "
                                 f"{value!r}", field=key)
        for key in ("ttft_percentile", "tpot_percentile"):
            if getattr(slo, key) not in SLO_PERCENTILES:
                raise InputError(f"SLO class {slo.name!r}: expected a percentile in "
                                 f"{SLO_PERCENTILES}, got {getattr(slo, key)!r}", field=key)
    labels = [c.label(problem.model) for c in problem.candidates]
    if len(set(labels)) != len(labels):
        raise InputError(f"candidate configurations repeat: {labels}", field="candidates")
    for c in problem.candidates:
        if isinstance(c.num_gpus, bool) or not isinstance(c.num_gpus, int) or c.num_gpus < 1:
            raise InputError(f"{c.hardware}: expected a GPU count >= 1", field="num_gpus")
        if c.max_replicas is not None and (not isinstance(c.max_replicas, int)
                                           or c.max_replicas < 0):
            raise InputError(f"{c.hardware}: expected a cap >= 0", field="max_replicas")
        if c.max_replicas_by_hour is not None:
            _per_hour(c.max_replicas_by_hour, hours, "max_replicas_by_hour")
    for gpu, cap in problem.gpu_caps:
        caps = cap if isinstance(cap, tuple) else (cap,)
        if isinstance(cap, tuple):
            _per_hour(cap, hours, f"gpu_caps.{gpu}")
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in caps):
            raise InputError(f"{gpu}: expected GPU counts >= 0, got {cap!r}",
                             field=f"gpu_caps.{gpu}")
    if problem.carbon.hourly_g_per_kwh is not None:
        _per_hour(problem.carbon.hourly_g_per_kwh, hours, "hourly_g_per_kwh")
    if problem.carbon.hardware_scenario not in SCENARIOS:
        raise InputError(f"unknown hardware scenario {problem.carbon.hardware_scenario!r}; "
                         f"known: {sorted(SCENARIOS)}", field="hardware_scenario")
    if problem.carbon.tdp not in set(TdpAssumption):
        raise InputError(f"expected one of {', '.join(TdpAssumption)}, got "
                         f"{problem.carbon.tdp!r}", field="tdp")
    # Prices and grid before any simulation: a typo fails at once, not after the capacities.
    from hgresearch.plan.economics import grid_g_per_kwh_by_hour, replica_cost_usd_per_h

    for candidate in problem.candidates:
        replica_cost_usd_per_h(candidate, problem.prices, problem.carbon.tdp)
    grid_g_per_kwh_by_hour(problem.carbon, hours)
    _check_price_and_power(problem)


def _check_price_and_power(problem: PlanProblem) -> None:
    """Every candidate's GPU needs a price (a row of the scenario in ``prices.csv``, or an
    override) and a TDP (``hardware.csv``, or an override): one :class:`InputError` says what is
    missing and the option that gives it (``--price GPU=USD_PER_GPU_H``, ``--tdp GPU=W``)."""
    from hgresearch.plan.economics import replica_power_w

    for candidate in problem.candidates:
        replica_power_w(candidate, problem.carbon.tdp, problem.carbon.tdp_overrides_w)


def length_extrapolation_notes(length_classes: Sequence[LengthClass],
                               calibration_runs: pd.DataFrame) -> list[str]:
    """One note per length class whose prompt or output is longer than any request of the runs
    the step times were calibrated on (each run's requests as the simulator replays them:
    :func:`hgresearch.sim.replay.run_workload`): there the planner's rates rest on the step-time
    model's linear extrapolation in tokens, not on measurement. The note gives the runs' mean
    and longest prompt and output (tokens) beside the class's."""
    from hgresearch.sim.replay import run_workload

    if calibration_runs.empty:
        return []
    prompts, outputs, mean_prompts, mean_outputs = [], [], [], []
    for _, run in calibration_runs.iterrows():
        workload = run_workload(run)
        prompts.append(int(np.max(workload.prompt_tokens)))
        outputs.append(int(np.max(workload.output_tokens)))
        mean_prompts.append(float(np.mean(workload.prompt_tokens)))
        mean_outputs.append(float(np.mean(workload.output_tokens)))
    notes = []
    for length in length_classes:
        beyond = []
        if length.prompt_tokens > max(prompts):
            beyond.append(f"{length.prompt_tokens:,} prompt tokens (calibration runs: mean "
                          f"{min(mean_prompts):,.0f}-{max(mean_prompts):,.0f}, longest "
                          f"{max(prompts):,})")
        if length.output_tokens > max(outputs):
            beyond.append(f"{length.output_tokens:,} output tokens (calibration runs: mean "
                          f"{min(mean_outputs):,.0f}-{max(mean_outputs):,.0f}, longest "
                          f"{max(outputs):,})")
        if beyond:
            notes.append(f"length class {length.name!r} has {' and '.join(beyond)}: its rates "
                         "extrapolate the step-time model beyond every calibration request "
                         "(--length NAME=PROMPT:OUTPUT sets the classes)")
    return notes
