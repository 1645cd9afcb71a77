"""Energy and carbon figures (one function per figure, each returns the Figure)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from hgresearch.identity import hardware_label
from hgresearch.report.figures.layout import spread_positions
from hgresearch.report.figures.style import COUNT_MARKERS, apply_style, color_for

_COUNT_STYLES = {1: "-", 2: "--", 4: "-.", 8: ":"}
_SCENARIO_TITLES = {"new": "New hardware (embodied carbon charged)",
                    "idle_consumer": "Idle consumer GPUs already bought (embodied sunk)"}


def tokens_per_kwh_vs_qps(runs: pd.DataFrame, model: str) -> Figure:
    """Tokens per kWh per configuration across request rates: the paper's TDP model (line,
    markers) and the utilisation-based power-model bracket (shaded band).

    ``runs`` comes from :func:`hgresearch.accounting.energy.energy_per_run` (one run per point).
    """
    apply_style()
    data = runs[(runs.model == model) & (runs.replicas == 1)]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for (gpu, count), group in data.groupby(["gpu_name", "gpu_count"], sort=True):
        group = group.sort_values("request_rate_qps")
        qps = group.request_rate_qps.to_numpy()
        color = color_for(gpu)
        style = _COUNT_STYLES.get(int(count), "-")
        ax.fill_between(qps, group.model_tok_per_kwh_high / 1e6, group.model_tok_per_kwh_low / 1e6,
                        color=color, alpha=0.12, linewidth=0)
        ax.plot(qps, group.model_tok_per_kwh_central / 1e6, color=color, linestyle=style,
                linewidth=0.8, alpha=0.7)
        ax.plot(qps, group.tdp_tok_per_kwh / 1e6, color=color, linestyle=style,
                marker=COUNT_MARKERS.get(int(count), "o"), linewidth=1.6,
                label=(f"{hardware_label(gpu, count)} "
                       f"(TDP {group.tdp_per_gpu_w.iloc[0]:.0f} W/GPU)"))
    ax.set_xscale("log", base=2)
    ticks = sorted(data.request_rate_qps.unique())
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.set_xlabel("Target request rate (QPS)")
    ax.set_ylabel("Tokens per kWh (millions)")
    ax.set_title(f"Energy efficiency, {model}\nthick: TDP model as the paper; thin + band: "
                 "power model (central, low-high)")
    ax.legend(loc="upper left", frameon=False)
    ax.set_ylim(bottom=0)
    return fig


def carbon_stacked(carbon: pd.DataFrame) -> Figure:
    """Operational + embodied g CO2e per 1M tokens per region, one bar per configuration,
    one panel per scenario (:func:`hgresearch.accounting.carbon.configuration_carbon`)."""
    apply_style()
    scenarios = list(dict.fromkeys(carbon.scenario))
    regions = list(dict.fromkeys(carbon.region))
    configs = list(dict.fromkeys(zip(carbon.hardware, carbon.request_rate_qps, carbon.gpu_name,
                                     strict=True)))
    fig, axes = plt.subplots(len(scenarios), 1, figsize=(7.2, 2.6 * len(scenarios) + 0.6),
                             sharex=True, sharey=True, squeeze=False)
    width = 0.8 / len(configs)
    x = np.arange(len(regions))
    for ax, scenario in zip(axes[:, 0], scenarios, strict=True):
        part = carbon[carbon.scenario == scenario]
        for k, (hardware, qps, gpu) in enumerate(configs):
            rows = part[(part.hardware == hardware) & (part.request_rate_qps == qps)]
            rows = rows.set_index("region").loc[regions]
            offset = x - 0.4 + width * (k + 0.5)
            color = color_for(gpu)
            ax.bar(offset, rows.operational_g_per_1m_tok, width, color=color,
                   label=f"{hardware} @ {qps:g} QPS: operational")
            ax.bar(offset, rows.embodied_g_per_1m_tok, width,
                   bottom=rows.operational_g_per_1m_tok, color=color, alpha=0.35,
                   hatch="///", edgecolor="white", linewidth=0,
                   label=f"{hardware} @ {qps:g} QPS: embodied")
        ax.set_title(_SCENARIO_TITLES.get(scenario, scenario))
        ax.set_ylabel("g CO2e per 1M tokens")
    intensity = carbon.drop_duplicates("region").set_index("region").loc[regions].g_co2_per_kwh
    axes[-1, 0].set_xticks(x, [f"{r}\n{g:.0f}" for r, g in zip(regions, intensity, strict=True)])
    axes[-1, 0].set_xlabel("Grid region and intensity (g CO2 per kWh)")
    # Above the panels, not inside one: the tallest bars reach the top of either panel.
    handles, labels = axes[0, 0].get_legend_handles_labels()
    legend_height_in = 0.18 * -(-len(labels) // 2) + 0.06  # two columns, 0.18 in per row
    top = 1.0 - legend_height_in / fig.get_figheight()
    fig.legend(handles, labels, frameon=False, ncol=2, loc="upper center",
               bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout(rect=(0, 0, 1, top))
    return fig


def break_even(totals: pd.DataFrame, grid: pd.DataFrame, crossings: pd.DataFrame,
               zoom_g_per_kwh: float = 120.0) -> Figure:
    """Total g CO2e per 1M tokens vs grid intensity for each configuration and scenario, the
    break-even intensities marked, the catalog's regions named on top; the right panel
    zooms on clean grids (0 to ``zoom_g_per_kwh``), where the ranking can flip.

    ``totals``: :func:`hgresearch.accounting.carbon.totals_vs_intensity`; ``grid``: the grid
    catalog rows
    shown; ``crossings``: :func:`hgresearch.accounting.carbon.break_even_table`.
    """
    apply_style()
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 4.4), gridspec_kw={"width_ratios": [3, 2]})
    scenario_styles = {"new": "-", "idle_consumer": "--"}
    for ax, limit in zip(axes, (float(totals.g_co2_per_kwh.max()), zoom_g_per_kwh), strict=True):
        shown = totals[totals.g_co2_per_kwh <= limit]
        for (scenario, hardware, qps), group in shown.groupby(
                ["scenario", "hardware", "request_rate_qps"], sort=False):
            ax.plot(group.g_co2_per_kwh, group.total_g_per_1m_tok,
                    color=color_for(group.gpu_name.iloc[0]),
                    linestyle=scenario_styles.get(scenario, ":"),
                    label=f"{hardware} @ {qps:g} QPS, {scenario}")
        ax.set_xlim(0, limit)
        ax.set_ylim(bottom=0)
        for row in crossings.dropna(subset=["break_even_g_per_kwh"]).itertuples():
            if row.break_even_g_per_kwh <= limit:
                ax.axvline(row.break_even_g_per_kwh, color="#444444", linewidth=0.8,
                           linestyle=":")
                ax.annotate(f"break-even ({row.scenario})\n{row.break_even_g_per_kwh:.0f} g/kWh",
                            (row.break_even_g_per_kwh, ax.get_ylim()[1] * 0.97), fontsize=7,
                            xytext=(4, 0), textcoords="offset points", va="top")
        ax.set_xlabel("Grid carbon intensity (g CO2 per kWh)")
    for ax in axes:
        ax.set_ylabel("Total g CO2e per 1M tokens")
    axes[1].set_xlabel(f"Grid carbon intensity (g CO2 per kWh), zoom on 0-{zoom_g_per_kwh:g}")
    axes[0].legend(frameon=False, loc="upper left", bbox_to_anchor=(0.0, 0.9))
    fig.tight_layout()
    for ax, limit in zip(axes, (float(totals.g_co2_per_kwh.max()), zoom_g_per_kwh), strict=True):
        _region_labels(ax, grid[grid.g_co2_per_kwh <= limit], limit)
    fig.tight_layout()
    return fig


def _region_labels(ax: Axes, regions: pd.DataFrame, limit: float,
                   fontsize: float = 6.5) -> None:
    """Region names above the axes, each joined by a leader to its intensity on the x axis;
    names of regions with close intensities are spread apart instead of overlapping."""
    width_pt = ax.bbox.width * 72.0 / ax.figure.dpi
    wanted_pt = regions.g_co2_per_kwh.to_numpy(float) / limit * width_pt
    placed_pt = spread_positions(wanted_pt, min_gap=1.5 * fontsize)
    for name, wanted, placed in zip(regions.region, wanted_pt, placed_pt, strict=True):
        ax.annotate(name, (wanted / width_pt, 1.0), xycoords="axes fraction",
                    xytext=(placed - wanted, 12), textcoords="offset points", rotation=90,
                    ha="center", va="bottom", fontsize=fontsize,
                    arrowprops={"arrowstyle": "-", "color": "0.4", "linewidth": 0.6,
                                "shrinkA": 0, "shrinkB": 0})


def efficiency_ratio_bracket(estimates: pd.DataFrame) -> Figure:
    """The paper's efficiency ratio under each energy estimate, with its bracket.

    ``estimates`` has ``estimate`` (label), ``ratio``, ``low``, ``high`` (NaN: no bracket).
    """
    apply_style()
    fig, ax = plt.subplots(figsize=(6.4, 0.55 * len(estimates) + 1.2))
    y = np.arange(len(estimates))[::-1]
    low = (estimates.ratio - estimates.low).fillna(0).clip(lower=0)
    high = (estimates.high - estimates.ratio).fillna(0).clip(lower=0)
    ax.errorbar(estimates.ratio, y, xerr=[low, high], fmt="o", color="#1f4e79", capsize=3)
    for yy, ratio in zip(y, estimates.ratio, strict=True):
        ax.annotate(f"{ratio:.2f}x", (ratio, yy), xytext=(0, 6), textcoords="offset points",
                    ha="center", fontsize=7.5)
    ax.set_yticks(y, estimates.estimate)
    ax.set_ylim(-0.6, len(estimates) - 0.3)  # room for the value label above the top row
    ax.axvline(1.0, color="#888888", linewidth=0.8)
    ax.set_xlim(left=0)
    ax.set_xlabel("Tokens per kWh, H100 config / RTX 4090 config")
    ax.set_title("The paper's efficiency ratio under different power assumptions")
    return fig
