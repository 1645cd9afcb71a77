"""TDP model, utilisation-based power model and the power catalog (the paper's Table 3 built
from them: tests/unit/report/test_paper_tables.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hgresearch.accounting import energy
from hgresearch.data import catalogs
from hgresearch.data.ingest import read_runs
from hgresearch.errors import InputError
from hgresearch.units import tokens_per_h


@pytest.fixture(scope="module")
def all_runs(reference_dir):
    return read_runs(reference_dir)


def test_tdp_formulas_against_hand_computed_numbers():
    # 1000 tok/s for an hour = 3.6 M tokens; 500 W for an hour = 0.5 kWh -> 7.2 M tok/kWh.
    assert tokens_per_h(1000.0) == 3.6e6
    assert energy.kwh_per_h(500.0) == 0.5
    assert energy.tokens_per_kwh(1000.0, 500.0) == pytest.approx(7.2e6)
    # 242 g/kWh over 7.2 M tok/kWh = 33.61 g per 1M tokens.
    assert energy.g_co2_per_1m_tok(7.2e6, 242.0) == pytest.approx(242 / 7.2)
    assert energy.efficiency_ratio(15.0, 5.0) == 3.0


def test_tdp_assumptions():
    assert energy.tdp_per_gpu_w("H100-PCIe", "paper") == 700.0
    assert energy.tdp_per_gpu_w("H100-PCIe", "datasheet") == 350.0
    assert energy.tdp_per_gpu_w("RTX-4090", "paper") == 450.0
    assert energy.tdp_per_gpu_w("H100-SXM", "paper") == 700.0  # catalog fallback
    assert energy.tdp_per_gpu_w("H100-PCIe", "paper", {"H100-PCIe": 310.0}) == 310.0
    assert math.isnan(energy.tdp_per_gpu_w("CPU", "datasheet"))
    with pytest.raises(ValueError):
        energy.tdp_per_gpu_w("H100-PCIe", "nameplate")
    with pytest.raises(KeyError):
        energy.tdp_per_gpu_w("Z80", "datasheet")


def test_add_tdp_energy_small_frame():
    runs = pd.DataFrame({"gpu_name": ["RTX-4090"], "gpu_count": [2], "replicas": [1],
                         "duration_s": [100.0], "total_token_throughput_tok_per_s": [900.0]})
    out = energy.add_tdp_energy(runs, "paper", grid_g_per_kwh=100.0)
    row = out.iloc[0]
    assert row.tdp_power_w == 900.0
    assert row.tdp_energy_j == 90_000.0
    assert row.tdp_energy_per_tok_j == pytest.approx(1.0)
    assert row.tdp_tok_per_kwh == pytest.approx(3.6e6)
    assert row.tdp_g_co2_per_1m_tok == pytest.approx(100 / 3.6)


def test_every_reference_run_gets_tdp_and_bracket(all_runs):
    out = energy.energy_per_run(all_runs)
    assert len(out) == 130
    assert out.tdp_energy_per_tok_j.notna().all()
    assert out.model_energy_per_tok_low_j.notna().all()
    assert (out.model_energy_per_tok_low_j <= out.model_energy_per_tok_central_j).all()
    assert (out.model_energy_per_tok_central_j <= out.model_energy_per_tok_high_j).all()
    # The power model never exceeds the board limits, so it stays below the paper's TDP model.
    assert (out.model_energy_per_tok_high_j <= out.tdp_energy_per_tok_j + 1e-12).all()
    # No telemetry in the reference data: measured energy is missing, never zero.
    assert out.measured_energy_per_tok_j.isna().all()
    assert out.measured_energy_source.isna().all()
    assert out.load_frac.between(0, 1).all()


def test_power_model_hand_computed():
    assert energy.modelled_power_w(0.5, 20.0, 380.0, "linear") == pytest.approx(200.0)
    assert energy.modelled_power_w(0.5, 20.0, 380.0, "fan2007") == pytest.approx(
        20 + 360 * (1 - 0.5 ** 1.4))
    assert energy.modelled_power_w(0.25, 20.0, 380.0, "sqrt") == pytest.approx(200.0)
    assert energy.modelled_power_w(0.0, 20.0, 380.0, "busy") == pytest.approx(20.0)
    assert energy.modelled_power_w(2.0, 20.0, 380.0, "linear") == pytest.approx(380.0)  # clipped
    for curve in energy.LOAD_CURVES.values():
        assert float(curve(np.array(1.0))) == pytest.approx(1.0)


def test_add_power_model_load_and_unknown_gpu():
    runs = pd.DataFrame({
        "model": ["m", "m", "m"], "dataset": ["d", "d", "d"],
        "gpu_name": ["RTX-4090", "RTX-4090", "L40S"],
        "gpu_count": [1, 1, 1], "tensor_parallel_size": [1, 1, 1], "replicas": [1, 1, 1],
        "total_token_throughput_tok_per_s": [500.0, 1000.0, 800.0]})
    out = energy.add_power_model(runs)
    assert list(out.load_frac) == [0.5, 1.0, 1.0]
    # u = 0.5 on an RTX 4090: low = 12 + (300 - 12) * 0.5 (linear, low parameters).
    assert out.model_power_low_w.iloc[0] == pytest.approx(156.0)
    assert out.model_power_high_w.iloc[1] == pytest.approx(450.0)
    assert out.model_energy_per_tok_low_j.iloc[0] == pytest.approx(156.0 / 500.0)
    assert math.isnan(out.model_power_central_w.iloc[2])  # no parameters for L40S: missing


def test_power_model_catalog_is_sourced_and_ordered():
    table = catalogs.power_model_catalog()
    assert {"H100-PCIe", "RTX-4090"} <= set(table.gpu_name)
    assert table.source.str.len().gt(10).all() and table.date.notna().all()
    assert (table.p_idle_high_w < table.p_max_low_w).all()


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """Point the catalog loaders at a temporary catalog folder (restores caches after)."""
    monkeypatch.setattr(catalogs, "CATALOG_DIR", tmp_path)
    catalogs.power_model_catalog.cache_clear()
    yield tmp_path
    catalogs.power_model_catalog.cache_clear()


HEADER = ("gpu_name,p_idle_w,p_idle_low_w,p_idle_high_w,p_max_w,p_max_low_w,p_max_high_w,"
          "power_limit_w,note,source,date\n")


@pytest.mark.parametrize("row, field", [
    ("RTX-4090,20,12,30,380,300,450,450,,,2026-11", "source"),
    ("RTX-4090,-20,12,30,380,300,450,450,,src,2026-11", "p_idle_w"),
    ("RTX-4090,20,12,30,380,300,500,450,,src,2026-11", "p_max_w"),
    ("RTX-4090,20,12,30,,300,450,450,,src,2026-11", "p_max_w"),
])
def test_power_model_catalog_errors_name_line_and_field(data_dir, row, field):
    (data_dir / "power_model.csv").write_text(HEADER + row + "\n")
    with pytest.raises(InputError) as err:
        catalogs.power_model_catalog()
    assert err.value.field == field
    assert err.value.line == 2
