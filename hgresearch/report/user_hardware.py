"""Your hardware, your runs (notebook ``10_your_hardware`` and ``hgresearch sim calibrate``):
the paper's analysis for runs measured on hardware the paper never had.

:func:`analyse_your_hardware` takes a folder of runs (anything ``hgresearch ingest`` reads) and
the hardware's price and power, and computes what the notebook shows: Table 2- and Table
3-style tables of the runs (cost–performance; energy under the TDP model and, where the runs
carry telemetry, measured), the data of a Figure 1-style plot, the calibration
(:func:`hgresearch.sim.user_calibration.calibrate_runs`: a calibration file, both methods'
leave-one-rate-out validation), where runs have them the engine steps reconstructed from
token timestamps against the server's counters, the SLO capacities from the calibrated
simulator with intervals, and a fleet plan that mixes the hardware with the paper's
configurations. Tables are data (:data:`YOUR_HARDWARE_TABLES`, written by
:func:`hgresearch.report.writers.write_tables`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hgresearch.plan import (
    Candidate,
    CarbonSettings,
    Demand,
    LengthClass,
    PlanProblem,
    PriceScenario,
    SimulatedReplicaRates,
    baselines,
    plan_and_check,
    replica_rate_table,
    replica_settings,
)
from hgresearch.plan.check import CheckedPlan
from hgresearch.report.writers import TableSpec
from hgresearch.sim.calibration_file import COEFFICIENTS, CalibrationFile
from hgresearch.sim.user_calibration import UserCalibration, UserRuns
from hgresearch.sim.validation import VALIDATION_METRICS
from hgresearch.units import TOKENS_PER_MILLION

#: Display units of the coefficients: (column label, factor from the file's SI unit).
COEFFICIENT_UNITS = {"c0_s": ("c0 (ms)", 1e3),
                     "c_prefill_s_per_token": ("c_prefill (us/token)", 1e6),
                     "c_decode_s_per_seq": ("c_decode (us/sequence)", 1e6),
                     "ttft_offset_s": ("ttft_offset (ms)", 1e3)}
#: The paper's configurations a plan offers beside yours (GPU, count).
PAPER_CANDIDATES: tuple[tuple[str, int], ...] = (("H100-PCIe", 1), ("RTX-4090", 2),
                                                 ("RTX-4090", 4))
#: SLO percentiles of the SLO-capacity table (TTFT, ms limits from the parameters).
SLO_METRICS = ("p90_ttft_ms", "p99_ttft_ms")


# ---------------------------------------------------------------------------------------------
# Tables of a calibration (the command line prints them too)
# ---------------------------------------------------------------------------------------------

def coefficient_rows(calibration: CalibrationFile) -> pd.DataFrame:
    """One row per fitted number: value and interval in display units (ms, µs)."""
    rows = []
    for key in COEFFICIENTS:
        name, factor = COEFFICIENT_UNITS[key]
        low, high = calibration.intervals.get(key, (math.nan, math.nan))
        rows.append({"coefficient": name,
                     "value": float(getattr(calibration.coefficients, key)) * factor,
                     "low": low * factor, "high": high * factor})
    return pd.DataFrame(rows)


def validation_rows(validation: pd.DataFrame) -> pd.DataFrame:
    """Leave-one-rate-out errors (%): one row per held-out rate, one column per metric, and a
    ``MAPE`` row (mean absolute error over the rates)."""
    table = validation.pivot_table(index="held_out_qps", columns="metric", values="error_pct")
    table = table.reindex(columns=[m for m in ("request_throughput_rps", "mean_tpot_ms",
                                               "p50_ttft_ms", "p90_ttft_ms", "p99_ttft_ms")
                                   if m in table.columns])
    mape = table.abs().mean().to_frame().T
    mape.index = ["MAPE"]
    out = pd.concat([table.rename(index=lambda q: f"{q:g} req/s"), mape])
    return out.rename_axis("held out").reset_index()


def step_check_for(user: UserRuns) -> pd.DataFrame:
    """Reconstructed engine steps against the server's counters for every run folder of
    ``user`` that has both token timestamps and ``server_metrics.json`` (empty otherwise)."""
    from hgresearch.sim.steps import server_step_counters, step_check_table

    dirs = [d for d in user.runs.get("run_dir", pd.Series(dtype=object))
            if isinstance(d, str) and d and server_step_counters(d) is not None]
    if not dirs:
        return pd.DataFrame()
    table = step_check_table(dirs)
    return table[["request_rate_qps", "steps", "server_steps", "steps_error_pct",
                  "output_tokens", "server_generation_tokens", "step_tokens",
                  "server_step_tokens", "implied_cached_prompt_tokens"]]


# ---------------------------------------------------------------------------------------------
# The notebook's analysis
# ---------------------------------------------------------------------------------------------

@dataclass
class YourHardware:
    """Everything notebook 10 shows (see the module docstring)."""

    label: str
    runs: pd.DataFrame
    table2: pd.DataFrame
    table3: pd.DataFrame
    scaling: pd.DataFrame
    calibration: UserCalibration
    method_comparison: pd.DataFrame
    steps_check: pd.DataFrame
    slo_capacity: pd.DataFrame
    plan: CheckedPlan
    plan_fleet: pd.DataFrame
    plan_check: pd.DataFrame
    plan_baselines: pd.DataFrame
    capacities: pd.DataFrame
    notes: list[str] = field(default_factory=list)


def runs_tables(runs: pd.DataFrame, model: str, hardware: str, gpu_name: str,
                price_usd_per_gpu_h: float, tdp_w: float | None
                ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Table 2-style cost–performance, Table 3-style energy and the Figure 1 points of the
    runs, priced at ``price_usd_per_gpu_h`` and powered at ``tdp_w`` per GPU (None: measured
    energy only, where the runs have telemetry)."""
    from hgresearch.report.paper_tables import (
        scaling_points,
        table2_cost_performance,
        table3,
    )

    prices = {gpu_name: price_usd_per_gpu_h}
    t2 = table2_cost_performance(runs, model, [hardware], prices_usd_per_gpu_h=prices)
    points = scaling_points(runs, model, [hardware], prices_usd_per_gpu_h=prices)
    first = runs[runs.repeat_index == 0]
    configurations = [(gpu_name, int(n), float(q)) for n, q in
                      zip(first.gpu_count, first.request_rate_qps, strict=True)]
    if tdp_w is not None:
        t3 = table3(first, model, configurations, tdp="datasheet",
                    tdp_overrides={gpu_name: float(tdp_w)})
    else:
        t3 = pd.DataFrame({"Hardware": first.hardware, "QPS": first.request_rate_qps})
    measured = first.energy_j / (first.total_input_tok + first.total_output_tok)
    t3["Measured J per token"] = measured.to_numpy(dtype=float)
    return t2, t3, points


