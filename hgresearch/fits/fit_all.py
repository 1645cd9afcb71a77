"""Fit every model of a runs table at once (capacity per configuration, latency per
configuration and metric) — the object the SLO table, the validation and the figures use."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import pandas as pd

from hgresearch.fits.common import ConfigKey, ModelInputError, ModelWarning, config_groups
from hgresearch.fits.latency import DEFAULT_RHO_MAX, LatencyFit, fit_latency
from hgresearch.fits.saturation import (
    SaturationFit,
    Schedule,
    estimate_schedule,
    fit_saturations,
)

#: Latency metrics fitted by default (TTFT tail percentiles and TPOT).
DEFAULT_METRICS = ("p50_ttft_ms", "p90_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "p99_tpot_ms")


@dataclass
class ModelSet:
    """Fitted capacity and latency models of a runs table, plus the warnings they raised."""

    schedule: Schedule
    capacity: pd.DataFrame
    capacity_fits: dict[ConfigKey, SaturationFit]
    latency: pd.DataFrame
    latency_fits: dict[tuple[ConfigKey, str], LatencyFit]
    messages: list[str] = field(default_factory=list)


def fit_models(runs: pd.DataFrame, metrics: tuple[str, ...] = DEFAULT_METRICS,
               form: str = "loglinear", drain: str = "constant", rho_max: float = DEFAULT_RHO_MAX,
               schedule: Schedule | None = None) -> ModelSet:
    """Fit capacity for every configuration and latency for every (configuration, metric).

    Warnings are collected into ``messages`` (and re-emitted once as :class:`ModelWarning`);
    latency fits that cannot run (fewer than two runs below saturation) are skipped with a
    message, never silently.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ModelWarning)
        schedule = schedule or estimate_schedule(runs)
        capacity, cap_fits = fit_saturations(runs, schedule, drain)
        lat_fits: dict[tuple[ConfigKey, str], LatencyFit] = {}
        skipped: list[str] = []
        for key, group in config_groups(runs):
            if key not in cap_fits:
                continue
            for metric in metrics:
                if metric not in group or group[metric].isna().all():
                    skipped.append(f"{cap_fits[key].as_row()['configuration']}: no {metric}")
                    continue
                try:
                    lat_fits[(key, metric)] = fit_latency(
                        group, cap_fits[key].capacity_rps, metric, form, rho_max)
                except ModelInputError as err:
                    skipped.append(str(err))
    messages = [str(w.message) for w in caught if issubclass(w.category, ModelWarning)]
    messages += [f"skipped: {s}" for s in skipped]
    latency = pd.DataFrame([f.as_row() for f in lat_fits.values()])
    return ModelSet(schedule, capacity, cap_fits, latency, lat_fits, messages)
