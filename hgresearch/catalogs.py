"""Small reference catalogs shipped in ``data/``: hardware specs, GPU prices, model architectures.

Every row carries a ``source`` and a ``date``; loaders validate units and missing values so a
typo in a catalog fails loudly with the file, line and field.
"""

from __future__ import annotations

import csv
import functools
from pathlib import Path

import pandas as pd

from hgresearch.errors import InputError

#: Folder holding the catalogs (``data/`` at the repository root, or next to the package).
DATA_DIR = Path(__file__).resolve().parent.parent / "data"


def read_catalog(name: str, required: dict[str, str], nonnegative: list[str],
                 complete: list[str] | tuple[str, ...] = ()) -> pd.DataFrame:
    """Read ``data/<name>`` and check required columns, sources and dates, non-negative
    numbers, and that the ``complete`` columns have a value in every row."""
    path = DATA_DIR / name
    if not path.exists():
        raise InputError("catalog file not found", file=str(path))
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    for number, row in enumerate(rows[1:], start=2):
        if row and len(row) != len(rows[0]):
            raise InputError(f"expected {len(rows[0])} fields, got {len(row)} "
                             "(quote values that contain commas)", file=str(path), line=number)
    table = pd.read_csv(path, keep_default_na=True, index_col=False)
    for column, kind in required.items():
        if column not in table.columns:
            raise InputError(f"missing column (expected {kind})", file=str(path), field=column)
    for column in ("source", "date"):
        for index, value in table[column].items():
            if pd.isna(value) or not str(value).strip():
                raise InputError("every row needs a source and a date", file=str(path),
                                 line=int(index) + 2, field=column)
    for column in complete:
        missing = table[column].isna() | (table[column].astype(str).str.strip() == "")
        if missing.any():
            raise InputError("missing value", file=str(path), line=int(missing.idxmax()) + 2,
                             field=column)
    for column in nonnegative:
        values = pd.to_numeric(table[column], errors="coerce")
        bad = table[column].notna() & (values.isna() | (values < 0))
        if bad.any():
            index = int(bad.idxmax())
            raise InputError(f"expected a non-negative number, got {table[column][index]!r}",
                             file=str(path), line=index + 2, field=column)
        table[column] = values
    return table


@functools.cache
def hardware_catalog() -> pd.DataFrame:
    """GPU specs: ``gpu_name`` (normalized), ``tdp_w``, ``memory_gb``,
    ``memory_bandwidth_gb_per_s``, ``fp16_dense_tflops``, ``aliases`` (``|``-separated)."""
    return read_catalog(
        "hardware.csv",
        {"gpu_name": "str", "aliases": "str", "tdp_w": "W", "memory_gb": "GB",
         "memory_bandwidth_gb_per_s": "GB/s", "fp16_dense_tflops": "TFLOPS"},
        ["tdp_w", "memory_gb", "memory_bandwidth_gb_per_s", "fp16_dense_tflops"],
    )


@functools.cache
def price_catalog() -> pd.DataFrame:
    """GPU rental prices per GPU-hour by ``scenario`` (``alternative``, ``hyperscaler``).

    A missing ``price_usd_per_gpu_h`` means the GPU is not offered in that scenario.
    """
    return read_catalog(
        "prices.csv",
        {"gpu_name": "str", "scenario": "str", "price_usd_per_gpu_h": "USD per GPU-hour"},
        ["price_usd_per_gpu_h", "price_low_usd_per_gpu_h", "price_high_usd_per_gpu_h"],
    )


@functools.cache
def model_catalog() -> pd.DataFrame:
    """Published model architectures (layers, hidden size, heads, KV heads, ...), one row each."""
    return read_catalog(
        "model_architectures.csv",
        {"model": "str", "num_layers": "int", "hidden_size": "int", "params_b": "1e9 params"},
        ["num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim",
         "intermediate_size", "vocab_size", "max_position_embeddings", "params_b",
         "weight_bytes_per_param"],
    )


@functools.cache
def gpu_aliases() -> dict[str, str]:
    """Map every known spelling of a GPU (and the normalized name itself) to its normalized name."""
    mapping: dict[str, str] = {}
    for row in hardware_catalog().itertuples():
        mapping[row.gpu_name.lower()] = row.gpu_name
        for alias in str(row.aliases).split("|"):
            if alias.strip():
                mapping[alias.strip().lower()] = row.gpu_name
    return mapping


def normalize_gpu_name(raw: str) -> str:
    """``NVIDIA-H100-PCIe`` -> ``H100-PCIe``; raises :class:`KeyError` for an unknown GPU."""
    key = raw.strip().lower()
    aliases = gpu_aliases()
    if key in aliases:
        return aliases[key]
    if key.replace(" ", "-") in aliases:
        return aliases[key.replace(" ", "-")]
    raise KeyError(raw)


def gpu_price_usd_per_h(gpu_name: str, scenario: str = "alternative") -> float:
    """Price of one GPU-hour; NaN when the GPU is not offered in ``scenario``."""
    prices = price_catalog()
    row = prices[(prices.gpu_name == gpu_name) & (prices.scenario == scenario)]
    if row.empty:
        known = sorted(set(prices.scenario))
        raise KeyError(f"no price for GPU {gpu_name!r} in scenario {scenario!r} "
                       f"(scenarios: {known}; edit data/prices.csv to add one)")
    return float(row.price_usd_per_gpu_h.iloc[0])
