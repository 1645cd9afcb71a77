"""Figures of the serving simulator's validation (``paper/figures/sim_validation.*``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import pyplot as plt
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, NullFormatter, StrMethodFormatter

from hgresearch.identity import hardware_label
from hgresearch.report.figures.style import COUNT_MARKERS, apply_style, color_for

#: Panel title and unit of each validated metric.
_PANELS = {"request_throughput_rps": ("request throughput", "req/s"),
           "output_throughput_tok_per_s": ("output throughput", "tok/s"),
           "mean_tpot_ms": ("mean TPOT", "ms"), "p50_ttft_ms": ("p50 TTFT", "ms"),
           "p90_ttft_ms": ("p90 TTFT", "ms"), "p99_ttft_ms": ("p99 TTFT", "ms")}


def sim_validation_figure(points: pd.DataFrame, goals_pct: dict[str, float],
                          mape_pct: dict[str, float],
                          noise_pct: dict[str, float] | None = None) -> Figure:
    """Predicted (leave-one-QPS-out) vs measured, one panel per metric, log-log: the identity
    line, the goal band (± goal %, dashed) where the metric has a goal, one colour per GPU
    type and count; each title gives the MAPE (``mape_pct``, as the validation table computes
    it) and the run-to-run noise floor (median relative std of repeated measured points) when
    known."""
    apply_style()
    noise_pct = noise_pct or {}
    fig, axes = plt.subplots(2, 3, figsize=(10.5, 6.6))
    hardware = (points[["gpu_name", "gpu_count"]].drop_duplicates()
                .sort_values(["gpu_name", "gpu_count"]).itertuples(index=False))
    hardware = list(hardware)
    for ax, (metric, (title, unit)) in zip(axes.ravel(), _PANELS.items(), strict=True):
        data = points[points.metric == metric]
        for gpu, count in hardware:
            sel = data[(data.gpu_name == gpu) & (data.gpu_count == count)]
            ax.scatter(sel.measured, sel.predicted, s=14, alpha=0.8,
                       color=color_for(gpu, count), marker=COUNT_MARKERS.get(int(count), "o"),
                       edgecolors="none")
        lo = float(np.nanmin([data.measured.min(), data.predicted.min()])) * 0.8
        hi = float(np.nanmax([data.measured.max(), data.predicted.max()])) * 1.25
        grid = np.array([lo, hi])
        ax.plot(grid, grid, color="black", lw=0.8)
        goal = goals_pct.get(metric)
        if goal is not None:
            for factor in (1 - goal / 100, 1 + goal / 100):
                ax.plot(grid, grid * factor, color="black", lw=0.7, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        label = f"{title}: MAPE {mape_pct.get(metric, float('nan')):.1f}%"
        if goal is not None:
            label += f" (goal {goal:g}%)"
        if metric in noise_pct and np.isfinite(noise_pct[metric]):
            label += f"\nrun-to-run spread {noise_pct[metric]:.1f}%"
        ax.set_title(label, fontsize=8.5)
        ax.set_xlabel(f"measured ({unit})")
        ax.set_ylabel(f"simulated, held out ({unit})")
    handles = [Line2D([], [], ls="none", marker=COUNT_MARKERS.get(int(count), "o"),
                      color=color_for(gpu, count), label=hardware_label(gpu, count))
               for gpu, count in hardware]
    handles += [Line2D([], [], color="black", lw=0.8, label="simulated = measured"),
                Line2D([], [], color="black", lw=0.7, ls="--", label="± goal")]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6),
               bbox_to_anchor=(0.5, -0.01), frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


#: Colour per routing policy (``hgresearch.traffic.routing.Policy`` values), shared by routing
#: figures.
POLICY_COLORS = {"round-robin": "#1f77b4", "weighted-random": "#ff7f0e", "jsq": "#2ca02c",
                 "least-tokens": "#d62728", "length-aware": "#9467bd",
                 "cost-spillover": "#8c564b"}


#: Colour of the baseline (one H100, no routing) in routing figures.
ALONE_COLOR = "#7f7f7f"


def routing_comparison_figure(interval: pd.DataFrame,
                              limits_ms: tuple[float, ...] = (500.0, 2000.0)) -> Figure:
    """The routing comparison (``hgresearch.sim.routing_study.seed_interval``'s table): one column
    per
    fleet; top, p99 TTFT against the offered rate per policy (median over seeds, band = range
    over seeds; dashed: the limits); bottom, cost per 1M tokens. A hollow marker: some replica
    is sent more than its sustained throughput (the SLO cannot hold at that load). The rows of
    ``num_slow = 0`` (the H100 alone), if any, are drawn in every column in grey."""
    apply_style()
    fleets = sorted(int(n) for n in interval.num_slow.unique() if n > 0)
    alone = interval[interval.num_slow == 0].sort_values("rate_qps")
    policies = [p for p in POLICY_COLORS if p in set(interval.policy)]
    fig, axes = plt.subplots(2, len(fleets), figsize=(2.9 * len(fleets), 5.6), sharex=True,
                             sharey="row", squeeze=False)
    limit_styles = ["--", ":", "-."]
    for col, num_slow in enumerate(fleets):
        top, bottom = axes[0, col], axes[1, col]
        data = interval[interval.num_slow == num_slow]
        if len(alone):
            over = (alone.max_load_high > 1.0).to_numpy()
            for ax, values in ((top, alone.p99_ttft_ms), (bottom, alone.cost_usd_per_1m_tok)):
                ax.plot(alone.rate_qps, values, color=ALONE_COLOR, lw=1.2)
                ax.scatter(alone.rate_qps[~over], values[~over], s=14, color=ALONE_COLOR,
                           zorder=3)
                ax.scatter(alone.rate_qps[over], values[over], s=14, facecolors="white",
                           edgecolors=ALONE_COLOR, zorder=3)
        for policy in policies:
            sel = data[data.policy == policy].sort_values("rate_qps")
            color = POLICY_COLORS[policy]
            over = (sel.max_load_high > 1.0).to_numpy()
            top.fill_between(sel.rate_qps, sel.p99_ttft_low_ms, sel.p99_ttft_high_ms,
                             color=color, alpha=0.15, lw=0)
            top.plot(sel.rate_qps, sel.p99_ttft_ms, color=color, lw=1.2)
            bottom.plot(sel.rate_qps, sel.cost_usd_per_1m_tok, color=color, lw=1.2)
            for ax, values in ((top, sel.p99_ttft_ms), (bottom, sel.cost_usd_per_1m_tok)):
                ax.scatter(sel.rate_qps[~over], values[~over], s=14, color=color, zorder=3)
                ax.scatter(sel.rate_qps[over], values[over], s=14, facecolors="white",
                           edgecolors=color, zorder=3)
        for limit, style in zip(limits_ms, limit_styles, strict=False):
            top.axhline(limit, color="black", lw=0.8, ls=style)
        top.set_yscale("log")
        # Plain milliseconds on the log axis (no 10³ notation), the limits among them.
        top.yaxis.set_major_locator(FixedLocator([20, 50, 100, 200, 500, 1000, 2000, 5000, 10000]))
        top.yaxis.set_major_formatter(StrMethodFormatter("{x:g}"))
        top.yaxis.set_minor_formatter(NullFormatter())
        top.set_title(f"1× H100 + {num_slow} × (2× RTX 4090)", fontsize=9)
        bottom.set_xlabel("offered rate (req/s)")
    axes[0, 0].set_ylabel("p99 TTFT (ms)")
    axes[1, 0].set_ylabel("cost (USD per 1M tokens)")
    handles = [Line2D([], [], color=POLICY_COLORS[p], lw=1.2, marker="o", markersize=4,
                      label=p) for p in policies]
    if len(alone):
        handles.append(Line2D([], [], color=ALONE_COLOR, lw=1.2, marker="o", markersize=4,
                              label="1× H100 alone"))
    handles += [Line2D([], [], color="black", lw=0.8, ls=style,
                       label=f"p99 TTFT {limit:g} ms")
                for limit, style in zip(limits_ms, limit_styles, strict=False)]
    handles.append(Line2D([], [], ls="none", marker="o", markersize=4, markerfacecolor="white",
                          markeredgecolor="black", label="a replica overloaded"))
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 5),
               bbox_to_anchor=(0.5, -0.01), frameon=False)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig
