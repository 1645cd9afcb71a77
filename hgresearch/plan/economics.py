"""Cost and carbon of one replica-hour of a candidate configuration (from the catalogs).

Power is the TDP model of :mod:`hgresearch.accounting.energy` (every GPU at its TDP whenever the
replica is on: an upper bound), the one power figure behind both the electricity cost of owned
hardware and operational carbon. A GPU, region or scenario the catalogs do not hold is a
:class:`~hgresearch.data.catalogs.CatalogKeyError` naming the catalog and the planner's field.

Hardware the catalogs do not price or power (a user's calibration file: an H200, a CPU, a GPU
outside ``hardware.csv``) gets its price per GPU-hour from ``PriceScenario.overrides_usd_per_gpu_h``
and its TDP from ``CarbonSettings.tdp_overrides_w``; without them an
:class:`~hgresearch.errors.InputError` names the option that gives them (``--price GPU=USD``,
``--tdp GPU=W``). Its embodied carbon, where ``embodied_carbon.csv`` has none, is not counted
(:func:`replica_embodied_g_per_h`; ``hgresearch plan`` says so).
"""

from __future__ import annotations

import math

import numpy as np

from hgresearch.data.catalogs import normalize_gpu_name
from hgresearch.errors import InputError
from hgresearch.plan.inputs import Candidate, CarbonSettings, PriceScenario


def gpu_key(gpu_name: str) -> str:
    """The catalogs' name of a GPU (aliases too), or the name as given for one outside them."""
    from hgresearch.data.catalogs import CatalogKeyError

    try:
        return normalize_gpu_name(gpu_name)
    except CatalogKeyError:
        return gpu_name.strip()


def replica_power_w(candidate: Candidate, tdp: str = "datasheet",
                    overrides_w: tuple[tuple[str, float], ...] = ()) -> float:
    """Power of one replica (W): its GPUs at the TDP assumption ``tdp`` (``overrides_w`` by GPU
    name first). A GPU with no TDP (a CPU, one outside ``hardware.csv``) and no override is an
    :class:`InputError` naming ``--tdp``."""
    from hgresearch.accounting.energy import configuration_power_w, tdp_per_gpu_w

    gpu = gpu_key(candidate.gpu_name)
    try:
        per_gpu_w: float = tdp_per_gpu_w(gpu, tdp, overrides=dict(overrides_w))
    except KeyError:
        per_gpu_w = math.nan
    if not math.isfinite(per_gpu_w):
        raise InputError(f"{candidate.hardware}: no TDP for GPU {gpu!r} in hgresearch/data/"
                         f"catalogs/hardware.csv: pass --tdp {gpu}=W (the power of one GPU)",
                         field="--tdp")
    return float(configuration_power_w(per_gpu_w, candidate.num_gpus))


def electricity_price_usd_per_kwh(region: str) -> float:
    """Retail electricity price of ``region``
    (``hgresearch/data/catalogs/electricity_prices.csv``)."""
    from hgresearch.data.catalogs import electricity_price_row

    return float(electricity_price_row(region).price_usd_per_kwh)


def price_usd_per_gpu_h(gpu_name: str, prices: PriceScenario, tdp: str = "datasheet") -> float:
    """What one GPU-hour costs under ``prices``; NaN when the GPU is not offered there."""
    from hgresearch.accounting.energy import kwh_per_h, tdp_per_gpu_w
    from hgresearch.data.catalogs import price_catalog, price_scenario_rows

    gpu = gpu_key(gpu_name)
    overrides = {gpu_key(g): v for g, v in prices.overrides_usd_per_gpu_h}
    if gpu in overrides:
        return float(overrides[gpu])
    table = price_scenario_rows(prices.scenario, field="prices")
    if gpu in {gpu_key(g) for g in prices.owned_gpus}:
        try:
            power_w: float = tdp_per_gpu_w(gpu, tdp)
        except KeyError:
            power_w = math.nan
        if not math.isfinite(power_w):
            raise InputError(f"owned GPU {gpu!r} has no TDP in hgresearch/data/catalogs/"
                             f"hardware.csv to price its electricity: pass its hourly cost as "
                             f"--price {gpu}=USD_PER_GPU_H", field="--price")
        return float(kwh_per_h(power_w) * electricity_price_usd_per_kwh(prices.electricity_region))
    row = table[table.gpu_name == gpu]
    if row.empty and gpu not in set(price_catalog().gpu_name):
        # Not merely "not offered in this scenario": the catalog has never heard of it.
        raise InputError(f"no price for GPU {gpu!r} in hgresearch/data/catalogs/prices.csv: "
                         f"pass --price {gpu}=USD_PER_GPU_H (the price of one GPU-hour)",
                         field="--price")
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


def has_embodied_carbon(gpu_name: str) -> bool:
    """Whether ``embodied_carbon.csv`` holds the GPU."""
    from hgresearch.data.catalogs import embodied_catalog

    return gpu_key(gpu_name) in set(embodied_catalog().item)


def replica_embodied_g_per_h(candidate: Candidate, carbon: CarbonSettings) -> float:
    """Embodied g CO2e charged per hour a replica serves (0 for GPUs whose class the hardware
    scenario treats as sunk, and for GPUs ``embodied_carbon.csv`` does not hold: not counted,
    see :func:`has_embodied_carbon`)."""
    from hgresearch.accounting.carbon import (
        SCENARIOS,
        embodied_g_per_serving_h,
        embodied_kg_per_gpu,
        gpu_class,
    )

    if not has_embodied_carbon(candidate.gpu_name):
        return 0.0
    gpu = normalize_gpu_name(candidate.gpu_name)
    if gpu_class(gpu) in SCENARIOS[carbon.hardware_scenario]:  # validate() checked the scenario
        return 0.0
    kg = embodied_kg_per_gpu(gpu) * candidate.num_gpus
    return embodied_g_per_serving_h(kg, carbon.lifetime_years, carbon.utilisation)


def replica_carbon_g_per_h(candidate: Candidate, carbon: CarbonSettings,
                           hours: int) -> np.ndarray:
    """g CO2e of one replica-hour in every hour: power × grid intensity + embodied share."""
    from hgresearch.accounting.energy import kwh_per_h

    operational = kwh_per_h(replica_power_w(candidate, carbon.tdp, carbon.tdp_overrides_w)) \
        * grid_g_per_kwh_by_hour(carbon, hours)
    return operational + replica_embodied_g_per_h(candidate, carbon)
