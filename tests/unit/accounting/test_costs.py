"""Cost formulas against numbers worked out by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from hgresearch.accounting.costs import (
    add_costs,
    cost_per_million_tok_at_rate_usd,
    run_cost_usd,
)
from hgresearch.data.catalogs import gpu_price_usd_per_h, price_catalog


def _run(**overrides) -> pd.DataFrame:
    row = {"gpu_name": "RTX-4090", "gpu_count": 2, "replicas": 1, "duration_s": 3600.0,
           "total_input_tok": 200_000, "total_output_tok": 300_000}
    row.update(overrides)
    return pd.DataFrame([row])


def test_hand_computed_costs():
    # 2 GPUs x 1 h x $0.25 = $0.50; 500k tokens -> $1.00 per 1M; 300k output -> $1.667 per 1M.
    out = add_costs(_run()).iloc[0]
    assert out.cost_usd == pytest.approx(0.50)
    assert out.cost_usd_per_1m_tok == pytest.approx(1.00)
    assert out.cost_usd_per_1m_output_tok == pytest.approx(0.50 / 0.3)
    assert out.tok_per_usd == pytest.approx(1_000_000)
    assert out.gpu_hours == pytest.approx(2.0)


def test_h100_and_replicas_and_overrides():
    # 1 GPU x 90 s x $2.00/h = $0.05
    h100 = add_costs(_run(gpu_name="H100-PCIe", gpu_count=1, duration_s=90.0)).iloc[0]
    assert h100.cost_usd == pytest.approx(0.05)
    assert run_cost_usd(90.0, 1, 2.0) == pytest.approx(0.05)
    # 4 replicas of 2 GPUs for 30 min at $0.25 = $1.00
    replicated = add_costs(_run(replicas=4, duration_s=1800.0)).iloc[0]
    assert replicated.cost_usd == pytest.approx(1.0)
    override = add_costs(_run(), prices_usd_per_gpu_h={"RTX-4090": 0.5}).iloc[0]
    assert override.cost_usd == pytest.approx(1.0)


def test_scenarios_and_missing_prices():
    hyperscaler = add_costs(_run(), "hyperscaler").iloc[0]
    assert math.isnan(hyperscaler.cost_usd)  # RTX-4090 not offered: missing, never zero
    assert gpu_price_usd_per_h("H100-PCIe", "hyperscaler") == pytest.approx(9.0)
    with pytest.raises(KeyError, match="unknown price scenario"):
        add_costs(_run(), "spot")


def test_cost_at_sustained_rate():
    # $2/h at 1000 tok/s = 3.6M tok/h -> $0.5556 per 1M tokens
    assert cost_per_million_tok_at_rate_usd(1000.0, 1, 2.0) == pytest.approx(2.0 / 3.6)


def test_price_catalog_rows_are_sourced():
    prices = price_catalog()
    assert prices.source.notna().all() and prices.date.notna().all()
    assert (prices.price_usd_per_gpu_h.dropna() > 0).all()