def method_comparison(paths: Sequence[str | Path], done: UserCalibration,
                      **kwargs: Any) -> pd.DataFrame:
    """Leave-one-rate-out MAPE (%) of both calibration methods on the same runs (``done``: the
    calibration already made with one of them; ``steps`` only where every run has per-token
    timestamps, else its row says why): one row per method, in-sample RMS log-error beside."""
    from hgresearch.errors import InputError
    from hgresearch.sim.calibration_file import METHODS
    from hgresearch.sim.user_calibration import calibrate_runs

    rows: list[dict[str, object]] = []
    for method in METHODS:
        try:
            result = (done if method == done.file.method
                      else calibrate_runs(paths, method=method, **kwargs))
        except InputError as err:
            rows.append({"method": method, "note": err.reason})
            continue
        rows.append({"method": method, "in_sample_rms_log_error": result.file.rms_log_error,
                     **{f"{m} MAPE (%)": result.file.validation.get(m, math.nan)
                        for m in VALIDATION_METRICS}, "note": ""})
    return pd.DataFrame(rows)


def slo_capacity(calibration: CalibrationFile, limits_ms: Sequence[float],
                 price_usd_per_gpu_h: float, *, step_time_factor: float) -> pd.DataFrame:
    """The SLO-capacity table of the calibrated configuration
    (:func:`hgresearch.sim.slo_rate.slo_rate_table`: highest steady-state rate meeting each
    TTFT percentile SLO, nominal and with every step ``step_time_factor`` times slower, e.g.
    :func:`slow_end_factor`) with the cost per 1M tokens at the given price, and the capacity
    at the slow and the fast end of the coefficients' intervals
    (``capacity_slow_rps``, ``capacity_fast_rps``: every step coefficient at its high, resp.
    low, bound)."""
    import dataclasses

    from hgresearch.accounting.costs import cost_per_million_tok_at_rate_usd
    from hgresearch.sim.calibrate import StepCoefficients
    from hgresearch.sim.run import measured_mean_lengths
    from hgresearch.sim.slo_rate import burst_throughput_rps, slo_rate_table

    fit = calibration.calibration()
    points = calibration.points()
    table = slo_rate_table({calibration.config_label: fit},
                           {calibration.config_label: points}, slo_limits_ms=limits_ms,
                           slo_metrics=SLO_METRICS, step_time_factor=step_time_factor)
    mean_in, mean_out = measured_mean_lengths(points)
    table["cost_usd_per_1m_tok"] = [
        cost_per_million_tok_at_rate_usd(t, calibration.gpu_count, price_usd_per_gpu_h)
        if t > 0 else math.nan for t in table.slo_tok_per_s]
    table["tok_per_usd"] = TOKENS_PER_MILLION / table.cost_usd_per_1m_tok
    for column, end in (("capacity_slow_rps", 1), ("capacity_fast_rps", 0)):
        bounds = [calibration.intervals.get(k, (v, v))[end] for k, v in
                  zip(COEFFICIENTS[:3], fit.coefficients.as_array()[:3], strict=True)]
        bounded = dataclasses.replace(fit, coefficients=StepCoefficients(
            float(bounds[0]), float(bounds[1]), float(bounds[2]),
            fit.coefficients.ttft_offset_s))
        table[column] = burst_throughput_rps(bounded, mean_in, mean_out)
    return table


