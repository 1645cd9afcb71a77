"""Leave-one-QPS-out validation of the capacity and latency models.

For every configuration and every offered rate λᵢ: drop the runs at λᵢ, refit capacity and the
TTFT p90 curve on the rest (the data set's schedule factor is kept — it describes the arrival
generator, not the configuration), and predict the held-out runs' achieved throughput, TTFT p90
and cost per 1M tokens. TTFT is predicted only where the refitted model says the held-out rate
is below saturation (ρ < ``rho_max``); above it the run has no steady state.

The cost of a run is price × GPUs × duration, so its prediction error is the duration error:
the cost column checks the chain end to end (prices, token counts, units), not a new model.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pandas as pd

from hgresearch.accounting.costs import cost_per_million_tok_usd, run_cost_usd
from hgresearch.fits.common import (
    ModelInputError,
    ModelWarning,
    config_groups,
    config_label,
    mape_pct,
)
from hgresearch.fits.latency import DEFAULT_RHO_MAX, fit_latency
from hgresearch.fits.saturation import SaturationFit, Schedule, estimate_schedule, fit_saturation

#: Validation goals: capacity (throughput) within 10 %, TTFT p90 within 25 % below saturation.
THROUGHPUT_GOAL_PCT = 10.0
TTFT_GOAL_PCT = 25.0


def _fold_predictions(group: pd.DataFrame, schedule: Schedule, drain: str, form: str,
                      metric: str, rho_max: float, full: SaturationFit,
                      alt_forms: tuple[str, ...]) -> list[dict[str, Any]]:
    rows = []
    rates = np.unique(group.request_rate_qps.to_numpy(float))
    for held in rates:
        test = group[group.request_rate_qps == held]
        train = group[group.request_rate_qps != held]
        base = {"configuration": config_label(group.iloc[0]), "held_out_qps": held,
                "n_test_runs": len(test)}
        try:
            cap = fit_saturation(train, schedule, drain, interval=False, start=full)
        except ModelInputError as err:
            rows.append({**base, "note": f"capacity not refitted: {err}"})
            continue
        n = test.num_prompts.to_numpy(float)
        duration_pred = cap.predict_duration_s(test.request_rate_qps.to_numpy(float), n)
        thr_obs = float(test.request_throughput_rps.mean())
        thr_pred = float(np.mean(n / duration_pred))
        row = {**base, "capacity_fold_rps": cap.capacity_rps,
               "capacity_shift_pct": 100.0 * (cap.capacity_rps / full.capacity_rps - 1.0),
               "throughput_obs_rps": thr_obs, "throughput_pred_rps": thr_pred,
               "throughput_err_pct": 100.0 * (thr_pred / thr_obs - 1.0)}
        if "cost_usd_per_1m_tok" in test and "price_usd_per_gpu_h" in test:
            tokens = (test.total_input_tok + test.total_output_tok).to_numpy(float)
            cost_pred = cost_per_million_tok_usd(
                run_cost_usd(duration_pred, test.gpu_count.to_numpy(float),
                             test.price_usd_per_gpu_h.to_numpy(float),
                             test.replicas.to_numpy(float)), tokens)
            row["cost_obs_usd_per_1m_tok"] = float(test.cost_usd_per_1m_tok.mean())
            row["cost_pred_usd_per_1m_tok"] = float(np.mean(cost_pred))
            row["cost_err_pct"] = 100.0 * (row["cost_pred_usd_per_1m_tok"]
                                           / row["cost_obs_usd_per_1m_tok"] - 1.0)
        rho = held / cap.capacity_rps
        row["rho_fold"] = rho
        if metric in test and rho < rho_max:
            obs = float(test[metric].mean())
            for this_form in (form, *alt_forms):
                try:
                    lat = fit_latency(train, cap.capacity_rps, metric, this_form, rho_max)
                except ModelInputError as err:
                    row["note"] = f"latency not refitted: {err}"
                    break
                pred = float(lat.predict(np.array([held]))["mean"].iloc[0])
                if this_form == form:
                    row.update({"ttft_obs_ms": obs, "ttft_pred_ms": pred,
                                "ttft_err_pct": 100.0 * (pred / obs - 1.0)})
                else:
                    row[f"ttft_err_pct[latency={this_form}]"] = 100.0 * (pred / obs - 1.0)
        elif rho >= rho_max:
            row["note"] = "held-out rate at or above fitted capacity: latency not predicted"
        rows.append(row)
    return rows


def fitted_leave_one_qps_out(runs: pd.DataFrame, schedule: Schedule | None = None,
                             drain: str = "constant", form: str = "loglinear",
                             metric: str = "p90_ttft_ms", rho_max: float = DEFAULT_RHO_MAX,
                             alt_forms: tuple[str, ...] = ()) -> pd.DataFrame:
    """Held-out predictions, one row per (configuration, held-out rate).

    ``alt_forms`` are other latency forms refitted on the same folds (column
    ``ttft_err_pct[latency=<form>]``), so they are compared on identical held-out points.

    ``runs`` should carry cost columns (:func:`hgresearch.accounting.costs.add_costs`) for the cost
    check.
    Configurations with fewer than three offered rates are skipped (two are needed to refit).
    """
    schedule = schedule or estimate_schedule(runs)
    rows: list[dict[str, Any]] = []
    with warnings.catch_warnings():
        # Folds are fitted on purpose with one point fewer; their warnings repeat the full
        # fit's and would drown the output.
        warnings.simplefilter("ignore", ModelWarning)
        for _, group in config_groups(runs):
            if group.request_rate_qps.nunique() < 3:
                continue
            full = fit_saturation(group, schedule, drain, interval=False)
            rows.extend(_fold_predictions(group, schedule, drain, form, metric, rho_max, full,
                                          alt_forms))
    return pd.DataFrame(rows)


def _summary(pred: pd.DataFrame) -> dict[str, float]:
    def stat(column: str) -> tuple[float, float, int]:
        if column not in pred:
            return math.nan, math.nan, 0
        values = pred[column].dropna().abs()
        if values.empty:
            return math.nan, math.nan, 0
        return float(values.mean()), float(values.max()), int(len(values))

    thr = stat("throughput_err_pct")
    ttft = stat("ttft_err_pct")
    cost = stat("cost_err_pct")
    shift = stat("capacity_shift_pct")
    return {"throughput_mape_pct": thr[0], "throughput_worst_pct": thr[1], "n_folds": thr[2],
            "capacity_loo_shift_max_pct": shift[1],
            "ttft_p90_mape_pct": ttft[0], "ttft_p90_worst_pct": ttft[1], "ttft_p90_n": ttft[2],
            "cost_mape_pct": cost[0], "cost_worst_pct": cost[1]}


def fitted_validation_table(predictions: pd.DataFrame,
                            alternatives: dict[str, pd.DataFrame] | None = None) -> pd.DataFrame:
    """Per-configuration MAPE and worst absolute error, plus a pooled ``all`` row.

    ``alternatives`` maps a label (e.g. ``"drain=constant"``) to the predictions of another
    model form; their throughput and TTFT MAPE are added as extra columns for comparison.
    """
    rows = []
    for label, part in predictions.groupby("configuration", sort=True):
        rows.append({"configuration": label, **_summary(part)})
    rows.append({"configuration": "all configurations", **_summary(predictions)})
    table = pd.DataFrame(rows)
    for column in [c for c in predictions.columns if c.startswith("ttft_err_pct[")]:
        name = column[len("ttft_err_pct["):-1]
        per_config = predictions.groupby("configuration")[column].apply(
            lambda v: float(v.dropna().abs().mean()) if v.notna().any() else math.nan)
        per_config["all configurations"] = (float(predictions[column].dropna().abs().mean())
                                            if predictions[column].notna().any() else math.nan)
        table[f"ttft_p90_mape_pct[{name}]"] = table.configuration.map(per_config)
    for name, alt in (alternatives or {}).items():
        alt_rows = {label: _summary(part) for label, part in alt.groupby("configuration")}
        alt_rows["all configurations"] = _summary(alt)
        table[f"throughput_mape_pct[{name}]"] = table.configuration.map(
            lambda c, rows=alt_rows: rows.get(c, {}).get("throughput_mape_pct", math.nan))
        table[f"ttft_p90_n[{name}]"] = table.configuration.map(
            lambda c, rows=alt_rows: rows.get(c, {}).get("ttft_p90_n", 0))
        table[f"ttft_p90_mape_pct[{name}]"] = table.configuration.map(
            lambda c, rows=alt_rows: rows.get(c, {}).get("ttft_p90_mape_pct", math.nan))
    table["throughput_goal_met"] = table.throughput_worst_pct <= THROUGHPUT_GOAL_PCT
    table["ttft_p90_goal_met"] = np.where(table.ttft_p90_n > 0,
                                          table.ttft_p90_mape_pct <= TTFT_GOAL_PCT, False)
    return table


__all__ = ["fitted_leave_one_qps_out", "fitted_validation_table", "mape_pct"]
