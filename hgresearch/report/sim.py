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
from hgresearch.sim.routing_study import FAST_CONFIG, SLOW_CONFIG, RoutingComparison
from hgresearch.sim.run import calibrations
from hgresearch.sim.slo_rate import agreement_table, measured_agreement, slo_rate_table
from hgresearch.sim.validation import (
    MAPE_COLUMNS,
    VALIDATION_METRICS,
    code_digest,
    coefficient_table,
    configuration_points,
    goal_misses,
    simulated_leave_one_qps_out,
    simulated_validation_table,
)


@dataclass
class SimReport:
    """Everything notebook 07 shows. ``seconds``: uncached wall time of each part (s)."""

    points: pd.DataFrame
    validation: pd.DataFrame
    fits: dict[str, Calibration]
    coefficients: pd.DataFrame
    slo_capacity: pd.DataFrame
    agreement: pd.DataFrame
    noise_pct: dict[str, float]
    seconds: dict[str, float] = field(default_factory=dict)


def analyse_simulator(runs: pd.DataFrame, *, build_dir: str | Path | None = None,
                      n_jobs: int = 2, executor: Executor | None = None) -> SimReport:
    """Leave-one-QPS-out validation, calibrations on all points, SLO capacities and their
    agreement with the measured points; cached in ``<build_dir>/cache/models``. ``executor``
    (default: ``n_jobs`` processes) runs the folds and fits (results identical)."""
    from hgresearch.cache import cached
    from hgresearch.fits.uncertainty import run_to_run_spread

    def compute() -> SimReport:
        seconds = {}
        start = time.perf_counter()
        points = simulated_leave_one_qps_out(runs, n_jobs=n_jobs, executor=executor)
        seconds["validation"] = time.perf_counter() - start
        start = time.perf_counter()
        fits = calibrations(runs, build_dir, n_jobs=n_jobs, executor=executor)
        seconds["calibration"] = time.perf_counter() - start
        measured = dict(configuration_points(runs))
        start = time.perf_counter()
        slo = slo_rate_table(fits, measured, executor=executor or Executor.for_jobs(n_jobs))
        seconds["slo_capacity"] = time.perf_counter() - start
        agreement = measured_agreement(fits, measured)
        return SimReport(points=points, validation=pd.DataFrame(), fits=fits,
                         coefficients=coefficient_table(fits), slo_capacity=slo,
                         agreement=agreement, noise_pct={}, seconds=seconds)

    report = cached(build_dir, "sim_report", runs, {"sim_code": code_digest(), "n_jobs": 0},
                    compute)
    # The table and the noise floor are cheap and outside the cache: the run-to-run spread of
    # every validated metric (repeated measured points), beside the errors.
    spread = run_to_run_spread(runs, VALIDATION_METRICS)[1]
    report.validation = simulated_validation_table(report.points, spread)
    report.noise_pct = ({m: float(v) for m, v in
                         spread.set_index("metric").median_rel_std_pct.items()}
                        if len(spread) else {})
    return report


def overall_mape(validation: pd.DataFrame) -> dict[str, float]:
    """MAPE (%) over all held-out points per metric: the table's ``all configurations`` row
    (p90 TTFT only where measured above 50 ms), keyed by the runs-table metric name."""
    row = validation.set_index("configuration").loc["all configurations"]
    return {metric: float(row[column]) for metric, column in MAPE_COLUMNS.items()}


#: The simulator's tables (``paper/tables``), in the order they are written.
SIMULATOR_TABLES = (
    TableSpec("sim_validation",
              "Simulator validation: leave-one-QPS-out MAPE (%) per configuration",
              "tab:sim-validation", default_decimals=1,
              notes=("Each rate is predicted by a calibration on the other rates only. p90 TTFT "
                     "counts points measured above 50 ms. Goals: throughput 5% (worst "
                     "configuration 10%), mean TPOT 10%, p90 TTFT 25%. The last row is the "
                     "run-to-run spread of repeated measured points (median relative std, %).",)),
    TableSpec("sim_coefficients", "Simulator step-time coefficients calibrated on all rates",
              "tab:sim-coefficients", default_decimals=3,
              notes=("Relative standard errors from the Jacobian at the optimum (s² (JᵀJ)⁻¹); "
                     "the error surface is rugged, so they understate the spread of prefill and "
                     "decode costs, which trade off.",)),
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
              notes=("simulated_ms: calibration on all rates (the one behind sim_slo_capacity); "
                     "held_out_ms: calibration on the other rates only. verdicts_agree: SLO "
                     "limits (50 ms to 5 s) at which the simulated verdict (met or not) is the "
                     "measured one; disagree_at_ms: the limits where it is not.",)),
)


def simulator_tables(report: SimReport) -> dict[str, pd.DataFrame | None]:
    """The frames of :data:`SIMULATOR_TABLES`, by file stem."""
    return {"sim_validation": report.validation, "sim_coefficients": report.coefficients,
            "sim_slo_capacity": report.slo_capacity,
            "sim_slo_agreement": agreement_table(report.agreement, report.points)}


def simulator_headline(report: SimReport) -> dict[str, float]:
    """Numbers ``hgresearch reproduce`` prints for notebook 07: the validation against its
    goals (:func:`hgresearch.sim.validation.goal_misses`) and the share of measured point × SLO
    verdicts the simulation agrees with (%)."""
    numbers = {k: round(v, 2) for k, v in goal_misses(report.validation).items()}
    numbers["slo_agreement_pct"] = round(100 * float(report.agreement.agrees.mean()), 1)
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
        lines.append(f"{label}: request-path delay {delay_ms:.0f} ms; held-out MAPE throughput "
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
