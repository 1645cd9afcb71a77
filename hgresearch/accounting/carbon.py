"""Carbon per token: operational (energy x grid intensity) plus embodied (manufacturing,
amortised over a lifetime and a utilisation), under two hardware scenarios.

* ``new``: every GPU (and its share of the host machine) is bought for the service, so its
  embodied carbon is charged to the tokens it serves.
* ``idle_consumer``: consumer GPUs were already bought and sit idle (the paper's argument):
  their embodied carbon is sunk and not charged; data-centre GPUs are still charged.

Embodied g CO2e per 1M tokens of a configuration =
``sum over its GPUs of (gpu + host share) kg x 1000 / (lifetime_h x utilisation x tokens per h
/ 1e6)``. With operational energy ``e`` (kWh per 1M tokens) and embodied ``m`` (g per 1M
tokens), total carbon at grid intensity ``I`` is ``I*e + m``; two configurations swap ranks
at the break-even intensity ``I* = (m_B - m_A) / (e_A - e_B)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from hgresearch.accounting.energy import (
    g_co2_per_1m_tok,
    kwh_per_1m_tok,
    tokens_per_kwh_of_energy,
)
from hgresearch.data.catalogs import embodied_catalog, grid_catalog
from hgresearch.identity import total_gpus
from hgresearch.units import TOKENS_PER_MILLION, tokens_per_h

HOURS_PER_YEAR = 8766.0  # 365.25 days

#: Scenario name -> GPU classes whose embodied carbon is sunk (not charged).
SCENARIOS: dict[str, frozenset[str]] = {
    "new": frozenset(),
    "idle_consumer": frozenset({"consumer"}),
}


def grid_intensity(region: str) -> float:
    """g CO2 per kWh of a region of the grid catalog."""
    grid = grid_catalog()
    row = grid[grid.region == region]
    if row.empty:
        raise KeyError(f"unknown grid region {region!r}; known: {list(grid.region)}")
    return float(row.g_co2_per_kwh.iloc[0])


def embodied_kg_per_gpu(gpu_name: str, bound: str = "central",
                        include_host: bool = True) -> float:
    """Embodied kg CO2e of one GPU plus (by default) its share of the host machine."""
    column = {"central": "kg_co2e", "low": "kg_co2e_low", "high": "kg_co2e_high"}[bound]
    rows = _embodied_rows(gpu_name)
    components = ["gpu", "host_share"] if include_host else ["gpu"]
    return float(rows[rows.component.isin(components)][column].sum())


def gpu_class(gpu_name: str) -> str:
    """``consumer`` or ``datacenter`` as recorded in the embodied catalog."""
    return str(_embodied_rows(gpu_name).gpu_class.iloc[0])


def _embodied_rows(gpu_name: str) -> pd.DataFrame:
    table = embodied_catalog()
    rows = table[table.item == gpu_name]
    if rows.empty:
        raise KeyError(f"no embodied carbon for {gpu_name!r} in "
                       "hgresearch/data/catalogs/embodied_carbon.csv")
    return rows


def amortised_g_per_1m_tok(embodied_kg: float, tok_per_s: float, lifetime_years: float,
                           utilisation: float) -> float:
    """Embodied g CO2e per 1M tokens: embodied mass spread over the tokens served in a
    lifetime of ``lifetime_years`` at ``utilisation`` (fraction of the time serving at
    ``tok_per_s``)."""
    return (embodied_g_per_serving_h(embodied_kg, lifetime_years, utilisation)
            / (tokens_per_h(tok_per_s) / TOKENS_PER_MILLION))


def embodied_g_per_serving_h(embodied_kg: float, lifetime_years: float,
                             utilisation: float) -> float:
    """Embodied g CO2e charged to one hour of serving: the mass spread over the
    ``lifetime_years × utilisation`` hours the hardware serves in its life."""
    if lifetime_years <= 0 or not 0 < utilisation <= 1:
        raise ValueError("lifetime_years must be > 0 and utilisation in (0, 1]")
    return embodied_kg * 1000.0 / (HOURS_PER_YEAR * lifetime_years * utilisation)


def configuration_carbon(configs: pd.DataFrame, regions: Iterable[str] | None = None,
                         scenarios: Iterable[str] = ("new", "idle_consumer"),
                         lifetime_years: float = 4.0, utilisation: float = 0.5,
                         energy_column: str = "tdp_energy_per_tok_j",
                         embodied_bound: str = "central",
                         include_host: bool = True) -> pd.DataFrame:
    """Operational + embodied g CO2e per 1M tokens per configuration, region and scenario.

    ``configs`` has one row per configuration with ``hardware``, ``gpu_name``, ``gpu_count``,
    ``replicas``, ``request_rate_qps``, ``total_token_throughput_tok_per_s`` and the energy
    per token column ``energy_column`` (J per token: TDP model, a power-model bound or
    measured). Returns a long table with ``kwh_per_1m_tok``, ``embodied_kg``,
    ``operational_g_per_1m_tok``, ``embodied_g_per_1m_tok`` and ``total_g_per_1m_tok``.
    """
    grid = grid_catalog()
    if regions is not None:
        regions = list(regions)
        unknown = [r for r in regions if r not in set(grid.region)]
        if unknown:
            raise KeyError(f"unknown grid region(s) {unknown}; known: {list(grid.region)}")
        grid = grid.set_index("region").loc[regions].reset_index()
    rows = []
    for config in configs.itertuples():
        energy_per_tok_j = getattr(config, energy_column)
        kwh_per_1m = kwh_per_1m_tok(energy_per_tok_j)
        tok_per_kwh = tokens_per_kwh_of_energy(1.0, energy_per_tok_j)
        kg = (embodied_kg_per_gpu(config.gpu_name, embodied_bound, include_host)
              * total_gpus(config.gpu_count, config.replicas))
        embodied_g = amortised_g_per_1m_tok(kg, config.total_token_throughput_tok_per_s,
                                            lifetime_years, utilisation)
        for scenario in scenarios:
            if scenario not in SCENARIOS:
                raise KeyError(f"unknown scenario {scenario!r}; known: {sorted(SCENARIOS)}")
            sunk = gpu_class(config.gpu_name) in SCENARIOS[scenario]
            for region in grid.itertuples():
                operational = g_co2_per_1m_tok(tok_per_kwh, region.g_co2_per_kwh)
                charged = 0.0 if sunk else embodied_g
                rows.append({
                    "hardware": config.hardware, "gpu_name": config.gpu_name,
                    "gpu_count": config.gpu_count, "request_rate_qps": config.request_rate_qps,
                    "scenario": scenario, "region": region.region,
                    "g_co2_per_kwh": region.g_co2_per_kwh, "kwh_per_1m_tok": kwh_per_1m,
                    "embodied_kg": 0.0 if sunk else kg,
                    "operational_g_per_1m_tok": operational,
                    "embodied_g_per_1m_tok": charged,
                    "total_g_per_1m_tok": operational + charged,
                })
    return pd.DataFrame(rows)


def lowest_carbon(carbon: pd.DataFrame) -> pd.DataFrame:
    """Per scenario and region: the configuration with the lowest total g CO2e per 1M tokens,
    and the runner-up's total (ties broken by table order)."""
    out = []
    for (scenario, region), group in carbon.groupby(["scenario", "region"], sort=False):
        ranked = group.sort_values("total_g_per_1m_tok", kind="stable")
        best = ranked.iloc[0]
        out.append({"scenario": scenario, "region": region,
                    "g_co2_per_kwh": best.g_co2_per_kwh, "lowest": best.hardware,
                    "lowest_total_g_per_1m_tok": best.total_g_per_1m_tok,
                    "runner_up": ranked.iloc[1].hardware if len(ranked) > 1 else None,
                    "runner_up_total_g_per_1m_tok":
                        ranked.iloc[1].total_g_per_1m_tok if len(ranked) > 1 else math.nan})
    return pd.DataFrame(out)


