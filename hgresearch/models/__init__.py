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

from hgresearch.models.capacity import (
    CapacityFit,
    Schedule,
    estimate_schedule,
    fit_capacities,
    fit_capacity,
)
from hgresearch.models.common import CONFIG_KEYS, ModelInputError, ModelWarning
from hgresearch.models.fit import DEFAULT_METRICS, ModelSet, fit_models
from hgresearch.models.latency import LatencyFit, fit_latency

__all__ = ["CONFIG_KEYS", "CapacityFit", "DEFAULT_METRICS", "LatencyFit", "ModelInputError",
           "ModelSet", "ModelWarning", "Schedule", "estimate_schedule", "fit_capacities",
           "fit_capacity", "fit_latency", "fit_models"]
