"""All model results of a runs table in one object, cached, plus the paper tables.

:func:`analyse` runs every fit, the validation, the roofline and the ratio audit;
:func:`write_tables` writes the tables to ``paper/tables``; :func:`headline` returns the
numbers ``hgresearch reproduce`` prints. The notebook ``04_models.ipynb`` is a thin caller.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from hgresearch.accounting.costs import add_costs
from hgresearch.cache import cached
from hgresearch.fits.fit_all import DEFAULT_METRICS, ModelSet, fit_models
from hgresearch.fits.latency import DEFAULT_RHO_MAX
from hgresearch.fits.roofline import roofline_table
from hgresearch.fits.scaling import (
    leave_one_count_out,
    scaling_tables,
    scaling_validation_table,
)
from hgresearch.fits.slo import Slo, default_slos, operating_curves, pareto_frontier
from hgresearch.fits.uncertainty import run_to_run_spread
from hgresearch.fits.validation import fitted_leave_one_qps_out, fitted_validation_table
from hgresearch.report.ratio_audit import audit_table, audit_verdicts, comparison_rows
from hgresearch.report.writers import write_table

#: The alternative forms every validation run compares with the chosen one.
ALTERNATIVE_DRAIN = {"constant": "log", "log": "constant"}
ALTERNATIVE_LATENCY = {"queue": "loglinear", "loglinear": "queue"}


@dataclass
class ModelReport:
    """Everything :func:`analyse` computes (tables are plain data frames)."""

    runs: pd.DataFrame
    models: ModelSet
    curves: pd.DataFrame
    frontier: pd.DataFrame
    scaling_summary: pd.DataFrame
    scaling_points: pd.DataFrame
    scaling_loo: pd.DataFrame
    scaling_validation: pd.DataFrame
    roofline: pd.DataFrame
    predictions: pd.DataFrame
    validation: pd.DataFrame
    comparisons: pd.DataFrame
    audit: pd.DataFrame
    verdicts: pd.DataFrame
    spread_points: pd.DataFrame
    spread_summary: pd.DataFrame
    settings: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)


def _compute(runs: pd.DataFrame, scenario: str, slos: list[Slo], latency_form: str,
             drain: str, rho_max: float, scaling_column: str) -> ModelReport:
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    costed = add_costs(runs, scenario)
    models = fit_models(costed, DEFAULT_METRICS, latency_form, drain, rho_max)
    seconds["fit"] = time.perf_counter() - start

    start = time.perf_counter()
    curves = pd.concat([operating_curves(models, metric, scenario, rho_max)
                        for metric in sorted({s.metric for s in slos})], ignore_index=True)
    frontier = pd.concat(
        [pareto_frontier(part).assign(metric=metric, model=model)
         for (metric, model), part in curves.groupby(["metric", "model"], sort=True)],
        ignore_index=True) if not curves.empty else curves
    seconds["slo"] = time.perf_counter() - start

    start = time.perf_counter()
    scaling_summary, scaling_points, _ = scaling_tables(models.capacity, scaling_column)
    scaling_loo = leave_one_count_out(models.capacity, scaling_column)
    scaling_validation = scaling_validation_table(scaling_loo)
    seconds["scaling"] = time.perf_counter() - start

    start = time.perf_counter()
    predictions = fitted_leave_one_qps_out(costed, models.schedule, drain, latency_form,
                                           rho_max=rho_max,
                                           alt_forms=(ALTERNATIVE_LATENCY[latency_form],))
    alternatives = {
        f"drain={ALTERNATIVE_DRAIN[drain]}": fitted_leave_one_qps_out(
            costed, models.schedule, ALTERNATIVE_DRAIN[drain], latency_form, rho_max=rho_max),
    }
    validation = fitted_validation_table(predictions, alternatives)
    seconds["validation"] = time.perf_counter() - start

    start = time.perf_counter()
    roofline = roofline_table(costed)
    comparisons = comparison_rows(costed, models.capacity, scenario=scenario)
    audit = audit_table(comparisons)
    verdicts = audit_verdicts(audit)
    spread_points, spread_summary = run_to_run_spread(costed)
    seconds["roofline+audit"] = time.perf_counter() - start
    return ModelReport(
        runs=costed, models=models, curves=curves, frontier=frontier,
        scaling_summary=scaling_summary, scaling_points=scaling_points,
        scaling_loo=scaling_loo, scaling_validation=scaling_validation, roofline=roofline,
        predictions=predictions, validation=validation, comparisons=comparisons, audit=audit,
        verdicts=verdicts, spread_points=spread_points, spread_summary=spread_summary,
        settings={"scenario": scenario, "latency_form": latency_form, "drain": drain,
                  "rho_max": rho_max, "scaling_column": scaling_column,
                  "slos": [s.label for s in slos]},
        seconds=seconds)


def analyse(runs: pd.DataFrame, *, scenario: str = "alternative",
            slos: list[Slo] | None = None, latency_form: str = "loglinear",
            drain: str = "constant", rho_max: float = DEFAULT_RHO_MAX,
            scaling_column: str = "capacity_rps",
            build_dir: str | Path | None = None) -> ModelReport:
    """Fit, validate and audit everything; cached under ``<build_dir>/cache/models`` by a
    hash of the runs, these settings and the model code (``build_dir=None``: no cache)."""
    slos = slos if slos is not None else default_slos()
    params = {"scenario": scenario, "slos": [(s.metric, s.limit_ms) for s in slos],
              "latency_form": latency_form, "drain": drain, "rho_max": rho_max,
              "scaling_column": scaling_column}
    return cached(build_dir, "report", runs, params,
                  lambda: _compute(runs, scenario, slos, latency_form, drain, rho_max,
                                   scaling_column))


def select_configurations(table: pd.DataFrame, model: str | None = None,
                          configurations: list[str] | None = None) -> pd.DataFrame:
    """Rows of ``model`` (if given) and whose ``configuration`` label is listed (if given)."""
    out = table
    if model:
        out = out[out.model == model]
    if configurations:
        out = out[out.configuration.isin(configurations)]
    return out


def write_tables(report: ModelReport, tables_dir: str | Path) -> list[Path]:
    """Write every model table (CSV + Markdown + LaTeX) to ``tables_dir``."""
    tables_dir = Path(tables_dir)
    written: list[Path] = []
    cap = report.models.capacity[[
        "configuration", "capacity_rps", "capacity_low_rps", "capacity_high_rps",
        "capacity_tok_per_s", "max_achieved_rps", "capacity_is_lower_bound", "drain_d0_s",
        "rms_rel_error_pct"]]
    written += write_table(cap, tables_dir / "models_capacity",
                           caption="Fitted capacity per configuration (95 % profile interval; "
                           "fixed-count duration model)", label="tab:models-capacity",
                           decimals={"capacity_tok_per_s": 0})
    lat = report.models.latency
    lat = lat[lat.metric == "p90_ttft_ms"][["configuration", "form", "a", "a_se", "b", "b_se",
                                            "resid_scale", "n_points", "rho_max_fitted"]]
    written += write_table(lat, tables_dir / "models_latency_ttft_p90",
                           caption="TTFT p90 against utilisation: fitted coefficients",
                           label="tab:models-latency", default_decimals=3)
    frontier = report.frontier[["model", "metric", "configuration", "rate_qps", "latency_ms",
                                "cost_usd_per_1m_tok"]]
    written += write_table(frontier, tables_dir / "models_pareto_frontier",
                           caption="Pareto frontier of cost per 1M tokens against tail latency",
                           label="tab:models-pareto", decimals={"cost_usd_per_1m_tok": 3})
    written += write_table(report.scaling_summary.drop(columns=["warnings"]),
                           tables_dir / "models_scaling",
                           caption="Tensor-parallel scaling fits (pooled per GPU type)",
                           label="tab:models-scaling", default_decimals=3)
    written += write_table(report.scaling_points, tables_dir / "models_scaling_points",
                           caption="Capacity and per-GPU efficiency by GPU count",
                           label="tab:models-scaling-points", default_decimals=3)
    written += write_table(report.scaling_validation, tables_dir / "models_scaling_validation",
                           caption="Leave-one-GPU-count-out error of the scaling fits",
                           label="tab:models-scaling-validation", default_decimals=1)
    written += write_table(report.validation, tables_dir / "models_validation",
                           caption="Leave-one-QPS-out prediction error (MAPE and worst "
                           "absolute error, %)", label="tab:models-validation",
                           default_decimals=1)
    roof = report.roofline[["model", "gpu_name", "gpu_count", "request_rate_qps",
                            "repeat_index", "batch_little", "achieved_decode_tok_per_s",
                            "decode_bound_tok_per_s", "decode_ratio", "prefill_ratio",
                            "decode_ceiling_tok_per_s", "ceiling_ratio", "exceeds_bound"]]
    written += write_table(roof, tables_dir / "models_roofline",
                           caption="Achieved / roofline bound for every run",
                           label="tab:models-roofline",
                           decimals={"achieved_decode_tok_per_s": 0,
                                     "decode_bound_tok_per_s": 0,
                                     "decode_ceiling_tok_per_s": 0, "decode_ratio": 3,
                                     "prefill_ratio": 3, "ceiling_ratio": 3})
    written += write_table(report.audit, tables_dir / "models_ratio_audit",
                           caption="The paper's headline ratios under each definition",
                           label="tab:models-audit", default_decimals=3)
    written += write_table(report.verdicts, tables_dir / "models_ratio_audit_verdicts",
                           caption="Which definition yields each headline ratio",
                           label="tab:models-audit-verdicts", default_decimals=3)
    written += write_table(report.comparisons, tables_dir / "models_ratio_comparisons",
                           caption="RTX 4090 vs H100 comparison rows behind the audit",
                           label="tab:models-comparisons", default_decimals=3)
    written += write_table(report.spread_summary, tables_dir / "models_run_spread",
                           caption="Run-to-run spread of repeated reference runs",
                           label="tab:models-spread", default_decimals=2)
    return written


def headline(report: ModelReport) -> dict[str, object]:
    """Numbers ``hgresearch reproduce`` prints for this notebook."""
    overall = report.validation[report.validation.configuration == "all configurations"].iloc[0]
    audit = {row.claim: row.reproduced_by if row.reproduced_by != "none"
             else f"closest: {row.best_definition}" for row in report.verdicts.itertuples()}
    return {
        "capacity throughput MAPE % (leave-one-QPS-out)": round(
            float(overall.throughput_mape_pct), 1),
        "capacity worst error %": round(float(overall.throughput_worst_pct), 1),
        "TTFT p90 MAPE % below saturation": round(float(overall.ttft_p90_mape_pct), 1),
        "TTFT p90 held-out points": int(overall.ttft_p90_n),
        "cost per 1M tok MAPE %": round(float(overall.cost_mape_pct), 1),
        "configurations meeting capacity goal (worst <= 10%)": int(
            report.validation.throughput_goal_met.iloc[:-1].sum()),
        "configurations": int(len(report.validation) - 1),
        "runs exceeding roofline bound": int(report.roofline.exceeds_bound.sum()),
        "max decode achieved/bound": round(float(report.roofline.decode_ratio.max()), 3),
        **{f"audit: {k}": v for k, v in audit.items()},
    }
