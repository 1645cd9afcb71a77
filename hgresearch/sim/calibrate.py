"""Calibration: fit a configuration's step-time coefficients by simulating its measured runs.

The step time of a replica is (:class:`~hgresearch.sim.step_time.LinearStepTimeModel`)::

    t = c0 · (1 + kv_bytes_per_token · kv_tokens_read / weights_bytes)
        + c_prefill · prefill_tokens + c_decode · decode_seqs,   at least the roofline floor

i.e. the per-step constant ``c0`` (reading the weights, launching kernels) scales with the
bytes read, so reading the KV costs per byte what reading the weights does; plus a constant
request-path delay ``ttft_offset`` (HTTP, tokenisation) added to every request's first token
and completion. Four numbers per configuration: the three step coefficients are searched in
log space with Nelder–Mead (:func:`scipy.optimize.minimize`; the simulated error surface is
rugged where scheduling decisions flip, which stalls gradient methods), minimising a robust
(soft-L1) loss of the log-ratios simulated / measured of :data:`TARGETS` at each calibration
point (one point per offered rate; repeated runs averaged); the offset is solved for inside
each evaluation (it shifts every TTFT by itself). Uncertainty: ``s² (JᵀJ)⁻¹`` from central
differences of the residuals at the optimum.

The simulation of a point does not depend on the offset, so the fit re-simulates only when a
step coefficient changes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import minimize, minimize_scalar

from hgresearch.errors import InputError
from hgresearch.identity import config_label
from hgresearch.sim.entities import ReplicaConfig
from hgresearch.sim.replay import Workload
from hgresearch.sim.replica_limits import (
    kv_bytes_per_token,
    kv_cache_tokens_from_log,
    replica_config_from_catalogs,
    roofline_floor_from_catalogs,
    weights_bytes,
)
from hgresearch.sim.simulator import cyclic_gc_paused, make_requests, request_times, run_replica
from hgresearch.sim.step_time import LinearStepTimeModel, RooflineFloor

#: Summary columns (runs-table names) the calibration matches and the validation reports.
TARGETS = ("duration_s", "request_throughput_rps", "output_throughput_tok_per_s",
           "mean_tpot_ms", "p50_ttft_ms", "p90_ttft_ms", "p99_ttft_ms")
#: Bounds of the fitted numbers: c0 (s), c_prefill (s/token), c_decode (s/seq), offset (s).
LOWER = (1e-5, 1e-9, 1e-8, 0.0)
UPPER = (10.0, 1e-1, 1e-1, 0.5)
#: First simplex steps in log coefficient (c0, c_prefill, c_decode): c0 is known to ~30% from
#: the lowest rate's TPOT, the others only to an order of magnitude.
INITIAL_STEPS = (0.3, 1.0, 1.0)
#: Log-error scale of the robust (Cauchy) loss: errors well above ~10% count less than squared.
ROBUST_SCALE = 0.1
#: Bound the per-token coefficients below by the roofline's compute time per token.
PHYSICAL_BOUNDS = True
#: Robust loss of the calibration: "soft_l1" (squared for small log-errors, linear for large)
#: or "cauchy" (logarithmic for large: outliers all but ignored).
LOSS = "soft_l1"
#: Finite-difference step of the Jacobian (uncertainty), in log coefficient.
DIFF_STEP = 0.1
#: Most objective evaluations of one calibration's simplex search.
MAX_EVALUATIONS = 50


@dataclass(frozen=True)
class Replica:
    """What is fixed about a configuration: its label, scheduler limits and KV cache, roofline
    floor (``None`` where the catalogs lack the hardware, e.g. CPU) and the KV-to-weights byte
    ratio that ties the KV read cost to ``c0``."""

    label: str
    model: str
    gpu_name: str
    num_gpus: int
    config: ReplicaConfig
    floor: RooflineFloor | None
    kv_per_weight_byte: float


@dataclass(frozen=True)
class StepCoefficients:
    """Fitted numbers of one configuration (see the module docstring)."""

    c0_s: float
    c_prefill_s_per_token: float
    c_decode_s_per_seq: float
    ttft_offset_s: float = 0.0
    #: Seconds per KV token read by attention; ``None``: ``c0_s × kv_per_weight_byte`` (a KV
    #: byte costs what a weight byte does — the per-configuration calibration). The shared
    #: cross-configuration model (:mod:`hgresearch.sim.step_model`) sets it from its own
    #: KV-read efficiency.
    c_kv_s_per_token: float | None = None

    def as_array(self) -> np.ndarray:
        """``[c0, c_prefill, c_decode, offset]``."""
        return np.array([self.c0_s, self.c_prefill_s_per_token, self.c_decode_s_per_seq,
                         self.ttft_offset_s])

    def step_model(self, replica: Replica) -> LinearStepTimeModel:
        """The replica's step-time model with these coefficients."""
        return LinearStepTimeModel(
            c0_s=self.c0_s, c_prefill_s_per_token=self.c_prefill_s_per_token,
            c_decode_s_per_seq=self.c_decode_s_per_seq,
            c_kv_s_per_token=(self.c0_s * replica.kv_per_weight_byte
                              if self.c_kv_s_per_token is None else self.c_kv_s_per_token),
            floor=replica.floor)


