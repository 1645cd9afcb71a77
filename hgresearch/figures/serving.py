"""Figures of our own served sweeps (e.g. the committed CPU sweep): load vs achieved rate,
and the client's TTFT beside the server's."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from hgresearch.figures.style import apply_style, color_for


def achieved_vs_offered(runs: pd.DataFrame, title: str) -> plt.Figure:
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


def client_vs_server_ttft(crosscheck: pd.DataFrame, title: str) -> plt.Figure:
    """TTFT p50/p99 per offered QPS as the client saw it and as the server's histogram has it
    (``crosscheck`` from :func:`hgresearch.serving.server_crosscheck`; mean over repeats)."""
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
