"""Operational + embodied carbon, scenarios, break-even, and the carbon catalogs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hgresearch.accounting import carbon
from hgresearch.data import catalogs
from hgresearch.errors import InputError


def test_grid_catalog_has_a_dozen_sourced_regions():
    grid = carbon.grid_catalog()
    assert len(grid) >= 12
    for region in ("EU-27", "FR", "DE", "PL", "NO", "SE", "US", "US-CA", "US-TX", "IN", "CN",
                   "BR"):
        assert region in set(grid.region)
    assert grid.g_co2_per_kwh.gt(0).all() and grid.g_co2_per_kwh.lt(1500).all()  # g/kWh
    assert grid.year.between(2015, 2026).all()
    assert grid.source.str.strip().str.len().gt(10).all() and grid.date.notna().all()
    assert grid.basis.notna().all()
    assert carbon.grid_intensity("EU-27") == 242.0  # the paper's value
    with pytest.raises(KeyError):
        carbon.grid_intensity("Atlantis")


def test_embodied_catalog_per_gpu_and_host_share():
    table = carbon.embodied_catalog()
    for gpu in ("H100-PCIe", "RTX-4090"):
        rows = table[table.item == gpu]
        assert set(rows.component) == {"gpu", "host_share"}
    assert (table.kg_co2e_low <= table.kg_co2e).all()
    assert (table.kg_co2e <= table.kg_co2e_high).all()
    assert table.assumptions.str.len().gt(20).all() and table.source.notna().all()
    assert carbon.embodied_kg_per_gpu("H100-PCIe") == 150.0 + 312.0
    assert carbon.embodied_kg_per_gpu("H100-PCIe", include_host=False) == 150.0
    assert carbon.embodied_kg_per_gpu("RTX-4090", "high") == 150.0 + 312.0
    assert carbon.gpu_class("RTX-4090") == "consumer"


def test_amortisation_hand_computed():
    # 462 kg over 4 years at 50% utilisation serving 1000 tok/s:
    # tokens = 1000 * 3600 * 8766 * 4 * 0.5 = 63.1152e9 -> 462e3 g / 63115.2 M tok.
    value = carbon.amortised_g_per_1m_tok(462.0, 1000.0, 4.0, 0.5)
    assert value == pytest.approx(462e3 / 63115.2)
    with pytest.raises(ValueError):
        carbon.amortised_g_per_1m_tok(462.0, 1000.0, 4.0, 0.0)


def _configs() -> pd.DataFrame:
    return pd.DataFrame({
        "hardware": ["1x H100-PCIe", "2x RTX-4090"], "gpu_name": ["H100-PCIe", "RTX-4090"],
        "gpu_count": [1, 2], "replicas": [1, 1], "request_rate_qps": [16.0, 4.0],
        "total_token_throughput_tok_per_s": [3000.0, 1250.0],
        # 0.7 kW / 3000 tok/s and 0.9 kW / 1250 tok/s
        "tdp_energy_per_tok_j": [700.0 / 3000.0, 900.0 / 1250.0],
    })


def test_configuration_carbon_scenarios():
    table = carbon.configuration_carbon(_configs(), ["EU-27", "FR"], lifetime_years=4.0,
                                        utilisation=0.5)
    assert len(table) == 2 * 2 * 2
    h100_eu = table[(table.gpu_name == "H100-PCIe") & (table.region == "EU-27")
                    & (table.scenario == "new")].iloc[0]
    kwh = 700.0 / 3000.0 * 1e6 / 3.6e6
    assert h100_eu.kwh_per_1m_tok == pytest.approx(kwh)
    assert h100_eu.operational_g_per_1m_tok == pytest.approx(242.0 * kwh)
    assert h100_eu.embodied_g_per_1m_tok == pytest.approx(
        carbon.amortised_g_per_1m_tok(462.0, 3000.0, 4.0, 0.5))
    idle = table[table.scenario == "idle_consumer"].set_index(["gpu_name", "region"])
    new = table[table.scenario == "new"].set_index(["gpu_name", "region"])
    # Sunk consumer hardware: no embodied carbon; the H100 is still charged.
    assert (idle.loc["RTX-4090"].embodied_g_per_1m_tok == 0).all()
    assert (new.loc["RTX-4090"].embodied_g_per_1m_tok > 0).all()
    assert np.allclose(idle.loc["H100-PCIe"].total_g_per_1m_tok,
                       new.loc["H100-PCIe"].total_g_per_1m_tok)
    lowest = carbon.lowest_carbon(table)
    assert set(lowest.lowest) == {"1x H100-PCIe"}
    with pytest.raises(KeyError):
        carbon.configuration_carbon(_configs(), ["Atlantis"])


def test_break_even_hand_computed():
    # A: 0.1 kWh + 5 g; B: 0.2 kWh + 0 g per 1M tokens -> equal at 50 g/kWh.
    assert carbon.break_even_g_per_kwh(0.1, 5.0, 0.2, 0.0) == pytest.approx(50.0)
    assert math.isnan(carbon.break_even_g_per_kwh(0.1, 0.0, 0.2, 5.0))  # A lower everywhere
    assert math.isnan(carbon.break_even_g_per_kwh(0.1, 1.0, 0.1, 5.0))  # parallel


def test_break_even_table_flips_only_for_sunk_consumer_hardware():
    table = carbon.configuration_carbon(_configs(), ["EU-27"])
    crossings = carbon.break_even_table(table).set_index("scenario")
    assert math.isnan(crossings.loc["new"].break_even_g_per_kwh)
    idle = crossings.loc["idle_consumer"]
    h100 = table[(table.gpu_name == "H100-PCIe")].iloc[0]
    rtx = table[(table.gpu_name == "RTX-4090") & (table.scenario == "idle_consumer")].iloc[0]
    expected = h100.embodied_g_per_1m_tok / (rtx.kwh_per_1m_tok - h100.kwh_per_1m_tok)
    assert idle.break_even_g_per_kwh == pytest.approx(expected)
    assert idle.lower_below.startswith("2x RTX-4090") and idle.lower_above.startswith("1x H100")
    totals = carbon.totals_vs_intensity(table, np.array([0.0, expected, 500.0]))
    at = totals[(totals.scenario == "idle_consumer")
                & (totals.g_co2_per_kwh == expected)].total_g_per_1m_tok
    assert at.iloc[0] == pytest.approx(at.iloc[1])


def test_break_even_summary_covers_every_combination():
    summary = carbon.break_even_summary(_configs(), {"TDP": "tdp_energy_per_tok_j"})
    assert len(summary) == 3 * 2  # embodied bounds x scenarios (one pair)
    idle = summary[summary.scenario == "idle_consumer"].set_index("embodied_bound")
    assert idle.loc["low"].break_even_g_per_kwh < idle.loc["high"].break_even_g_per_kwh


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """Point the catalog loaders at a temporary catalog folder (restores caches after)."""
    monkeypatch.setattr(catalogs, "CATALOG_DIR", tmp_path)
    carbon.grid_catalog.cache_clear()
    carbon.embodied_catalog.cache_clear()
    yield tmp_path
    carbon.grid_catalog.cache_clear()
    carbon.embodied_catalog.cache_clear()


GRID_HEADER = "region,region_name,year,g_co2_per_kwh,basis,note,source,date\n"
EMBODIED_HEADER = ("item,component,gpu_class,kg_co2e,kg_co2e_low,kg_co2e_high,per,assumptions,"
                   "source,date\n")


@pytest.mark.parametrize("rows, field, line", [
    ("FR,France,2023,56,lifecycle,,Ember,2024-07\nDE,Germany,2023,-3,lifecycle,,Ember,2024-07",
     "g_co2_per_kwh", 3),
    ("FR,France,2023,56,lifecycle,,,2024-07", "source", 2),
    ("FR,France,2023,,lifecycle,,Ember,2024-07", "g_co2_per_kwh", 2),
    ("FR,France,2023,56,lifecycle,,Ember,2024-07\nFR,France,2022,60,lifecycle,,Ember,2024-07",
     "region", 3),
])
def test_grid_catalog_errors(data_dir, rows, field, line):
    (data_dir / "grid_carbon.csv").write_text(GRID_HEADER + rows + "\n")
    with pytest.raises(InputError) as err:
        carbon.grid_catalog()
    assert (err.value.field, err.value.line) == (field, line)


@pytest.mark.parametrize("row, field", [
    ("RTX-4090,gpu,consumer,110,120,150,one GPU,scaled,src,2026-11", "kg_co2e"),
    ("RTX-4090,board,consumer,110,60,150,one GPU,scaled,src,2026-11", "component"),
    ("RTX-4090,gpu,consumer,110,60,150,one GPU,,src,2026-11", "assumptions"),
])
def test_embodied_catalog_errors(data_dir, row, field):
    (data_dir / "embodied_carbon.csv").write_text(EMBODIED_HEADER + row + "\n")
    with pytest.raises(InputError) as err:
        carbon.embodied_catalog()
    assert (err.value.field, err.value.line) == (field, 2)
