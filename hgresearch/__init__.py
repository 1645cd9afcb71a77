"""hgresearch: measurement and analysis toolkit for heterogeneous-GPU LLM inference.

The folders are the layers (:mod:`hgresearch.layers` declares their order): ``data`` (run
folders, ingest, catalogs) → ``traffic`` (arrivals, lengths, routing) → ``accounting`` (cost,
energy, carbon) → ``fits`` and ``sim`` (models, simulator) → ``plan`` (fleet planner) →
``report`` (tables, figures, audit, manuscript) → ``cli``; ``bench`` measures beside the stack.

The functions a notebook reaches for most are importable from here (``from hgresearch import
read_runs``); they are resolved lazily (PEP 562), so importing one module of the package does
not import the others.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: Public name -> the module that defines it.
_EXPORTS = {
    "read_runs": "hgresearch.data.ingest.runs",
    "select_repeats": "hgresearch.data.ingest.runs",
    "reference_dir": "hgresearch.data.reference",
    "read_requests": "hgresearch.data.runfolder",
    "hardware_label": "hgresearch.identity",
    "write_table": "hgresearch.report.writers",
    "write_frame": "hgresearch.report.writers",
    "save_figure": "hgresearch.report.figures.style",
    "simulate_fleet": "hgresearch.sim.fleet",
    "calibrations": "hgresearch.sim.run",
}
__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'hgresearch' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
