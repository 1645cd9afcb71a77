"""Figures of the fleet planner (notebook 08_fleet): cost and carbon per 1M tokens against the
demand, the cost–carbon Pareto front, and a day's plan hour by hour."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from hgresearch.report.figures.style import apply_style, color_for

#: Line colour and style of each plan of :func:`hgresearch.plan.hybrid_study.compare_at_rates`.
PLAN_STYLES = {
    "hybrid": {"color": "#6a3d9a", "linestyle": "-", "marker": "o"},
    "H100-PCIe only": {"color": color_for("H100-PCIe"), "linestyle": "--", "marker": "s"},
    "RTX-4090 only": {"color": color_for("RTX-4090"), "linestyle": "--", "marker": "^"},
    "best single configuration": {"color": "#7f7f7f", "linestyle": ":", "marker": "D"},
}


#: Legend entry of a plan that failed its simulated check (drawn as a cross, not joined).
FAILED_LABEL = "failed its check (not a result)"


def _style(name: str) -> dict[str, str]:
    return PLAN_STYLES.get(name, {"color": "#333333", "linestyle": "-", "marker": "x"})


def _plain_log_axis(axis: Axis, ticks: list[float] | None = None) -> None:
    """Plain numbers (0.05, not 5×10⁻²) on a log axis; minor tick labels off."""
    if ticks is not None:
        axis.set_ticks(ticks)
    else:
        axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def cost_carbon_vs_demand(table: pd.DataFrame, title: str) -> Figure:
    """Cost (top) and carbon (bottom) per 1M tokens against the demand, one column per
    ``scenario``, one line per ``plan`` (log–log); a row whose ``passed`` is false (the plan
    failed its simulated check) is a cross off its line (:data:`FAILED_LABEL`)."""
    apply_style()
    scenarios = list(dict.fromkeys(table.scenario))
    fig, axes = plt.subplots(2, len(scenarios), figsize=(4.2 * len(scenarios) + 1.8, 6.0),
                             sharex=True, squeeze=False)
    for col, scenario in enumerate(scenarios):
        data = table[table.scenario == scenario]
        for row, (column, label) in enumerate((
                ("cost_usd_per_1m_tok", "cost (USD per 1M tokens)"),
                ("g_co2_per_1m_tok", "carbon (g CO₂e per 1M tokens)"))):
            ax = axes[row, col]
            for name, group in data.groupby("plan", sort=False):
                group = group.sort_values("rate_rps")
                # a plan that failed its check is no result: a gap in its line, and a cross
                passed = (group.passed.astype(bool) if "passed" in group
                          else pd.Series(True, index=group.index))
                hybrid = name == "hybrid"  # on top, wider: baselines it equals stay visible
                ax.plot(group.rate_rps, group[column].where(passed), label=name, markersize=4,
                        linewidth=2.4 if hybrid else 1.3, zorder=3 if hybrid else 2,
                        alpha=0.75 if hybrid else 1.0, **_style(str(name)))
                failed = group[~passed & group[column].notna()]
                if len(failed):
                    ax.plot(failed.rate_rps, failed[column], linestyle="none", marker="x",
                            markersize=8, color=_style(str(name))["color"], zorder=4,
                            label=FAILED_LABEL)
            ax.set_xscale("log")
            ax.set_yscale("log")
            _plain_log_axis(ax.xaxis, sorted(data.rate_rps.unique()))
            _plain_log_axis(ax.yaxis)
            ax.set_ylabel(label)
            if row == 0:
                ax.set_title(scenario)
            else:
                ax.set_xlabel("demand (requests/s, log)")
    # one legend entry per label over every panel (a failed plan may appear in one only)
    entries: dict[str, Artist] = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(label, handle)
    fig.legend(list(entries.values()), list(entries), loc="center left",
               bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def pareto(front: pd.DataFrame, baselines: pd.DataFrame, title: str) -> Figure:
    """The cost–carbon Pareto front (USD vs g CO₂e per 1M tokens) with the single-hardware
    baselines as separate markers (a baseline without a plan is left out)."""
    apply_style()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    # Only the points are plans; the dotted line just orders them.
    ax.plot(front.g_co2_per_1m_tok, front.cost_usd_per_1m_tok, linestyle=":",
            color=_style("hybrid")["color"], marker="o", markersize=5,
            label="Pareto-optimal plans (ε-constraint)")
    for row in baselines.dropna(subset=["cost_usd_per_1m_tok"]).itertuples():  # no plan: no point
        style = _style(str(row.plan))
        ax.plot([row.g_co2_per_1m_tok], [row.cost_usd_per_1m_tok], linestyle="none",
                marker=style["marker"], color=style["color"], markersize=7, label=row.plan)
    ax.set_xlabel("carbon (g CO₂e per 1M tokens)")
    ax.set_ylabel("cost (USD per 1M tokens)")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    ax.set_title(title)
    fig.tight_layout()
    return fig


def day_plan(days: dict[str, pd.DataFrame], title: str) -> Figure:
    """A day hour by hour: demand, grid intensity, and the GPUs of each configuration in every
    plan of ``days`` (name -> :func:`hgresearch.plan.hybrid_study.day_table`), stacked bars."""
    apply_style()
    names = list(days)
    first = days[names[0]]
    hours = np.sort(first.hour.unique())
    fig, axes = plt.subplots(2 + len(names), 1, figsize=(7.6, 2.0 * (2 + len(names)) + 0.4),
                             sharex=True)
    per_hour = first.drop_duplicates("hour").set_index("hour")
    axes[0].plot(hours, per_hour.demand_rps.loc[hours], color="#333333", marker="o",
                 markersize=3)
    axes[0].set_ylabel("demand\n(requests/s)")
    axes[1].plot(hours, per_hour.grid_g_per_kwh.loc[hours], color="#2ca02c", marker="o",
                 markersize=3)
    axes[1].set_ylabel("grid intensity\n(g CO₂/kWh)")
    for ax, name in zip(axes[2:], names, strict=True):
        day = days[name]
        bottom = np.zeros(len(hours))
        for (config, gpu, count), group in day.groupby(["config", "gpu_name", "num_gpus"],
                                                       sort=False):
            gpus = group.set_index("hour").gpus.reindex(hours, fill_value=0).to_numpy()
            if not gpus.any():
                continue
            ax.bar(hours, gpus, bottom=bottom, color=color_for(str(gpu), int(count)),
                   width=0.8, label=config)
            bottom += gpus
        ax.set_ylabel(f"GPUs on\n({name})")
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    axes[-1].set_xlabel("hour of the day")
    axes[-1].set_xticks(hours[::2])
    fig.suptitle(title)
    fig.tight_layout()
    return fig
