"""``hgresearch plan``: the fleet planner (docs/planner.md).

It finds the cheapest (or lowest-carbon) mix of configurations for a load and its SLOs, checks
it by simulation, compares it with single-hardware fleets and writes a fleet file.
"""

from __future__ import annotations

from enum import StrEnum
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
    TdpOverrides,
    executor_of,
    output_option,
)
from hgresearch.executors import ExecutorKind

if TYPE_CHECKING:
    import pandas as pd

    from hgresearch.plan import Candidate, PlanProblem
    from hgresearch.sim.calibration_file import CalibrationFile

DEFAULT_CANDIDATES = ["1x H100-PCIe", "2x RTX-4090", "4x RTX-4090", "8x RTX-4090"]


class StepTimes(StrEnum):
    """Where the simulated replicas' step times come from."""

    CALIBRATED = "calibrated"
    ROOFLINE = "roofline"


def plan(
    model: Annotated[str, typer.Option(help="Model (hgresearch/data/catalogs/"
                                       "model_architectures.csv).")]
    = "DeepSeek-R1-Distill-Qwen-14B",
    qps: Annotated[float, typer.Option(help="Demand: requests per second.")] = 20.0,
    slo: Annotated[list[str] | None, typer.Option(
        help="SLO class, repeatable: [NAME=]SPEC[@SHARE], SPEC 'batch' or pXX_ttft:MS / "
             "pXX_tpot:MS joined by commas (e.g. p99_ttft:500).")] = None,
    length: Annotated[list[str] | None, typer.Option(
        help="Length class, repeatable: NAME=PROMPT:OUTPUT[@FRACTION] tokens.")] = None,
    candidate: Annotated[list[str] | None, typer.Option(
        help="Candidate configuration 'Nx GPU', repeatable (default: 1x H100-PCIe, 2x/4x/8x "
             "RTX-4090).")] = None,
    max_: Annotated[list[str] | None, typer.Option(
        "--max", help="Availability cap, repeatable: GPU=N GPUs of a type, or 'Nx GPU=N' "
                      "replicas of a configuration.")] = None,
    objective: Annotated[str, typer.Option(help="cost, carbon, or weighted (cost + "
                                           "--carbon-price × kg CO2e).")] = "cost",
    carbon_price: Annotated[float, typer.Option(help="USD per kg CO2e (objective weighted).")]
    = 0.1,
    prices: Annotated[str, typer.Option(help="Price scenario of hgresearch/data/catalogs/"
                                        "prices.csv (alternative, hyperscaler).")]
    = "alternative",
    owned: Annotated[list[str] | None, typer.Option(
        help="GPU type already owned (pays electricity only), repeatable.")] = None,
    electricity: Annotated[str, typer.Option(help="Region of hgresearch/data/catalogs/"
                                             "electricity_prices.csv for owned GPUs.")]
    = "EU-27",
    grid: Annotated[str, typer.Option(help="Grid region of hgresearch/data/catalogs/"
                                      "grid_carbon.csv.")] = "EU-27",
    hardware_scenario: Annotated[str, typer.Option(
        help="Embodied carbon: new (charged) or idle_consumer (consumer GPUs' is sunk).")]
    = "new",
    step_times: Annotated[StepTimes, typer.Option(
        help="Step times of the simulated replicas: calibrated (the simulator's calibration "
             "on the reference runs, as notebook 07 fits it; cached in --build-dir: after "
             "`make reproduce` it is there, else the first call fits it, minutes) or roofline "
             "(the physical floor alone: optimistic latencies, overstated capacity).")]
    = StepTimes.CALIBRATED,
    source: ReferenceSource = None,
    confidence: Annotated[float, typer.Option(
        help="Confidence of the simulator's step-time interval: every replica is sized at the "
             "slow end (its steps this much slower than predicted) and the plan is checked "
             "there too (the stress check).")] = 0.9,
    headroom: Annotated[float, typer.Option(
        help="Fraction of its slow-end SLO rate every replica is kept free of (0.1: loaded to "
             "at most 90%%; covers the rates' estimation error and the routing split).")]
    = 0.1,
    check_seeds: Annotated[int, typer.Option(help="Seeds of the simulated check.")] = 3,
    check_duration: Annotated[float, typer.Option(
        help="Seconds of traffic the check simulates per seed (the request count follows "
             "from the demand; 600: steady state).")] = 600.0,
    max_rounds: Annotated[int, typer.Option(help="Re-plan at most this many times when the "
                                            "simulated check misses an SLO.")] = 5,
    output: Annotated[Path | None, output_option("Fleet file (YAML) of the plan, for "
                                                 "'hgresearch sim fleet' and 'bench --fleet'.")]
    = None,
    base_url: Annotated[list[str] | None, typer.Option(
        help="Live endpoint of a planned replica, repeatable: 'Nx GPU=URL', one per replica "
             "of every configuration the plan uses (makes -o a live fleet file for "
             "'bench --fleet').")] = None,
    build_dir: BuildDir = Path("build"),
    executor: ExecutorOption = ExecutorKind.PROCESS,
    address: Address = None,
    candidate_file: CandidateFiles = None,
    price: PriceOverrides = None,
    tdp: TdpOverrides = None,
    allow_large: AllowLarge = False,
) -> None:
    """Plan a fleet for one request rate: the plan, its simulated check, and the
    single-configuration baselines. Your own hardware joins the candidates with
    --candidate-file (a calibration file of `hgresearch sim calibrate`), priced and powered
    with --price/--tdp where the catalogs are silent."""
    from hgresearch.bounds import check_work
    from hgresearch.errors import InputError
    from hgresearch.plan import (
        CarbonSettings,
        Demand,
        LengthClass,
        PlanProblem,
        PriceScenario,
        SimulatedReplicaRates,
        baselines,
        length_extrapolation_notes,
        plan_and_check,
        replica_rate_table,
        replica_settings,
        validate,
        write_fleet_file,
    )
    from hgresearch.plan.check import CHECK_DURATION_S, CHECK_WARMUP_FRACTION
    from hgresearch.plan.options import (
        parse_base_urls,
        parse_candidate,
        parse_caps,
        parse_length,
        parse_slo,
    )
    from hgresearch.plan.replica_rates import ROOFLINE_ONLY
    from hgresearch.plan.work import check_work_estimate, rates_work_estimate, replicas_estimate
    from hgresearch.report.plan import (
        comparison_table,
        fleet_table,
        robust_check_table,
    )
    from hgresearch.sim.intervals import reference_intervals
    from hgresearch.sim.steady_state import SteadyStateSettings

    if not 0 < confidence < 1:
        raise InputError(f"expected a confidence in (0, 1), got {confidence:g}",
                         field="--confidence")
    if not 0 <= headroom < 1:
        raise InputError(f"expected a headroom in [0, 1), got {headroom:g}", field="--headroom")
    if not check_duration > 0 or check_seeds < 1:
        raise InputError("expected --check-duration > 0 and --check-seeds >= 1",
                         field="--check-duration")
    if output is not None:
        check_output_target(output)

    slo_classes = tuple(parse_slo(text, i) for i, text in enumerate(slo or ["p99_ttft:500"]))
    lengths = tuple(parse_length(t) for t in length) if length else (
        LengthClass("default", 1024, 128),)
    user = candidate_files(candidate_file, model)
    candidates, gpu_caps = parse_caps(max_ or [], with_candidate_files(
        [parse_candidate(c) for c in candidate or DEFAULT_CANDIDATES], user))
    price_overrides, tdp_overrides = gpu_overrides(price, tdp)
    problem = PlanProblem(
        model=model, demand=Demand.steady(qps), length_classes=lengths,
        slo_classes=slo_classes, candidates=tuple(candidates),
        prices=PriceScenario(prices, tuple(owned or ()), electricity,
                             overrides_usd_per_gpu_h=price_overrides),
        carbon=CarbonSettings(grid_region=grid, hardware_scenario=hardware_scenario,
                              tdp_overrides_w=tdp_overrides),
        gpu_caps=gpu_caps)
    validate(problem)
    steady = SteadyStateSettings()
    # The check's size follows from the demand alone: refuse an absurd one before anything runs.
    check_work(check_work_estimate(qps, check_duration, check_seeds), allow_large=allow_large)
    check_work(rates_work_estimate(problem, steady), allow_large=allow_large)
    runner = executor_of(executor, address)
    intervals = reference_intervals(build_dir, source)
    factor = intervals.step_time_factor(confidence)

    def progress(line: str) -> None:
        typer.echo(f"... {line}", err=True)

    if step_times == StepTimes.CALIBRATED:
        from hgresearch.sim import fleet as sim_fleet

        progress("calibrations (cached in --build-dir; minutes on first use)")
        provider = SimulatedReplicaRates(
            fits=sim_fleet.fleet_calibrations(build_dir, source, executor=runner),
            source="calibrated on the reference runs", steady=steady,
            step_time_factor=factor)
    else:
        provider = SimulatedReplicaRates(steady=steady, step_time_factor=factor)
    provider.fits.update({label: f.calibration() for label, f in user.items()})
    progress(f"steady-state rates of {len(problem.candidates)} configurations x "
             f"{len(problem.class_keys())} classes, nominal and steps x{factor:.3g}")
    rates = replica_rate_table(problem, provider, build_dir=build_dir, executor=runner)
    # Replicas follow from the rates: refuse a fleet too large to check before solving.
    replicas, what = replicas_estimate(problem, rates)
    check_work(check_work_estimate(qps, check_duration, check_seeds, replicas=replicas,
                                   replicas_what=what), allow_large=allow_large)
    settings = replica_settings(problem, provider)
    checked = plan_and_check(problem, rates, seeds=tuple(range(check_seeds)),
                             duration_s=check_duration, max_rounds=max_rounds,
                             objective=objective, carbon_price_usd_per_kg=carbon_price,
                             headroom=headroom, progress=progress, **settings)

    def show(table: pd.DataFrame) -> str:
        return str(table.to_string(float_format=lambda x: f"{x:.4g}", index=False))

    typer.echo(f"{model} at {qps:g} req/s; SLO classes: "
               + "; ".join(f"{s.name}: {s.describe()}" for s in slo_classes)
               + f"; prices {problem.prices.describe()}; grid {grid}; objective {objective}")
    if (rates.step_time_source == ROOFLINE_ONLY).any():
        typer.echo("note: replica rates come from the simulator on the roofline floor alone "
                   "(uncalibrated: optimistic latencies, overstated rates)", err=True)
    for note in candidate_notes(problem, user):
        typer.echo(f"note: {note}", err=True)
    if step_times == StepTimes.CALIBRATED:
        from hgresearch.sim.run import calibration_runs

        for note in length_extrapolation_notes(problem.length_classes,
                                               calibration_runs(source)):
            typer.echo(f"note: {note}")
    typer.echo(f"sized at the slow end of the simulator's step-time interval at {confidence:g} "
               f"confidence (every step x{factor:.3g}; {intervals.source}) with "
               f"{headroom:.0%} headroom")
    typer.echo("\nplan (load: of the planned capacity / of the slow-end rate / of the nominal "
               "rate; every replica of a configuration gets the same share):")
    typer.echo(show(fleet_table(checked.plan)))
    check = checked.checks[-1][0]
    verdict = "passed" if checked.passed else "MISSED"
    typer.echo(f"\nsimulated check ({check_seeds} seeds x {check.duration_s:g} s of traffic = "
               f"{check.num_requests:,} requests each, first "
               f"{CHECK_WARMUP_FRACTION:.0%} dropped; nominal and stressed with every step "
               f"x{factor:.3g}; {checked.rounds} round(s)): {verdict}")
    typer.echo(show(robust_check_table(check, intervals, confidence)))
    if check.duration_s < CHECK_DURATION_S:
        typer.echo(f"note: the check ran {check.duration_s:g} s of traffic, less than the "
                   f"{CHECK_DURATION_S:g} s that reach steady state", err=True)
    typer.echo("\nbaselines (single hardware, no availability caps):")
    typer.echo(show(comparison_table(checked.plan, baselines(
        problem, rates, objective=objective, carbon_price_usd_per_kg=carbon_price,
        capacity_scale=checked.capacity_scale, headroom=headroom, **settings))))
    if output is not None:
        urls = parse_base_urls(base_url, model) if base_url else None
        typer.echo(f"\nwrote {write_fleet_file(checked.plan, output, base_urls=urls)}")


