"""Calibrate the simulator on a user's runs: any ingestible result files or run folders of one
configuration → a :class:`~hgresearch.sim.calibration_file.CalibrationFile` and its
leave-one-rate-out validation (``hgresearch sim calibrate``; docs/simulator.md, "Calibration
files").

1. **Runs**: :func:`hgresearch.data.ingest.read_tables` (vLLM, guidellm, aiperf files, our run
   folders); the hardware label (``--label "1x H200"``) names the GPU for files that do not,
   and may name a GPU outside the catalogs (it then has no roofline floor, catalog KV bound,
   price or TDP). Every run must be of one configuration (model, GPU, count, one replica).
2. **What each run offers**: the summaries the fit compares
   (:data:`~hgresearch.sim.calibrate.TARGETS`: those every run has; at least one throughput or
   duration, the mean TPOT and a TTFT percentile), and a workload to replay
   (:func:`point_workload`: per-request send times and lengths where the file has them, else
   the run's rate with lengths drawn to its totals).
   What is missing is said, per file, in one error.
3. **KV cache**: the server's (``server_metrics.json``, else its log), a number given, else the
   catalogs' memory bound (:class:`~hgresearch.sim.replica_limits.KvCache`, ``source`` says).
4. **Fit**: ``summaries`` — :func:`hgresearch.sim.calibrate.calibrate` (by simulation, the
   paper's calibration); ``steps`` — :func:`hgresearch.sim.steps.fit_step_times` on the engine
   steps reconstructed from per-token timestamps, then the request-path delay solved by
   simulation (:func:`fit_offset`), offered where every run has per-token timestamps (the
   default is ``summaries``: on the committed CPU sweep neither validates better on every
   metric; docs/simulator.md has the comparison).
5. **Validation**: each offered rate held out in turn, the rest fitted with the same method, the
   held-out rate simulated (:func:`leave_one_rate_out`; the rows of
   :func:`hgresearch.sim.validation.simulated_leave_one_qps_out`).

Why one module of this length: the five steps share the user's runs and their error messages
(file and field of the run at fault), and run in one order for ``sim calibrate`` and for
:func:`revalidate`; split, each piece would need the others' state.

Uses the calibration's public API only (``calibrate``, ``Calibration``, ``StepCoefficients``,
``Replica``, ``simulate_times``, ``SummaryAtOffset``), so a new step-time model replaces the fit
here and nowhere else.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hgresearch.data.ingest.common import Hardware
from hgresearch.errors import InputError
from hgresearch.identity import hardware_label
from hgresearch.sim.calibrate import (
    LOWER,
    TARGETS,
    UPPER,
    Replica,
    StepCoefficients,
    SummaryAtOffset,
    calibrate,
    robust_loss,
    simulate_summary,
    simulate_times,
)
from hgresearch.sim.calibration_file import (
    METHODS,
    Architecture,
    CalibrationFile,
    RunRecord,
    catalog_architecture,
    read_architecture,
    run_record,
)
from hgresearch.sim.entities import ReplicaConfig
from hgresearch.sim.replay import Workload
from hgresearch.sim.replica_limits import (
    KvCache,
    num_kv_blocks_from_memory,
    roofline_floor,
    server_kv_cache,
)
from hgresearch.sim.step_time import RooflineFloor
from hgresearch.sim.validation import VALIDATION_METRICS

#: The default calibration method (:data:`hgresearch.sim.calibration_file.METHODS`).
DEFAULT_METHOD = "summaries"
#: Interval level of the coefficients written to the file.
LEVEL = 0.95
#: The fewest offered rates a leave-one-rate-out validation needs (two to fit, one to predict).
MIN_RATES_TO_VALIDATE = 3
_HARDWARE = re.compile(r"^\s*(\d+)\s*x\s*(\S.*?)\s*$")


def parse_user_hardware(label: str, *, field: str = "--label") -> Hardware:
    """``Nx GPU`` as :class:`~hgresearch.data.ingest.common.Hardware`: the catalog's name where
    ``hardware.csv`` knows the GPU (aliases too), else the name as given (a GPU outside the
    catalogs)."""
    from hgresearch.data.catalogs import CatalogKeyError, normalize_gpu_name

    match = _HARDWARE.match(label or "")
    if match is None or int(match[1]) < 1:
        raise InputError(f"expected 'Nx GPU' (e.g. '1x H200'), got {label!r}", field=field)
    try:
        gpu = normalize_gpu_name(match[2])
    except CatalogKeyError:
        gpu = match[2]
    return Hardware(gpu, int(match[1]))


def gpu_in_catalog(gpu_name: str) -> bool:
    """Whether ``hardware.csv`` knows the GPU."""
    from hgresearch.data.catalogs import CatalogKeyError, normalize_gpu_name

    try:
        normalize_gpu_name(gpu_name)
    except CatalogKeyError:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# The runs
# ---------------------------------------------------------------------------------------------

@dataclass
class UserRuns:
    """The runs of one configuration (one row per run, the runs table's columns) and the
    per-request table of each run that has one (by ``run_id``)."""

    runs: pd.DataFrame
    requests: dict[str, pd.DataFrame]

    @property
    def model(self) -> str:
        """The runs' model."""
        return str(self.runs.model.iloc[0])

    @property
    def hardware(self) -> Hardware:
        """The runs' hardware."""
        first = self.runs.iloc[0]
        return Hardware(str(first.gpu_name), int(first.gpu_count))


def _where(run: pd.Series) -> str:
    return f"{run.source_file}:{run.source_line}"


def load_user_runs(paths: Sequence[str | Path], *, hardware: Hardware | None = None
                   ) -> UserRuns:
    """Ingest ``paths`` (:func:`hgresearch.data.ingest.read_tables`, ``hardware`` for files that
    name no GPU) and check that they hold one configuration."""
    from hgresearch.data.ingest import read_tables
    from hgresearch.data.runfolder import read_requests

    try:
        with warnings.catch_warnings():
            # a run naming other hardware than --label is an error here (below), not a warning
            warnings.filterwarnings("ignore", message=".*names its own hardware")
            tables = read_tables(paths, hardware=hardware)
    except InputError as err:
        if "--hardware option" in err.reason:  # the ingest's name for what --label gives here
            field = (err.field or "").split(" (")[0] or None
            raise InputError(err.reason.replace("a --hardware option", "--label 'Nx GPU'"),
                             file=err.file, line=err.line, field=field) from None
        raise
    runs = tables.runs
    if hardware is not None:
        # ingest's --hardware applies only to files that name none; a calibration's --label
        # names the hardware of every run, so a run that says otherwise is a mistake
        other = runs[(runs.gpu_name != hardware.gpu_name) | (runs.gpu_count != hardware.gpu_count)]
        if len(other):
            run = other.iloc[0]
            raise InputError(f"the record says {hardware_label(run.gpu_name, run.gpu_count)} "
                             f"but the hardware given says {hardware.label} (--label)",
                             file=str(run.source_file), line=int(run.source_line),
                             field="gpu_name")
    configs = runs.groupby(["model", "gpu_name", "gpu_count", "replicas"], dropna=False).size()
    if len(configs) > 1:
        listing = "; ".join(f"{m} on {hardware_label(g, c, r)} ({n} runs)"
                            for (m, g, c, r), n in configs.items())
        raise InputError(f"the runs hold {len(configs)} configurations ({listing}): calibrate "
                         "one configuration at a time", file=str(paths[0]))
    if int(runs.replicas.iloc[0]) != 1:
        raise InputError("runs of several replicas behind a load balancer: calibrate one "
                         "replica's runs (the simulator's unit is a replica)",
                         file=_where(runs.iloc[0]), field="replicas")
    requests: dict[str, pd.DataFrame] = {}
    for _, run in runs.iterrows():
        run_dir = run.get("run_dir")
        if isinstance(run_dir, str) and run_dir:
            requests[str(run.run_id)] = read_requests(run_dir)
    if len(tables.requests):
        for run_id, group in tables.requests.groupby("run_id", sort=False):
            requests.setdefault(str(run_id), group.reset_index(drop=True))
    return UserRuns(runs=runs.reset_index(drop=True), requests=requests)


def available_targets(runs: pd.DataFrame) -> tuple[str, ...]:
    """The calibration targets every run has (finite and > 0). An :class:`InputError` says
    which run lacks what when the rest is too little to calibrate: a throughput or duration,
    the mean TPOT and at least one TTFT percentile."""
    present = tuple(t for t in TARGETS if t in runs
                    and bool((pd.to_numeric(runs[t], errors="coerce") > 0).all()))
    needs = {"a throughput or the duration": ("duration_s", "request_throughput_rps",
                                              "output_throughput_tok_per_s"),
             "the mean TPOT": ("mean_tpot_ms",),
             "a TTFT percentile (p50, p90 or p99)": ("p50_ttft_ms", "p90_ttft_ms",
                                                     "p99_ttft_ms")}
    for what, columns in needs.items():
        if not set(columns) & set(present):
            lacking = [_where(run) for _, run in runs.iterrows()
                       if not any(pd.notna(run.get(c)) and float(run[c]) > 0 for c in columns)]
            raise InputError(f"cannot calibrate: {what} is missing in {len(lacking)} run(s) "
                             f"({', '.join(lacking[:3])}{', ...' if len(lacking) > 3 else ''}); "
                             "the summary needs " + " or ".join(columns)
                             + " (vllm bench serve: --percentile-metrics ttft,tpot "
                             "--metric-percentiles 50,90,99, or --save-detailed)",
                             field=columns[0])
    return present


def point_workload(run: pd.Series, requests: pd.DataFrame | None) -> Workload:
    """What a simulation of ``run`` replays (:class:`~hgresearch.sim.replay.Workload`):

    * per-request send times and lengths where the run has them (our run folders; vLLM's
      ``--save-detailed`` with ``start_times``; guidellm and aiperf per-request records):
      replayed exactly;
    * lengths but no send times: the lengths in order, arrivals from vLLM 0.8.5's seeded
      Poisson schedule at the run's rate (the individual times are unknown);
    * totals only: the paper's protocol at the run's rate, lengths drawn to match the totals
      (:func:`hgresearch.sim.replay.reference_run_workload`).

    An unbounded rate (``vllm bench serve``'s default ``inf``) without a concurrency cap sends
    every request at once (arrivals 0). A run capped by concurrency whose send times are
    unknown cannot be replayed: an :class:`InputError` says so and what would help.
    """
    from hgresearch.sim.replay import reference_run_workload, replay_workload
    from hgresearch.traffic.arrivals import vllm085_arrival_gaps_s, vllm085_send_offsets_s

    if requests is not None and len(requests):
        ok = requests[requests.success.fillna(False).astype(bool)
                      & ~requests.warmup.fillna(False).astype(bool)]
        times = pd.to_numeric(ok.t_sent_ns, errors="coerce")
        lengths = (pd.to_numeric(ok.prompt_tokens, errors="coerce").notna().all()
                   and pd.to_numeric(ok.output_tokens, errors="coerce").notna().all())
        if len(ok) and lengths and times.notna().all():
            frame = ok.assign(t_sent_ns=times.astype("int64"),
                              prompt_tokens=ok.prompt_tokens.astype("int64"),
                              output_tokens=ok.output_tokens.astype("int64"),
                              success=True, warmup=False)
            return replay_workload(frame)
        rate = float(run.request_rate_qps)
        capped = pd.notna(run.get("max_concurrency"))
        # an unbounded rate without a cap sends everything at once: arrivals all 0
        if len(ok) and lengths and rate > 0 and not capped:
            n = len(ok)
            prompts = ok.prompt_tokens.to_numpy(dtype="int64")
            outputs = ok.output_tokens.to_numpy(dtype="int64")
            return Workload(arrivals_s=vllm085_send_offsets_s(rate, n), prompt_tokens=prompts,
                            output_tokens=np.maximum(outputs, 1),
                            min_duration_s=float(vllm085_arrival_gaps_s(rate, n).sum()),
                            lengths_source="replayed lengths, drawn arrivals")
    rate = float(run.request_rate_qps)
    if pd.notna(run.get("max_concurrency")) or not rate > 0:
        why = (f"capped at {int(run.max_concurrency)} concurrent requests"
               if pd.notna(run.get("max_concurrency")) else f"sent at rate {rate:g}")
        raise InputError(f"the run was {why} and the file keeps no per-request send times, so "
                         "its arrivals cannot be replayed: give a Poisson/constant-rate run, "
                         "or per-request records (our run folders; vllm bench serve "
                         "--save-detailed from a version that writes start_times)",
                         file=_where(run), field="request_rate_qps")
    return reference_run_workload(run)


# ---------------------------------------------------------------------------------------------
# The replica
# ---------------------------------------------------------------------------------------------

def catalog_floor(architecture: Architecture, gpu_name: str, gpu_count: int
                  ) -> RooflineFloor | None:
    """The roofline floor where ``hardware.csv`` gives the GPU's bandwidth and FLOPS (tensor
    parallel: they add up; FP8 weights at the FP8 rate where the GPU has one), else None (a
    CPU, a GPU outside the catalogs)."""
    if not gpu_in_catalog(gpu_name):
        return None
    floor = roofline_floor(weights_bytes=architecture.weights_bytes,
                           kv_bytes_per_token=architecture.kv_bytes_per_token,
                           params_b=architecture.params_b,
                           weight_bytes_per_param=architecture.weight_bytes_per_param,
                           gpu=gpu_name, num_gpus=gpu_count)
    usable = [floor.bandwidth_bytes_per_s, floor.peak_flops_per_s]
    if not all(math.isfinite(value) and value > 0 for value in usable):
        return None
    return floor


def kv_cache_for(runs: UserRuns, architecture: Architecture, hardware: Hardware, *,
                 num_blocks: int | None = None, block_size: int | None = None) -> KvCache:
    """The replica's KV cache: ``num_blocks`` when given, else the server's
    (:func:`~hgresearch.sim.replica_limits.server_kv_cache` of the run folders), else the
    catalogs' memory bound (vLLM's default ``gpu_memory_utilization`` 0.9; an upper bound).
    An :class:`InputError` says how to give the number when none of these exists."""
    from hgresearch.data.catalogs import hardware_catalog, normalize_gpu_name

    if num_blocks is not None:
        return KvCache(num_blocks, block_size or 16, "given", "--kv-blocks")
    run_dirs = [d for d in runs.runs.get("run_dir", pd.Series(dtype=object))
                if isinstance(d, str) and d]
    found = server_kv_cache(run_dirs)
    if found is not None:
        return found
    memory_gib = math.nan
    if gpu_in_catalog(hardware.gpu_name):
        table = hardware_catalog()
        memory_gib = float(table[table.gpu_name == normalize_gpu_name(hardware.gpu_name)]
                           .iloc[0].memory_gb)
    if not (math.isfinite(memory_gib) and memory_gib > 0):
        raise InputError(f"no KV cache size for {hardware.label}: the runs carry no server "
                         "metrics or log, and the catalogs give no GPU memory; pass --kv-blocks "
                         "N (vLLM logs 'KV cache size: T tokens' (N = T / block size) or "
                         "'# GPU blocks: N' at start-up; /metrics has "
                         "vllm:cache_config_info{num_gpu_blocks=...})", field="--kv-blocks")
    size = block_size or 16
    blocks = num_kv_blocks_from_memory(memory_gib, architecture.weights_bytes,
                                       architecture.kv_bytes_per_token,
                                       num_gpus=hardware.gpu_count, block_size=size)
    return KvCache(blocks, size, "catalog",
                   "hgresearch/data/catalogs/hardware.csv memory at gpu_memory_utilization 0.9")


def user_replica(label: str, architecture: Architecture, hardware: Hardware, kv: KvCache
                 ) -> Replica:
    """The simulator's :class:`~hgresearch.sim.calibrate.Replica` of a user's configuration."""
    return Replica(label=label, model=architecture.name, gpu_name=hardware.gpu_name,
                   num_gpus=hardware.gpu_count,
                   config=ReplicaConfig(num_kv_blocks=kv.num_blocks, block_size=kv.block_size),
                   floor=catalog_floor(architecture, hardware.gpu_name, hardware.gpu_count),
                   kv_per_weight_byte=architecture.kv_bytes_per_token
                   / architecture.weights_bytes)


# ---------------------------------------------------------------------------------------------
# The fits
# ---------------------------------------------------------------------------------------------

@dataclass
class Fit:
    """Coefficients of one fit, their intervals (coefficient -> (low, high)), the fit's RMS
    log-error over its targets and how the intervals were made."""

    coefficients: StepCoefficients
    intervals: dict[str, tuple[float, float]]
    rms_log_error: float
    interval_method: str
    detail: dict[str, Any] = field(default_factory=dict)


def fit_offset(replica: Replica, coefficients: StepCoefficients, points: pd.DataFrame,
               workloads: Sequence[Workload], targets: Sequence[str]
               ) -> tuple[float, float]:
    """The request-path delay (s) that best matches the measured TTFT percentiles of
    ``points`` when ``workloads`` are simulated with ``coefficients`` (robust loss on
    log-errors, as :func:`~hgresearch.sim.calibrate.calibrate` solves it), and the RMS
    log-error over all ``targets`` at that delay."""
    from scipy.optimize import minimize_scalar

    summaries = SummaryAtOffset([simulate_times(replica, coefficients, w) for w in workloads],
                                targets)
    log_observed = np.log(points[list(targets)].to_numpy(dtype=float))
    ttft = [i for i, t in enumerate(targets) if t.endswith("_ttft_ms")]

    def log_errors(offset_s: float) -> np.ndarray:
        errors: np.ndarray = np.log(summaries(offset_s)) - log_observed
        return errors

    offset = float(minimize_scalar(lambda o: robust_loss(log_errors(o)[:, ttft]),
                                   bounds=(LOWER[3], UPPER[3]), method="bounded",
                                   options={"xatol": 1e-5}).x) if ttft else 0.0
    return offset, float(np.sqrt(np.mean(log_errors(offset) ** 2)))


def _summary_fit(replica: Replica, points: pd.DataFrame, workloads: Sequence[Workload],
                 targets: Sequence[str], uncertainty: bool) -> Fit:
    fit = calibrate(replica, points, list(workloads), targets=targets, uncertainty=uncertainty)
    c = fit.coefficients
    intervals = {}
    if uncertainty:
        from scipy.stats import norm

        z = float(norm.ppf(0.5 + LEVEL / 2))
        for key, rel in zip(("c0_s", "c_prefill_s_per_token", "c_decode_s_per_seq"),
                            fit.rel_se, strict=True):
            # a zero or infinite error is no interval: the points did not constrain it (a
            # coefficient on its bound, or no more summaries than unknowns)
            if math.isfinite(rel) and rel > 0:
                spread = math.exp(z * math.log1p(rel))
                value = float(getattr(c, key))
                intervals[key] = (value / spread, value * spread)
    return Fit(c, intervals, fit.rms_log_error,
               "log-normal from the Jacobian at the optimum (s² (JᵀJ)⁻¹); the offset has none",
               {"num_simulations": fit.num_simulations})


def _steps_fit(replica: Replica, points: pd.DataFrame, workloads: Sequence[Workload],
               targets: Sequence[str], steps: Sequence[pd.DataFrame], uncertainty: bool) -> Fit:
    from hgresearch.sim.steps import fit_step_times

    fit = fit_step_times(replica, steps, bootstrap_reps=200 if uncertainty else 0)
    offset, rms = fit_offset(replica, fit.coefficients, points, workloads, targets)
    c = StepCoefficients(fit.coefficients.c0_s, fit.coefficients.c_prefill_s_per_token,
                         fit.coefficients.c_decode_s_per_seq, offset)
    intervals = {key: (lo, hi) for key, lo, hi in
                 zip(("c0_s", "c_prefill_s_per_token", "c_decode_s_per_seq"), fit.low, fit.high,
                     strict=True) if math.isfinite(lo) and math.isfinite(hi)}
    return Fit(c, intervals, rms,
               "bootstrap over runs (200 resamples, percentiles); the offset has none",
               {"num_steps": fit.num_steps,
                "median_abs_step_log_error": fit.median_abs_log_error})


# ---------------------------------------------------------------------------------------------
# Calibrate and validate
# ---------------------------------------------------------------------------------------------

@dataclass
class UserCalibration:
    """What :func:`calibrate_runs` produced: the calibration file's content, the calibration
    points (repeats averaged, one row per rate), the leave-one-rate-out rows (empty below
    :data:`MIN_RATES_TO_VALIDATE` rates) and notes on what was assumed."""

    file: CalibrationFile
    points: pd.DataFrame
    validation: pd.DataFrame
    runs: UserRuns
    notes: list[str] = field(default_factory=list)


def _points(runs: pd.DataFrame) -> pd.DataFrame:
    from hgresearch.data.ingest import select_repeats

    return select_repeats(runs, "mean").sort_values("request_rate_qps", kind="stable"
                                                   ).reset_index(drop=True)


def _steps_of(user: UserRuns, run_ids: Sequence[str]) -> list[pd.DataFrame]:
    from hgresearch.sim.steps import reconstruct_steps

    return [reconstruct_steps(user.requests[r]).steps for r in run_ids]


def _fit(method: str, replica: Replica, points: pd.DataFrame, workloads: Sequence[Workload],
         targets: Sequence[str], steps: Sequence[pd.DataFrame], uncertainty: bool) -> Fit:
    if method == "steps":
        return _steps_fit(replica, points, workloads, targets, steps, uncertainty)
    return _summary_fit(replica, points, workloads, targets, uncertainty)


def leave_one_rate_out(method: str, replica: Replica, user: UserRuns, points: pd.DataFrame,
                       workloads: Sequence[Workload], targets: Sequence[str],
                       steps_by_run: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Each offered rate held out in turn: fit on the other rates (the same ``method``; the
    steps of the held-out rate's runs left out too), simulate the held-out rate, compare with
    its measurement. Rows as :func:`hgresearch.sim.validation.simulated_leave_one_qps_out`'s."""
    rows = []
    rates = points.request_rate_qps.to_numpy(dtype=float)
    for held in range(len(points)):
        keep = [i for i in range(len(points)) if i != held]
        other_runs = user.runs[~np.isclose(user.runs.request_rate_qps.to_numpy(float),
                                           rates[held])].run_id.astype(str)
        steps = [steps_by_run[r] for r in other_runs if r in steps_by_run]
        fit = _fit(method, replica, points.iloc[keep].reset_index(drop=True),
                   [workloads[i] for i in keep], targets, steps, uncertainty=False)
        predicted = simulate_summary(replica, fit.coefficients, workloads[held])
        measured = points.iloc[held]
        for metric in VALIDATION_METRICS:
            if metric not in measured or not float(measured[metric]) > 0:
                continue
            rows.append({"configuration": replica.label, "gpu_name": replica.gpu_name,
                         "gpu_count": replica.num_gpus, "held_out_qps": float(rates[held]),
                         "metric": metric, "measured": float(measured[metric]),
                         "predicted": float(predicted[metric]),
                         "error_pct": 100.0 * (predicted[metric] / float(measured[metric]) - 1),
                         "lengths_source": workloads[held].lengths_source, "method": method})
    return pd.DataFrame(rows)


def resolve_architecture(user: UserRuns, *, model: str | None = None,
                         architecture_file: str | Path | None = None) -> Architecture:
    """The model architecture: ``architecture_file`` (named ``model`` or the runs' model), else
    the catalog's row of ``model`` or of the runs' model; an :class:`InputError` says how to
    give one for a model outside the catalog."""
    from hgresearch.data.catalogs import CatalogKeyError

    name = model or user.model
    if architecture_file is not None:
        return read_architecture(architecture_file, name)
    try:
        return catalog_architecture(name)
    except CatalogKeyError:
        raise InputError(f"model {name!r} is not in hgresearch/data/catalogs/"
                         "model_architectures.csv: pass --model NAME (a catalog model with the "
                         "same architecture) or --architecture FILE (its Hugging Face "
                         "config.json, or the catalog's fields num_layers, num_kv_heads, "
                         "head_dim, params_b, weight_bytes_per_param)",
                         file=_where(user.runs.iloc[0]), field="model") from None


def calibrate_runs(paths: Sequence[str | Path], *, label: str | None = None,
                   model: str | None = None, architecture_file: str | Path | None = None,
                   method: str = DEFAULT_METHOD, kv_blocks: int | None = None,
                   block_size: int | None = None, validate: bool = True,
                   architecture: Architecture | None = None) -> UserCalibration:
    """Calibrate the configuration of the runs in ``paths`` (see the module docstring).

    Args:
        paths: result files and run folders (anything :func:`hgresearch.data.ingest.read_tables`
            reads).
        label: hardware label ``Nx GPU`` (required where the files name no GPU; may name a GPU
            outside the catalogs).
        model, architecture_file: the model (catalog name) and/or its architecture file.
        method: ``summaries`` or ``steps``.
        kv_blocks, block_size: the KV cache, where the runs carry no server metrics or log.
        validate: run the leave-one-rate-out validation.
        architecture: the model's architecture itself (a calibration file's), instead of
            ``model``/``architecture_file``.
    """
    from hgresearch import __version__
    from hgresearch.sim.steps import has_token_timestamps

    hardware = parse_user_hardware(label) if label else None
    user = load_user_runs(paths, hardware=hardware)
    hardware = user.hardware
    if architecture is None:
        architecture = resolve_architecture(user, model=model,
                                            architecture_file=architecture_file)
    targets = available_targets(user.runs)
    points = _points(user.runs)
    first_run = {float(r): str(g.run_id.iloc[0]) for r, g in
                 user.runs.groupby("request_rate_qps", sort=True)}
    workloads = [point_workload(row, user.requests.get(first_run[float(row.request_rate_qps)]))
                 for _, row in points.iterrows()]
    timed = [str(r) for r in user.runs.run_id
             if str(r) in user.requests and has_token_timestamps(user.requests[str(r)])]
    if method not in METHODS:
        raise InputError(f"expected one of {', '.join(METHODS)}, got {method!r}",
                         field="--method")
    if method == "steps" and len(timed) < len(user.runs):
        missing = [_where(r) for _, r in user.runs.iterrows() if str(r.run_id) not in timed]
        raise InputError(f"--method steps needs per-token timestamps in every run; "
                         f"{len(missing)} have none ({', '.join(missing[:3])}): use --method "
                         "summaries", field="--method")
    kv = kv_cache_for(user, architecture, hardware, num_blocks=kv_blocks, block_size=block_size)
    config = f"{architecture.name} on {hardware.label}"
    replica = user_replica(config, architecture, hardware, kv)
    notes = []
    if not gpu_in_catalog(hardware.gpu_name):
        notes.append(f"GPU {hardware.gpu_name!r} is not in hgresearch/data/catalogs/"
                     "hardware.csv: no roofline floor; pass --price and --tdp when planning")
    elif replica.floor is None:
        notes.append(f"the catalogs give no bandwidth or FLOPS for {hardware.gpu_name}: no "
                     "roofline floor")
    if kv.source == "catalog":
        notes.append("KV cache from the catalogs' GPU memory (an upper bound: activations and "
                     "CUDA graphs not subtracted); pass --kv-blocks with the number the server "
                     "logged ('KV cache size: T tokens' / block size) for a better one")
    drawn = sorted({w.lengths_source for w in workloads} - {"replayed"})
    if drawn:
        notes.append(f"workloads not replayed exactly ({', '.join(drawn)}): arrivals from vLLM "
                     "0.8.5's seeded Poisson schedule at each run's rate")
    missing_targets = [t for t in TARGETS if t not in targets]
    if missing_targets:
        notes.append(f"targets left out (not in every run): {', '.join(missing_targets)}")
    steps_by_run = {}
    if method == "steps":
        steps_by_run = dict(zip(timed, _steps_of(user, timed), strict=True))
    fit = _fit(method, replica, points, workloads, targets, list(steps_by_run.values()),
               uncertainty=True)
    validation = pd.DataFrame()
    if validate and len(points) >= MIN_RATES_TO_VALIDATE:
        validation = leave_one_rate_out(method, replica, user, points, workloads, targets,
                                        steps_by_run)
    elif validate:
        notes.append(f"leave-one-rate-out validation needs {MIN_RATES_TO_VALIDATE} offered "
                     f"rates; the runs have {len(points)}")
    mape = ({} if validation.empty else
            {m: float(g.error_pct.abs().mean()) for m, g in validation.groupby("metric")})
    records = _run_records(user)
    calibration = CalibrationFile(
        label=hardware.label, model=architecture.name, gpu_name=hardware.gpu_name,
        gpu_count=hardware.gpu_count, architecture=architecture, method=method,
        coefficients=fit.coefficients, kv_cache=kv, intervals=fit.intervals,
        interval_level=LEVEL, interval_method=fit.interval_method,
        max_num_seqs=replica.config.max_num_seqs,
        max_num_batched_tokens=replica.config.max_num_batched_tokens, floor=replica.floor,
        runs=records, targets=tuple(targets), rms_log_error=fit.rms_log_error,
        validation=mape, notes=tuple(notes), hgresearch_version=__version__)
    return UserCalibration(file=calibration, points=points, validation=validation, runs=user,
                           notes=notes)


def run_paths(calibration: CalibrationFile) -> list[Path]:
    """The runs a calibration file was fitted on, as ``calibrate_runs`` takes them: the run
    folder of a ``summary.json``, else the result file (each once, in file order)."""
    from hgresearch.data.runfolder import SUMMARY_FILE

    paths: dict[Path, None] = {}
    for run in calibration.runs:
        first = Path(run.files[0][0])
        paths[first.parent if first.name == SUMMARY_FILE else first] = None
    return list(paths)


def revalidate(calibration: CalibrationFile) -> UserCalibration:
    """Calibrate again on the runs a calibration file names (its hardware, architecture,
    method and, where it was given or bounded by the catalogs, KV cache), with the
    leave-one-rate-out validation: ``hgresearch sim validate --candidate-file``. The runs'
    hashes are checked when the file is read."""
    missing = [p for p in run_paths(calibration) if not p.exists()]
    if missing:
        raise InputError(f"the calibration's run {missing[0]} is not there (moved?): validate "
                         "where the runs are", file=calibration.path, field="runs")
    kv = calibration.kv_cache
    given = kv.source == "given"
    return calibrate_runs(run_paths(calibration), label=calibration.label,
                          architecture=calibration.architecture, method=calibration.method,
                          kv_blocks=kv.num_blocks if given else None,
                          block_size=kv.block_size if given else None)


def _run_records(user: UserRuns) -> tuple[RunRecord, ...]:
    """Each run's files (a run folder's summary, requests and server metrics; a result file)
    hashed, with its summary values."""
    from hgresearch.data.runfolder import REQUESTS_FILE, SERVER_METRICS_FILE, SUMMARY_FILE

    records = []
    for _, run in user.runs.iterrows():
        run_dir = run.get("run_dir")
        if isinstance(run_dir, str) and run_dir:
            files = [Path(run_dir) / name for name in (SUMMARY_FILE, REQUESTS_FILE,
                                                        SERVER_METRICS_FILE)]
            files = [f for f in files if f.is_file()]
        else:
            files = [Path(str(run.source_file))]
        records.append(run_record(files, run.to_dict(), str(run.source_format)))
    return tuple(records)
