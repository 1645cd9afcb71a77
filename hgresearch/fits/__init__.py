"""Fitted cost-performance models of LLM serving configurations.

* :mod:`~hgresearch.fits.saturation` — the saturating throughput fit: requests/s a configuration
  sustains (fixed-count runs; ``fit_saturation``, ``SaturationFit``);
* :mod:`~hgresearch.fits.latency` — tail latency against utilisation;
* :mod:`~hgresearch.fits.scaling` — tensor-parallel scaling (USL, Amdahl);
* :mod:`~hgresearch.fits.slo` — latency targets, cost against tail latency along the fitted
  curves and its Pareto frontier;
* :mod:`~hgresearch.fits.roofline` — physical bounds from the hardware/model catalogs;
* :mod:`~hgresearch.fits.validation` — leave-one-QPS-out prediction error of the fits
  (``fitted_leave_one_qps_out``, ``fitted_validation_table``);
* :mod:`~hgresearch.fits.uncertainty` — run-to-run spread and bootstrap intervals;
* :mod:`~hgresearch.cache` — results cached by a hash of their inputs.

See ``docs/models.md``.
"""

import importlib
from typing import Any

#: Public names, resolved lazily (PEP 562) so that ``hgresearch --help`` does not import
#: scipy and statsmodels just because the ``models`` sub-command is registered.
_EXPORTS = {
    "SaturationFit": "saturation", "Schedule": "saturation", "estimate_schedule": "saturation",
    "fit_saturations": "saturation", "fit_saturation": "saturation",
    "CONFIG_KEYS": "common", "ModelInputError": "common", "ModelWarning": "common",
    "DEFAULT_METRICS": "fit_all", "ModelSet": "fit_all", "fit_models": "fit_all",
    "LatencyFit": "latency", "fit_latency": "latency",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"hgresearch.fits.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'hgresearch.fits' has no attribute {name!r}")
