"""``hgresearch sim``: the serving simulator (docs/simulator.md).

``sim run`` simulates one run of a configuration calibrated on its measured runs; ``sim validate``
validates the calibration leaving one offered rate out; ``sim fleet`` simulates a fleet file's
replicas behind a routing policy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from hgresearch.cli.options import (
    Address,
    BuildDir,
    ExecutorOption,
    ReferenceSource,
    Seed,
    executor_of,
    output_option,
)
from hgresearch.executors import ExecutorKind
from hgresearch.traffic.routing import Policy


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
) -> None:
    """Simulate a fleet at one request rate; print per-replica and overall summaries.

    Arrivals and lengths are those the live ``hgresearch bench`` would send with the same
    --qps, --num-prompts, --workload and --seed.

    A replica without ``step_time`` in the fleet file runs its configuration's calibrated
    step-time model (fitted on the reference data and data/raw/cpu-tiny, with its request-path
    delay and KV capacity); a configuration with no calibration runs on the roofline floor
    alone (a note on stderr says so). The first call calibrates every configuration and may
    take minutes; the calibrations are then cached under BUILD_DIR/cache/models.
    """
    from hgresearch.bench.options import parse_workload_option
    from hgresearch.bench.prompts import build_requests
    from hgresearch.errors import InputError
    from hgresearch.sim.fleet import ROOFLINE_ONLY, fleet_summary, sim_replicas, simulate_fleet
    from hgresearch.sim.fleet_spec import load_fleet
    from hgresearch.traffic.arrivals import arrival_offsets_ns
    from hgresearch.traffic.routing import make_policy

    if num_prompts < 1:
        raise InputError(f"--num-prompts: expected an integer >= 1, got {num_prompts}")
    if not qps > 0:
        raise InputError(f"--qps: expected a rate > 0, got {qps}")
    replicas = sim_replicas(load_fleet(fleet_file), build_dir=build_dir, reference=reference)
    specs = build_requests(parse_workload_option(workload), num_prompts, seed=seed)
    arrivals_s = arrival_offsets_ns(num_prompts, qps, seed=seed) / 1e9
    router_policy = make_policy(policy, seed=seed, threshold_tokens=threshold_tokens,
                                max_outstanding=max_outstanding)
    frame = simulate_fleet(replicas, router_policy, arrivals_s,
                           [s.prompt_len for s in specs], [s.output_len for s in specs])
    table = fleet_summary(frame, replicas)
    for replica in replicas:
        if replica.step_time_source == ROOFLINE_ONLY:
            typer.echo(f"note: {replica.name}: no calibration for this configuration and no "
                       "step_time in the fleet file: the roofline floor alone (a lower bound: "
                       "latencies are optimistic)", err=True)
    typer.echo(f"fleet {fleet_file}, policy {policy.value}, {qps:g} req/s, "
               f"{num_prompts} requests, seed {seed}")
    typer.echo(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))


def sim_run(
    config: Annotated[str, typer.Option(
        "--config", help='Configuration label, e.g. "DeepSeek-R1-Distill-Qwen-14B on 1x '
                         'H100-PCIe" (the reference data\'s and data/raw\'s).')],
    qps: Annotated[float, typer.Option("--qps", help="Offered request rate (req/s).")],
    num_prompts: Annotated[int, typer.Option("--num-prompts", help="Requests to send.")] = 200,
    reference: ReferenceSource = None,
    build_dir: BuildDir = Path("build"),
    seed: Seed = 0,
    output: Annotated[Path | None, output_option(
        "Also write a run-like folder (requests, summary, config; source = simulated).")]
    = None,
    executor: ExecutorOption = ExecutorKind.PROCESS,
    address: Address = None,
) -> None:
    """Simulate one run of a configuration calibrated on its measured runs; print its summary
    (the keys of a measured run's summary.json) as JSON."""
    from hgresearch.sim.run import (
        calibration_for,
        calibration_runs,
        calibrations,
        simulate_run,
        write_run_folder,
    )
    from hgresearch.sim.validation import configuration_points

    runs = calibration_runs(reference)
    fit = calibration_for(config, calibrations(runs, build_dir, n_jobs=2,
                                              executor=executor_of(executor, address)))
    points = dict(configuration_points(runs))[config]
    run = simulate_run(fit, points, qps, num_prompts, length_seed=seed)
    typer.echo(json.dumps(run.summary, indent=1, default=str))
    if output is not None:
        write_run_folder(run, output)
        typer.echo(f"simulated run -> {output}", err=True)


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
) -> None:
    """Leave-one-QPS-out validation of the simulator: per configuration, each rate is held
    out, the rest calibrate, the held-out rate is simulated; prints the MAPE table (%).
    Configurations run on --executor (the same table on each)."""
    from hgresearch.errors import InputError
    from hgresearch.identity import config_label
    from hgresearch.sim.run import calibration_runs
    from hgresearch.sim.validation import simulated_leave_one_qps_out, simulated_validation_table

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
    typer.echo(table.to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    if output is not None:
        points.to_csv(output, index=False)
        typer.echo(f"per-point errors -> {output}", err=True)
