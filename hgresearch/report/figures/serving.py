"""Figures of our own served sweeps (e.g. the committed CPU sweep): load vs achieved rate,
the client's TTFT beside the server's, and per-request latency distributions."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.artist import Artist
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from hgresearch.accounting.crosscheck import ecdf_band
from hgresearch.report.figures.style import apply_style, color_for

#: Axis label of each per-request latency column.
LATENCY_LABELS = {"ttft_ms": "time to first token (ms)",
                  "tpot_ms": "time per output token (ms)",
                  "e2el_ms": "end-to-end latency (ms)"}


def achieved_vs_offered(runs: pd.DataFrame, title: str) -> Figure:
    """Offered QPS (log2) vs achieved requests/s (left) and output tokens/s (right): every
    repeat as a dot, the mean over repeats as a line, the ideal line dashed."""
    apply_style()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.0, 3.6))
    rates = np.sort(runs.request_rate_qps.unique())
    left.plot(rates, rates, color="#999999", linestyle="--", linewidth=1,
              label="ideal (achieved = offered)")
    for hw, data in runs.groupby("hardware", sort=True):
        color = color_for(str(data.gpu_name.iloc[0]))
        means = data.groupby("request_rate_qps").mean(numeric_only=True).sort_index()
        for ax, column in ((left, "request_throughput_rps"),
                           (right, "output_throughput_tok_per_s")):
            ax.plot(means.index, means[column], color=color, label=f"{hw} (mean)")
            ax.scatter(data.request_rate_qps, data[column], color=color, s=12, alpha=0.6,
                       label=f"{hw} (each repeat)", zorder=3)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(rates, [f"{r:g}" for r in rates])
        ax.set_xlabel("offered request rate (QPS, log₂)")
    left.set_ylabel("achieved request rate (requests/s)")
    right.set_ylabel("output throughput (tokens/s)")
    left.legend(frameon=False, loc="upper left")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def client_vs_server_ttft(crosscheck: pd.DataFrame, title: str) -> Figure:
    """TTFT p50/p99 per offered QPS as the client saw it and as the server's histogram has it
    (``crosscheck`` from :func:`hgresearch.accounting.crosscheck.server_crosscheck`; mean over
    repeats)."""
    apply_style()
    means = crosscheck.groupby("request_rate_qps").mean(numeric_only=True).sort_index()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    styles = {"p50_ttft_ms": ("client p50", "#1f4e79", "-"),
              "p99_ttft_ms": ("client p99", "#1f4e79", ":"),
              "server_p50_ttft_ms": ("server p50 (histogram)", "#c55a11", "-"),
              "server_p99_ttft_ms": ("server p99 (histogram)", "#c55a11", ":")}
    for column, (label, color, linestyle) in styles.items():
        ax.plot(means.index, means[column], label=label, color=color, linestyle=linestyle,
                marker="o", markersize=4)
    ax.set_xscale("log", base=2)
    ax.set_xticks(means.index, [f"{r:g}" for r in means.index])
    ax.set_yscale("log")
    ax.set_xlabel("offered request rate (QPS, log₂)")
    ax.set_ylabel("time to first token (ms)")
    ax.set_title(title)
    ax.legend(frameon=False)
    fig.tight_layout()
    return fig


def latency_ecdf_per_qps(requests: pd.DataFrame, title: str,
                         columns: tuple[str, ...] = ("ttft_ms", "tpot_ms"),
                         slo_ms: dict[str, float] | None = None,
                         confidence: float = 0.95) -> Figure:
    """Empirical CDF of each per-request latency per offered QPS (repeats pooled), log x, with
    the simultaneous ``confidence`` band of each curve (DKW,
    :func:`hgresearch.accounting.crosscheck.ecdf_band`)
    and optional latency targets (``slo_ms``: column -> ms) as vertical lines.

    ``requests`` comes from :func:`hgresearch.accounting.crosscheck.requests_of_runs`.
    """
    apply_style()
    rates = sorted(requests.request_rate_qps.unique())
    # viridis without its pale yellow end, which is hard to see on white
    palette = dict(zip(rates, sns.color_palette("viridis", len(rates) + 1)[:len(rates)],
                       strict=True))
    fig, axes = plt.subplots(1, len(columns), figsize=(4.6 * len(columns), 4.2), squeeze=False)
    counts = requests.groupby("request_rate_qps").size()
    for ax, column in zip(axes[0], columns, strict=True):
        data = requests.dropna(subset=[column])
        sns.ecdfplot(data=data, x=column, hue="request_rate_qps", palette=palette,
                     log_scale=True, legend=False, linewidth=1.2, ax=ax)
        for rate, part in data.groupby("request_rate_qps", sort=True):
            x, _, low, high = ecdf_band(part[column], confidence)
            ax.fill_between(x, low, high, step="post", color=palette[rate], alpha=0.15,
                            linewidth=0)
        target = (slo_ms or {}).get(column)
        if target is not None:
            ax.axvline(target, color="black", linewidth=0.8, linestyle=":")
        ax.set_xlabel(LATENCY_LABELS.get(column, column) + ", log scale")
        ax.set_ylabel("fraction of requests at or below x")
        ax.set_ylim(0, 1.02)
    handles: list[Artist] = [Line2D([], [], color=palette[rate], linewidth=1.2,
                      label=f"{rate:g} QPS ({counts[rate]} requests)") for rate in rates]
    handles.append(Patch(color="0.6", alpha=0.3,
                         label=f"{confidence:.0%} band (DKW, per curve)"))
    if slo_ms:
        handles.append(Line2D([], [], color="black", linewidth=0.8, linestyle=":",
                              label="latency target"))
    # under the panels: inside one it would cover the curves of some rate
    fig.legend(handles=handles, frameon=False, loc="lower center", fontsize=7,
               ncol=min(len(handles), 4))
    fig.suptitle(title)
    legend_rows = -(-len(handles) // 4)
    fig.tight_layout(rect=(0, (0.2 * legend_rows + 0.1) / fig.get_figheight(), 1, 1))
    return fig
