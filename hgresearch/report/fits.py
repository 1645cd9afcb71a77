"""All model results of a runs table in one object, cached, plus their tables.

:func:`analyse_models` runs every fit, the validation, the roofline and the run-to-run spread;
:func:`model_tables` with :data:`MODEL_TABLES` is what
:func:`hgresearch.report.writers.write_tables` writes to ``paper/tables``;
:func:`models_headline` returns the numbers ``hgresearch reproduce`` prints. The notebook
``04_models.ipynb`` and ``hgresearch fit`` are thin callers. (The paper's ratio claims are
audited with every other claim in :mod:`hgresearch.report.audit`.)
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
from hgresearch.report.writers import TableSpec

#: The alternative forms every validation run compares with the chosen one.
ALTERNATIVE_DRAIN = {"constant": "log", "log": "constant"}
ALTERNATIVE_LATENCY = {"queue": "loglinear", "loglinear": "queue"}


@dataclass
class ModelReport:
    """Everything :func:`analyse_models` computes (tables are plain data frames)."""

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
    spread_points: pd.DataFrame
    spread_summary: pd.DataFrame
    settings: dict[str, object] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


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
    spread_points, spread_summary = run_to_run_spread(costed)
    seconds["roofline+spread"] = time.perf_counter() - start
    return ModelReport(
        runs=costed, models=models, curves=curves, frontier=frontier,
        scaling_summary=scaling_summary, scaling_points=scaling_points,
        scaling_loo=scaling_loo, scaling_validation=scaling_validation, roofline=roofline,
        predictions=predictions, validation=validation, spread_points=spread_points,
        spread_summary=spread_summary,
        settings={"scenario": scenario, "latency_form": latency_form, "drain": drain,
                  "rho_max": rho_max, "scaling_column": scaling_column,
                  "slos": [s.label for s in slos]},
        seconds=seconds)


def analyse_models(runs: pd.DataFrame, *, scenario: str = "alternative",
            slos: list[Slo] | None = None, latency_form: str = "loglinear",
            drain: str = "constant", rho_max: float = DEFAULT_RHO_MAX,
            scaling_column: str = "capacity_rps",
            build_dir: str | Path | None = None) -> ModelReport:
    """Fit and validate everything; cached under ``<build_dir>/cache/models`` by a
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


#: The model tables (``paper/tables``), in the order they are written.
MODEL_TABLES = (
    TableSpec("models_capacity",
              "Fitted capacity per configuration (95 % profile interval; fixed-count duration "
              "model)", "tab:models-capacity", decimals={"capacity_tok_per_s": 0},
              columns=("configuration", "capacity_rps", "capacity_low_rps", "capacity_high_rps",
                       "capacity_tok_per_s", "max_achieved_rps", "capacity_is_lower_bound",
                       "drain_d0_s", "rms_rel_error_pct")),
    TableSpec("models_latency_ttft_p90", "TTFT p90 against utilisation: fitted coefficients",
              "tab:models-latency", default_decimals=3,
              columns=("configuration", "form", "a", "a_se", "b", "b_se", "resid_scale",
                       "n_points", "rho_max_fitted")),
    TableSpec("models_pareto_frontier",
              "Pareto frontier of cost per 1M tokens against tail latency", "tab:models-pareto",
              decimals={"cost_usd_per_1m_tok": 3},
              columns=("model", "metric", "configuration", "rate_qps", "latency_ms",
                       "cost_usd_per_1m_tok")),
    TableSpec("models_scaling", "Tensor-parallel scaling fits (pooled per GPU type)",
              "tab:models-scaling", default_decimals=3),
    TableSpec("models_scaling_points", "Capacity and per-GPU efficiency by GPU count",
              "tab:models-scaling-points", default_decimals=3),
    TableSpec("models_scaling_validation", "Leave-one-GPU-count-out error of the scaling fits",
              "tab:models-scaling-validation", default_decimals=1),
    TableSpec("models_validation",
              "Leave-one-QPS-out prediction error (MAPE and worst absolute error, %)",
              "tab:models-validation", default_decimals=1),
    TableSpec("models_roofline", "Achieved / roofline bound for every run",
              "tab:models-roofline",
              decimals={"achieved_decode_tok_per_s": 0, "decode_bound_tok_per_s": 0,
                        "decode_ceiling_tok_per_s": 0, "decode_ratio": 3, "prefill_ratio": 3,
                        "ceiling_ratio": 3},
              columns=("model", "gpu_name", "gpu_count", "request_rate_qps", "repeat_index",
                       "batch_little", "achieved_decode_tok_per_s", "decode_bound_tok_per_s",
                       "decode_ratio", "prefill_ratio", "decode_ceiling_tok_per_s",
                       "ceiling_ratio", "exceeds_bound")),
    TableSpec("models_run_spread", "Run-to-run spread of repeated reference runs",
              "tab:models-spread", default_decimals=2),
)


def model_tables(report: ModelReport) -> dict[str, pd.DataFrame | None]:
    """The frames of :data:`MODEL_TABLES`, by file stem."""
    latency = report.models.latency
    return {"models_capacity": report.models.capacity,
            "models_latency_ttft_p90": latency[latency.metric == "p90_ttft_ms"],
            "models_pareto_frontier": report.frontier,
            "models_scaling": report.scaling_summary.drop(columns=["warnings"]),
            "models_scaling_points": report.scaling_points,
            "models_scaling_validation": report.scaling_validation,
            "models_validation": report.validation, "models_roofline": report.roofline,
            "models_run_spread": report.spread_summary}


def models_headline(report: ModelReport) -> dict[str, object]:
    """Numbers ``hgresearch reproduce`` prints for this notebook."""
    overall = report.validation[report.validation.configuration == "all configurations"].iloc[0]
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
    }