def check_output_target(path: Path) -> None:
    """Refuse, before any work, a ``-o`` target that cannot be written: a folder, or a file in
    a folder that does not exist or is not writable."""
    import os

    from hgresearch.errors import InputError

    if path.is_dir():
        raise InputError(f"{path} is a folder; expected a file to write the fleet file to",
                         field="--output")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"folder {parent} does not exist", field="--output")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise InputError(f"cannot write {path}", field="--output")


# ---------------------------------------------------------------------------------------------
# Your hardware: candidates from calibration files, prices and TDPs the catalogs lack
# ---------------------------------------------------------------------------------------------

def candidate_files(paths: list[Path] | None, model: str) -> dict[str, CalibrationFile]:
    """The calibration files of --candidate-file by configuration label; each must calibrate the
    plan's model (a calibration describes one model's serving)."""
    from hgresearch.cli.sim import warnings_as_lines
    from hgresearch.errors import InputError
    from hgresearch.sim.calibration_file import read_candidate_files

    with warnings_as_lines():
        files = read_candidate_files(paths or [])
    for calibration in files.values():
        if calibration.model != model:
            raise InputError(f"calibrates {calibration.model!r}, but the plan is for {model!r}: "
                             f"pass --model {calibration.model}", file=calibration.path,
                             field="model")
    return files


