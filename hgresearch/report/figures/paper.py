"""Figures of the paper (Figure 1) and the beyond-the-paper views of the same runs."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from hgresearch.report.figures.layout import spread_positions
from hgresearch.report.figures.style import COUNT_MARKERS, apply_style, color_for


def _hardware_style(points: pd.DataFrame, hardware: str) -> dict[str, Any]:
    row = points[points.hardware == hardware].iloc[0]
    shaded = points[points.gpu_name == row.gpu_name].gpu_count.nunique() > 1
    color = color_for(row.gpu_name, int(row.gpu_count) if shaded else None)
    return {"color": color, "marker": COUNT_MARKERS.get(int(row.gpu_count), "o")}


def figure1_scaling(points: pd.DataFrame, hardware: list[str], model: str,
                    projection: Mapping[str, Any] | None = None,
                    cost_table: bool | None = None) -> Figure:
    """Target QPS (log2) vs achieved requests/s per configuration, the ideal line, the cost
    per 1M tokens of each point, and an optional projected replica point.

    The costs are labels beside the points, as in the paper, or with ``cost_table`` (default:
    more than two configurations, where labels beside the points crowd each other and the
    lines) a table under the plot. ``points`` comes from
    :func:`hgresearch.report.paper_tables.scaling_points`; ``projection`` from
    :func:`hgresearch.report.paper_tables.project_replicas`.
    """
    apply_style()
    if cost_table is None:
        cost_table = len(hardware) > 2
    if cost_table:
        fig, (ax, table_ax) = plt.subplots(
            2, 1, figsize=(7.6, 4.6 + 0.22 * len(hardware)),
            gridspec_kw={"height_ratios": [4.2, 0.4 + 0.22 * len(hardware)]})
    else:
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
    rates = np.sort(points.request_rate_qps.unique())
    dense = np.geomspace(rates.min(), rates.max(), 200)
    ax.plot(dense, dense, color="#999999", linestyle="--", linewidth=1,
            label="ideal (achieved = target)")
    points = points[points.hardware.isin(hardware)]  # shades follow the GPU counts shown
    for hw in hardware:
        data = points[points.hardware == hw].sort_values("request_rate_qps")
        ax.plot(data.request_rate_qps, data.request_throughput_rps, label=hw, linewidth=1.5,
                markersize=5, **_hardware_style(points, hw))
    if projection is not None:
        # the star takes the colour of the configuration it replicates ("4 x (2x RTX-4090)")
        replicated = [hw for hw in hardware if f"({hw})" in projection["hardware"]]
        star_color = (_hardware_style(points, replicated[0])["color"] if replicated
                      else color_for("RTX-4090"))
        ax.plot([projection["request_rate_qps"]], [projection["request_throughput_rps"]],
                marker="*", markersize=12, linestyle="none", color=star_color,
                markeredgecolor="black",
                label=f"projected {projection['hardware']}:\n"
                + textwrap.fill(projection["rule"], 60))
        ax.annotate(f"${projection['cost_usd_per_1m_tok']:.3f}",
                    (projection["request_rate_qps"], projection["request_throughput_rps"]),
                    textcoords="offset points", xytext=(6, 4), fontsize=7)
    ax.set_xscale("log", base=2)
    ax.set_xticks(rates, [f"{r:g}" for r in rates])
    ax.set_xlim(rates.min() / 1.25, rates.max() * 1.6)  # room for the labels right of 32 QPS
    ax.set_ylim(bottom=min(0.0, ax.get_ylim()[0]))
    ax.set_xlabel("target request rate (QPS, log₂)")
    ax.set_ylabel("achieved request rate (requests/s)")
    costs = "table" if cost_table else "labels"
    ax.set_title(f"Scaling pattern — {model}\n{costs}: cost per 1M tokens (input+output, USD)")
    ax.legend(loc="upper left", frameon=False)
    if cost_table:
        _cost_table(table_ax, points, hardware)
    fig.tight_layout()
    if not cost_table:
        _cost_labels(ax, points)
    return fig


def _cost_table(ax: Axes, points: pd.DataFrame, hardware: list[str]) -> None:
    """Cost per 1M tokens per configuration (rows, in the configuration's colour) and QPS."""
    ax.axis("off")
    grid = points.pivot_table(index="hardware", columns="request_rate_qps",
                              values="cost_usd_per_1m_tok").loc[hardware]
    table = ax.table(cellText=[[f"${c:.3f}" for c in row] for row in grid.to_numpy()],
                     rowLabels=hardware, colLabels=[f"{q:g} QPS" for q in grid.columns],
                     loc="center", cellLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(7.5)
    for (row, _col), cell in table.get_celld().items():
        cell.set_linewidth(0.3)
        if row > 0:
            cell.get_text().set_color(_hardware_style(points, hardware[row - 1])["color"])


def _cost_labels(ax: Axes, points: pd.DataFrame, fontsize: float = 6.5) -> None:
    """Cost labels right of each point in the point's colour; labels at one QPS that would
    overlap are spread apart vertically (kept inside the axes) with a leader to their point.
    Call after the layout is final: the spacing is computed in points."""
    low, high = ax.get_ylim()
    units_per_pt = (high - low) / (ax.bbox.height * 72.0 / ax.figure.dpi)
    gap = 1.6 * fontsize * units_per_pt
    for rate, group in points.groupby("request_rate_qps", sort=True):
        wanted = group.request_throughput_rps.to_numpy(float)
        placed = spread_positions(wanted, gap, low + gap / 2, high - gap / 2)
        for row, label_y in zip(group.itertuples(), placed, strict=True):
            color = _hardware_style(points, row.hardware)["color"]
            leader = ({"arrowstyle": "-", "color": color, "linewidth": 0.5, "shrinkA": 0,
                       "shrinkB": 2} if abs(label_y - row.request_throughput_rps) > gap / 2
                      else None)
            # on a white box: a line passing behind the label does not strike it through
            ax.annotate(f"${row.cost_usd_per_1m_tok:.3f}", (rate, row.request_throughput_rps),
                        xytext=(rate * 1.1, label_y), fontsize=fontsize, va="center",
                        color=color, arrowprops=leader,
                        bbox={"boxstyle": "square,pad=0.1", "facecolor": "white",
                              "edgecolor": "none", "alpha": 0.85})


def ttft_percentiles_vs_qps(runs: pd.DataFrame, hardware: list[str], model: str,
                            percentiles: tuple[str, ...] = ("p50", "p90", "p99"),
                            slo_ms: float | None = None) -> Figure:
    """TTFT percentiles vs offered QPS per configuration, one panel per percentile, log y."""
    apply_style()
    fig, axes = plt.subplots(1, len(percentiles), figsize=(9.6, 3.4), sharey=True)
    for ax, pct in zip(np.atleast_1d(axes), percentiles, strict=True):
        for hw in hardware:
            data = runs[runs.hardware == hw].sort_values("request_rate_qps")
            ax.plot(data.request_rate_qps, data[f"{pct}_ttft_ms"], label=hw, markersize=4,
                    **_hardware_style(runs, hw))
        if slo_ms is not None:
            ax.axhline(slo_ms, color="black", linewidth=0.8, linestyle=":",
                       label=f"{slo_ms:g} ms SLO")
        ax.set_xscale("log", base=2)
        rates = np.sort(runs.request_rate_qps.unique())
        ax.set_xticks(rates, [f"{r:g}" for r in rates])
        ax.set_yscale("log")
        ax.set_title(f"TTFT {pct}")
        ax.set_xlabel("offered QPS")
    np.atleast_1d(axes)[0].set_ylabel("time to first token (ms)")
    np.atleast_1d(axes)[-1].legend(frameon=False)
    fig.suptitle(f"Time to first token vs load — {model}")
    fig.tight_layout()
    return fig


def cost_vs_qps(runs: pd.DataFrame, hardware: list[str], model: str) -> Figure:
    """Cost per 1M tokens (input+output) vs offered QPS per configuration."""
    apply_style()
    fig, ax = plt.subplots()
    for hw in hardware:
        data = runs[runs.hardware == hw].sort_values("request_rate_qps")
        ax.plot(data.request_rate_qps, data.cost_usd_per_1m_tok, label=hw, markersize=5,
                **_hardware_style(runs, hw))
    rates = np.sort(runs.request_rate_qps.unique())
    ax.set_xscale("log", base=2)
    ax.set_xticks(rates, [f"{r:g}" for r in rates])
    ax.set_yscale("log")
    ax.set_xlabel("offered QPS")
    ax.set_ylabel("cost per 1M tokens (USD)")
    scenario = runs.price_scenario.iloc[0] if "price_scenario" in runs else ""
    ax.set_title(f"Cost per 1M tokens vs load — {model} ({scenario} prices)")
    ax.legend(frameon=False)
    fig.tight_layout()
    return fig


def throughput_ratio_heatmap(ratios: pd.DataFrame, reference: str = "1x H100-PCIe"
                             ) -> Figure:
    """Heatmap of challenger/reference throughput per (model, GPU count) row and QPS column,
    blue above 1 (the challenger is faster), red below.

    ``ratios`` comes from :func:`hgresearch.report.paper_tables.throughput_ratio_table`.
    """
    apply_style()
    grid = ratios.pivot_table(index=["model", "hardware"], columns="request_rate_qps",
                              values="throughput_ratio", sort=True)
    grid.index = [f"{m} — {h}" for m, h in grid.index]
    grid.columns = [f"{q:g}" for q in grid.columns]
    fig, ax = plt.subplots(figsize=(6.4, 0.32 * len(grid) + 1.4))
    sns.heatmap(grid, ax=ax, cmap="RdBu", center=1.0,
                vmin=min(0.4, float(np.nanmin(grid.values))),
                vmax=max(1.2, float(np.nanmax(grid.values))),
                annot=True, fmt=".2f", annot_kws={"fontsize": 7}, linewidths=0.5,
                linecolor="white", cbar_kws={"label": f"output throughput / {reference}"})
    ax.set_xlabel("offered QPS")
    ax.set_ylabel("")
    ax.grid(False)
    ax.tick_params(axis="y", labelsize=8)
    ax.set_title(f"RTX-4090 configurations vs {reference} at matched offered load")
    fig.tight_layout()
    return fig