def plan_with_your_hardware(calibration: CalibrationFile, *, demand_rps: float,
                            slos: Sequence[str], price_usd_per_gpu_h: float, tdp_w: float,
                            max_replicas: int | None,
                            paper_candidates: Sequence[tuple[str, int]] = PAPER_CANDIDATES,
                            prices: str = "alternative", grid: str = "EU-27",
                            paper_step_times: str = "roofline", check_seeds: int = 2,
                            build_dir: str | Path | None = None,
                            reference_dir: str | Path | None = None,
                            step_time_factor: float = 1.0, headroom: float = 0.1,
                            check_duration_s: float | None = None
                            ) -> tuple[CheckedPlan, pd.DataFrame, pd.DataFrame, list[str]]:
    """The cheapest fleet for ``demand_rps`` under ``slos`` (``--slo`` texts of ``hgresearch
    plan``) from the paper's configurations and yours (at most ``max_replicas`` of yours: the
    boxes you have), checked by simulation: the checked plan, the per-replica capacities, the
    baselines (single hardware) and notes. The paper's configurations run their calibration on
    the reference data (``paper_step_times = "calibrated"``: minutes on first use, and only
    where your model is one the paper measured) or the roofline floor alone.

    As ``hgresearch plan`` does: every replica is sized at its steady-state rate with every
    step ``step_time_factor`` times as long (the slow end of an interval), loaded to at most
    ``1 - headroom`` of it, and the plan checked for ``check_duration_s`` of simulated traffic
    (default: the planner's) at nominal and slow-end step times."""
    from hgresearch.plan.check import CHECK_DURATION_S
    from hgresearch.plan.options import parse_slo
    from hgresearch.report.plan import comparison_table

    notes = []
    mine = Candidate(calibration.gpu_name, calibration.gpu_count, max_replicas=max_replicas)
    candidates = [Candidate(g, n) for g, n in paper_candidates
                  if (g, n) != (calibration.gpu_name, calibration.gpu_count)]
    points = calibration.points()
    prompt = max(int(round((points.total_input_tok / points.completed).mean())), 1)
    output = max(int(round((points.total_output_tok / points.completed).mean())), 1)
    problem = PlanProblem(
        model=calibration.model, demand=Demand.steady(demand_rps),
        length_classes=(LengthClass("runs' mean", prompt, output),),
        slo_classes=tuple(parse_slo(text, i) for i, text in enumerate(slos)),
        candidates=(*candidates, mine),
        prices=PriceScenario(prices, overrides_usd_per_gpu_h=(
            (calibration.gpu_name, float(price_usd_per_gpu_h)),)),
        carbon=CarbonSettings(grid_region=grid, tdp_overrides_w=(
            (calibration.gpu_name, float(tdp_w)),)))
    fits = {}
    if paper_step_times == "calibrated":
        from hgresearch.sim.fleet import fleet_calibrations

        fits = fleet_calibrations(build_dir, reference_dir)
    provider = SimulatedReplicaRates(fits={**fits, calibration.config_label:
                                           calibration.calibration()},
                                     step_time_factor=step_time_factor, source="calibrated")
    covered = [c.hardware for c in candidates if c.label(problem.model) not in provider.fits]
    if covered:
        notes.append(f"{', '.join(covered)}: no calibration of {problem.model} on this hardware"
                     ": the roofline floor alone (a lower bound on step times: optimistic "
                     "capacities)")
    capacities = replica_rate_table(problem, provider, build_dir=build_dir)
    settings = replica_settings(problem, provider)
    checked = plan_and_check(problem, capacities, seeds=tuple(range(check_seeds)),
                             duration_s=(CHECK_DURATION_S if check_duration_s is None
                                         else check_duration_s),
                             headroom=headroom, **settings)
    compared = comparison_table(checked.plan, baselines(problem, capacities,
                                                        capacity_scale=checked.capacity_scale,
                                                        **settings))
    return checked, capacities, compared, notes


