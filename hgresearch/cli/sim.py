"""``hgresearch sim``: the serving simulator (docs/simulator.md).

``sim run`` simulates one run of a configuration calibrated on its measured runs; ``sim validate``
validates the calibration leaving one offered rate out; ``sim fleet`` simulates a fleet file's
replicas behind a routing policy; ``sim calibrate`` calibrates a user's runs into a calibration
file, which ``sim run``, ``sim fleet`` and ``plan`` take with ``--candidate-file``.
"""

from __future__ import annotations

import contextlib
import json
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from hgresearch.cli.options import (
    Address,
    AllowLarge,
    BuildDir,
    CandidateFiles,
    ExecutorOption,
    PriceOverrides,
    ReferenceSource,
    Seed,
    TdpOverrides,
    executor_of,
    output_option,
)
from hgresearch.executors import ExecutorKind
from hgresearch.traffic.routing import Policy

if TYPE_CHECKING:
    import pandas as pd

    from hgresearch.executors import Executor
    from hgresearch.sim.calibrate import Calibration
    from hgresearch.sim.fleet import SimReplica
    from hgresearch.sim.intervals import PredictionIntervals
    from hgresearch.sim.user_calibration import UserCalibration


def sim_fleet(
    fleet_file: Annotated[Path, typer.Argument(help="Fleet file (YAML; docs/simulator.md).")],
    policy: Annotated[Policy, typer.Option(help="Routing policy.")] = Policy.JSQ,
    qps: Annotated[float, typer.Option(help="Request rate (req/s) of the Poisson arrivals.")]
    = 20.0,
    num_prompts: Annotated[int, typer.Option(help="Requests.")] = 200,
    workload: Annotated[str, typer.Option(help="Length mix, as hgresearch bench --workload "
                                          "(token counts only are used).")]
    = "random:input_len=1024,output_len=128",
    seed: Seed = 0,
    threshold_tokens: Annotated[int, typer.Option(help="length-aware: prompts of at least this "
                                                  "many tokens go to the fastest replica.")]
    = 1024,
    max_outstanding: Annotated[int, typer.Option(help="cost-spillover: SLO-safe outstanding "
                                                 "requests per replica (unless the fleet file "
                                                 "gives one).")] = 16,
    reference: ReferenceSource = None,
    build_dir: BuildDir = Path("build"),
    candidate_file: CandidateFiles = None,
    price: PriceOverrides = None,
    tdp: TdpOverrides = None,
    allow_large: AllowLarge = False,
    confidence: Annotated[float, typer.Option(
        help="Confidence of the prediction intervals and of the stress run printed after the "
             "summary (0: neither). Both come from the shared step-time model's leave-one-"
             "configuration-out residuals: the first use runs that cross-validation "
             "(minutes), then it is cached in --build-dir.")] = 0.9,
) -> None:
    """Simulate a fleet at one request rate; print per-replica and overall summaries, the
    --confidence prediction intervals of the replicas the shared step-time model calibrates,
    and a stress run of the same traffic with every step as slow as the interval's slow end.

    The work (memory and time from --num-prompts and the fleet's replicas) is estimated
    before anything is calibrated: over 4 GB or 1 hour is refused without --allow-large. A
    long simulation shows a progress bar; Ctrl-C stops it at once (exit 130).

    Arrivals and lengths are those the live ``hgresearch bench`` would send with the same
    --qps, --num-prompts, --workload and --seed.

    A replica without ``step_time`` in the fleet file runs its configuration's calibrated
    step-time model (fitted on the reference data and data/raw/cpu-tiny, with its request-path
    delay and KV capacity); a configuration with no calibration runs on the roofline floor
    alone (a note on stderr says so). The first call calibrates every configuration and may
    take minutes; the calibrations are then cached under BUILD_DIR/cache/models. A replica
    whose configuration a --candidate-file (or its fleet entry's `calibration:` file)
    calibrates runs that calibration; its GPU needs a price and a TDP (--price, --tdp where
    the catalogs have none).
    """
    from hgresearch.bench.options import parse_workload_option
    from hgresearch.bench.prompts import build_requests
    from hgresearch.errors import InputError
    from hgresearch.sim.fleet import (
        ROOFLINE_ONLY,
        fleet_summary,
        sim_replicas,
        simulate_fleet,
        with_slower_steps,
    )
    from hgresearch.sim.fleet_spec import load_fleet
    from hgresearch.sim.intervals import reference_intervals
    from hgresearch.traffic.arrivals import arrival_offsets_ns
    from hgresearch.traffic.routing import make_policy

    if num_prompts < 1:
        raise InputError(f"--num-prompts: expected an integer >= 1, got {num_prompts}")
    if not qps > 0:
        raise InputError(f"--qps: expected a rate > 0, got {qps}")
    if not 0 <= confidence < 1:
        raise InputError(f"expected a confidence in [0, 1), got {confidence:g}",
                         field="--confidence")
    from hgresearch.bounds import check_work
    from hgresearch.sim.calibration_file import parse_gpu_values, read_candidate_files
    from hgresearch.sim.run import run_estimate

    prices = parse_gpu_values(price, "--price", "USD_PER_GPU_H")
    tdps = parse_gpu_values(tdp, "--tdp", "W")
    fleet = load_fleet(fleet_file)
    estimate = run_estimate(num_prompts, replicas=len(fleet.replicas))
    check_work(estimate, allow_large=allow_large)
    with warnings_as_lines():
        candidates = {k: v.calibration() for k, v in
                      read_candidate_files(candidate_file or []).items()}
        replicas = sim_replicas(fleet, build_dir=build_dir,
                                reference=reference, candidates=candidates,
                                prices_usd_per_gpu_h=prices)
    require_price_and_tdp(replicas, tdps)
    specs = build_requests(parse_workload_option(workload), num_prompts, seed=seed)
    arrivals_s = arrival_offsets_ns(num_prompts, qps, seed=seed) / 1e9
    router_policy = make_policy(policy, seed=seed, threshold_tokens=threshold_tokens,
                                max_outstanding=max_outstanding)
    with progress_bar(num_prompts, "simulated requests", estimate.time_s) as advance:
        frame = simulate_fleet(replicas, router_policy, arrivals_s,
                               [s.prompt_len for s in specs], [s.output_len for s in specs],
                               on_completions=advance)
    table = fleet_summary(frame, replicas, tdp_w_by_gpu=tdps)
    for replica in replicas:
        if replica.step_time_source == ROOFLINE_ONLY:
            typer.echo(f"note: {replica.name}: no calibration for this configuration and no "
                       "step_time in the fleet file: the roofline floor alone (a lower bound: "
                       "latencies are optimistic)", err=True)
    typer.echo(f"fleet {fleet_file}, policy {policy.value}, {qps:g} req/s, "
               f"{num_prompts} requests, seed {seed}")
    typer.echo(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    if confidence == 0:
        return
    if not any(replica.shared_model for replica in replicas):
        typer.echo("note: no prediction interval and no stress run: no replica runs the shared "
                   "step-time model, whose held-out residuals they come from", err=True)
        return
    typer.echo("... prediction intervals (the reference cross-validation, cached in "
               "--build-dir; minutes on first use)", err=True)
    intervals = reference_intervals(build_dir, reference)
    lines, without = fleet_interval_lines(table, replicas, intervals, confidence)
    for line in lines:
        typer.echo(line)
    factor = intervals.step_time_factor(confidence)
    with progress_bar(num_prompts, "simulated requests (stress)", estimate.time_s) as advance:
        stressed = simulate_fleet(with_slower_steps(replicas, factor), router_policy,
                                  arrivals_s, [s.prompt_len for s in specs],
                                  [s.output_len for s in specs], on_completions=advance)
    typer.echo(f"stress: the same requests with every step and request-path delay "
               f"x{factor:.3g} (the slow end of the {confidence:.0%} step-time interval, "
               "one-sided)")
    typer.echo(fleet_summary(stressed, replicas, tdp_w_by_gpu=tdps)[
        list(STRESS_COLUMNS)].to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    if without:
        typer.echo(f"note: no prediction interval for {', '.join(without)}: its step times are "
                   "not the shared step-time model's, whose held-out residuals the intervals "
                   "come from; the stress run slows it down by the same factor", err=True)


#: Columns of ``sim fleet``'s summary (summary.json keys) with a prediction interval.
FLEET_INTERVAL_COLUMNS = ("request_throughput", "mean_tpot_ms", "p50_ttft_ms", "p90_ttft_ms",
                          "p99_ttft_ms")
#: Columns of ``sim fleet``'s stress table.
STRESS_COLUMNS = ("replica", "completed", "request_throughput", "mean_tpot_ms", "p50_ttft_ms",
                  "p90_ttft_ms", "p99_ttft_ms", "p99_e2el_ms")


def fleet_interval_lines(table: pd.DataFrame, replicas: list[SimReplica],
                         intervals: PredictionIntervals, confidence: float
                         ) -> tuple[list[str], list[str]]:
    """``sim fleet``'s interval lines, and the names of the replicas without an interval: per
    replica whose step times are the shared model's
    (:attr:`SimReplica.shared_model <hgresearch.sim.fleet.SimReplica.shared_model>`), each
    value of :data:`FLEET_INTERVAL_COLUMNS` with its ``confidence`` interval
    (:func:`hgresearch.sim.intervals.summary_intervals`). The residuals are those of one
    configuration's prediction: the fleet's overall row gets none."""
    from hgresearch.sim.intervals import summary_intervals

    lines = [f"{confidence:.0%} prediction intervals ({intervals.source}):"]
    without = []
    rows = table[table.replica != "all"]
    for replica, (_, row) in zip(replicas, rows.iterrows(), strict=True):
        if not replica.shared_model:
            without.append(replica.name)
            continue
        summary = {key: row[key] for key in FLEET_INTERVAL_COLUMNS}
        parts = [f"{key} {summary[key]:.4g} [{low:.4g}, {high:.4g}]" for key, (low, high)
                 in summary_intervals(intervals, summary, confidence).items()]
        lines.append(f"  {replica.name}: {'; '.join(parts)}")
    return lines, without


@contextlib.contextmanager
def warnings_as_lines() -> Iterator[None]:
    """Print the warnings raised inside (a calibration file's changed run files, runs ingest
    skipped or read twice) as ``warning: ...`` lines on stderr, one per warning."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            for warning in caught:
                typer.echo(f"warning: {warning.message}", err=True)


def require_price_and_tdp(replicas: list[SimReplica], tdps: dict[str, float]) -> None:
    """A replica calibrated by a calibration file (your hardware) needs a price and a TDP: an
    :class:`InputError` names what is missing and the option that gives it."""
    import math

    from hgresearch.errors import InputError
    from hgresearch.sim.calibration_file import gpu_key
    from hgresearch.sim.fleet import CALIBRATION_FILE, tdp_or_nan

    for replica in replicas:
        if replica.step_time_source != CALIBRATION_FILE:
            continue
        gpu = gpu_key(replica.gpu_name)
        if math.isnan(replica.price_usd_per_gpu_h):
            raise InputError(f"{replica.name}: no price for GPU {gpu!r} (not in hgresearch/"
                             "data/catalogs/prices.csv): pass --price "
                             f"{gpu}=USD_PER_GPU_H (or price_usd_per_gpu_h in the fleet file)",
                             field="--price")
        if math.isnan(tdp_or_nan(gpu, tdps)):
            raise InputError(f"{replica.name}: no TDP for GPU {gpu!r} (not in hgresearch/data/"
                             f"catalogs/hardware.csv): pass --tdp {gpu}=W", field="--tdp")


def sim_run(
    qps: Annotated[float, typer.Option("--qps", help="Offered request rate (req/s).")],
    config: Annotated[str | None, typer.Option(
        "--config", help='Configuration label, e.g. "DeepSeek-R1-Distill-Qwen-14B on 1x '
                         'H100-PCIe" (the reference data\'s and data/raw\'s, or a '
                         '--candidate-file\'s; default: the one candidate file\'s), or an '
                         'unmeasured "MODEL on Nx GPU" the shared step-time model predicts '
                         '(a note on stderr says so).')] = None,
    num_prompts: Annotated[int, typer.Option("--num-prompts", help="Requests to send.")] = 200,
    reference: ReferenceSource = None,
    build_dir: BuildDir = Path("build"),
    seed: Seed = 0,
    output: Annotated[Path | None, output_option(
        "Also write a run-like folder (requests, summary, config; source = simulated).")]
    = None,
    executor: ExecutorOption = ExecutorKind.PROCESS,
    address: Address = None,
    candidate_file: CandidateFiles = None,
    allow_large: AllowLarge = False,
    confidence: Annotated[float, typer.Option(
        help="Confidence of the prediction intervals printed on stderr beside the summary "
             "(0: none). They come from the shared step-time model's leave-one-configuration-"
             "out residuals: the first use runs that cross-validation (minutes), then it is "
             "cached in --build-dir.")] = 0.9,
) -> None:
    """Simulate one run of a configuration calibrated on its measured runs (the reference
    data's, or a --candidate-file's); print its summary (the keys of a measured run's
    summary.json) as JSON, and on stderr the --confidence prediction interval of its
    throughput, mean TPOT and TTFT percentiles (what the held-out validation says the truth
    may be, given this prediction).

    A configuration never measured ("MODEL on Nx GPU" with the model in
    model_architectures.csv and a GPU of hardware.csv of a type the shared step-time model
    is fitted for, e.g. "DeepSeek-R1-Distill-Qwen-32B on 8x RTX-4090") is simulated with the
    shared model's prediction: a note on stderr says so, and the summary (and -o's
    config.json) carry calibration_source = "predicted: shared model, configuration not
    measured" and calibration_note. Its request lengths are the means of the same model's
    measured runs on its other configurations (named in the note); a model without measured
    runs is refused, as is a model whose weights leave no KV room on the N GPUs.

    Checked before anything is calibrated or simulated: the rate and the number of requests,
    the work (memory and time estimated from --num-prompts; over 4 GB or 1 hour is refused
    without --allow-large), -o (a folder holding a run is refused) and the configuration (an
    unknown label names the closest known ones). A long simulation shows a progress bar;
    Ctrl-C stops it at once (exit 130)."""
    from hgresearch.bounds import check_work
    from hgresearch.errors import InputError
    from hgresearch.sim.run import (
        check_run_folder_target,
        check_run_inputs,
        run_estimate,
        simulate_run,
        write_run_folder,
    )
    from hgresearch.sim.step_model import PREDICTED_UNMEASURED

    check_run_inputs(qps, num_prompts)
    if not 0 <= confidence < 1:
        raise InputError(f"expected a confidence in [0, 1), got {confidence:g}",
                         field="--confidence")
    estimate = run_estimate(num_prompts)
    check_work(estimate, allow_large=allow_large)
    if output is not None:
        check_run_folder_target(output)
    with warnings_as_lines():
        fit, points = _run_calibration(config, candidate_file, reference, build_dir,
                                       executor_of(executor, address))
    if fit.extra.get("source") == PREDICTED_UNMEASURED:
        typer.echo(f"note: prediction of an unmeasured configuration: {fit.extra['note']}",
                   err=True)
    with progress_bar(num_prompts, "simulated requests", estimate.time_s) as advance:
        run = simulate_run(fit, points, qps, num_prompts, length_seed=seed,
                           on_completions=advance)
    if output is not None:
        write_run_folder(run, output)
    typer.echo(json.dumps(run.summary, indent=1, default=str))
    if confidence > 0:
        for line in interval_lines(fit, run.summary, confidence, build_dir, reference):
            typer.echo(line, err=True)
    if output is not None:
        typer.echo(f"simulated run -> {output}", err=True)


def interval_lines(fit: Calibration, summary: dict[str, object], confidence: float,
                   build_dir: Path, reference: Path | None) -> list[str]:
    """``sim run``'s interval lines: the reference intervals
    (:func:`hgresearch.sim.intervals.reference_intervals`) around the summary's values where
    the calibration is the shared step-time model's (measured or predicted); else one line
    saying why there is none."""
    from hgresearch.sim.intervals import reference_intervals, summary_intervals
    from hgresearch.sim.step_model import PREDICTED_UNMEASURED, SHARED_MODEL

    if fit.extra.get("source") not in (SHARED_MODEL, PREDICTED_UNMEASURED):
        return ["note: no prediction interval: this calibration is not the shared step-time "
                "model's, whose held-out residuals the intervals come from"]
    typer.echo("... prediction intervals (the reference cross-validation, cached in "
               "--build-dir; minutes on first use)", err=True)
    intervals = reference_intervals(build_dir, reference)
    lines = [f"{confidence:.0%} prediction intervals ({intervals.source}):"]
    for key, (low, high) in summary_intervals(intervals, summary, confidence).items():
        lines.append(f"  {key}: {summary[key]:.4g} [{low:.4g}, {high:.4g}]")
    return lines


#: Work estimated to take at least this long (s) shows a progress bar on stderr.
PROGRESS_AFTER_S = 5.0


@contextlib.contextmanager
def progress_bar(total: int, unit: str, estimated_s: float
                 ) -> Iterator[Callable[[int], object] | None]:
    """A callback that advances a progress bar on stderr by its argument, for work estimated
    at :data:`PROGRESS_AFTER_S` or more; ``None`` (no bar, no cost) for shorter work."""
    if estimated_s < PROGRESS_AFTER_S:
        yield None
        return
    from tqdm import tqdm

    try:
        with tqdm(total=total, unit=f" {unit}", file=sys.stderr, mininterval=1.0,
                  dynamic_ncols=True) as bar:
            yield bar.update
    except KeyboardInterrupt:
        # Ctrl-C can land inside tqdm's own code (drawing the bar, before its close() ends
        # the line): the error line that follows starts on a line of its own
        sys.stderr.write("\n")
        raise


def _run_calibration(config: str | None, candidate_files: list[Path] | None,
                     reference: Path | None, build_dir: Path, runner: Executor
                     ) -> tuple[Calibration, pd.DataFrame]:
    """The calibration ``sim run`` simulates and its measured points: a candidate file's
    (by --config, or the only one), else the reference configurations' (fitted on first use),
    else — for a configuration never measured whose model and GPU type the shared step-time
    model knows — that model's prediction, with the same model's measured points on other
    configurations for the lengths (:func:`hgresearch.sim.run.unmeasured_configuration`)."""
    from hgresearch.errors import InputError
    from hgresearch.sim.calibration_file import read_candidate_files
    from hgresearch.sim.run import (
        calibration_for,
        calibration_runs,
        calibrations,
        check_configuration,
        unmeasured_configuration,
    )
    from hgresearch.sim.validation import configuration_points

    files = read_candidate_files(candidate_files or [])
    if config is None:
        if len(files) != 1:
            raise InputError("expected --config LABEL (or one --candidate-file)",
                             field="--config")
        config = next(iter(files))
    if config in files:
        return files[config].calibration(), files[config].points()
    runs = calibration_runs(reference)
    points = dict(configuration_points(runs))
    if config not in points:
        # before calibrating (minutes when nothing is cached): a typo answers at once, and so
        # do a configuration too large for its GPUs and one without lengths to replay
        target = unmeasured_configuration(config, points)
        if target is None:
            check_configuration(config, set(points) | set(files))
        elif target.label in points:  # a measured configuration, spelled with an alias
            config = target.label
        else:
            from hgresearch.sim.step_model import calibration_for as predicted_calibration

            fit = predicted_calibration(target.model, target.gpu_name, target.gpu_count,
                                        build_dir=build_dir, reference=reference)
            fit.extra["note"] = f"{fit.extra['note']}; {target.lengths_note()}"
            fit.extra["lengths_from"] = list(target.lengths_from)
            return fit, target.points
    known = calibrations(runs, build_dir, n_jobs=2, executor=runner)
    fit = calibration_for(config, {**known, **{k: v.calibration() for k, v in files.items()}})
    return fit, points[config]


def sim_calibrate(
    runs: Annotated[list[Path], typer.Argument(
        help="Run folders or result files of one configuration (anything `hgresearch ingest` "
             "reads: vLLM, guidellm, aiperf, our run folders).")],
    output: Annotated[Path, output_option("Calibration file to write (YAML, e.g. "
                                          "h200.calibration.yaml).")],
    label: Annotated[str | None, typer.Option(
        "--label", "--hardware", help="Hardware of the runs, 'Nx GPU' (e.g. '1x H200'); "
                                      "required where the files name no GPU; the GPU may be "
                                      "outside the catalogs.")] = None,
    model: Annotated[str | None, typer.Option(
        help="Model of hgresearch/data/catalogs/model_architectures.csv whose architecture "
             "the runs served (default: the runs' model).")] = None,
    architecture: Annotated[Path | None, typer.Option(
        help="Architecture of a model outside the catalog: its Hugging Face config.json, or a "
             "YAML/JSON mapping of num_layers, num_kv_heads, head_dim, params_b, "
             "weight_bytes_per_param.")] = None,
    method: Annotated[str, typer.Option(
        help="summaries (fit by simulating the runs' summaries) or steps (fit to the engine "
             "steps reconstructed from per-token timestamps; needs them in every run).")]
    = "summaries",
    kv_blocks: Annotated[int | None, typer.Option(
        help="KV cache blocks of the server, where the runs carry no server_metrics.json or "
             "server log (vLLM logs 'KV cache size: T tokens' at start-up).")] = None,
    block_size: Annotated[int | None, typer.Option(
        help="Tokens per KV block with --kv-blocks (vLLM's default 16).")] = None,
    validate: Annotated[bool, typer.Option(
        help="Run the leave-one-rate-out validation (needs three offered rates).")] = True,
) -> None:
    """Calibrate the simulator on your runs of one configuration: fit its step-time model, write
    a calibration file (coefficients with intervals, the KV cache and where it came from, the
    runs' files and SHA-256 hashes, hardware, model), and print the leave-one-rate-out
    validation. Use the file with `sim run/fleet --candidate-file` and `plan --candidate-file`."""
    from hgresearch.sim.calibration_file import write_calibration_file
    from hgresearch.sim.user_calibration import calibrate_runs

    with warnings_as_lines():
        result = calibrate_runs(runs, label=label, model=model,
                                architecture_file=architecture, method=method,
                                kv_blocks=kv_blocks, block_size=block_size,
                                validate=validate)
    typer.echo(calibration_report(result))
    typer.echo(f"\ncalibration -> {write_calibration_file(result.file, output)}")


def calibration_report(result: UserCalibration) -> str:
    """What ``sim calibrate`` prints: the runs, the KV cache, the coefficients with intervals,
    the notes, the step reconstruction against the server (method steps) and the validation."""
    from hgresearch.report.user_hardware import (
        coefficient_rows,
        step_check_for,
        validation_rows,
    )

    f = result.file
    rates = ", ".join(f"{r:g}" for r in result.points.request_rate_qps)
    formats = ", ".join(sorted(set(result.runs.runs.source_format.astype(str))))
    lines = [f"{f.config_label}: {len(result.runs.runs)} runs ({formats}) at {rates} req/s; "
             f"method {f.method}",
             f"KV cache: {f.kv_cache.num_blocks} blocks x {f.kv_cache.block_size} tokens "
             f"({f.kv_cache.source}: {f.kv_cache.detail})"]
    lines += [f"note: {note}" for note in result.notes]

    def show(table: pd.DataFrame) -> str:
        return str(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))

    lines += ["", "coefficients (interval: " + f.interval_method + "):",
              show(coefficient_rows(f))]
    if f.method == "steps":
        check = step_check_for(result.runs)
        if len(check):
            lines += ["", "engine steps reconstructed from token timestamps vs the server's "
                          "counters:", show(check)]
    if len(result.validation):
        lines += ["", "leave-one-rate-out validation (error %, simulated vs measured):",
                  show(validation_rows(result.validation))]
    return "\n".join(lines)


def sim_validate(
    runs_dir: Annotated[list[Path] | None, typer.Argument(
        help="Run folders or result files to validate on (default: the calibration runs: "
             "the reference data and data/raw/cpu-tiny).")] = None,
    config: Annotated[list[str] | None, typer.Option(
        "--config", help="Only this configuration label, repeatable (default: all).")] = None,
    reference: ReferenceSource = None,
    executor: ExecutorOption = ExecutorKind.PROCESS,
    address: Address = None,
    output: Annotated[Path | None, output_option(
        "Also write the per-point errors (CSV).")] = None,
    candidate_file: CandidateFiles = None,
) -> None:
    """Leave-one-QPS-out validation of the simulator: per configuration, each rate is held
    out, the rest calibrate, the held-out rate is simulated; prints the MAPE table (%).
    Configurations run on --executor (the same table on each). With --candidate-file, the
    calibration file's own runs, hardware, KV cache and method are validated instead."""
    from hgresearch.errors import InputError
    from hgresearch.identity import config_label
    from hgresearch.sim.run import calibration_runs
    from hgresearch.sim.validation import simulated_leave_one_qps_out, simulated_validation_table

    if candidate_file:
        if runs_dir or config:
            raise InputError("give either --candidate-file or runs (and --config), not both",
                             field="--candidate-file")
        points = _validate_candidate_files(candidate_file)
    else:
        if runs_dir:
            from hgresearch.data.ingest import read_runs

            runs = read_runs(runs_dir)
        else:
            runs = calibration_runs(reference)
        if config:
            labels = runs.apply(config_label, axis=1)
            unknown = sorted(set(config) - set(labels))
            if unknown:
                raise InputError(f"unknown configuration(s) {unknown}; known: "
                                 f"{sorted(set(labels))}", field="config")
            runs = runs[labels.isin(config)]
        points = simulated_leave_one_qps_out(runs, executor=executor_of(executor, address))
    if points.empty:
        raise InputError("no configuration with three or more offered rates to validate")
    table = simulated_validation_table(points)
    if candidate_file:
        typer.echo("MAPE (%) per configuration (p90 TTFT: points measured above 50 ms only):")
    typer.echo(table.to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    if output is not None:
        points.to_csv(output, index=False)
        typer.echo(f"per-point errors -> {output}", err=True)


def _validate_candidate_files(paths: list[Path]) -> pd.DataFrame:
    """The leave-one-rate-out points of each calibration file, calibrated again on its runs
    (:func:`hgresearch.sim.user_calibration.revalidate`), the per-rate errors printed."""
    import pandas as pd

    from hgresearch.report.user_hardware import validation_rows
    from hgresearch.sim.calibration_file import read_calibration_file
    from hgresearch.sim.user_calibration import revalidate

    parts = []
    for path in paths:
        with warnings_as_lines():
            result = revalidate(read_calibration_file(path))
        if len(result.validation):
            typer.echo(f"{result.file.config_label} ({path}, method {result.file.method}): "
                       "error %, simulated vs measured")
            typer.echo(validation_rows(result.validation).to_string(
                index=False, float_format=lambda x: f"{x:.2f}") + "\n")
        parts.append(result.validation)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