def with_candidate_files(candidates: list[Candidate], files: dict[str, CalibrationFile]
                         ) -> list[Candidate]:
    """``candidates`` plus the hardware of each calibration file (once: a file of a
    configuration already listed calibrates that one)."""
    from hgresearch.plan import Candidate

    listed = {(c.gpu_name, c.num_gpus) for c in candidates}
    extra = [Candidate(f.gpu_name, f.gpu_count) for f in files.values()
             if (f.gpu_name, f.gpu_count) not in listed]
    return [*candidates, *extra]


def gpu_overrides(price: list[str] | None, tdp: list[str] | None
                  ) -> tuple[tuple[tuple[str, float], ...], tuple[tuple[str, float], ...]]:
    """--price GPU=USD_PER_GPU_H and --tdp GPU=W as the planner's override tuples."""
    from hgresearch.sim.calibration_file import parse_gpu_values

    return (tuple(sorted(parse_gpu_values(price, "--price", "USD_PER_GPU_H").items())),
            tuple(sorted(parse_gpu_values(tdp, "--tdp", "W").items())))


def candidate_notes(problem: PlanProblem, files: dict[str, CalibrationFile]) -> list[str]:
    """What the plan assumed about hardware from calibration files: the calibration used, and
    embodied carbon not counted where the catalog has none."""
    from hgresearch.plan.economics import has_embodied_carbon

    notes = [f"{label}: calibrated on your runs ({f.path}; method {f.method}, KV cache from "
             f"{f.kv_cache.source})" for label, f in files.items()]
    notes += [f"{c.hardware}: no embodied carbon in hgresearch/data/catalogs/"
              "embodied_carbon.csv: not counted (the carbon objective understates it)"
              for c in problem.candidates if not has_embodied_carbon(c.gpu_name)]
    return notes
