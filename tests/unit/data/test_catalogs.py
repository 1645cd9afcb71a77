"""The catalogs package: every catalog file, its loader, and where the loaders live."""

from __future__ import annotations

import inspect

import pandas as pd
import pytest

from hgresearch.accounting import carbon
from hgresearch.accounting.energy import measured, power_model, tdp
from hgresearch.data import catalogs
from hgresearch.errors import InputError

#: Catalog file -> its loader in :mod:`hgresearch.data.catalogs`.
LOADERS = {
    "hardware.csv": catalogs.hardware_catalog,
    "prices.csv": catalogs.price_catalog,
    "model_architectures.csv": catalogs.model_catalog,
    "power_model.csv": catalogs.power_model_catalog,
    "grid_carbon.csv": catalogs.grid_catalog,
    "embodied_carbon.csv": catalogs.embodied_catalog,
    "electricity_prices.csv": catalogs.electricity_price_catalog,
}


def test_every_catalog_file_has_a_loader_in_catalogs():
    shipped = sorted(path.name for path in catalogs.CATALOG_DIR.glob("*.csv"))
    assert shipped == sorted(LOADERS)
    for name, loader in LOADERS.items():
        table = loader()
        assert isinstance(table, pd.DataFrame) and len(table) > 0, name
        assert table.source.notna().all() and table.date.notna().all(), name


def test_energy_and_carbon_read_no_catalog_themselves():
    """The power model and carbon catalogs are loaded by the catalogs package only; energy and
    carbon use those loaders (the names they expose are the same functions)."""
    assert power_model.power_model_catalog is catalogs.power_model_catalog
    assert tdp.hardware_catalog is catalogs.hardware_catalog
    assert carbon.grid_catalog is catalogs.grid_catalog
    assert carbon.embodied_catalog is catalogs.embodied_catalog
    for module in (tdp, power_model, measured, carbon):
        source = inspect.getsource(module)
        assert "read_catalog" not in source, module.__name__
        for name in LOADERS:
            assert f'"{name}"' not in source, f"{module.__name__} opens {name} itself"


def test_checksum_manifest_ships_beside_the_catalogs():
    from hgresearch.data.reference import DATASETS

    manifest = DATASETS["ionet-aibc2025"].checksum_file
    assert manifest.parent == catalogs.CHECKSUM_DIR
    assert manifest.is_relative_to(catalogs.CATALOG_DIR)
    assert len(DATASETS["ionet-aibc2025"].checksums()) == 120


@pytest.mark.parametrize(("lookup", "catalog", "close"), [
    (lambda: catalogs.normalize_gpu_name("RTX-4909"), "hardware.csv", "RTX-4090"),
    (lambda: catalogs.gpu_price_usd_per_h("H100-PCIe", "alternativ"), "prices.csv",
     "alternative"),
    (lambda: catalogs.grid_row("EU27"), "grid_carbon.csv", "EU-27"),
    (lambda: catalogs.electricity_price_row("DE "), "electricity_prices.csv", "DE"),
    (lambda: catalogs.model_row("DeepSeek-R1-Distill-Qwen-14"), "model_architectures.csv",
     "DeepSeek-R1-Distill-Qwen-14B"),
    (lambda: catalogs.embodied_rows("RTX 4090"), "embodied_carbon.csv", "RTX-4090"),
])
def test_a_missing_catalog_key_is_one_error_naming_file_key_and_close_matches(
        lookup, catalog: str, close: str) -> None:
    with pytest.raises(catalogs.CatalogKeyError) as err:
        lookup()
    # bad input (one line, exit 2 on the command line) and a failed lookup alike
    assert isinstance(err.value, InputError) and isinstance(err.value, KeyError)
    assert err.value.catalog == catalog and close in err.value.close
    message = str(err.value)
    assert f"hgresearch/data/catalogs/{catalog}" in message and repr(err.value.key) in message
    assert f"did you mean {close!r}" in message or f"{close!r} or" in message
    assert not message.startswith('"')  # not KeyError's quoted repr


def test_every_layer_raises_the_catalog_error_for_a_missing_key() -> None:
    from hgresearch.accounting import carbon, costs
    from hgresearch.plan.economics import electricity_price_usd_per_kwh
    from hgresearch.sim.replica_limits import kv_bytes_per_token

    for lookup in (lambda: carbon.grid_intensity("Atlantis"),
                   lambda: carbon.embodied_kg_per_gpu("Z80"),
                   lambda: costs.add_costs(pd.DataFrame(), scenario="cheap"),
                   lambda: electricity_price_usd_per_kwh("XX"),
                   lambda: kv_bytes_per_token("no-such-model")):
        with pytest.raises(catalogs.CatalogKeyError):
            lookup()
