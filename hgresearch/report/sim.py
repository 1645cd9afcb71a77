"""The simulator's calibration, validation and SLO-capacity results for the paper (notebook
``07_simulator``): compute once (:func:`analyse_simulator`, cached by the runs and the
simulator's code); their tables (:data:`SIMULATOR_TABLES`, :data:`ROUTING_TABLES`, written by
:func:`hgresearch.report.writers.write_tables`) and headline numbers
(:func:`simulator_headline`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from hgresearch.executors import Executor
from hgresearch.report.writers import TableSpec
from hgresearch.sim.calibrate import Calibration
from hgresearch.sim.intervals import coverage_table, held_out_intervals
from hgresearch.sim.routing_study import FAST_CONFIG, SLOW_CONFIG, RoutingComparison
from hgresearch.sim.slo_rate import (
    CONFIDENCE,
    agreement_table,
    measured_agreement,
    slo_rate_table,
)
from hgresearch.sim.step_model import GpuFit
from hgresearch.sim.validation import (
    MAPE_COLUMNS,
    VALIDATION_METRICS,
    CrossValidation,
    cached_cross_validation,
    calibrations_from,
    code_digest,
    coefficient_table,
    configuration_points,
    goal_misses,
    goals_table,
    gpu_coefficient_table,
    schemes_table,
    simulated_validation_table,
    slo_contradictions,
    unbounded_kv_predictions,
)


@dataclass
class SimReport:
    """Everything notebook 07 shows. ``points``: every validation row (column ``scheme``:
    LOCO, LOQO, in-sample); ``validation``: the LOCO MAPE table per configuration and metric;
    ``fits``: the calibrations (derived from the shared model) by configuration;
    ``gpu_fits``: the shared model's parameters by GPU type. ``unbounded_kv``: every point's
    TTFT percentiles with an unbounded KV cache (the contradictions table's KV reason).
    ``seconds``: uncached wall time of each part (s)."""

    points: pd.DataFrame
    validation: pd.DataFrame
    fits: dict[str, Calibration]
    coefficients: pd.DataFrame
    slo_capacity: pd.DataFrame
    agreement: pd.DataFrame
    noise_pct: dict[str, float]
    seconds: dict[str, float] = field(default_factory=dict)
    gpu_fits: dict[str, GpuFit] = field(default_factory=dict)
    config_coefficients: pd.DataFrame = field(default_factory=pd.DataFrame)
    schemes: pd.DataFrame = field(default_factory=pd.DataFrame)
    goals: pd.DataFrame = field(default_factory=pd.DataFrame)
    coverage: pd.DataFrame = field(default_factory=pd.DataFrame)
    excluded: pd.DataFrame = field(default_factory=pd.DataFrame)
    loqo: pd.DataFrame = field(default_factory=pd.DataFrame)
    in_sample: pd.DataFrame = field(default_factory=pd.DataFrame)
    contradictions: pd.DataFrame = field(default_factory=pd.DataFrame)
    unbounded_kv: pd.DataFrame = field(default_factory=pd.DataFrame)


def analyse_simulator(runs: pd.DataFrame, *, build_dir: str | Path | None = None,
                      n_jobs: int = 2, executor: Executor | None = None) -> SimReport:
    """Cross-validation of the shared step-time model (LOCO, LOQO, in-sample;
    :func:`hgresearch.sim.validation.cross_validate`), the calibrations it gives, interval
    coverage, SLO capacities and their agreement with the measured points; cached in
    ``<build_dir>/cache/models``. ``executor`` (default: ``n_jobs`` processes) runs the folds
    (results identical)."""
    from hgresearch.cache import cached
    from hgresearch.fits.uncertainty import run_to_run_spread

    def compute() -> SimReport:
        seconds = {}
        start = time.perf_counter()
        validation: CrossValidation = cached_cross_validation(runs, build_dir, n_jobs=n_jobs,
                                                              executor=executor)
        seconds["cross_validation"] = time.perf_counter() - start
        fits = calibrations_from(validation, runs)
        measured = dict(configuration_points(runs))
        start = time.perf_counter()
        # the slow end of the same validation's held-out step-time residuals (what
        # reference_intervals reads from the cache when these are the reference runs)
        factor = held_out_intervals(validation.points).step_time_factor(CONFIDENCE)
        slo = slo_rate_table(fits, measured, step_time_factor=factor,
                             executor=executor or Executor.for_jobs(n_jobs))
        seconds["slo_capacity"] = time.perf_counter() - start
        agreement = measured_agreement(fits, measured)
        unbounded_kv = unbounded_kv_predictions(fits, measured)
        return SimReport(points=validation.points, validation=pd.DataFrame(), fits=fits,
                         coefficients=gpu_coefficient_table(validation.fits),
                         slo_capacity=slo, agreement=agreement, noise_pct={}, seconds=seconds,
                         gpu_fits=validation.fits,
                         config_coefficients=coefficient_table(fits),
                         excluded=validation.excluded, unbounded_kv=unbounded_kv)

    report = cached(build_dir, "sim_report", runs, {"sim_code": code_digest(), "n_jobs": 0},
                    compute)
    # The tables and the noise floor are cheap and outside the cache: the run-to-run spread of
    # every validated metric (repeated measured points), beside the errors.
    spread = run_to_run_spread(runs, VALIDATION_METRICS)[1]
    points = report.points
    report.validation = simulated_validation_table(points[points.scheme == "LOCO"], spread)
    report.loqo = simulated_validation_table(points[points.scheme == "LOQO"], spread)
    report.in_sample = simulated_validation_table(points[points.scheme == "in-sample"], spread)
    report.schemes = schemes_table(points)
    report.goals = goals_table(points)
    report.coverage = coverage_table(points, scheme="LOCO")
    report.contradictions = slo_contradictions(
        points, held_out_intervals(points), excluded=report.excluded,
        unbounded_kv=report.unbounded_kv)
    report.noise_pct = ({m: float(v) for m, v in
                         spread.set_index("metric").median_rel_std_pct.items()}
                        if len(spread) else {})
    return report


def overall_mape(validation: pd.DataFrame) -> dict[str, float]:
    """MAPE (%) over all held-out points per metric: the table's ``all configurations`` row
    (p90 TTFT only where measured above 50 ms), keyed by the runs-table metric name."""
    row = validation.set_index("configuration").loc["all configurations"]
    return {metric: float(row[column]) for metric, column in MAPE_COLUMNS.items()}


_SCHEME_NOTE = ("LOCO: each GPU configuration predicted by the shared model fitted without any "
                "of its runs. LOQO: each offered rate removed from every configuration of the "
                "GPU type at once, then predicted. in-sample: the fit on all points. p90 TTFT "
                "counts points measured above 50 ms; the TTFT of the points in "
                "sim_excluded_runs is left out. The CPU configuration is fitted alone "
                "(no datasheet numbers): no LOCO.")

#: The simulator's tables (``paper/tables``), in the order they are written.
SIMULATOR_TABLES = (
    TableSpec("sim_validation",
              "Simulator validation: LOCO, LOQO and in-sample MAPE (%) side by side",
              "tab:sim-validation", default_decimals=1, notes=(_SCHEME_NOTE,)),
    TableSpec("sim_validation_goals",
              "Simulator validation against the goals (MAPE %, per scheme and metric)",
              "tab:sim-validation-goals", default_decimals=1,
              notes=("Goals from the trust issue: LOCO throughput 10%, mean TPOT 15%, p90 TTFT "
                     "35%; LOQO 5%, 10%, 25%. worst_configuration: the configuration with the "
                     "largest MAPE of that scheme and metric.", _SCHEME_NOTE)),
    TableSpec("sim_validation_loco",
              "Simulator validation: leave-one-configuration-out MAPE (%) per metric",
              "tab:sim-validation-loco", default_decimals=1,
              notes=(_SCHEME_NOTE, "The last row is the run-to-run spread of repeated measured "
                     "points (median relative std, %).")),
    TableSpec("sim_validation_loqo",
              "Simulator validation: leave-one-rate-out MAPE (%) per metric",
              "tab:sim-validation-loqo", default_decimals=1, notes=(_SCHEME_NOTE,)),
    TableSpec("sim_validation_in_sample",
              "Simulator in-sample error: the fit on all points, MAPE (%) per metric",
              "tab:sim-validation-in-sample", default_decimals=1, notes=(_SCHEME_NOTE,)),
    TableSpec("sim_interval_coverage",
              "Prediction intervals: empirical coverage on held-out configurations",
              "tab:sim-interval-coverage", default_decimals=1,
              notes=("Split-conformal intervals from LOCO residuals (predicted / measured - 1), "
                     "cross-fitted: each configuration's points are judged by intervals built "
                     "from the other configurations' residuals only. below/above: measured "
                     "points under / over the interval. Excluded points (sim_excluded_runs) "
                     "are not counted.",)),
    TableSpec("sim_coefficients",
              "Shared step-time model: parameters per GPU type, standard errors, bounds",
              "tab:sim-coefficients", default_decimals=4,
              notes=("Factors are 1 / efficiency against the datasheet (hardware.csv): 1 is the "
                     "peak (FP8 for FP8 weights on a GPU with FP8 tensor cores). Relative "
                     "standard errors from s² H⁻¹, H the Hessian of the fit's cost by central "
                     "differences (step 10% in log) over the free parameters at the fitted "
                     "point; inf: the cost does not curve upward along the parameter there "
                     "(not determined by the data, or the search stopped off a minimum in "
                     "that direction). A parameter on a bound has none (status says which "
                     "bound); the all-reduce terms are fixed where a GPU type has no "
                     "tensor-parallel configuration.",)),
    TableSpec("sim_config_coefficients",
              "Step-time coefficients of each configuration, derived from the shared model",
              "tab:sim-config-coefficients", default_decimals=3,
              notes=("c0, c_prefill, c_decode, c_kv and the offset follow from the GPU type's "
                     "parameters (sim_coefficients) and the configuration's datasheet times; "
                     "source 'alone': fitted on its own points (no datasheet numbers).",)),
    TableSpec("sim_excluded_runs",
              "Measured points whose TTFT is kept out of the fit, with the reason",
              "tab:sim-excluded-runs", default_decimals=1,
              notes=("A work-conserving queue's TTFT grows with load; these points' TTFT falls "
                     "by more than 1.5x at a higher rate of the same configuration. Their "
                     "throughput and TPOT stay in the fit.",)),
    TableSpec("sim_slo_contradictions",
              "Measured points whose SLO verdict the model contradicts, with the reason",
              "tab:sim-slo-contradictions", default_decimals=1,
              notes=("Every measured point x p90/p99 TTFT x limit (50 ms to 5 s) where the "
                     "measurement met the limit but the 90% interval of the in-sample "
                     "prediction lies wholly above it, or missed it while the interval lies "
                     "wholly below. reason: why the model may disagree (its TTFT is kept out "
                     "of the fit, sim_excluded_runs); empty: unexplained.",)),
    TableSpec("sim_slo_capacity",
              "SLO capacity from the calibrated simulator: steady-state Poisson load (the "
              "paper protocol's 200-request rate beside it)",
              "tab:sim-slo-capacity", default_decimals=2,
              decimals={"slo_tok_per_s": 0, "cost_usd_per_1m_tok": 3, "tok_per_usd": 0},
              notes=("slo_rate_qps: highest Poisson rate at which the TTFT percentile meets the "
                     "limit at steady state (2 seeds x 4,000 requests, first 1,000 dropped, "
                     "stable queue; to 1%); capacity_rps: burst throughput, the top of the "
                     "search. slo_rate_low_qps: the same with every step slower by the "
                     "simulator's step-time interval at 90% confidence (high: nominal). "
                     "paper_protocol_rate_qps: what a 200-request run from an empty server "
                     "gives (a transient, for comparison with the paper; never for planning). "
                     "Tokens/s (prompt + output), cost per 1M tokens "
                     "and tokens per dollar at slo_rate_qps, alternative prices (H100-PCIe 2.00, "
                     "RTX-4090 0.25 USD/GPU-h; none for CPU).",)),
    TableSpec("sim_slo_agreement",
              "SLO capacity at the measured points: simulated vs measured TTFT percentile",
              "tab:sim-slo-agreement", default_decimals=1,
              notes=("simulated_ms: the shared model fitted on all points (the one behind "
                     "sim_slo_capacity); held_out_ms: the LOCO prediction (the configuration's "
                     "runs never seen). verdicts_agree: SLO limits (50 ms to 5 s) at which the "
                     "simulated verdict (met or not) is the measured one; disagree_at_ms: the "
                     "limits where it is not.",)),
)


def simulator_tables(report: SimReport) -> dict[str, pd.DataFrame | None]:
    """The frames of :data:`SIMULATOR_TABLES`, by file stem."""
    loco = report.points[report.points.scheme == "LOCO"].drop(columns="scheme")
    return {"sim_validation": report.schemes, "sim_validation_goals": report.goals,
            "sim_validation_loco": report.validation, "sim_validation_loqo": report.loqo,
            "sim_validation_in_sample": report.in_sample,
            "sim_interval_coverage": report.coverage,
            "sim_coefficients": report.coefficients,
            "sim_config_coefficients": report.config_coefficients,
            "sim_excluded_runs": report.excluded,
            "sim_slo_contradictions": report.contradictions,
            "sim_slo_capacity": report.slo_capacity,
            "sim_slo_agreement": agreement_table(report.agreement, loco)}


def simulator_headline(report: SimReport) -> dict[str, float]:
    """Numbers ``hgresearch reproduce`` prints for notebook 07: the LOCO validation against its
    goals (:func:`hgresearch.sim.validation.goal_misses`), the LOQO and in-sample MAPEs, the
    90% intervals' coverage per metric and the share of measured point × SLO verdicts the
    simulation agrees with (%)."""
    numbers = {f"loco_{k}": round(v, 2) for k, v in goal_misses(report.validation).items()}
    numbers.update({f"loqo_{k}": round(v, 2) for k, v in goal_misses(report.loqo).items()})
    numbers.update({f"in_sample_{k}": round(v, 2)
                    for k, v in goal_misses(report.in_sample).items()})
    cover = report.coverage[report.coverage.nominal_pct == 90]
    numbers.update({f"coverage90_{m}_pct": round(float(c), 1)
                    for m, c in zip(cover.metric, cover.coverage_pct, strict=True)})
    numbers["slo_agreement_pct"] = round(100 * float(report.agreement.agrees.mean()), 1)
    contradictions = report.contradictions
    numbers["slo_contradictions"] = len(contradictions)
    numbers["slo_contradictions_unexplained"] = int((contradictions.reason == "").sum())
    return numbers


#: The routing comparison's table; its note names the number of seeds (``{seeds}``).
ROUTING_TABLES = (
    TableSpec("sim_routing_comparison",
              "Routing policies for 1x H100-PCIe + N x (2x RTX-4090), "
              "DeepSeek-R1-Distill-Qwen-14B: highest offered rate that holds p99 TTFT",
              "tab:sim-routing-comparison", default_decimals=2,
              decimals={"p99_ttft_ms": 0, "p99_ttft_low_ms": 0, "p99_ttft_high_ms": 0,
                        "p99_ttft_limit_ms": 0, "max_rate_qps": 0, "cost_usd_per_1m_tok": 3},
              notes=("Calibrated fleet simulator, paper protocol (200 requests, Poisson "
                     "arrivals, ShareGPT-like lengths with the 14B runs' means), {seeds} seeds. "
                     "max_rate_qps: the highest grid rate up to which the median p99 TTFT stays "
                     "within the limit and no replica is sent more than its sustained "
                     "throughput (max_load_high <= 1). Cost: alternative prices, every GPU "
                     "billed for the whole run. The calibration's validation errors apply "
                     "(sim_validation).",)),
)


def routing_tables(comparison: RoutingComparison) -> dict[str, pd.DataFrame | None]:
    """The frames of :data:`ROUTING_TABLES`, by file stem."""
    return {"sim_routing_comparison": comparison.verdicts.drop(columns=["num_slow"])}


def routing_context(comparison: RoutingComparison) -> dict[str, object]:
    """What :data:`ROUTING_TABLES`' note names: the number of seeds."""
    return {"seeds": int(comparison.interval.seeds.max())}


def routing_reading(report: SimReport, comparison: RoutingComparison) -> str:
    """What decides the routing comparison, in numbers: each replica's request-path delay and
    held-out errors, what each holds alone under p99 TTFT <= 500 ms, the best policies per
    limit and fleet, how many points have 500 ms inside their seed range, and the H100's share
    of the requests under JSQ at 24 req/s."""
    validation = report.validation.set_index("configuration")
    interval = comparison.interval
    lines = []
    for label in (FAST_CONFIG, SLOW_CONFIG):
        row = validation.loc[label]
        delay_ms = 1e3 * report.fits[label].coefficients.ttft_offset_s
        lines.append(f"{label}: request-path delay {delay_ms:.0f} ms; LOCO MAPE throughput "
                     f"{row.request_throughput_mape_pct:.1f}%, mean TPOT "
                     f"{row.mean_tpot_mape_pct:.1f}%, p99 TTFT {row.p99_ttft_mape_pct:.1f}%")
    alone = report.slo_capacity.set_index(["configuration", "slo"]).slo_rate_qps
    slo_500 = "p99_ttft ≤ 500 ms"
    lines.append(f"alone: 1x H100 holds p99 TTFT <= 500 ms up to "
                 f"{alone[(FAST_CONFIG, slo_500)]:.1f} req/s, one 2x RTX-4090 pair up to "
                 f"{alone[(SLOW_CONFIG, slo_500)]:.1f} req/s")
    for limit, best in comparison.best.groupby("p99_ttft_limit_ms"):
        lines.append(f"p99 TTFT <= {limit:g} ms: " + "; ".join(
            f"N={row.num_slow}: {row.max_rate_qps:g} req/s ({row.policies}, "
            f"${row.cost_usd_per_1m_tok:.3f}/1M tok)" for row in best.itertuples()))
    near = interval[(interval.p99_ttft_low_ms <= 500) & (interval.p99_ttft_high_ms > 500)]
    jsq = interval[(interval.policy == "jsq") & (interval.rate_qps == 24)]
    lines.append(f"{len(near)} of {len(interval)} fleet × rate × policy points have 500 ms "
                 f"inside their seed range; H100 share of requests under JSQ at 24 req/s: "
                 + ", ".join(f"N={n}: {share:.2f}"
                             for n, share in jsq.set_index("num_slow").h100_share.items()))
    return "\n".join(lines)