def analyse_your_hardware(runs_path: str | Path, *, gpu_name: str, gpu_count: int,
                          price_usd_per_gpu_h: float, tdp_w: float | None,
                          slo_limits_ms: Sequence[float], plan_slos: Sequence[str],
                          demand_rps: float, max_replicas: int | None, model: str | None = None,
                          method: str = "summaries", output_dir: str | Path = "build",
                          paper_step_times: str = "roofline",
                          build_dir: str | Path | None = None,
                          reference_dir: str | Path | None = None,
                          confidence: float = 0.9) -> YourHardware:
    """Everything notebook 10 shows for the runs under ``runs_path`` (see the module
    docstring); the calibration file is written to ``<output_dir>/<hardware>.calibration.yaml``
    by the notebook (:func:`calibration_path`). The plan is sized at the slow end of the
    ``confidence`` interval of your calibration's own leave-one-rate-out error
    (:func:`slow_end_factor`)."""
    from hgresearch.identity import hardware_label
    from hgresearch.sim.user_calibration import calibrate_runs

    check_output_dir(output_dir)
    hardware = hardware_label(gpu_name, gpu_count)
    calibration = calibrate_runs([runs_path], label=hardware, model=model, method=method)
    runs = calibration.runs.runs
    runs_model = str(runs.model.iloc[0])
    t2, t3, points = runs_tables(runs, runs_model, calibration.file.label,
                                 calibration.file.gpu_name, price_usd_per_gpu_h, tdp_w)
    comparison = method_comparison([runs_path], calibration, label=hardware, model=model)
    steps = step_check_for(calibration.runs)
    # one slow end for the SLO table and the plan: the calibration's own held-out error
    factor = slow_end_factor(calibration, confidence)
    slo = slo_capacity(calibration.file, slo_limits_ms, price_usd_per_gpu_h,
                       step_time_factor=factor)
    checked, capacities, compared, notes = plan_with_your_hardware(
        calibration.file, step_time_factor=factor,
        demand_rps=demand_rps, slos=plan_slos,
        price_usd_per_gpu_h=price_usd_per_gpu_h,
        tdp_w=tdp_w if tdp_w is not None else math.nan, max_replicas=max_replicas,
        paper_step_times=paper_step_times, build_dir=build_dir, reference_dir=reference_dir)
    from hgresearch.report.plan import check_table, fleet_table

    return YourHardware(label=calibration.file.config_label, runs=runs, table2=t2, table3=t3,
                        scaling=points, calibration=calibration, method_comparison=comparison,
                        steps_check=steps, slo_capacity=slo, plan=checked,
                        plan_fleet=fleet_table(checked.plan),
                        plan_check=check_table(checked.checks[-1][0]),
                        plan_baselines=compared, capacities=capacities,
                        notes=[*calibration.notes, *notes])


