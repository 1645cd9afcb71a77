"""Shared figure style and deterministic saving (PNG + vector PDF, no timestamps)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")  # headless and deterministic; notebooks still display the returned figure
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from hgresearch.report.figures.layout import FigureLayoutWarning, layout_problems  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

#: Colour per normalized GPU name, shared by every figure.
GPU_COLORS = {
    "H100-PCIe": "#1f4e79",
    "H100-SXM": "#2e75b6",
    "H200": "#5b9bd5",
    "A100-SXM": "#7f7f7f",
    "A100-PCIe": "#a5a5a5",
    "L40S": "#70ad47",
    "RTX-5090": "#ff7f0e",
    "RTX-4090": "#c55a11",
    "RTX-3090": "#f4b183",
    "CPU": "#595959",
}
#: Line style per GPU count of a configuration.
COUNT_MARKERS = {1: "o", 2: "s", 4: "^", 8: "D"}
#: Shade of a GPU's colour per GPU count (see :func:`color_for`).
COUNT_SHADES = {1: 0.55, 2: 0.25, 4: -0.15, 8: -0.5}

RC: dict[RcKeyType, Any] = {
    "figure.figsize": (6.4, 4.0),
    "figure.dpi": 100,
    "savefig.dpi": 150,
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 7.5,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "pdf.fonttype": 42,
    "svg.hashsalt": "hgresearch",
    "path.simplify": False,
}


def apply_style() -> None:
    """Set the shared matplotlib style (idempotent)."""
    plt.rcParams.update(RC)


def color_for(gpu_name: str, gpu_count: int | None = None) -> str:
    """Colour of a GPU type; with ``gpu_count``, a darker shade for larger configurations so
    that 2x/4x/8x of one GPU stay distinguishable."""
    from matplotlib.colors import to_hex, to_rgb

    base = GPU_COLORS.get(gpu_name, "#333333")
    if gpu_count is None:
        return base
    # Light to dark with the GPU count, in steps large enough to tell 4 from 8 GPUs apart
    # (positive: mixed towards white, negative: towards black).
    shade = COUNT_SHADES.get(int(gpu_count), 0.0)
    rgb = to_rgb(base)
    mixed = [c + (1 - c) * shade if shade > 0 else c * (1 + shade) for c in rgb]
    return to_hex((mixed[0], mixed[1], mixed[2]))


def save_figure(fig: Figure, stem: str | Path, check_layout: bool = True) -> list[Path]:
    """Save ``<stem>.png`` and ``<stem>.pdf`` without dates or software versions, so the same
    figure gives the same bytes every time. Returns the paths.

    With ``check_layout``, warns (:class:`~hgresearch.report.figures.layout.FigureLayoutWarning`)
    when labels overlap, an annotation leaves its axes or a legend covers data."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    png = stem.with_suffix(".png")
    pdf = stem.with_suffix(".pdf")
    fig.savefig(png, metadata={"Software": None}, bbox_inches="tight")
    fig.savefig(pdf, metadata={"CreationDate": None, "ModDate": None, "Producer": None,
                               "Creator": None}, bbox_inches="tight")
    if check_layout:
        problems = layout_problems(fig)
        if problems:
            warnings.warn(f"{png.name}: " + "; ".join(problems), FigureLayoutWarning,
                          stacklevel=2)
    return [png, pdf]
