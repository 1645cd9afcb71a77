"""Prices and power of hardware the catalogs do not hold (issue 19, item 2): given with
--price/--tdp they are used, without them one error names the option; what the catalogs already
say ("not offered") keeps its meaning."""

from __future__ import annotations

import math

import pytest

from hgresearch.errors import InputError
from hgresearch.plan.economics import (
    has_embodied_carbon,
    price_usd_per_gpu_h,
    replica_carbon_g_per_h,
    replica_embodied_g_per_h,
    replica_power_w,
)
from hgresearch.plan.inputs import Candidate, CarbonSettings, PriceScenario


def test_a_gpu_outside_the_price_catalog_needs_a_price() -> None:
    with pytest.raises(InputError, match=r"field '--price': no price for GPU 'H200' .* "
                                         r"pass --price H200=USD_PER_GPU_H"):
        price_usd_per_gpu_h("H200", PriceScenario())
    given = PriceScenario(overrides_usd_per_gpu_h=(("H200", 3.5), ("MI300X", 4.0)))
    assert price_usd_per_gpu_h("NVIDIA H200", given) == 3.5  # an alias of the catalog's GPU
    assert price_usd_per_gpu_h("MI300X", given) == 4.0      # no catalog knows it
    # a GPU the price catalog lists without a price in a scenario is "not offered" there
    assert math.isnan(price_usd_per_gpu_h("RTX-4090", PriceScenario("hyperscaler")))


def test_a_gpu_without_a_tdp_needs_one() -> None:
    for gpu in ("CPU", "MI300X"):
        with pytest.raises(InputError, match=rf"field '--tdp': 2x {gpu}: no TDP for GPU "
                                             rf"'{gpu}' .* pass --tdp {gpu}=W"):
            replica_power_w(Candidate(gpu, 2))
    assert replica_power_w(Candidate("CPU", 2), overrides_w=(("CPU", 65.0),)) == 130.0
    assert replica_power_w(Candidate("H200", 1)) == 700.0  # the catalog's datasheet TDP


def test_embodied_carbon_of_hardware_the_catalog_lacks_is_not_counted() -> None:
    carbon = CarbonSettings(grid_region="DE", tdp_overrides_w=(("MI300X", 750.0),))
    assert not has_embodied_carbon("MI300X") and has_embodied_carbon("RTX-4090")
    assert replica_embodied_g_per_h(Candidate("MI300X", 1), carbon) == 0.0
    assert replica_embodied_g_per_h(Candidate("RTX-4090", 1), carbon) > 0.0
    # operational carbon still counts its power
    assert replica_carbon_g_per_h(Candidate("MI300X", 1), carbon, 1)[0] > 0.0
