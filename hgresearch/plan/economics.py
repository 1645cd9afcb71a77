"""Cost and carbon of one replica-hour of a candidate configuration (from the catalogs).

Power is the TDP model of :mod:`hgresearch.accounting.energy` (every GPU at its TDP whenever the
replica is on: an upper bound), the one power figure behind both the electricity cost of owned
hardware and operational carbon. A GPU, region or scenario the catalogs do not hold is a
:class:`~hgresearch.data.catalogs.CatalogKeyError` naming the catalog and the planner's field.
"""

from __future__ import annotations

import math

import numpy as np

from hgresearch.data.catalogs import normalize_gpu_name
from hgresearch.plan.inputs import Candidate, CarbonSettings, PriceScenario


def replica_power_w(candidate: Candidate, tdp: str = "datasheet") -> float:
    """Power of one replica (W): its GPUs at the TDP assumption ``tdp``."""
    from hgresearch.accounting.energy import configuration_power_w, tdp_per_gpu_w

    per_gpu_w: float = tdp_per_gpu_w(normalize_gpu_name(candidate.gpu_name), tdp)
    return float(configuration_power_w(per_gpu_w, candidate.num_gpus))


def electricity_price_usd_per_kwh(region: str) -> float:
    """Retail electricity price of ``region``
    (``hgresearch/data/catalogs/electricity_prices.csv``)."""
    from hgresearch.data.catalogs import electricity_price_row

    return float(electricity_price_row(region).price_usd_per_kwh)


def price_usd_per_gpu_h(gpu_name: str, prices: PriceScenario, tdp: str = "datasheet") -> float:
    """What one GPU-hour costs under ``prices``; NaN when the GPU is not offered there."""
    from hgresearch.accounting.energy import kwh_per_h, tdp_per_gpu_w
    from hgresearch.data.catalogs import price_scenario_rows

    gpu = normalize_gpu_name(gpu_name)
    overrides = dict(prices.overrides_usd_per_gpu_h)
    if gpu in overrides:
        return float(overrides[gpu])
    if gpu in {normalize_gpu_name(g) for g in prices.owned_gpus}:
        power_w: float = tdp_per_gpu_w(gpu, tdp)
        return float(kwh_per_h(power_w) * electricity_price_usd_per_kwh(prices.electricity_region))
    table = price_scenario_rows(prices.scenario, field="prices")
    row = table[table.gpu_name == gpu]
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
    return np.full(hours, grid_intensity(carbon.grid_region))


def replica_embodied_g_per_h(candidate: Candidate, carbon: CarbonSettings) -> float:
    """Embodied g CO2e charged per hour a replica serves (0 for GPUs whose class the hardware
    scenario treats as sunk)."""
    from hgresearch.accounting.carbon import (
        SCENARIOS,
        embodied_g_per_serving_h,
        embodied_kg_per_gpu,
        gpu_class,
    )

    gpu = normalize_gpu_name(candidate.gpu_name)
    if gpu_class(gpu) in SCENARIOS[carbon.hardware_scenario]:  # validate() checked the scenario
        return 0.0
    kg = embodied_kg_per_gpu(gpu) * candidate.num_gpus
    return embodied_g_per_serving_h(kg, carbon.lifetime_years, carbon.utilisation)


def replica_carbon_g_per_h(candidate: Candidate, carbon: CarbonSettings,
                           hours: int) -> np.ndarray:
    """g CO2e of one replica-hour in every hour: power × grid intensity + embodied share."""
    from hgresearch.accounting.energy import kwh_per_h

    operational = kwh_per_h(replica_power_w(candidate, carbon.tdp)) \
        * grid_g_per_kwh_by_hour(carbon, hours)
    return operational + replica_embodied_g_per_h(candidate, carbon)
