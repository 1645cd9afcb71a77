"""Figures of the serving simulator's validation (``paper/figures/sim_validation.*``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import pyplot as plt
from matplotlib.lines import Line2D

from hgresearch.figures.style import COUNT_MARKERS, apply_style, color_for
from hgresearch.keys import hardware_label

#: Panel title and unit of each validated metric.
_PANELS = {"request_throughput_rps": ("request throughput", "req/s"),
           "output_throughput_tok_per_s": ("output throughput", "tok/s"),
           "mean_tpot_ms": ("mean TPOT", "ms"), "p50_ttft_ms": ("p50 TTFT", "ms"),
           "p90_ttft_ms": ("p90 TTFT", "ms"), "p99_ttft_ms": ("p99 TTFT", "ms")}


def sim_validation_figure(points: pd.DataFrame, goals_pct: dict[str, float],
                          mape_pct: dict[str, float],
                          noise_pct: dict[str, float] | None = None) -> plt.Figure:
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
