"""Figures of the reproduction audit (:mod:`hgresearch.report.audit`)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from hgresearch.report.audit.comparisons import MATCHED_ALL_RATES
from hgresearch.report.audit.definitions import RATIO_CLAIMS
from hgresearch.report.figures.style import COUNT_MARKERS, apply_style

#: y axis of each ratio claim's panel (columns of
#: :func:`hgresearch.report.audit.comparisons.comparisons`).
RATIO_Y_LABELS = {
    "throughput_ratio": "tokens/s, 4090 config / H100 (ratio)",
    "cost_reduction": "1 − cost per token 4090 / H100 (fraction)",
    "tok_per_usd_ratio": "tokens per USD, 4090 config / H100 (ratio)",
}


def ratio_claims_figure(comparisons: pd.DataFrame) -> Figure:
    """RTX 4090 / H100 at matched offered load: throughput ratio, cost reduction and
    throughput-per-dollar ratio per model and 4090 count, with the paper's claimed ranges (one
    panel per ratio claim)."""
    apply_style()
    data = comparisons[comparisons.definition == MATCHED_ALL_RATES]
    fig, axes = plt.subplots(1, 3, figsize=(10.5, 3.4))
    palette = plt.get_cmap("tab10")
    models = sorted(data.model.unique())
    for ax, (claim_id, claim, kind, low, high) in zip(axes, RATIO_CLAIMS, strict=True):
        for (model, count), part in data.groupby(["model", "gpu_count"], sort=True):
            ax.plot(part.qps, part[kind], color=palette(models.index(model)),
                    marker=COUNT_MARKERS.get(int(count), "o"), ms=4, lw=1,
                    label=f"{model.replace('DeepSeek-R1-Distill-', 'R1-')} {count}x")
        ax.axhspan(low if low is not None else 0.0, high, color="gold", alpha=0.25,
                   label="paper's claim")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("offered rate (req/s)")
        ax.set_ylabel(RATIO_Y_LABELS[kind])
        ax.set_title(f"{claim_id}: {claim}", fontsize=8.5)
    axes[-1].legend(fontsize=5.5, ncol=1, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    return fig
