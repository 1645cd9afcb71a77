"""The catalogs package: every catalog file, its loader, and where the loaders live."""

from __future__ import annotations

import inspect

import pandas as pd

from hgresearch.accounting import carbon
from hgresearch.accounting.energy import measured, power_model, tdp
from hgresearch.data import catalogs

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