def slow_end_factor(calibration: UserCalibration, confidence: float = 0.9) -> float:
    """How many times slower than predicted every step may be at ``confidence``: the
    split-conformal slow end of the mean-TPOT residuals of the calibration's leave-one-rate-out
    validation (:meth:`hgresearch.sim.intervals.PredictionIntervals.step_time_factor`); 1 when
    the runs had too few rates to validate."""
    from hgresearch.sim.intervals import intervals_from_errors

    rows = calibration.validation
    if rows.empty or "mean_tpot_ms" not in set(rows.metric):
        return 1.0
    intervals = intervals_from_errors(rows, "leave-one-rate-out of " + calibration.file.label)
    return intervals.step_time_factor(confidence)


def check_output_dir(output_dir: str | Path) -> Path:
    """``output_dir``, unless it lies in the repository's ``paper/`` (the paper's committed
    tables and figures are regenerated by ``hgresearch reproduce`` only): an
    :class:`~hgresearch.errors.InputError` then."""
    from hgresearch.errors import InputError
    from hgresearch.paths import REPO_ROOT

    resolved = Path(output_dir).resolve()
    paper = (REPO_ROOT / "paper").resolve()
    if resolved == paper or paper in resolved.parents:
        raise InputError("the output folder lies in paper/, which only `hgresearch reproduce` "
                         "writes: choose another (default build/your_hardware)",
                         file=str(output_dir), field="output_dir")
    return resolved


def calibration_path(output_dir: str | Path, result: YourHardware) -> Path:
    """Where the notebook writes the calibration file: ``<output_dir>/<Nx GPU>.calibration.yaml``
    (spaces as underscores)."""
    from hgresearch.sim.calibration_file import SUFFIX

    return Path(output_dir) / (result.calibration.file.label.replace(" ", "_") + SUFFIX)


# ---------------------------------------------------------------------------------------------
# Tables and headline
# ---------------------------------------------------------------------------------------------

#: The notebook's tables (written under its output folder, never ``paper/``).
YOUR_HARDWARE_TABLES = (
    TableSpec("your_table2_cost_performance",
              "Cost-performance of {label} (Table 2 layout; {price} USD per GPU-hour)",
              "tab:your-cost-performance", decimals={"Cost per run ($)": 4,
                                                     "Cost per 1M tokens ($)": 4},
              notes=("{price_note}",)),
    TableSpec("your_table3_energy",
              "Energy per run of {label} (Table 3 layout: every GPU at {tdp} W for the whole "
              "run; measured where the runs have telemetry)",
              "tab:your-energy", default_decimals=3,
              notes=("Power = GPU count x TDP for the whole run; tokens = input + output; "
                     "efficiency ratio = tokens per kWh over the least efficient row.",)),
    TableSpec("your_calibration", "Step-time coefficients of {label} ({method}; {interval})",
              "tab:your-calibration", default_decimals=3,
              notes=("KV cache: {kv_blocks} blocks of {kv_block_size} tokens, kv_source "
                     "{kv_source} ({kv_detail}).",)),
    TableSpec("your_validation",
              "Leave-one-rate-out validation of {label}: error of the simulation (%)",
              "tab:your-validation", default_decimals=1,
              notes=("Each rate predicted by a calibration on the other rates only.",)),
    TableSpec("your_method_comparison",
              "Calibration methods on the same runs: leave-one-rate-out MAPE (%)",
              "tab:your-methods", default_decimals=1),
    TableSpec("your_steps_check",
              "Engine steps reconstructed from token timestamps vs the server's counters",
              "tab:your-steps", default_decimals=2,
              notes=("Both count only steps that emit a token. step_tokens: prompt + generated "
                     "tokens of those steps; the server leaves out prompt tokens served from "
                     "its prefix cache (implied_cached_prompt_tokens).",)),
    TableSpec("your_slo_capacity",
              "SLO capacity of {label} from the calibrated simulator",
              "tab:your-slo", default_decimals=2,
              decimals={"slo_tok_per_s": 0, "cost_usd_per_1m_tok": 4, "tok_per_usd": 0},
              notes=("slo_rate_qps: highest offered rate meeting the TTFT percentile (200 "
                     "requests, Poisson), low/high over three draws of the length mix; "
                     "capacity_slow/fast_rps: sustained throughput with every step coefficient "
                     "at the high/low end of its interval.",)),
    TableSpec("your_plan_fleet", "Plan for {demand:g} req/s: your hardware beside the paper's "
              "configurations", "tab:your-plan", default_decimals=3),
    TableSpec("your_plan_baselines", "The plan against single-hardware fleets",
              "tab:your-plan-baselines", default_decimals=3),
)


