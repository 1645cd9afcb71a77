"""One step-time model across configurations: what the hardware does, with efficiencies per
GPU type shared by every model and tensor-parallel degree.

An engine step of ``model`` on ``n`` × ``gpu`` (tensor parallel) reads the weights and the KV
it attends to, computes ~2 × parameters FLOPs per token, and — with ``n > 1`` — all-reduces
the activations twice per layer over the GPUs' interconnect. At the datasheet rates
(:func:`config_physics`, from ``hardware.csv`` and ``model_architectures.csv``) that is::

    weights_s          = weights bytes / n / memory bandwidth
    kv_s_per_token     = KV bytes per token / n / memory bandwidth
    flops_s_per_token  = 2 × parameters / n / dense peak (FP8 for FP8 weights where the GPU
                         has FP8 tensor cores, else FP16)
    allreduce_calls    = 2 × layers                                   (0 when n = 1)
    allreduce_s_per_token = allreduce_calls × hidden × 2 bytes × 2(n−1)/n / link bandwidth

The step time multiplies each by a factor fitted per GPU type (:data:`PARAMETERS`)::

    t = step_overhead + weights_factor·weights_s
        + allreduce_latency·latency_doubling^log2(n/2)·allreduce_calls
        + (prefill_factor·flops_s_per_token + allreduce_factor·allreduce_s_per_token)
          × prefill tokens
        + (decode_factor·flops_s_per_token
           + allreduce_decode_factor·allreduce_s_per_token) × decode sequences
        + kv_factor·kv_s_per_token × KV tokens read

A factor ≥ 1 is 1 / efficiency against the datasheet — except ``decode_factor``: a decode
step's matrix products run on a handful of rows each, hidden under the weight read (the step is
memory-bound below ~160 sequences on an RTX 4090, ~190 on an H100 PCIe: peak FLOPs / bandwidth
/ 2), so a decoded sequence's *marginal* cost is a fraction of its FLOPs time, and the factor
may be below 1. Prefill chunks are compute-bound and their factor is bounded by the peak.
The all-reduce's per-token factor differs between prefill and decode: a prefill chunk
all-reduces megabytes per call, a decode step a few kilobytes per sequence, and a collective
reaches a smaller fraction of the link's bandwidth on small messages.

plus ``ttft_offset`` on every request's first token (HTTP, tokenisation). That is a
:class:`~hgresearch.sim.step_time.LinearStepTimeModel` per configuration whose coefficients are
*derived* (:func:`coefficients_for`): the simulator, the planner and every caller of
:class:`~hgresearch.sim.calibrate.Calibration` see the same linear model as before. Attention
FLOPs are left out (≈ 4 × layers × heads × head_dim × context per token: under 2% of the
weight FLOPs at the reference runs' ~200-1,000-token contexts).

The factors are fitted (:func:`fit_gpu`) by simulating every measured point of every
configuration of a GPU type (one point per offered rate, repeats averaged), minimising a robust
(soft-L1) loss of the log-ratios simulated / measured of :data:`FIT_TARGETS` (weighted so
that each measured quantity counts once: :data:`FIT_WEIGHTS`), except the
(point, metric) pairs :mod:`hgresearch.sim.anomalies` keeps out of the fit. Because the
factors are shared, a configuration never measured gets a calibration too
(:func:`calibration_for`), labelled as a prediction.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from hgresearch.data.catalogs import (
    CatalogKeyError,
    hardware_catalog,
    model_row,
    normalize_gpu_name,
)
from hgresearch.errors import InputError
from hgresearch.identity import config_label
from hgresearch.sim.calibrate import (
    Calibration,
    Replica,
    SimulatedTimes,
    StepCoefficients,
    replica_for,
    simulate_times,
    summary_from_times,
)
from hgresearch.sim.replay import Workload
from hgresearch.sim.replica_limits import (
    kv_bytes_per_token,
    peak_dense_flops_per_s,
    weights_bytes,
)

#: The per-GPU-type numbers, in the order of every vector below.
PARAMETERS = ("weights_factor", "kv_factor", "prefill_factor", "decode_factor",
              "step_overhead_s", "allreduce_latency_s", "allreduce_factor",
              "allreduce_latency_doubling", "ttft_offset_s", "allreduce_decode_factor")
#: Bounds. A factor is 1 / efficiency: 1 is the datasheet peak, which no step can beat.
LOWER = {"weights_factor": 1.0, "kv_factor": 1.0, "prefill_factor": 1.0, "decode_factor": 1e-3,
         "step_overhead_s": 1e-5, "allreduce_latency_s": 1e-7, "allreduce_factor": 1.0,
         "allreduce_latency_doubling": 0.125, "ttft_offset_s": 1e-4,
         "allreduce_decode_factor": 1.0}
UPPER = {"weights_factor": 20.0, "kv_factor": 200.0, "prefill_factor": 50.0, "decode_factor": 50.0,
         "step_overhead_s": 0.1, "allreduce_latency_s": 1e-3, "allreduce_factor": 200.0,
         "allreduce_latency_doubling": 8.0, "ttft_offset_s": 0.5,
         "allreduce_decode_factor": 200.0}
#: Where every fit starts (a GPU type's previous fit is a better start for its folds).
INITIAL = {"weights_factor": 1.2, "kv_factor": 1.5, "prefill_factor": 1.5, "decode_factor": 0.1,
           "step_overhead_s": 2e-3, "allreduce_latency_s": 2e-5, "allreduce_factor": 2.0,
           "allreduce_latency_doubling": 1.0, "ttft_offset_s": 0.01,
           "allreduce_decode_factor": 2.0}
#: The tensor-parallel terms: fixed at their start (and reported as not identified) for a GPU
#: type without a tensor-parallel configuration among its points.
ALLREDUCE_PARAMETERS = ("allreduce_latency_s", "allreduce_factor", "allreduce_latency_doubling",
                        "allreduce_decode_factor")
#: The tensor-parallel degree ``allreduce_latency_s`` refers to: ``allreduce_latency_doubling``
#: multiplies it per doubling of the degree beyond this one (a collective's fixed cost depends
#: on how many GPUs take part: ring and tree steps, PCIe hops). Fixed at 1, not identified,
#: for a GPU type measured at one tensor-parallel degree only.
REFERENCE_TP_DEGREE = 2
DEGREE_PARAMETERS = ("allreduce_latency_doubling",)
#: Metrics the fit matches (runs-table names).
FIT_TARGETS = ("request_throughput_rps", "mean_tpot_ms", "p50_ttft_ms", "p90_ttft_ms",
               "p99_ttft_ms")
#: Weight of each target's log-error in the loss: each measured quantity counts once — the
#: three TTFT percentiles, strongly correlated measurements of one queueing delay, share the
#: weight that throughput and mean TPOT each have. (Equal weights gave TTFT three fifths of the
#: loss, and the fit traded TPOT for TTFT noise.) The percentiles keep weight 1 so that the
#: soft-L1 scale means for them what it did.
FIT_WEIGHTS = {"request_throughput_rps": 3.0, "mean_tpot_ms": 3.0, "p50_ttft_ms": 1.0,
               "p90_ttft_ms": 1.0, "p99_ttft_ms": 1.0}
#: Soft-L1 scale of the log-errors: errors well above ~15% count linearly, not squared.
ROBUST_SCALE = 0.15
#: Finite-difference step of the Jacobian (in log parameter): the simulated summaries jump
#: where a scheduling decision flips, so a step much smaller than this sees only the jumps.
DIFF_STEP = 0.1
#: A restart of the search must lower the cost by this fraction to earn another.
RESTART_GAIN = 0.01
#: Most function evaluations (besides the Jacobian's) of a fit from :data:`INITIAL`, and of a
#: refit from a previous fit (the leave-one-out folds).
MAX_EVALUATIONS = 40
REFIT_EVALUATIONS = 12
#: Simulations kept per configuration (most recent step coefficients first to go): enough for
#: one Jacobian, whose offset column reuses the simulations of the point it is taken at.
CACHED_SIMULATIONS = 10
#: Activations all-reduced per token and layer: hidden × 2 bytes (16-bit, also for FP8
#: weights), twice per layer (after attention and after the MLP).
ACTIVATION_BYTES = 2.0
#: ``source`` of a calibration the shared model predicts for an unmeasured configuration.
PREDICTED_UNMEASURED = "predicted: shared model, configuration not measured"
#: ``source`` of a calibration of a measured configuration from the shared model.
SHARED_MODEL = "shared model"


@dataclass(frozen=True)
class ConfigPhysics:
    """Datasheet times of one configuration (see the module docstring), in seconds."""

    weights_s: float
    kv_s_per_token: float
    flops_s_per_token: float
    allreduce_s_per_token: float
    allreduce_calls: int
    tensor_parallel: int = 1


def tensor_parallel_problem(model: str, gpu_count: int) -> str | None:
    """Why vLLM cannot serve ``model`` with tensor parallelism over ``gpu_count`` GPUs, or
    None: it splits the attention heads evenly across the GPUs and refuses a degree that does
    not divide them. None too for a model ``model_architectures.csv`` does not hold (a user's
    calibration file may bring its own architecture): nothing to check it against."""
    try:
        heads = int(model_row(model).num_attention_heads)
    except CatalogKeyError:
        return None
    n = int(gpu_count)
    if n >= 1 and heads % n == 0:
        return None
    return (f"tensor parallelism over {n} GPUs needs {n} to divide {model}'s {heads} attention "
            "heads (vLLM refuses otherwise)")


def config_physics(model: str, gpu_name: str, gpu_count: int) -> ConfigPhysics:
    """The datasheet times of ``model`` on ``gpu_count`` × ``gpu_name`` from the catalogs.

    Raises:
        InputError: when the hardware catalog lacks the GPU's bandwidth, peak FLOPs or (with
            more than one GPU) interconnect bandwidth, or ``gpu_count`` does not divide the
            model's attention heads (vLLM's tensor parallelism needs it to).
    """
    table = hardware_catalog()
    gpu = table[table.gpu_name == normalize_gpu_name(gpu_name, field="gpu")].iloc[0]
    bandwidth = float(gpu.memory_bandwidth_gb_per_s) * 1e9
    peak = peak_dense_flops_per_s(model, gpu_name)
    if not (math.isfinite(bandwidth) and bandwidth > 0 and math.isfinite(peak) and peak > 0):
        raise InputError(f"{gpu.gpu_name}: the shared step-time model needs the memory "
                         "bandwidth and dense FP16 TFLOPS of hardware.csv",
                         field="memory_bandwidth_gb_per_s")
    arch = model_row(model)
    n = int(gpu_count)
    problem = tensor_parallel_problem(model, n)
    if problem is not None:
        raise InputError(problem, field="gpu_count")
    calls = 2 * int(arch.num_layers) if n > 1 else 0
    allreduce_s = 0.0
    if n > 1:
        link = float(pd.to_numeric(gpu.get("interconnect_gb_per_s"), errors="coerce")) * 1e9
        if not (math.isfinite(link) and link > 0):
            raise InputError(f"{gpu.gpu_name}: tensor parallelism needs interconnect_gb_per_s "
                             "in hardware.csv", field="interconnect_gb_per_s")
        # Ring all-reduce: each GPU sends and receives 2(n-1)/n of the data.
        allreduce_s = (calls * float(arch.hidden_size) * ACTIVATION_BYTES
                       * 2.0 * (n - 1) / n / link)
    return ConfigPhysics(
        weights_s=weights_bytes(model) / n / bandwidth,
        kv_s_per_token=kv_bytes_per_token(model) / n / bandwidth,
        flops_s_per_token=2.0 * float(arch.params_b) * 1e9 / n / peak,
        allreduce_s_per_token=allreduce_s, allreduce_calls=calls, tensor_parallel=n)


def coefficients_for(physics: ConfigPhysics, values: Mapping[str, float]) -> StepCoefficients:
    """The linear step coefficients of a configuration from its datasheet times and its GPU
    type's fitted :data:`PARAMETERS` (the module docstring's formula)."""
    degree = (values.get("allreduce_latency_doubling", 1.0)
              ** math.log2(max(physics.tensor_parallel, 1) / REFERENCE_TP_DEGREE))
    allreduce = values["allreduce_factor"] * physics.allreduce_s_per_token
    return StepCoefficients(
        c0_s=(values["step_overhead_s"] + values["weights_factor"] * physics.weights_s
              + values["allreduce_latency_s"] * degree * physics.allreduce_calls),
        c_prefill_s_per_token=values["prefill_factor"] * physics.flops_s_per_token + allreduce,
        c_decode_s_per_seq=(values["decode_factor"] * physics.flops_s_per_token
                            + values.get("allreduce_decode_factor", values["allreduce_factor"])
                            * physics.allreduce_s_per_token),
        ttft_offset_s=values["ttft_offset_s"],
        c_kv_s_per_token=values["kv_factor"] * physics.kv_s_per_token)


@dataclass(frozen=True)
class ConfigData:
    """One configuration's measured points (one row per offered rate), its replica, workloads
    (one per row), datasheet times and fit mask (rows × :data:`FIT_TARGETS`, True = fitted)."""

    label: str
    points: pd.DataFrame
    replica: Replica
    workloads: tuple[Workload, ...]
    physics: ConfigPhysics
    mask: np.ndarray


@dataclass(frozen=True)
class GpuFit:
    """The fitted :data:`PARAMETERS` of one GPU type and how well they are determined.

    ``rel_se``: relative standard error of each parameter (from ``s² H⁻¹``, H the central-
    difference Hessian of the fit's cost over the free parameters, in log space:
    ``exp(se) − 1``); NaN for a parameter on a bound or fixed, ``inf`` for one the cost does
    not curve upward along (see :func:`_standard_errors`).
    ``status``: ``free``, ``lower bound``, ``upper bound`` or ``fixed (no tensor-parallel
    configuration)``. ``configurations``: the labels fitted on.
    """

    gpu_name: str
    values: dict[str, float]
    rel_se: dict[str, float]
    status: dict[str, str]
    configurations: tuple[str, ...]
    num_points: int
    num_residuals: int
    rms_log_error: float
    num_evaluations: int
    extra: dict[str, object] = field(default_factory=dict)


def _summary(times: SimulatedTimes, offset_s: float) -> np.ndarray:
    summary = summary_from_times(times, offset_s)
    return np.array([summary[k] for k in FIT_TARGETS], dtype=float)


def _values_from(u: np.ndarray, free: Sequence[str], fixed: Mapping[str, float],
                 scale: Mapping[str, float]) -> dict[str, float]:
    values = dict(fixed)
    for i, name in enumerate(free):
        values[name] = float(scale[name] * math.exp(u[i]))
    return values


def _robust_cost(residuals: np.ndarray) -> float:
    """The soft-L1 cost :func:`fit_gpu` minimises (``least_squares``' ``cost``)."""
    z = (residuals / ROBUST_SCALE) ** 2
    return float(ROBUST_SCALE ** 2 * np.sum(np.sqrt(1.0 + z) - 1.0))


def _cost_hessian(cost: Callable[[np.ndarray], float], u: np.ndarray, indices: Sequence[int],
                  step: float) -> np.ndarray:
    """Central-difference Hessian of ``cost`` at ``u`` over the coordinates ``indices``, at
    ``step`` (log parameter). The simulated summaries jump where a scheduling decision flips:
    a Jacobian of the residuals at this step is dominated by those jumps (each one a huge
    column entry) and its JᵀJ overstates the curvature, by up to 100× on the reference runs.
    The cost sums the jumps of every residual and is smooth at this scale, so its curvature is
    what the data determine."""
    n = len(indices)
    center = cost(u)
    hessian = np.zeros((n, n))
    eye = np.eye(len(u)) * step
    for a, i in enumerate(indices):
        hessian[a, a] = (cost(u + eye[i]) - 2.0 * center + cost(u - eye[i])) / step ** 2
        for b in range(a):
            j = indices[b]
            hessian[a, b] = hessian[b, a] = (
                cost(u + eye[i] + eye[j]) - cost(u + eye[i] - eye[j])
                - cost(u - eye[i] + eye[j]) + cost(u - eye[i] - eye[j])) / (4.0 * step ** 2)
    return hessian


#: A direction of the cost's Hessian whose curvature is below this fraction of the largest is
#: flat: the data do not determine it.
FLAT_CURVATURE = 1e-6
#: A parameter loading more than this on a flat or descending direction has no standard error.
FLAT_LOADING = 0.1


def _standard_errors(hessian: np.ndarray, s2: float) -> np.ndarray:
    """Standard errors (log parameter) from ``s² H⁻¹``, over the Hessian's upward-curving
    directions only. A parameter that loads on a flat or downward-curving direction (the search
    stopped off a minimum there, or the data cannot tell it from another parameter) gets
    ``inf``: a finite number there would claim a precision the fit does not have."""
    curvature, vectors = np.linalg.eigh(hessian)
    top = float(curvature.max()) if curvature.size else 0.0
    upward = curvature > max(top, 0.0) * FLAT_CURVATURE
    if not upward.any():
        return np.full(len(hessian), math.inf)
    variance = (vectors[:, upward] ** 2 / curvature[upward]).sum(axis=1) * s2
    undetermined = (np.abs(vectors[:, ~upward]) > FLAT_LOADING).any(axis=1)
    return np.where(undetermined, math.inf, np.sqrt(variance))


def fit_gpu(data: Sequence[ConfigData], *, start: Mapping[str, float] | None = None,
            max_evaluations: int = MAX_EVALUATIONS, uncertainty: bool = True) -> GpuFit:
    """Fit one GPU type's :data:`PARAMETERS` to every fitted (point, metric) of ``data`` (its
    configurations) by simulation (see the module docstring); ``start`` (default
    :data:`INITIAL`) is where the search begins.

    Raises:
        InputError: without configurations, across GPU types, or without a fitted metric.
    """
    if not data:
        raise InputError("no configuration to fit", field="configurations")
    gpus = {d.replica.gpu_name for d in data}
    if len(gpus) != 1:
        raise InputError(f"one GPU type per fit, got {sorted(gpus)}", field="gpu_name")
    start_values = {**INITIAL, **(start or {})}
    degrees = {d.physics.tensor_parallel for d in data if d.physics.allreduce_calls > 0}
    free = [p for p in PARAMETERS if (degrees or p not in ALLREDUCE_PARAMETERS)
            and (len(degrees) > 1 or p not in DEGREE_PARAMETERS)]
    fixed = {p: start_values[p] for p in PARAMETERS if p not in free}
    fixed.update({p: 1.0 for p in DEGREE_PARAMETERS if p not in free})
    # Parameters are searched as u = log(value / start): every coordinate starts at 0, so the
    # relative Jacobian step DIFF_STEP means the same for each.
    scale = {p: min(max(start_values[p], LOWER[p]), UPPER[p]) for p in PARAMETERS}
    lower = np.array([math.log(LOWER[p] / scale[p]) for p in free])
    upper = np.array([math.log(UPPER[p] / scale[p]) for p in free])
    x0 = np.clip(np.zeros(len(free)), lower + 1e-9, upper - 1e-9)
    weights = np.array([FIT_WEIGHTS[k] for k in FIT_TARGETS])
    observed = [np.log(d.points[list(FIT_TARGETS)].to_numpy(dtype=float)) for d in data]
    masks = [d.mask & np.isfinite(o) for d, o in zip(data, observed, strict=True)]
    if not any(m.any() for m in masks):
        raise InputError("no fitted metric in any point", field="targets")
    cache: dict[tuple[str, tuple[float, ...]], list[SimulatedTimes]] = {}

    def residuals(u: np.ndarray) -> np.ndarray:
        values = _values_from(u, free, fixed, scale)
        out = []
        for d, obs, mask in zip(data, observed, masks, strict=True):
            coefs = coefficients_for(d.physics, values)
            # The offset moves no step: simulations are shared by evaluations that differ in
            # the offset alone (one column of every Jacobian).
            key = (d.label, (coefs.c0_s, coefs.c_prefill_s_per_token, coefs.c_decode_s_per_seq,
                             coefs.c_kv_s_per_token or 0.0))
            if key not in cache:
                if len(cache) > CACHED_SIMULATIONS * len(data):
                    del cache[next(iter(cache))]  # the oldest: memory stays bounded
                cache[key] = [simulate_times(d.replica, coefs, w) for w in d.workloads]
            sim = np.vstack([_summary(t, coefs.ttft_offset_s) for t in cache[key]])
            out.append(np.where(mask, np.log(np.maximum(sim, 1e-12)) - np.where(mask, obs, 0.0),
                                0.0).ravel())
        return np.concatenate(out)

    weight_all = np.concatenate([np.broadcast_to(weights, m.shape).ravel() for m in masks])

    def weighted(u: np.ndarray) -> np.ndarray:
        return np.asarray(residuals(u) * weight_all, dtype=float)

    # The trust region shrinks whenever a step lands on a jump of the simulated summaries and
    # the search then stops early (xtol); restarting from where it stopped resets the region.
    # Restarts end when one no longer lowers the cost by RESTART_GAIN or the budget is spent.
    x = x0
    spent = 0
    result = None
    while spent < max_evaluations:
        attempt = least_squares(weighted, x, bounds=(lower, upper), method="trf",
                                loss="soft_l1", f_scale=ROBUST_SCALE, diff_step=DIFF_STEP,
                                x_scale=1.0, max_nfev=max_evaluations - spent)
        spent += int(attempt.nfev)
        improved = result is None or attempt.cost < result.cost * (1.0 - RESTART_GAIN)
        if result is None or attempt.cost < result.cost:
            result = attempt
        if not improved or attempt.status == 0:  # no gain, or the budget ran out inside
            break
        x = np.clip(attempt.x, lower + 1e-9, upper - 1e-9)
    assert result is not None
    u = np.clip(result.x, lower, upper)
    values = _values_from(u, free, fixed, scale)
    fitted = np.concatenate([m.ravel() for m in masks])
    raw = residuals(u)[fitted]
    status = {p: ("fixed (one tensor-parallel degree)" if degrees
                  and p in DEGREE_PARAMETERS else "fixed (no tensor-parallel configuration)")
              for p in fixed}
    rel_se = {p: math.nan for p in PARAMETERS}
    on_bound = []
    for i, p in enumerate(free):
        if u[i] <= lower[i] + 1e-3:
            status[p] = "lower bound"
            on_bound.append(i)
        elif u[i] >= upper[i] - 1e-3:
            status[p] = "upper bound"
            on_bound.append(i)
        else:
            status[p] = "free"
    if uncertainty:
        interior = [i for i in range(len(free)) if i not in on_bound]
        dof = max(int(fitted.sum()) - len(interior), 1)
        s2 = 2.0 * float(result.cost) / dof
        hessian = _cost_hessian(lambda x: _robust_cost(weighted(x)), u, interior, DIFF_STEP)
        spent += 2 * len(interior) ** 2 + 1
        se = _standard_errors(hessian, s2)
        for j, i in enumerate(interior):
            rel_se[free[i]] = float(math.expm1(se[j])) if se[j] < 50 else math.inf
    return GpuFit(gpu_name=next(iter(gpus)), values=values, rel_se=rel_se, status=status,
                  configurations=tuple(d.label for d in data),
                  num_points=sum(len(d.points) for d in data), num_residuals=int(fitted.sum()),
                  rms_log_error=float(math.sqrt(np.mean(raw ** 2))) if raw.size else math.nan,
                  num_evaluations=spent)


def calibration_from_fit(fit: GpuFit, replica: Replica, *, source: str = SHARED_MODEL,
                         rates_qps: Sequence[float] = ()) -> Calibration:
    """A :class:`Calibration` of ``replica`` (one configuration of ``fit``'s GPU type) with the
    coefficients the shared model derives for it; ``extra["source"]`` says whether the
    configuration was measured (:data:`SHARED_MODEL`) or is a prediction
    (:data:`PREDICTED_UNMEASURED`). ``rel_se`` is that of the weights, prefill and decode
    factors (the parameters behind c0, c_prefill and c_decode)."""
    physics = config_physics(replica.model, replica.gpu_name, replica.num_gpus)
    coefficients = coefficients_for(physics, fit.values)
    return Calibration(
        replica=replica, coefficients=coefficients,
        rel_se=(fit.rel_se["weights_factor"], fit.rel_se["prefill_factor"],
                fit.rel_se["decode_factor"]),
        rates_qps=tuple(float(r) for r in rates_qps), rms_log_error=fit.rms_log_error,
        num_simulations=0,
        extra={"source": source, "gpu_fit": fit.gpu_name,
               "fitted_on": list(fit.configurations)})


def calibration_for(model: str, gpu_name: str, gpu_count: int,
                    fits: Mapping[str, GpuFit] | None = None, *, measured: bool = False,
                    build_dir: str | Path | None = "build",
                    reference: str | Path | None = None) -> Calibration:
    """The calibration of ``model`` on ``gpu_count`` × ``gpu_name`` from the shared model
    ``fits`` (by GPU name; default: the reference runs' fits,
    :func:`hgresearch.sim.validation.reference_shared_fits` with ``build_dir`` and
    ``reference``, cached): KV cache from the
    catalogs, vLLM 0.8.5's scheduler limits for the GPU, the step coefficients derived from
    the GPU type's factors. Unless ``measured``, ``extra["source"]`` is
    :data:`PREDICTED_UNMEASURED` and ``extra["note"]`` says so in words.

    Raises:
        InputError: when no fit covers the GPU type (the list of those that do is given), or
            the catalogs lack what the model needs.
    """
    gpu = normalize_gpu_name(gpu_name, field="gpu")
    if fits is None:
        from hgresearch.sim.validation import reference_shared_fits

        fits = reference_shared_fits(build_dir, reference)
    if gpu not in fits:
        raise InputError(f"no shared step-time model for GPU {gpu!r}; fitted: "
                         f"{', '.join(sorted(fits)) or 'none'}", field="gpu")
    from hgresearch.sim.calibrate import vllm085_scheduler_limits

    limits = vllm085_scheduler_limits(gpu)
    replica = replica_for(model, gpu, int(gpu_count), max_num_seqs=limits["max_num_seqs"],
                          max_num_batched_tokens=limits["max_num_batched_tokens"])
    calibration = calibration_from_fit(
        fits[gpu], replica, source=SHARED_MODEL if measured else PREDICTED_UNMEASURED)
    if not measured:
        label = config_label({"model": model, "gpu_name": gpu, "gpu_count": int(gpu_count)})
        calibration.extra["note"] = (
            f"{label} was not measured: its step times are predicted by the shared model of "
            f"{gpu} (fitted on {len(fits[gpu].configurations)} measured configurations); see "
            "sim_validation_loco for the error of such predictions")
    return calibration