def break_even_g_per_kwh(kwh_a: float, embodied_g_a: float, kwh_b: float,
                         embodied_g_b: float) -> float:
    """Grid intensity (g CO2 per kWh) at which A and B emit the same per token.

    Totals are ``I*kwh + embodied`` (per 1M tokens). Returns NaN when the lines never cross
    at a non-negative intensity (one configuration is lower everywhere) or are parallel.
    """
    if kwh_a == kwh_b:
        return math.nan
    crossing = (embodied_g_b - embodied_g_a) / (kwh_a - kwh_b)
    return crossing if crossing >= 0 else math.nan


def break_even_table(carbon: pd.DataFrame) -> pd.DataFrame:
    """Break-even grid intensity for every pair of configurations in every scenario, with the
    configuration that is lower below and above it (or the one lower everywhere)."""
    rows = []
    per_config = carbon.drop_duplicates(["scenario", "hardware", "request_rate_qps"])
    for scenario, group in per_config.groupby("scenario", sort=False):
        items = list(group.itertuples())
        for i, a in enumerate(items):
            for b in items[i + 1:]:
                crossing = break_even_g_per_kwh(a.kwh_per_1m_tok, a.embodied_g_per_1m_tok,
                                                b.kwh_per_1m_tok, b.embodied_g_per_1m_tok)
                name_a = f"{a.hardware} @ {a.request_rate_qps:g} QPS"
                name_b = f"{b.hardware} @ {b.request_rate_qps:g} QPS"

                def lower_at(intensity: float, a: Any = a, b: Any = b, name_a: str = name_a,
                             name_b: str = name_b) -> str:
                    total_a = intensity * a.kwh_per_1m_tok + a.embodied_g_per_1m_tok
                    total_b = intensity * b.kwh_per_1m_tok + b.embodied_g_per_1m_tok
                    return name_a if total_a <= total_b else name_b

                probe_high = (crossing * 2 + 1) if not math.isnan(crossing) else 1000.0
                rows.append({
                    "scenario": scenario, "a": name_a, "b": name_b,
                    "break_even_g_per_kwh": crossing,
                    "lower_below": lower_at(0.0 if math.isnan(crossing) else crossing / 2),
                    "lower_above": lower_at(probe_high),
                })
    return pd.DataFrame(rows)


