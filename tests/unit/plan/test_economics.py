"""Cost and carbon of a replica-hour (hgresearch.plan.economics)."""

from __future__ import annotations

import numpy as np
import pytest

from hgresearch.errors import InputError
from hgresearch.plan import (
    Candidate,
    CarbonSettings,
    PriceScenario,
)
from hgresearch.plan.economics import price_usd_per_gpu_h, replica_carbon_g_per_h


def test_owned_hardware_pays_electricity_only() -> None:
    owned = PriceScenario(owned_gpus=("RTX-4090",), electricity_region="DE")
    # 450 W for an hour at the DE household price of the catalog
    assert price_usd_per_gpu_h("RTX-4090", owned) == pytest.approx(0.45 * 0.4268)
    assert price_usd_per_gpu_h("H100-PCIe", owned) == 2.0
    assert np.isnan(price_usd_per_gpu_h("RTX-4090", PriceScenario("hyperscaler")))
    with pytest.raises(InputError, match="unknown electricity region 'XX'"):
        price_usd_per_gpu_h("RTX-4090", PriceScenario(owned_gpus=("RTX-4090",),
                                                      electricity_region="XX"))
    sunk = CarbonSettings(grid_region="FR", hardware_scenario="idle_consumer")
    new = CarbonSettings(grid_region="FR")
    gpu = Candidate("RTX-4090", 2)
    assert replica_carbon_g_per_h(gpu, sunk, 1)[0] == pytest.approx(0.9 * 56)
    assert replica_carbon_g_per_h(gpu, new, 1)[0] > replica_carbon_g_per_h(gpu, sunk, 1)[0]
