"""The simulator against measured steady state on vLLM-CPU (notebook ``06_cpu_sweep``; the
check is :mod:`hgresearch.sim.sustained`): tables, headline numbers and the figure.

:data:`SUSTAINED_TABLES` with :func:`sustained_tables` is what
:func:`hgresearch.report.writers.write_tables` writes; :func:`sustained_headline` the numbers
``hgresearch reproduce`` prints and the manuscript quotes by name.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import pyplot as plt
from matplotlib.artist import Artist
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from hgresearch.report.figures.style import apply_style
from hgresearch.report.writers import TableSpec
from hgresearch.sim.sustained import SustainedCheck, sustained_summary

#: Row label and unit of each compared metric.
METRIC_LABELS = {"request_throughput_rps": ("request throughput", "req/s"),
                 "mean_tpot_ms": ("mean TPOT", "ms"), "p90_ttft_ms": ("p90 TTFT", "ms"),
                 "p99_ttft_ms": ("p99 TTFT", "ms")}

SUSTAINED_TABLES = (
    TableSpec("sim_sustained_cpu",
              "Simulator calibrated on the short paper-protocol CPU runs vs long sustained "
              "Poisson runs of the same vLLM-CPU server (steady window)",
              "tab:sim-sustained-cpu",
              decimals={"offered req/s": 0, "window requests": 0, "measured": 2,
                        "predicted": 2, "error %": 1, "interval low": 2, "interval high": 2},
              notes=("Window: requests sent from {warmup_s:.0f} s after the first send to the "
                     "last send; intervals at {confidence:.0%} from the calibration's "
                     "leave-one-rate-out residuals (split-conformal).",)),
    TableSpec("sim_sustained_cpu_summary",
              "Sustained-load check: error per metric over the long CPU runs",
              "tab:sim-sustained-cpu-summary",
              decimals={"MAPE %": 1, "worst error %": 1, "worst at req/s": 0, "coverage": 2,
                        "goal %": 0}),
)


def sustained_tables(check: SustainedCheck) -> dict[str, pd.DataFrame | None]:
    """The frames of :data:`SUSTAINED_TABLES`."""
    rows = check.rows.assign(metric=check.rows.metric.map(
        lambda m: f"{METRIC_LABELS[m][0]} ({METRIC_LABELS[m][1]})"))
    detail = rows.rename(columns={"rate_qps": "offered req/s",
                                  "window_requests": "window requests", "error_pct": "error %",
                                  "low": "interval low", "high": "interval high"})[
        ["method", "offered req/s", "window requests", "metric", "measured", "predicted", "error %",
         "interval low", "interval high", "covered"]]
    summary = sustained_summary(check)
    summary = summary.assign(metric=summary.metric.map(
        lambda m: f"{METRIC_LABELS[m][0]} ({METRIC_LABELS[m][1]})")).rename(columns={
            "mape_pct": "MAPE %", "worst_error_pct": "worst error %",
            "worst_rate_qps": "worst at req/s", "goal_pct": "goal %",
            "meets_goal": "meets goal"})
    return {"sim_sustained_cpu": detail, "sim_sustained_cpu_summary": summary}


def sustained_context(check: SustainedCheck) -> dict[str, object]:
    """What the tables' notes are filled with."""
    return {"warmup_s": check.warmup_s, "confidence": check.confidence}


def sustained_headline(check: SustainedCheck) -> dict[str, float]:
    """Mean absolute and worst error (%) and interval coverage per method and metric, named
    ``sustained_<method>_<metric>_...``."""
    numbers: dict[str, float] = {}
    for row in sustained_summary(check).itertuples(index=False):
        key = f"sustained_{row.method}_{row.metric}"
        numbers[f"{key}_mape_pct"] = round(float(row.mape_pct), 1)
        numbers[f"{key}_worst_error_pct"] = round(float(row.worst_error_pct), 1)
        numbers[f"{key}_coverage"] = round(float(row.coverage), 2)
    numbers["sustained_long_runs"] = float(check.rows.run.nunique())
    numbers["sustained_max_rate_qps"] = round(float(check.rows.rate_qps.max()), 1)
    return numbers


def sustained_figure(check: SustainedCheck, title: str) -> Figure:
    """Measured (dots) and predicted per offered rate (one line per calibration method, its
    prediction interval as a band), one panel per metric."""
    apply_style()
    fig, axes = plt.subplots(1, len(METRIC_LABELS), figsize=(12.0, 3.6))
    methods = list(dict.fromkeys(check.rows.method))
    colours = {method: f"C{i}" for i, method in enumerate(methods)}
    for ax, (metric, (label, unit)) in zip(np.ravel(axes), METRIC_LABELS.items(), strict=True):
        for method in methods:
            data = check.rows[(check.rows.metric == metric) & (check.rows.method == method)
                              ].sort_values("rate_qps")
            ax.fill_between(data.rate_qps, data.low, data.high, color=colours[method],
                            alpha=0.15, lw=0)
            ax.plot(data.rate_qps, data.predicted, "-", color=colours[method])
        measured = (check.rows[check.rows.metric == metric]
                    .drop_duplicates("run").sort_values("rate_qps"))
        ax.plot(measured.rate_qps, measured.measured, "o", color="C3")
        ax.set_title(label)
        ax.set_xlabel("offered load (req/s)")
        ax.set_ylabel(unit)
        ax.set_ylim(bottom=0)
    handles: list[Artist] = [Line2D([], [], color="C3", marker="o", ls="",
                                    label="measured (steady window)")]
    handles += [Line2D([], [], color=colours[m], label=f"simulated, calibrated on short runs "
                                                      f"({m})") for m in methods]
    handles.append(Rectangle((0, 0), 1, 1, color="grey", alpha=0.15,
                                 label=f"{check.confidence:.0%} prediction interval"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False,
               fontsize="small")
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.1, 1, 0.95))
    return fig
