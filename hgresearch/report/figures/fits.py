"""Figures of the fitted models (one function per figure, each returns the Figure).

Every number drawn comes from :mod:`hgresearch.fits`; nothing is computed here beyond
evaluating fitted curves on a grid.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from hgresearch.fits.common import CONFIG_KEYS, config_label
from hgresearch.fits.fit_all import ModelSet
from hgresearch.fits.scaling import usl_throughput
from hgresearch.report.figures.style import COUNT_MARKERS, apply_style, color_for


def _panels(n: int, width: float = 3.2, height: float = 2.6,
            max_cols: int = 4) -> tuple[Figure, list[Axes]]:
    cols = min(max(n, 1), max_cols)
    rows = math.ceil(max(n, 1) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def _selected(models: ModelSet, model: str | None,
              configurations: list[str] | None) -> list[tuple[object, ...]]:
    keys = []
    for key, fit in models.capacity_fits.items():
        label = config_label(fit.config)
        if model and fit.config["model"] != model:
            continue
        if configurations and label not in configurations:
            continue
        keys.append(key)
    return keys


def _runs_of(runs: pd.DataFrame, key: tuple[object, ...]) -> pd.DataFrame:
    mask = np.ones(len(runs), bool)
    for column, value in zip(CONFIG_KEYS, key, strict=True):
        mask &= (runs[column] == value).to_numpy()
    return runs[mask]


def capacity_fits_figure(runs: pd.DataFrame, models: ModelSet, model: str | None = None,
                         configurations: list[str] | None = None) -> Figure:
    """Achieved against offered rate per configuration: runs, fitted fixed-count curve, the
    curves at the ends of the capacity interval (band) and the steady-state capacity."""
    apply_style()
    keys = _selected(models, model, configurations)
    fig, axes = _panels(len(keys))
    for ax, key in zip(axes, keys, strict=False):
        fit = models.capacity_fits[key]
        data = _runs_of(runs, key)
        n = float(data.num_prompts.median())
        grid = np.geomspace(max(0.5, data.request_rate_qps.min() / 2),
                            data.request_rate_qps.max() * 2, 120)
        color = color_for(fit.config["gpu_name"])
        ax.plot(grid, grid, color="0.7", lw=0.8, ls=":", label="offered")
        ax.plot(grid, fit.predict_throughput_rps(grid, n), color=color, label="fit (N runs)")
        lows: list[np.ndarray] = []
        highs: list[np.ndarray] = []
        for mu in (fit.capacity_low_rps, fit.capacity_high_rps):
            if math.isfinite(mu):
                other = type(fit)(**{**fit.__dict__, "capacity_rps": mu})
                (lows if mu < fit.capacity_rps else highs).append(
                    other.predict_throughput_rps(grid, n))
        if lows or highs:
            lo = lows[0] if lows else fit.predict_throughput_rps(grid, n)
            # no upper bound on μ: the envelope is the arrival-limited curve (μ → ∞)
            unbounded = type(fit)(**{**fit.__dict__, "capacity_rps": 1e12})
            hi = highs[0] if highs else unbounded.predict_throughput_rps(grid, n)
            ax.fill_between(grid, lo, hi, color=color, alpha=0.2, lw=0,
                            label="95 % interval of μ")
        ax.axhline(fit.capacity_rps, color=color, ls="--", lw=0.8,
                   label=f"μ = {fit.capacity_rps:.1f} req/s"
                   + (" (lower bound)" if fit.capacity_is_lower_bound else ""))
        ax.scatter(data.request_rate_qps, data.request_throughput_rps, color=color, s=16,
                   zorder=3, label="runs")
        ax.set_xscale("log", base=2)
        ax.set_title(config_label(fit.config).replace(" on ", "\n"), fontsize=8)
        ax.set_xlabel("offered rate (req/s)")
        ax.set_ylabel("achieved (req/s)")
        ax.set_ylim(0, max(data.request_throughput_rps.max(), fit.capacity_rps) * 1.3)
        ax.legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    return fig


def capacity_summary_figure(capacity: pd.DataFrame) -> Figure:
    """Fitted capacity (tokens/s) with its 95 % interval for every configuration."""
    apply_style()
    data = capacity.sort_values(["model", "gpu_name", "gpu_count"]).reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(8.4, 0.28 * len(data) + 1.0))
    y = np.arange(len(data))
    for i, row in data.iterrows():
        color = color_for(row.gpu_name)
        high = row.capacity_high_tok_per_s
        hi = high if math.isfinite(high) else row.capacity_tok_per_s * 1.5
        ax.plot([row.capacity_low_tok_per_s, hi], [i, i], color=color, lw=2, alpha=0.5)
        ax.scatter(row.capacity_tok_per_s, i, color=color if not row.capacity_is_lower_bound
                   else "white", edgecolor=color, zorder=3, s=22,
                   marker=COUNT_MARKERS.get(int(row.gpu_count), "o"))
        if not math.isfinite(high):
            ax.annotate("→", (hi, i), va="center", fontsize=8, color=color)
    ax.set_yticks(y, data.configuration, fontsize=6.5)
    ax.set_xlabel("capacity (input + output tokens/s); hollow = lower bound")
    ax.invert_yaxis()
    handles = [Line2D([], [], color=color_for(gpu), marker="o", lw=2, alpha=0.8, label=gpu)
               for gpu in sorted(data.gpu_name.unique())]
    handles.append(Line2D([], [], color="0.4", marker="o", markerfacecolor="white", lw=2,
                          label="lower bound (capacity not reached)"))
    # the marker shape is the GPU count: say so, one entry per count shown
    handles += [Line2D([], [], color="0.4", marker=COUNT_MARKERS.get(count, "o"), lw=0,
                       label=f"{count} GPU{'s' if count > 1 else ''}")
                for count in sorted({int(c) for c in data.gpu_count})]
    # beside the axes: inside, every corner hides some configuration's point or interval
    ax.legend(handles=handles, fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              title="dot: fitted capacity, bar: 95 % interval", title_fontsize=6.5)
    fig.tight_layout()
    return fig


def latency_fits_figure(runs: pd.DataFrame, models: ModelSet,
                        metrics: str | list[str] = "p90_ttft_ms", model: str | None = None,
                        configurations: list[str] | None = None) -> Figure:
    """Latency against offered rate, one row per metric and one column per configuration:
    runs used (filled) and excluded as saturated (hollow), fitted curve and the 95 % band of
    its mean; an invalid fit (latency falling with load) is drawn dashed."""
    apply_style()
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    keys = _selected(models, model, configurations)
    cols = max(len(keys), 1)
    # one offered-rate axis per configuration column, labelled under its bottom panel
    fig, grid_axes = plt.subplots(len(metrics), cols, figsize=(3.2 * cols, 2.5 * len(metrics)),
                                  squeeze=False, sharex="col")
    for row, metric in enumerate(metrics):
        for col, key in enumerate(keys):
            ax = grid_axes[row][col]
            lat = models.latency_fits.get((key, metric))
            cap = models.capacity_fits[key]
            data = _runs_of(runs, key)
            color = color_for(cap.config["gpu_name"])
            if lat is not None:
                top = min(cap.capacity_rps * 0.99, data.request_rate_qps.max())
                grid = np.linspace(0.02 * cap.capacity_rps, top, 120)
                pred = lat.predict(grid)
                ax.plot(grid, pred["mean"], color=color, ls="-" if lat.valid else "--",
                        label=f"{lat.form} fit" + ("" if lat.valid else " (invalid)"))
                if pred["mean_low"].notna().any():
                    ax.fill_between(grid, pred["mean_low"].clip(lower=1e-3), pred["mean_high"],
                                    color=color, alpha=0.2, lw=0, label="95 % band (mean)")
                used = (data.request_rate_qps / cap.capacity_rps
                        < lat.rho_max_fitted + 1e-9)
            else:
                used = np.zeros(len(data), bool)
            ax.scatter(data.request_rate_qps[used], data[metric][used], color=color, s=14,
                       zorder=3, label="fitted runs")
            ax.scatter(data.request_rate_qps[~used], data[metric][~used], facecolor="white",
                       edgecolor=color, s=14, zorder=3, label="saturated (not fitted)")
            ax.set_yscale("log")
            if row == 0:
                ax.set_title(config_label(cap.config).replace(" on ", "\n"), fontsize=8)
            if row == len(metrics) - 1:
                ax.set_xlabel("offered rate (req/s)")
            ax.set_ylabel(metric.replace("_ms", " (ms)"))
            if row == 0 and col == 0:
                ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def scaling_figure(points: pd.DataFrame, summary: pd.DataFrame) -> Figure:
    """Capacity against GPU count (runs and pooled USL / Amdahl fits) and per-GPU efficiency."""
    apply_style()
    fig, (ax, ax_eff) = plt.subplots(1, 2, figsize=(9.0, 3.4))
    styles = {"usl": "-", "amdahl": "--"}
    palette = plt.get_cmap("tab10")
    for i, (model, part) in enumerate(points.groupby("model", sort=True)):
        color = palette(i)
        gpu = part.gpu_name.iloc[0]
        ax.scatter(part.gpu_count, part.observed, color=color, zorder=3, s=18, label=model)
        grid = np.linspace(1, max(8, part.gpu_count.max()), 60)
        for form, ls in styles.items():
            row = summary[(summary.gpu_name == gpu) & (summary.form == form)]
            if row.empty or f"fitted_{form}" not in part:
                continue
            sigma, kappa = float(row.sigma.iloc[0]), float(row.kappa.iloc[0])
            first = part.iloc[0]
            x1 = first[f"fitted_{form}"] / float(usl_throughput(first.gpu_count, 1.0, sigma,
                                                                kappa))
            ax.plot(grid, usl_throughput(grid, x1, sigma, kappa), color=color, ls=ls, lw=1)
            ax_eff.plot(grid, usl_throughput(grid, 1.0, sigma, kappa) / grid, color="0.3",
                        ls=ls, lw=1)
        if "observed_efficiency_per_gpu" in part:
            ax_eff.scatter(part.gpu_count, part.observed_efficiency_per_gpu, color=color, s=18)
    ax.set_xlabel("GPUs (tensor parallel)")
    column = str(points.capacity_column.iloc[0])
    unit = ("tokens/s" if column.endswith("_tok_per_s")
            else "requests/s" if column.endswith("_rps") else column)
    ax.set_ylabel(f"capacity ({unit}, {column})")
    ax.set_xscale("log", base=2)
    ax.legend(fontsize=6, title="solid: USL, dashed: Amdahl", title_fontsize=6)
    ax_eff.set_xscale("log", base=2)
    ax_eff.set_xlabel("GPUs (tensor parallel)")
    ax_eff.set_ylabel("per-GPU efficiency X(n) / (n·X₁)")
    ax_eff.set_ylim(0, 1.2)
    fig.tight_layout()
    return fig


def pareto_figure(curves: pd.DataFrame, frontier: pd.DataFrame, model: str,
                  metric: str = "p90_ttft_ms") -> Figure:
    """Cost per 1M tokens against predicted tail latency along each configuration's load
    range, and the Pareto frontier over them."""
    apply_style()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    part = curves[(curves.model == model) & (curves.metric == metric)]
    for label, one in part.groupby("configuration", sort=True):
        row = one.iloc[0]
        ax.plot(one.latency_ms, one.cost_usd_per_1m_tok, color=color_for(row.gpu_name),
                marker=COUNT_MARKERS.get(int(row.gpu_count), "o"), markevery=10, ms=4,
                lw=1, label=label.split(" on ")[1])
    front = frontier[(frontier.model == model) & (frontier.metric == metric)]
    # a point stays optimal until a cheaper one appears at a higher latency: a step
    ax.step(front.latency_ms, front.cost_usd_per_1m_tok, where="post", color="black", lw=2.2,
            alpha=0.35, label="Pareto frontier")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"predicted {metric.replace('_ms', '')} (ms)")
    ax.set_ylabel("cost per 1M tokens (USD)")
    ax.set_title(model, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def roofline_figure(roofline: pd.DataFrame) -> Figure:
    """Achieved / bound for every run: decode (bandwidth/compute bound at the run's batch),
    prefill (compute bound on TTFT) and decode at the KV-cache-limited ceiling."""
    apply_style()
    data = roofline.sort_values(["gpu_name", "model", "gpu_count", "request_rate_qps"])
    labels = [f"{r.model} {r.gpu_count}x{r.gpu_name}" for r in data.itertuples()]
    order = list(dict.fromkeys(labels))
    x = np.array([order.index(label) for label in labels], float)
    fig, axes = plt.subplots(3, 1, figsize=(9.0, 7.5), sharex=True)
    for ax, column, title in zip(
            axes, ["decode_ratio", "prefill_ratio", "ceiling_ratio"],
            ["decode tokens/s ÷ bound at the run's batch (Little's law)",
             "prefill bound ÷ mean TTFT",
             "decode tokens/s ÷ ceiling (largest batch the KV cache holds)"], strict=True):
        jitter = (data.request_rate_qps.rank(method="dense").to_numpy() - 3) * 0.08
        for gpu in sorted(data.gpu_name.unique()):
            mine = (data.gpu_name == gpu).to_numpy()
            ax.scatter((x + jitter)[mine], data[column][mine], color=color_for(gpu), s=10,
                       label=gpu)
        ax.axhline(1.0, color="crimson", lw=1)
        ax.set_ylim(0, 1.1)
        ax.set_ylabel("achieved / bound")
        ax.set_title(title, fontsize=8.5)
    axes[-1].set_xticks(range(len(order)), order, rotation=90, fontsize=6)
    axes[-1].set_xlabel("configuration (points left to right: rising offered rate)")
    n_bad = int(roofline.exceeds_bound.sum())
    fig.suptitle(f"{len(roofline)} runs; {n_bad} above their bound", fontsize=9)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper right", frameon=False, fontsize=7,
               ncol=len(labels))
    fig.tight_layout()
    return fig


def validation_figure(predictions: pd.DataFrame) -> Figure:
    """Held-out prediction against measurement: throughput (±10 %) and TTFT p90 (±25 %)."""
    apply_style()
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.8))
    pairs = [("throughput_obs_rps", "throughput_pred_rps", 0.10, "achieved throughput (req/s)"),
             ("ttft_obs_ms", "ttft_pred_ms", 0.25, "TTFT p90 (ms)")]
    for ax, (obs, pred, tol, label) in zip(axes, pairs, strict=True):
        if obs not in predictions:
            ax.set_visible(False)
            continue
        data = predictions.dropna(subset=[obs, pred])
        data = data[data[pred] > 0]
        # "<model> on <n>x <GPU>" -> the GPU, one colour (and legend entry) each
        gpus = data.configuration.str.split(" on ").str[1].str.split().str[-1]
        for gpu in sorted(gpus.unique()):
            ax.scatter(data[obs][gpus == gpu], data[pred][gpus == gpu], color=color_for(gpu),
                       s=12, label=f"{gpu} (held-out run)")
        lo = float(min(data[obs].min(), data[pred].min())) * 0.8
        hi = float(max(data[obs].max(), data[pred].max())) * 1.2
        grid = np.geomspace(lo, hi, 10)
        ax.plot(grid, grid, color="0.3", lw=0.8, label="prediction = measurement")
        ax.fill_between(grid, grid * (1 - tol), grid * (1 + tol), color="0.5", alpha=0.15,
                        lw=0, label=f"±{tol:.0%}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"measured {label}")
        ax.set_ylabel(f"predicted (left out) {label}")
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig

