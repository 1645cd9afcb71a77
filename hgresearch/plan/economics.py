"""Cost and carbon of one replica-hour of a candidate configuration (from the catalogs).

Power is the TDP model of :mod:`hgresearch.accounting.energy` (every GPU at its TDP whenever the
replica
is on: an upper bound), the one power figure behind both the electricity cost of owned
hardware and operational carbon.
"""

from __future__ import annotations

import math

import numpy as np

from hgresearch.errors import InputError
from hgresearch.plan.inputs import Candidate, CarbonSettings, PriceScenario


def _gpu(gpu_name: str) -> str:
    from hgresearch.data.catalogs import normalize_gpu_name

    try:
        return normalize_gpu_name(gpu_name)
    except KeyError:
        raise InputError(f"unknown GPU {gpu_name!r} (add it to hgresearch/data/catalogs/"
                         "hardware.csv)", field="gpu_name") from None


def replica_power_w(candidate: Candidate, tdp: str = "datasheet") -> float:
    """Power of one replica (W): its GPUs at the TDP assumption ``tdp``."""
    from hgresearch.accounting.energy import configuration_power_w, tdp_per_gpu_w

    return float(configuration_power_w(tdp_per_gpu_w(_gpu(candidate.gpu_name), tdp),
                                       candidate.num_gpus))


def electricity_price_usd_per_kwh(region: str) -> float:
    """Retail electricity price of ``region``
    (``hgresearch/data/catalogs/electricity_prices.csv``)."""
    from hgresearch.data.catalogs import catalog_path, electricity_price_catalog

    table = electricity_price_catalog()
    row = table[table.region == region]
    if row.empty:
        raise InputError(f"no electricity price for region {region!r} (known: "
                         f"{list(table.region)}; add one to "
                         f"{catalog_path('electricity_prices.csv')})",
                         field="electricity_region")
    return float(row.price_usd_per_kwh.iloc[0])


def price_usd_per_gpu_h(gpu_name: str, prices: PriceScenario, tdp: str = "datasheet") -> float:
    """What one GPU-hour costs under ``prices``; NaN when the GPU is not offered there."""
    from hgresearch.accounting.energy import kwh_per_h, tdp_per_gpu_w
    from hgresearch.data.catalogs import price_catalog

    gpu = _gpu(gpu_name)
    overrides = dict(prices.overrides_usd_per_gpu_h)
    if gpu in overrides:
        return float(overrides[gpu])
    if gpu in {_gpu(g) for g in prices.owned_gpus}:
        return float(kwh_per_h(tdp_per_gpu_w(gpu, tdp))
                     * electricity_price_usd_per_kwh(prices.electricity_region))
    table = price_catalog()
    if prices.scenario not in set(table.scenario):
        raise InputError(f"unknown price scenario {prices.scenario!r}; known: "
                         f"{sorted(set(table.scenario))} (or name owned GPUs)",
                         field="prices")
    row = table[(table.scenario == prices.scenario) & (table.gpu_name == gpu)]
    return float(row.price_usd_per_gpu_h.iloc[0]) if not row.empty else math.nan


def replica_cost_usd_per_h(candidate: Candidate, prices: PriceScenario,
                           tdp: str = "datasheet") -> float:
    """What one replica costs per hour (every GPU of it); NaN when not offered."""
    from hgresearch.accounting.costs import hourly_cost_usd

    return float(hourly_cost_usd(candidate.num_gpus,
                                 price_usd_per_gpu_h(candidate.gpu_name, prices, tdp)))


def grid_g_per_kwh_by_hour(carbon: CarbonSettings, hours: int) -> np.ndarray:
    """Grid intensity of every hour: the hourly profile, else the region's constant."""
    from hgresearch.accounting.carbon import grid_intensity

    if carbon.hourly_g_per_kwh is not None:
        return np.asarray(carbon.hourly_g_per_kwh, dtype=float)
    try:
        return np.full(hours, grid_intensity(carbon.grid_region))
    except KeyError as err:
        raise InputError(str(err.args[0]), field="grid_region") from None


def replica_embodied_g_per_h(candidate: Candidate, carbon: CarbonSettings) -> float:
    """Embodied g CO2e charged per hour a replica serves (0 for GPUs whose class the hardware
    scenario treats as sunk)."""
    from hgresearch.accounting.carbon import (
        SCENARIOS,
        embodied_g_per_serving_h,
        embodied_kg_per_gpu,
        gpu_class,
    )

    gpu = _gpu(candidate.gpu_name)
    try:
        if gpu_class(gpu) in SCENARIOS[carbon.hardware_scenario]:
            return 0.0
        kg = embodied_kg_per_gpu(gpu) * candidate.num_gpus
    except KeyError as err:
        raise InputError(str(err.args[0]), field="gpu_name") from None
    return embodied_g_per_serving_h(kg, carbon.lifetime_years, carbon.utilisation)


def replica_carbon_g_per_h(candidate: Candidate, carbon: CarbonSettings,
                           hours: int) -> np.ndarray:
    """g CO2e of one replica-hour in every hour: power × grid intensity + embodied share."""
    from hgresearch.accounting.energy import kwh_per_h

    operational = kwh_per_h(replica_power_w(candidate, carbon.tdp)) \
        * grid_g_per_kwh_by_hour(carbon, hours)
    return operational + replica_embodied_g_per_h(candidate, carbon)
