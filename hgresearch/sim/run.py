"""One simulated run of a calibrated configuration: the requests table, the summary (the keys
of a measured run's ``summary.json``) and a run-like folder (``source = simulated``)."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hgresearch.bounds import WorkEstimate
from hgresearch.data.summary import summarize
from hgresearch.errors import InputError
from hgresearch.executors import Executor
from hgresearch.paths import REPO_ROOT
from hgresearch.sim.calibrate import Calibration
from hgresearch.sim.energy import energy_meter
from hgresearch.sim.replay import reference_workload
from hgresearch.sim.simulator import SIMULATED, make_requests, requests_frame, run_replica
from hgresearch.sim.validation import calibrate_all, code_digest

#: Our own measured runs with per-request records that are calibrated beside the paper's.
OWN_CALIBRATION_RUNS = REPO_ROOT / "data" / "raw" / "cpu-tiny"


def calibration_runs(reference: str | Path | None = None) -> pd.DataFrame:
    """The runs the simulator is calibrated on: the paper's reference runs (verified, from
    ``reference`` or the lookup order) and :data:`OWN_CALIBRATION_RUNS`."""
    from hgresearch.data.ingest import read_runs
    from hgresearch.data.reference import reference_dir

    sources: list[Path] = [reference_dir("ionet-aibc2025", source=reference)]
    if OWN_CALIBRATION_RUNS.is_dir():
        sources.append(OWN_CALIBRATION_RUNS)
    return read_runs(sources, relative_to=REPO_ROOT)


@dataclass(frozen=True)
class SimulatedRun:
    """A simulated run: its requests table, summary and the calibration behind it."""

    requests: pd.DataFrame
    summary: dict[str, Any]
    calibration: Calibration


def calibrations(runs: pd.DataFrame, build_dir: str | Path | None = None, *,
                 n_jobs: int = 1, executor: Executor | None = None) -> dict[str, Calibration]:
    """``label -> calibration on all its points`` for every configuration of ``runs``,
    cached under ``<build_dir>/cache/models`` by a hash of the runs and the simulator's code
    (shared by ``hgresearch sim run`` and notebook 07); ``executor`` (default: ``n_jobs``
    processes) fits the configurations when the cache has none."""
    from hgresearch.cache import cached

    return cached(build_dir, "sim_calibrations", runs, {"sim_code": code_digest()},
                  lambda: calibrate_all(runs, n_jobs=n_jobs, executor=executor))


def check_configuration(label: str, known: Any) -> None:
    """:class:`InputError` unless ``label`` is one of ``known`` (configuration labels): the
    closest labels (:func:`difflib.get_close_matches`) as "did you mean", then every known
    one. Called before anything is calibrated, so a typo answers at once."""
    labels = sorted(str(k) for k in known)
    if label in labels:
        return
    close = difflib.get_close_matches(label, labels, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    raise InputError(f"unknown configuration {label!r}; {hint}known: {'; '.join(labels)}",
                     field="config")


def calibration_for(label: str, fits: dict[str, Any]) -> Any:
    """The entry of ``fits`` for configuration ``label``; :class:`InputError` with close
    matches and the known configurations otherwise (:func:`check_configuration`)."""
    check_configuration(label, fits)
    return fits[label]


@dataclass(frozen=True)
class UnmeasuredConfiguration:
    """A configuration never measured that the shared step-time model can predict: its
    catalog names, its label, and the measured points whose lengths its runs replay (the same
    model's runs on other configurations, ``lengths_from``)."""

    label: str
    model: str
    gpu_name: str
    gpu_count: int
    points: pd.DataFrame
    lengths_from: tuple[str, ...]

    def lengths_note(self) -> str:
        """Where the simulated requests' lengths come from, in words."""
        return (f"request lengths are the means of {self.model}'s measured runs on "
                f"{', '.join(self.lengths_from)}")


def shared_model_gpus(points: Mapping[str, pd.DataFrame]) -> set[str]:
    """GPU types the shared step-time model is fitted for, given the calibration runs'
    configurations (``label -> points``): those of a configuration with datasheet numbers
    (:func:`hgresearch.sim.validation.has_physics`, the split the fit itself makes)."""
    from hgresearch.sim.validation import has_physics

    out = set()
    for group in points.values():
        first = group.iloc[0]
        if has_physics(str(first.gpu_name), int(first.gpu_count), str(first.model)):
            out.add(str(first.gpu_name))
    return out


def unmeasured_configuration(label: str, points: Mapping[str, pd.DataFrame]
                             ) -> UnmeasuredConfiguration | None:
    """The configuration ``label`` names (``MODEL on Nx GPU``, names as the catalogs or
    their aliases write them) when the shared step-time model can predict it: its model is in
    ``model_architectures.csv``, its GPU in ``hardware.csv`` and of a type the model is fitted
    for (:func:`shared_model_gpus` of ``points``, the measured configurations). ``None``
    otherwise: the caller answers with :func:`check_configuration`'s "unknown configuration".
    Cheap (catalog lookups only): called before anything is fitted. A label that names a
    measured configuration under other spellings (an alias of the GPU) comes back with the
    measured label and that configuration's points.

    Raises:
        InputError: naming the configuration, when the weights do not fit on its GPUs (no
            room for a KV block), the catalogs lack what the shared model needs, or the model
            has no measured run to take request lengths from.
    """
    from hgresearch.data.catalogs import CatalogKeyError, model_row, normalize_gpu_name
    from hgresearch.identity import config_label, parse_config_label

    parsed = parse_config_label(label)
    if parsed is None:
        return None
    try:
        model = str(model_row(parsed[0]).model)
        gpu = normalize_gpu_name(parsed[1])
    except CatalogKeyError:
        return None
    count = parsed[2]
    canonical = config_label({"model": model, "gpu_name": gpu, "gpu_count": count})
    if canonical in points:
        return UnmeasuredConfiguration(canonical, model, gpu, count, points[canonical], ())
    if gpu not in shared_model_gpus(points):
        return None
    from hgresearch.sim.calibrate import replica_for, vllm085_scheduler_limits
    from hgresearch.sim.step_model import config_physics

    try:
        config_physics(model, gpu, count)
        limits = vllm085_scheduler_limits(gpu)
        replica_for(model, gpu, count, max_num_seqs=limits["max_num_seqs"],
                    max_num_batched_tokens=limits["max_num_batched_tokens"])
    except InputError as err:
        raise InputError(f"cannot predict {canonical!r}: {err.reason}",
                         field=err.field or "config") from None
    same_model = {k: v for k, v in points.items() if str(v.iloc[0].model) == model}
    if not same_model:
        raise InputError(f"cannot predict {canonical!r}: request lengths are taken from the "
                         f"model's measured runs and {model} has none (measured models: "
                         f"{', '.join(sorted({str(v.iloc[0].model) for v in points.values()}))})",
                         field="config")
    lengths_from = tuple(sorted(k.split(" on ", 1)[1] for k in same_model))
    return UnmeasuredConfiguration(canonical, model, gpu, count,
                                   pd.concat(list(same_model.values()), ignore_index=True),
                                   lengths_from)


#: Peak memory of :func:`simulate_run` per simulated request (bytes), and the fixed part
#: (bytes) beside it. Measured with ``benchmarks/sim_bounds.py``: the paper's protocol (14B on
#: 1x H100-PCIe, 8 req/s) simulated with N = 20,000 and N = 100,000 requests, each in a fresh
#: process; the slope of the peak resident memory (``ru_maxrss``) between the two sizes is the
#: cost of one request (its SimRequest, event-heap entries, requests-table row and the
#: summary's copies): 1,347 B (tracemalloc counts 1,228 B of Python objects), rounded up to
#: 2,000 B for allocator growth on larger runs. The process before the run (interpreter,
#: pandas, the calibration) held 160-230 MB: ``SIM_BASE_BYTES``. 10,000,000 requests are then
#: estimated at 20 GB (the issue saw it pass 11 GB and grow) and refused.
SIM_BYTES_PER_REQUEST = 2_000
SIM_BASE_BYTES = 250e6
#: Simulated requests per second of wall time: the same runs gave 17,900/s on a shared
#: 2-core machine; a quarter of that allows for heavier load (longer batches) and slower
#: machines. The time estimate of :func:`run_estimate`.
SIM_REQUESTS_PER_S = 5_000.0
#: Memory of one more replica of a simulated fleet (bytes): its scheduler, step-time model and
#: run record (the same script, a fleet of 1 and of 1,000 replicas: 4,000 B traced), rounded
#: up for the allocator.
SIM_BYTES_PER_REPLICA = 10_000


def run_estimate(num_prompts: int, *, replicas: int = 1) -> WorkEstimate:
    """What simulating ``num_prompts`` requests (on ``replicas`` replicas behind one router)
    costs, for :func:`hgresearch.bounds.check_work`: memory from
    :data:`SIM_BYTES_PER_REQUEST`, time from :data:`SIM_REQUESTS_PER_S` (a replica more
    adds its steps: the time scales with replicas at a fixed rate per replica)."""
    what = f"simulating {num_prompts:,} requests" + (
        f" on {replicas:,} replicas" if replicas > 1 else "")
    return WorkEstimate(what=what,
                        memory_bytes=(SIM_BASE_BYTES + SIM_BYTES_PER_REQUEST * num_prompts
                                      + SIM_BYTES_PER_REPLICA * replicas),
                        time_s=num_prompts * max(1, replicas) / SIM_REQUESTS_PER_S)


def check_run_inputs(rate_qps: float, num_prompts: int) -> None:
    """:class:`InputError` for a rate that is not > 0 or fewer than one request."""
    if not rate_qps > 0:
        raise InputError(f"expected a rate > 0, got {rate_qps}", field="qps")
    if num_prompts < 1:
        raise InputError(f"expected at least one request, got {num_prompts}",
                         field="num_prompts")


def measured_mean_lengths(points: pd.DataFrame) -> tuple[float, float]:
    """Mean prompt and output tokens per request of measured runs (runs-table rows): the mean
    over runs of ``total_input_tok / completed`` and ``total_output_tok / completed``."""
    if len(points) == 0:
        raise InputError("no measured runs to take the mean lengths from", field="points")
    return (float((points.total_input_tok / points.completed).mean()),
            float((points.total_output_tok / points.completed).mean()))


def add_request_path_delay(table: pd.DataFrame,
                           offset_s: float | np.ndarray) -> pd.DataFrame:
    """``table`` (a simulated requests table) with the calibration's constant request-path
    delay (``ttft_offset_s``: HTTP, tokenisation; one number, or one per row) added to every
    request's first token, last token and completion (so to TTFT and E2EL, not TPOT)."""
    table = table.copy()
    offset_ns = np.round(np.asarray(offset_s, dtype=float) * 1e9).astype("int64")
    for column in ("t_first_token_ns", "t_last_token_ns", "t_done_ns"):
        table[column] = table[column] + offset_ns
    table["ttft_ms"] = table["ttft_ms"] + offset_ns / 1e6
    table["e2el_ms"] = table["e2el_ms"] + offset_ns / 1e6
    return table


def calibration_provenance(fit: Calibration) -> dict[str, Any]:
    """What a simulated run records of its calibration: ``calibration_source`` (the
    calibration's ``extra["source"]``: e.g. ``shared model`` for a measured configuration,
    :data:`hgresearch.sim.step_model.PREDICTED_UNMEASURED` for a prediction; ``None`` when
    the calibration names none) and, where it has one, ``calibration_note`` (why it is a
    prediction, where the lengths come from)."""
    out: dict[str, Any] = {"calibration_source": fit.extra.get("source")}
    if fit.extra.get("note"):
        out["calibration_note"] = fit.extra["note"]
    return out


def simulate_run(fit: Calibration, points: pd.DataFrame, rate_qps: float, num_prompts: int, *,
                 length_seed: int = 0,
                 on_completions: Callable[[int], object] | None = None) -> SimulatedRun:
    """Simulate ``num_prompts`` requests at ``rate_qps`` (the paper's protocol: vLLM 0.8.5's
    seeded arrivals, ShareGPT-like lengths with the configuration's measured means) and
    summarise it like a measured run, with ``source = simulated``, the calibration's source
    (:func:`calibration_provenance`: a prediction of an unmeasured configuration says so) and
    the energy per step
    (:mod:`hgresearch.sim.energy`) where the power model knows the GPU. ``on_completions``
    (a progress bar) is called with the requests each engine step finished. Callers bound
    the work first (:func:`run_estimate`)."""
    check_run_inputs(rate_qps, num_prompts)
    mean_in, mean_out = measured_mean_lengths(points)
    workload = reference_workload(rate_qps, num_prompts, mean_in, mean_out,
                                  length_seed=length_seed)
    replica = fit.replica
    step_model = fit.coefficients.step_model(replica)
    meter = None
    try:
        meter = energy_meter(step_model, replica.gpu_name, replica.num_gpus)
    except InputError:
        meter = None  # no power model or no roofline for this hardware: energy stays missing
    requests = make_requests(replica.config, workload.arrivals_s, workload.prompt_tokens,
                             workload.output_tokens)
    run = run_replica(replica.config, meter or step_model, requests,
                      on_completions=on_completions)
    table = add_request_path_delay(requests_frame(run), fit.coefficients.ttft_offset_s)
    summary = summarize(table, bootstrap_reps=0)
    summary.update({
        "source": SIMULATED, "configuration": replica.label, "model_id": replica.model,
        "gpu_name": replica.gpu_name, "gpu_count": replica.num_gpus,
        "tensor_parallel_size": replica.num_gpus, "replicas": 1, "request_rate": rate_qps,
        "num_prompts": num_prompts, "burstiness": 1.0, "dataset": workload.lengths_source,
        "num_preemptions": run.num_preemptions,
        "energy_source": "simulated-utilisation" if meter else None,
        "energy_j": meter.energy_j(summary["duration"]) if meter else None,
        **calibration_provenance(fit),
    })
    if meter and summary["energy_j"] is not None:
        tokens = summary["total_input_tokens"] + summary["total_output_tokens"]
        summary["energy_per_tok_j"] = summary["energy_j"] / tokens if tokens else None
        summary["energy_per_output_tok_j"] = (summary["energy_j"] / summary["total_output_tokens"]
                                              if summary["total_output_tokens"] else None)
    return SimulatedRun(requests=table, summary=summary, calibration=fit)


def check_run_folder_target(run_dir: str | Path) -> None:
    """:class:`InputError` when ``run_dir`` cannot take a simulated run: it holds a run
    already (nothing measured is overwritten), or it is a file. Called before the
    simulation, so a bad ``-o`` answers before the work."""
    from hgresearch.data.runfolder import REQUESTS_FILE, is_finished

    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise InputError("is a file, expected a folder (or none) for the run", file=str(run_dir),
                         field="output")
    if run_dir.exists() and (is_finished(run_dir) or (run_dir / REQUESTS_FILE).exists()):
        raise InputError("folder already holds a run; choose another", file=str(run_dir),
                         field="output")


def write_run_folder(run: SimulatedRun, run_dir: str | Path) -> Path:
    """Write a run-like folder (requests, summary, config) through :mod:`hgresearch.data.runfolder`;
    the config records the calibration's coefficients and source (:func:`calibration_provenance`).
    Refuses a folder that already holds a run (nothing measured is overwritten)."""
    from hgresearch.data.runfolder import (
        REQUESTS_FILE,
        RecordWriter,
        write_config,
        write_summary,
    )

    run_dir = Path(run_dir)
    check_run_folder_target(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    writer = RecordWriter(run_dir / REQUESTS_FILE)
    columns = ["index", "warmup", "segment", "segment_start_ns", "t_scheduled_ns", "t_sent_ns",
               "cap_wait_ns", "t_first_token_ns", "t_last_token_ns", "t_done_ns",
               "prompt_tokens", "output_tokens", "expected_output_tokens", "usage_source",
               "http_status", "success", "num_preemptions", "source"]
    try:
        for record in run.requests[columns].to_dict(orient="records"):
            writer.write({k: (v.item() if hasattr(v, "item") else v) for k, v in record.items()})
    finally:
        writer.close()
    coefs = run.calibration.coefficients
    write_config(run_dir, {"source": SIMULATED, "configuration": run.calibration.replica.label,
                           **calibration_provenance(run.calibration),
                           "coefficients": {"c0_s": coefs.c0_s,
                                            "c_prefill_s_per_token": coefs.c_prefill_s_per_token,
                                            "c_decode_s_per_seq": coefs.c_decode_s_per_seq,
                                            "ttft_offset_s": coefs.ttft_offset_s},
                           "calibration_rates_qps": list(run.calibration.rates_qps),
                           "sim_code": code_digest()})
    write_summary(run_dir, run.summary)
    return run_dir
