"""The simulator's calibration, validation and SLO-capacity results for the paper (notebook
``07_simulator``): compute once (cached by the runs and the simulator's code), write tables and
the figure deterministically."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from hgresearch.executors import Executor
from hgresearch.sim.calibrate import Calibration
from hgresearch.sim.routing_study import RoutingComparison
from hgresearch.sim.run import calibrations
from hgresearch.sim.slo_rate import agreement_table, measured_agreement, slo_rate_table
from hgresearch.sim.validation import (
    GOALS_PCT,
    MAPE_COLUMNS,
    VALIDATION_METRICS,
    code_digest,
    coefficient_table,
    configuration_points,
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


def analyse(runs: pd.DataFrame, *, build_dir: str | Path | None = None,
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
        slo = slo_rate_table(fits, measured)
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


def write_outputs(report: SimReport, paper_dir: str | Path) -> list[Path]:
    """``tables/sim_validation.*``, ``tables/sim_coefficients.*``,
    ``tables/sim_slo_capacity.*`` (the SLO-capacity table of the paper),
    ``tables/sim_slo_agreement.*`` and ``figures/sim_validation.{png,pdf}``."""
    from hgresearch.report.figures.sim import sim_validation_figure
    from hgresearch.report.figures.style import save_figure
    from hgresearch.report.writers import write_table

    paper_dir = Path(paper_dir)
    tables = paper_dir / "tables"
    written = write_table(
        report.validation, tables / "sim_validation",
        caption="Simulator validation: leave-one-QPS-out MAPE (%) per configuration",
        label="tab:sim-validation", default_decimals=1,
        notes=["Each rate is predicted by a calibration on the other rates only. p90 TTFT "
               "counts points measured above 50 ms. Goals: throughput 5% (worst "
               "configuration 10%), mean TPOT 10%, p90 TTFT 25%. The last row is the "
               "run-to-run spread of repeated measured points (median relative std, %)."])
    written += write_table(
        report.coefficients, tables / "sim_coefficients",
        caption="Simulator step-time coefficients calibrated on all rates",
        label="tab:sim-coefficients", default_decimals=3,
        notes=["Relative standard errors from the Jacobian at the optimum (s² (JᵀJ)⁻¹); the "
               "error surface is rugged, so they understate the spread of prefill and decode "
               "costs, which trade off."])
    written += write_table(
        report.slo_capacity, tables / "sim_slo_capacity",
        caption="SLO capacity from the calibrated simulator (paper protocol, 200 requests)",
        label="tab:sim-slo-capacity", default_decimals=2,
        decimals={"slo_tok_per_s": 0, "cost_usd_per_1m_tok": 3, "tok_per_usd": 0},
        notes=["slo_rate_qps: highest offered rate at which the TTFT percentile meets the "
               "limit (bisection), capped at the sustained capacity; low/high over three "
               "draws of the length mix. Tokens/s (prompt + output), cost per 1M tokens and "
               "tokens per dollar at slo_rate_qps, alternative prices (H100-PCIe 2.00, "
               "RTX-4090 0.25 USD/GPU-h; none for CPU)."])
    written += write_table(
        agreement_table(report.agreement, report.points), tables / "sim_slo_agreement",
        caption="SLO capacity at the measured points: simulated vs measured TTFT percentile",
        label="tab:sim-slo-agreement", default_decimals=1,
        notes=["simulated_ms: calibration on all rates (the one behind sim_slo_capacity); "
               "held_out_ms: calibration on the other rates only. verdicts_agree: SLO limits "
               "(50 ms to 5 s) at which the simulated verdict (met or not) is the measured "
               "one; disagree_at_ms: the limits where it is not."])
    points = report.points
    fig = sim_validation_figure(points, GOALS_PCT, overall_mape(report.validation),
                                report.noise_pct)
    written += save_figure(fig, paper_dir / "figures" / "sim_validation")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return written




def write_routing_outputs(comparison: RoutingComparison, paper_dir: str | Path) -> list[Path]:
    """``tables/sim_routing_comparison.*`` (the verdicts) and
    ``figures/sim_routing_comparison.{png,pdf}``."""
    import matplotlib.pyplot as plt

    from hgresearch.report.figures.sim import routing_comparison_figure
    from hgresearch.report.figures.style import save_figure
    from hgresearch.report.writers import write_table

    paper_dir = Path(paper_dir)
    seeds = int(comparison.interval.seeds.max())
    limits = tuple(float(v) for v in comparison.verdicts.p99_ttft_limit_ms.unique())
    written = write_table(
        comparison.verdicts.drop(columns=["num_slow"]),
        paper_dir / "tables" / "sim_routing_comparison",
        caption="Routing policies for 1x H100-PCIe + N x (2x RTX-4090), "
                "DeepSeek-R1-Distill-Qwen-14B: highest offered rate that holds p99 TTFT",
        label="tab:sim-routing-comparison", default_decimals=2,
        decimals={"p99_ttft_ms": 0, "p99_ttft_low_ms": 0, "p99_ttft_high_ms": 0,
                  "p99_ttft_limit_ms": 0, "max_rate_qps": 0, "cost_usd_per_1m_tok": 3},
        notes=[f"Calibrated fleet simulator, paper protocol (200 requests, Poisson arrivals, "
               f"ShareGPT-like lengths with the 14B runs' means), {seeds} seeds. max_rate_qps: "
               "the highest grid rate up to which the median p99 TTFT stays within the limit "
               "and no replica is sent more than its sustained throughput "
               "(max_load_high <= 1). Cost: alternative prices, every GPU billed for the "
               "whole run. The calibration's validation errors apply (sim_validation)."])
    fig = routing_comparison_figure(comparison.interval, limits)
    written += save_figure(fig, paper_dir / "figures" / "sim_routing_comparison")
    plt.close(fig)
    return written