def totals_vs_intensity(carbon: pd.DataFrame, intensities: np.ndarray) -> pd.DataFrame:
    """Total g CO2e per 1M tokens of each configuration and scenario over a grid-intensity
    range (for the break-even chart)."""
    per_config = carbon.drop_duplicates(["scenario", "hardware", "request_rate_qps"])
    rows = []
    for config in per_config.itertuples():
        for intensity in intensities:
            rows.append({"scenario": config.scenario, "hardware": config.hardware,
                         "gpu_name": config.gpu_name,
                         "request_rate_qps": config.request_rate_qps,
                         "g_co2_per_kwh": float(intensity),
                         "total_g_per_1m_tok": float(intensity) * config.kwh_per_1m_tok
                         + config.embodied_g_per_1m_tok})
    return pd.DataFrame(rows)


def break_even_summary(configs: pd.DataFrame,
                       energy_columns: dict[str, str] | None = None,
                       embodied_bounds: Iterable[str] = ("low", "central", "high"),
                       lifetime_years: float = 4.0, utilisation: float = 0.5,
                       scenarios: Iterable[str] = ("new", "idle_consumer")) -> pd.DataFrame:
    """Break-even grid intensity of every configuration pair under each energy estimate
    (label -> J-per-token column) and embodied-carbon bound: how robust the flip point is."""
    energy_columns = energy_columns or {"TDP model": "tdp_energy_per_tok_j"}
    frames = []
    for label, column in energy_columns.items():
        for bound in embodied_bounds:
            carbon = configuration_carbon(configs, regions=None, scenarios=scenarios,
                                          lifetime_years=lifetime_years,
                                          utilisation=utilisation, energy_column=column,
                                          embodied_bound=bound)
            table = break_even_table(carbon)
            table.insert(1, "energy_estimate", label)
            table.insert(2, "embodied_bound", bound)
            frames.append(table)
    return pd.concat(frames, ignore_index=True)