def your_hardware_tables(result: YourHardware) -> dict[str, pd.DataFrame | None]:
    """The frames of :data:`YOUR_HARDWARE_TABLES`, by stem (a table without rows is left out)."""
    frames: dict[str, pd.DataFrame | None] = {
        "your_table2_cost_performance": result.table2,
        "your_table3_energy": result.table3,
        "your_calibration": coefficient_rows(result.calibration.file),
        "your_validation": (validation_rows(result.calibration.validation)
                            if len(result.calibration.validation) else None),
        "your_method_comparison": result.method_comparison,
        "your_steps_check": result.steps_check if len(result.steps_check) else None,
        "your_slo_capacity": result.slo_capacity.drop(columns=["configuration"]),
        "your_plan_fleet": result.plan_fleet,
        "your_plan_baselines": result.plan_baselines,
    }
    return frames


def your_hardware_context(result: YourHardware, price_usd_per_gpu_h: float,
                          tdp_w: float | None, demand_rps: float,
                          price_is_placeholder: bool) -> dict[str, object]:
    """The placeholders of the tables' captions and notes."""
    f = result.calibration.file
    return {"label": result.label, "price": f"{price_usd_per_gpu_h:g}",
            "tdp": "—" if tdp_w is None else f"{tdp_w:g}", "method": f.method,
            "interval": f"{f.interval_level:.0%} intervals: {f.interval_method}",
            "demand": demand_rps, "kv_blocks": f.kv_cache.num_blocks,
            "kv_block_size": f.kv_cache.block_size, "kv_source": f.kv_cache.source,
            "kv_detail": f.kv_cache.detail,
            "price_note": ("The price and TDP of this hardware are placeholders for the demo, "
                           "not market figures." if price_is_placeholder else "")}


def your_hardware_headline(result: YourHardware) -> dict[str, object]:
    """A few numbers to print after the notebook runs."""
    f = result.calibration.file
    best = result.table2.loc[result.table2["Cost per 1M tokens ($)"].idxmin()]
    out: dict[str, object] = {
        "configuration": result.label, "runs": len(result.runs),
        "kv_source": f.kv_cache.source,
        "cheapest point": f"${best['Cost per 1M tokens ($)']:.4f} per 1M tokens at "
                          f"{best['QPS']} QPS",
        "plan": result.plan.plan.describe(), "plan check": "passed" if result.plan.passed
        else "MISSED"}
    for metric, mape in f.validation.items():
        out[f"{metric} MAPE (%)"] = round(float(mape), 1)
    if len(result.steps_check):
        err = result.steps_check.steps_error_pct.abs()
        out["step count error vs server (%)"] = f"max {err.max():.2f}, median {np.median(err):.2f}"
    return out