@dataclass(frozen=True)
class Calibration:
    """Result of :func:`calibrate`: coefficients, the relative standard errors of the three
    step coefficients, the calibration rates and the fit's RMS
    log-error."""

    replica: Replica
    coefficients: StepCoefficients
    rel_se: tuple[float, float, float]
    rates_qps: tuple[float, ...]
    rms_log_error: float
    num_simulations: int
    extra: dict[str, Any] = field(default_factory=dict)

    def scaled(self, step_time_factor: float) -> Calibration:
        """This calibration with every simulated step ``step_time_factor`` times as long (and
        the TTFT offset with it): the slow (> 1) or fast (< 1) end of a prediction interval
        (:mod:`hgresearch.sim.intervals`). The roofline floor scales too, so that a step the
        floor bounds slows down like any other."""
        if not (math.isfinite(step_time_factor) and step_time_factor > 0):
            raise ValueError(f"step_time_factor must be a positive number, not {step_time_factor}")
        c = self.coefficients
        coefficients = StepCoefficients(
            c0_s=c.c0_s * step_time_factor,
            c_prefill_s_per_token=c.c_prefill_s_per_token * step_time_factor,
            c_decode_s_per_seq=c.c_decode_s_per_seq * step_time_factor,
            ttft_offset_s=c.ttft_offset_s * step_time_factor,
            c_kv_s_per_token=(None if c.c_kv_s_per_token is None
                              else c.c_kv_s_per_token * step_time_factor))
        floor = self.replica.floor
        if floor is not None:
            floor = replace(floor,
                            bandwidth_bytes_per_s=floor.bandwidth_bytes_per_s / step_time_factor,
                            peak_flops_per_s=floor.peak_flops_per_s / step_time_factor)
        return replace(self, replica=replace(self.replica, floor=floor),
                       coefficients=coefficients,
                       extra={**self.extra, "step_time_factor": step_time_factor})


def vllm085_scheduler_limits(gpu_name: str) -> dict[str, int]:
    """vLLM 0.8.5's scheduler limits for its OpenAI server on ``gpu_name`` when none are given
    (``EngineArgs._set_default_args_v1``: a device whose name contains "h100" or "h200" gets
    ``max_num_seqs`` 1024 and ``max_num_batched_tokens`` 8192, any other 256 and 2048). The
    reference runs left both at their defaults; a wrong budget distorts TTFT at load (the
    prefill chunk per step and the batch size are both capped by them)."""
    name = gpu_name.lower()
    if "h100" in name or "h200" in name:
        return {"max_num_seqs": 1024, "max_num_batched_tokens": 8192}
    return {"max_num_seqs": 256, "max_num_batched_tokens": 2048}


