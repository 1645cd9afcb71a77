"""Fitted cost-performance models of LLM serving configurations.

* :mod:`~hgresearch.models.capacity` — requests/s a configuration sustains (fixed-count runs);
* :mod:`~hgresearch.models.latency` — tail latency against utilisation;
* :mod:`~hgresearch.models.scaling` — tensor-parallel scaling (USL, Amdahl);
* :mod:`~hgresearch.models.slo` — capacity and cost per token under a latency SLO, Pareto
  frontier;
* :mod:`~hgresearch.models.roofline` — physical bounds from the hardware/model catalogs;
* :mod:`~hgresearch.models.validation` — leave-one-QPS-out prediction error;
* :mod:`~hgresearch.models.audit` — the paper's headline ratios under each definition;
* :mod:`~hgresearch.models.uncertainty` — run-to-run spread and bootstrap intervals;
* :mod:`~hgresearch.models.cache` — results cached by a hash of their inputs.

See ``docs/models.md``.
"""

import importlib
from typing import Any

#: Public names, resolved lazily (PEP 562) so that ``hgresearch --help`` does not import
#: scipy and statsmodels just because the ``models`` sub-command is registered.
_EXPORTS = {
    "CapacityFit": "capacity", "Schedule": "capacity", "estimate_schedule": "capacity",
    "fit_capacities": "capacity", "fit_capacity": "capacity",
    "CONFIG_KEYS": "common", "ModelInputError": "common", "ModelWarning": "common",
    "DEFAULT_METRICS": "fit", "ModelSet": "fit", "fit_models": "fit",
    "LatencyFit": "latency", "fit_latency": "latency",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"hgresearch.models.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'hgresearch.models' has no attribute {name!r}")