def replica_for(model: str, gpu_name: str, gpu_count: int, *, label: str | None = None,
                kv_cache_tokens: int | None = None, **config_kwargs: int) -> Replica:
    """The :class:`Replica` of ``model`` on ``gpu_count`` × ``gpu_name`` (tensor parallel).

    KV blocks come from the server-reported capacity when given (``kv_cache_tokens``), else
    from the catalogs; the roofline floor from the catalogs where they know the hardware.
    """
    label = label or config_label({"model": model, "gpu_name": gpu_name, "gpu_count": gpu_count})
    ratio = kv_bytes_per_token(model) / weights_bytes(model)
    block_size = int(config_kwargs.get("block_size", 16))
    if kv_cache_tokens is not None:
        config = ReplicaConfig(num_kv_blocks=max(kv_cache_tokens // block_size, 1),
                               **config_kwargs)
    else:
        config = replica_config_from_catalogs(model, gpu_name, num_gpus=gpu_count,
                                              **config_kwargs)
    floor: RooflineFloor | None
    try:
        floor = roofline_floor_from_catalogs(model, gpu_name, num_gpus=gpu_count)
        if not (math.isfinite(floor.bandwidth_bytes_per_s) and floor.bandwidth_bytes_per_s > 0
                and math.isfinite(floor.peak_flops_per_s) and floor.peak_flops_per_s > 0):
            floor = None
    except (InputError, ValueError, TypeError):
        floor = None
    return Replica(label=label, model=model, gpu_name=gpu_name, num_gpus=gpu_count,
                   config=config, floor=floor, kv_per_weight_byte=ratio)


def replica_for_runs(runs: pd.DataFrame) -> Replica:
    """:func:`replica_for` the configuration of ``runs`` (one configuration of a runs table);
    the KV capacity is read from a run folder's server log when one has it."""
    from hgresearch.data.runfolder import SERVER_LOG_FILE
    from hgresearch.identity import hardware_label

    first = runs.iloc[0]
    kv_tokens = None
    for run_dir in runs.get("run_dir", pd.Series(dtype=object)).dropna():
        if not isinstance(run_dir, str) or not run_dir:
            continue
        from pathlib import Path

        for log in (Path(run_dir) / SERVER_LOG_FILE, Path(run_dir).parent / SERVER_LOG_FILE):
            if log.is_file():
                kv_tokens = kv_cache_tokens_from_log(log.read_text(errors="replace"))
                if kv_tokens:
                    break
        if kv_tokens:
            break
    label = f"{first['model']} on {hardware_label(first['gpu_name'], int(first['gpu_count']))}"
    return replica_for(str(first["model"]), str(first["gpu_name"]), int(first["gpu_count"]),
                       label=label, kv_cache_tokens=kv_tokens,
                       **vllm085_scheduler_limits(str(first["gpu_name"])))


@dataclass(frozen=True)
class SimulatedTimes:
    """Per-request times of one simulated run (s from the first send), before the offset."""

    arrivals_s: np.ndarray
    first_token_s: np.ndarray
    done_s: np.ndarray
    output_tokens: np.ndarray
    prompt_tokens: np.ndarray
    min_duration_s: float


def simulate_times(replica: Replica, coefficients: StepCoefficients,
                   workload: Workload) -> SimulatedTimes:
    """Simulate ``workload`` on ``replica``; the per-request times as arrays."""
    with cyclic_gc_paused():
        requests = make_requests(replica.config, workload.arrivals_s, workload.prompt_tokens,
                                 workload.output_tokens)
        run_replica(replica.config, coefficients.step_model(replica), requests)
    arrivals_s, first_token_s, done_s = request_times(requests)
    return SimulatedTimes(
        arrivals_s=np.array(arrivals_s, dtype=float),
        first_token_s=np.array(first_token_s, dtype=float),
        done_s=np.array(done_s, dtype=float),
        output_tokens=np.asarray(workload.output_tokens, dtype="int64"),
        prompt_tokens=np.asarray(workload.prompt_tokens, dtype="int64"),
        min_duration_s=workload.min_duration_s)


def summary_from_times(times: SimulatedTimes, ttft_offset_s: float = 0.0) -> dict[str, float]:
    """The :data:`TARGETS` (and total token throughput) of a simulated run, computed as vLLM's
    benchmark does: duration = the later of the last response and the end of the send loop
    (``min_duration_s``); TPOT over requests with more than one output token; percentiles with
    linear interpolation (``numpy.percentile``, as :func:`hgresearch.data.summary.describe`)."""
    ttft_ms = (times.first_token_s - times.arrivals_s + ttft_offset_s) * 1e3
    multi = times.output_tokens > 1
    tpot_ms = ((times.done_s[multi] - times.first_token_s[multi])
               / (times.output_tokens[multi] - 1)) * 1e3
    duration = max(float(times.done_s.max()) + ttft_offset_s, times.min_duration_s)
    n = len(times.done_s)
    out_tok = float(times.output_tokens.sum())
    p50, p90, p99 = np.percentile(ttft_ms, [50, 90, 99])
    return {
        "duration_s": duration,
        "request_throughput_rps": n / duration,
        "output_throughput_tok_per_s": out_tok / duration,
        "total_token_throughput_tok_per_s": (out_tok + float(times.prompt_tokens.sum()))
        / duration,
        "mean_tpot_ms": float(tpot_ms.mean()) if len(tpot_ms) else math.nan,
        "mean_ttft_ms": float(ttft_ms.mean()),
        "p50_ttft_ms": float(p50), "p90_ttft_ms": float(p90), "p99_ttft_ms": float(p99),
    }


#: Summary columns that are a token count over the duration (numerator per run).
_PER_DURATION = ("request_throughput_rps", "output_throughput_tok_per_s",
                 "total_token_throughput_tok_per_s")


class SummaryAtOffset:
    """:func:`summary_from_times` of several runs as a function of the request-path offset,
    computed once per run: the offset adds itself to every TTFT (so to each TTFT percentile
    and the mean) and moves the last response, hence the duration and the throughputs;
    nothing else depends on it. Calling it costs a few array operations instead of a
    percentile per run and offset (the calibration solves for the offset inside every
    evaluation). Equal to :func:`summary_from_times` up to float rounding."""

    def __init__(self, times: Sequence[SimulatedTimes], columns: Sequence[str]) -> None:
        rows = [summary_from_times(t, 0.0) for t in times]
        self.at_zero = np.array([[row[k] for k in columns] for row in rows], dtype=float)
        self.last_done_s = np.array([float(t.done_s.max()) for t in times])
        self.min_duration_s = np.array([t.min_duration_s for t in times])
        numerators = {
            "request_throughput_rps": [float(len(t.done_s)) for t in times],
            "output_throughput_tok_per_s": [float(t.output_tokens.sum()) for t in times],
            "total_token_throughput_tok_per_s": [
                float(t.output_tokens.sum() + t.prompt_tokens.sum()) for t in times]}
        self.duration_column = [j for j, k in enumerate(columns) if k == "duration_s"]
        self.per_duration = [(j, np.array(numerators[k])) for j, k in enumerate(columns)
                             if k in _PER_DURATION]
        self.ttft_columns = [j for j, k in enumerate(columns) if k.endswith("_ttft_ms")]

    def __call__(self, ttft_offset_s: float) -> np.ndarray:
        """The summaries (one row per run, the given columns) at ``ttft_offset_s``."""
        out = self.at_zero.copy()
        duration_s = np.maximum(self.last_done_s + ttft_offset_s, self.min_duration_s)
        for j in self.duration_column:
            out[:, j] = duration_s
        for j, numerator in self.per_duration:
            out[:, j] = numerator / duration_s
        for j in self.ttft_columns:
            out[:, j] += ttft_offset_s * 1e3
        return out


def simulate_summary(replica: Replica, coefficients: StepCoefficients,
                     workload: Workload) -> dict[str, float]:
    """:func:`summary_from_times` of :func:`simulate_times`."""
    return summary_from_times(simulate_times(replica, coefficients, workload),
                              coefficients.ttft_offset_s)


def coefficient_lower_bounds(replica: Replica) -> tuple[float, float, float]:
    """Lower bounds of (c0, c_prefill, c_decode): :data:`LOWER`, and where the roofline is
    known, a token (prefilled or decoded) costs at least its FLOPs at the peak rate (the
    linear model adds the per-token costs to ``c0``, so without this bound a fit can make
    prefill nearly free — which only the rare prefill-heavy steps of a burst would contradict)."""
    if PHYSICAL_BOUNDS and replica.floor is not None:
        per_token = replica.floor.flops_per_token / replica.floor.peak_flops_per_s
        return (LOWER[0], max(LOWER[1], per_token), max(LOWER[2], per_token))
    return (LOWER[0], LOWER[1], LOWER[2])


def robust_loss(log_errors: np.ndarray) -> float:
    """Sum of ``LOSS`` over log-errors scaled by :data:`ROBUST_SCALE`."""
    z = (np.asarray(log_errors) / ROBUST_SCALE) ** 2
    if LOSS == "cauchy":
        return float(np.sum(np.log1p(z)))
    return float(np.sum(2.0 * (np.sqrt(1.0 + z) - 1.0)))  # soft-L1: linear for large errors


def _initial_guess(measured: pd.DataFrame, replica: Replica) -> np.ndarray:
    """A start from the calibration points only: c0 from the lowest-rate TPOT (nearly a
    one-sequence decode step), the others a fixed fraction of it."""
    lowest = measured.sort_values("request_rate_qps").iloc[0]
    c0 = float(lowest.mean_tpot_ms) / 1e3 * 0.9
    if replica.floor is not None:
        c0 = max(c0, replica.floor.floor_s(0, 1, 0))
    # Prefill: twice the roofline's compute time per token (~50% of peak FLOPS) where known.
    prefill = (2.0 * replica.floor.flops_per_token / replica.floor.peak_flops_per_s
               if replica.floor is not None else c0 / 2000.0)
    return np.array([math.log(c0), math.log(prefill), math.log(c0 / 200.0), 0.002])


def calibrate(replica: Replica, measured: pd.DataFrame, workloads: Sequence[Workload], *,
              targets: Sequence[str] = TARGETS, max_evaluations: int = MAX_EVALUATIONS,
              uncertainty: bool = True) -> Calibration:
    """Fit ``replica``'s :class:`StepCoefficients` to ``measured`` (one row per calibration
    point, columns :data:`TARGETS` and ``request_rate_qps``) by simulating ``workloads`` (one
    per row, same order).

    ``uncertainty=False`` skips the standard errors (six more evaluations; ``rel_se`` is then
    NaN): the leave-one-out validation uses only the coefficients.

    Raises:
        InputError: without calibration points or with a row lacking a target.
    """
    if len(measured) == 0 or len(measured) != len(workloads):
        raise InputError(f"expected one workload per calibration point, got {len(workloads)} "
                         f"for {len(measured)}", field="request_rate_qps")
    observed = measured[list(targets)].to_numpy(dtype=float)
    if not np.isfinite(observed).all() or (observed <= 0).any():
        raise InputError(f"{replica.label}: every calibration point needs positive "
                         f"{', '.join(targets)}", field="targets")
    log_observed = np.log(observed)
    ttft_columns = [i for i, k in enumerate(targets) if k.endswith("_ttft_ms")]
    cache: dict[tuple[float, float, float], tuple[np.ndarray, float]] = {}

    def projected(x: np.ndarray) -> tuple[np.ndarray, float]:
        """Log-residuals at the best offset for these step coefficients, and that offset:
        the offset moves every TTFT percentile by itself and nothing else (durations by a
        negligible amount), so it is solved for inside (variable projection)."""
        key = (float(x[0]), float(x[1]), float(x[2]))
        if key in cache:
            return cache[key]
        coefs = StepCoefficients(math.exp(x[0]), math.exp(x[1]), math.exp(x[2]))
        summaries = SummaryAtOffset([simulate_times(replica, coefs, w) for w in workloads],
                                    targets)

        def at(offset_s: float) -> np.ndarray:
            log_errors: np.ndarray = np.log(summaries(offset_s)) - log_observed
            return log_errors

        def ttft_cost(offset_s: float) -> float:
            return robust_loss(at(offset_s)[:, ttft_columns])

        offset = (minimize_scalar(ttft_cost, bounds=(LOWER[3], UPPER[3]), method="bounded",
                                  options={"xatol": 1e-5}).x if ttft_columns else 0.0)
        cache[key] = (at(float(offset)).ravel(), float(offset))
        return cache[key]

    lower = np.log(np.array(coefficient_lower_bounds(replica)))
    upper = np.log(np.array(UPPER[:3]))
    x0 = np.clip(_initial_guess(measured, replica)[:3], lower + 1e-9, upper - 1e-9)
    # Simulated percentiles jump where a scheduling decision flips, so the error surface is
    # rugged at the scale of a few percent: a simplex search (no gradients) over the log
    # coefficients, bounded by clipping, is steadier than a gradient method. The robust
    # (Cauchy) loss keeps a few points the replica model cannot represent (e.g. runs whose TTFT
    # falls as the load rises) from dragging the others.
    def robust_cost(x: np.ndarray) -> float:
        return robust_loss(projected(np.clip(x, lower, upper))[0])

    simplex = np.vstack([x0] + [x0 + step for step in np.diag(INITIAL_STEPS)])
    result = minimize(robust_cost, x0, method="Nelder-Mead",
                      options={"maxfev": max_evaluations, "xatol": 0.01, "fatol": 1e-3,
                               "initial_simplex": simplex})
    x = np.clip(result.x, lower, upper)
    residuals, offset = projected(x)
    coefs = StepCoefficients(math.exp(x[0]), math.exp(x[1]), math.exp(x[2]), offset)
    rel_se = (math.nan, math.nan, math.nan)
    if uncertainty:
        # Central differences of the residuals at the optimum (step DIFF_STEP in log),
        # s² (JᵀJ)⁻¹ with s² the residual variance.
        jac = np.column_stack([
            (projected(np.clip(x + DIFF_STEP * e, lower, upper))[0]
             - projected(np.clip(x - DIFF_STEP * e, lower, upper))[0]) / (2 * DIFF_STEP)
            for e in np.eye(len(x))])
        dof = max(len(residuals) - len(x) - 1, 1)
        s2 = float(residuals @ residuals) / dof
        se = np.sqrt(np.clip(np.diag(s2 * np.linalg.pinv(jac.T @ jac)), 0.0, None))
        # A log-space standard error s is a relative one of exp(s) - 1 (upper side); a
        # coefficient the points do not constrain (flat direction) gets an infinite one.
        c0_se, prefill_se, decode_se = (float(math.expm1(v)) if v < 50 else math.inf
                                        for v in se[:3])
        rel_se = (c0_se, prefill_se, decode_se)
    return Calibration(replica=replica, coefficients=coefs, rel_se=rel_se,
                       rates_qps=tuple(float(r) for r in measured.request_rate_qps),
                       rms_log_error=float(math.sqrt(np.mean(residuals ** 2))),
                       num_simulations=len(cache) * len(workloads))
