"""Small reference catalogs shipped with the package (the CSV files beside this module):
hardware specs, GPU prices, electricity prices, model architectures, the power model's
parameters, grid carbon intensities and embodied carbon; ``reference/`` holds the SHA-256
manifests of the reference data sets (:mod:`hgresearch.data.reference`).

Every row carries a ``source`` and a ``date``; loaders validate units and missing values so a
typo in a catalog fails loudly with the file, line and field. The files are package data, so a
plain (non-editable) install finds them too.

A key a catalog does not hold (a GPU, a price scenario, a grid region, ...) is one error
everywhere: :class:`CatalogKeyError`, raised by :func:`catalog_rows` and the lookups built on it.
"""

from __future__ import annotations

import csv
import difflib
import functools
import math
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from hgresearch.errors import InputError

#: Folder holding the catalog CSV files (this package's folder; they ship as package data).
CATALOG_DIR = Path(__file__).resolve().parent
#: Folder holding the SHA-256 manifests ``<dataset>.sha256`` of the reference data sets.
CHECKSUM_DIR = CATALOG_DIR / "reference"
#: The catalogs' folder as error messages name it (the same for a checkout and an install).
CATALOG_LABEL = "hgresearch/data/catalogs"
#: A lookup error lists every key of the catalog up to this many (else only close matches).
MAX_LISTED_KEYS = 30


def catalog_path(name: str) -> Path:
    """Path of the catalog file ``name`` (such as ``hardware.csv``)."""
    return CATALOG_DIR / name


class CatalogKeyError(InputError, KeyError):
    """A key a catalog does not hold, e.g. ``unknown grid region 'EU27'; did you mean 'EU-27'?
    (hgresearch/data/catalogs/grid_carbon.csv, column region: BR, CN, DE, ...)``.

    The one error of every catalog lookup: an :class:`~hgresearch.errors.InputError` (the
    command line prints it as one line and exits 2; ``file``, ``line`` and ``field`` name the
    user's input where the caller knows it) that names the catalog file, its column and the key,
    and suggests the closest keys it does hold. It is also a :class:`KeyError` (a lookup that
    found nothing), so code that guards a lookup with ``except KeyError`` keeps working.

    Attributes:
        catalog: the catalog file (``grid_carbon.csv``).
        column: the column looked in.
        key: the key not found.
        close: the catalog's keys closest to ``key`` (case-insensitive; at most three).
    """

    def __init__(self, catalog: str, column: str, key: object, known: Iterable[object], *,
                 what: str | None = None, message: str | None = None, file: str | None = None,
                 line: int | None = None, field: str | None = None) -> None:
        self.catalog = catalog
        self.column = column
        self.key = key
        keys = sorted({str(k) for k in known})
        by_lower = {k.lower(): k for k in keys}
        self.close = [by_lower[k] for k in difflib.get_close_matches(
            str(key).lower(), list(by_lower), n=3, cutoff=0.6)]
        text = message or f"unknown {what or column} {key!r}"
        if self.close:
            text += f"; did you mean {' or '.join(map(repr, self.close))}?"
        listed = ", ".join(keys) if len(keys) <= MAX_LISTED_KEYS else f"{len(keys)} keys"
        text += f" ({CATALOG_LABEL}/{catalog}, column {column}: {listed or 'none'})"
        super().__init__(text, file=file, line=line, field=field)

    def __str__(self) -> str:
        # KeyError's own __str__ would print the message quoted, as a repr.
        return Exception.__str__(self)


def catalog_rows(catalog: str, table: pd.DataFrame, column: str, key: object, *,
                 what: str | None = None, field: str | None = None) -> pd.DataFrame:
    """The rows of the catalog file ``catalog`` (loaded as ``table``) whose ``column`` equals
    ``key``; :class:`CatalogKeyError` when there is none (``what`` names the key in the
    message, e.g. ``grid region``; ``field``: the user's input it came from)."""
    rows = table[table[column] == key]
    if rows.empty:
        raise CatalogKeyError(catalog, column, key, table[column].dropna(), what=what,
                              field=field)
    return rows


def read_catalog(name: str, required: dict[str, str], nonnegative: list[str],
                 complete: list[str] | tuple[str, ...] = ()) -> pd.DataFrame:
    """Read the catalog file ``name`` and check required columns, sources and dates,
    non-negative numbers, and that the ``complete`` columns have a value in every row."""
    path = catalog_path(name)
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
    ``memory_bandwidth_gb_per_s``, ``fp16_dense_tflops``, ``fp8_dense_tflops`` (empty for a GPU
    without FP8 tensor cores), ``aliases`` (``|``-separated)."""
    return read_catalog(
        "hardware.csv",
        {"gpu_name": "str", "aliases": "str", "tdp_w": "W", "memory_gb": "GB",
         "memory_bandwidth_gb_per_s": "GB/s", "fp16_dense_tflops": "TFLOPS",
         "fp8_dense_tflops": "TFLOPS"},
        ["tdp_w", "memory_gb", "memory_bandwidth_gb_per_s", "fp16_dense_tflops",
         "fp8_dense_tflops"],
    )


#: Bytes of a 16-bit activation: the KV cache and GEMM inputs of a model with quantized weights
#: unless the model says otherwise (vLLM's ``kv_cache_dtype="auto"`` is the model's dtype).
ACTIVATION_DTYPE_BYTES = 2.0
#: Bytes per parameter of FP8 weights: an FP8 checkpoint (``...-FP8-dynamic``: weights and
#: activations in FP8) runs its GEMMs on FP8 tensor cores where the GPU has them.
FP8_WEIGHT_BYTES = 1.0


def kv_cache_dtype_bytes(weight_bytes_per_param: float) -> float:
    """Bytes of one KV-cache value under vLLM's default ``kv_cache_dtype="auto"``: the model's
    dtype — the weights' bytes per parameter, but 16-bit for quantized (FP8, INT8, INT4)
    weights, whose checkpoints keep a 16-bit model dtype. The one definition the simulator,
    the roofline bounds and user calibrations use."""
    return max(float(weight_bytes_per_param), ACTIVATION_DTYPE_BYTES)


def dense_peak_tflops(gpu_row: pd.Series, weight_bytes_per_param: float) -> float:
    """Dense peak TFLOPS of one GPU (a :func:`hardware_catalog` row) for the matrix products of
    a model with ``weight_bytes_per_param``: the FP8 tensor-core rate for FP8 weights on a GPU
    that has one (``fp8_dense_tflops``: Hopper, Ada; vLLM's FP8 checkpoints quantize the
    activations too, W8A8), else the FP16 rate (on Ampere FP8 weights are dequantized; NaN
    when the catalog has neither). The one definition the simulator, the roofline bounds and
    user calibrations use."""
    fp8 = float(gpu_row.get("fp8_dense_tflops", math.nan))
    if float(weight_bytes_per_param) == FP8_WEIGHT_BYTES and fp8 > 0:
        return fp8
    return float(gpu_row.fp16_dense_tflops)


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


def normalize_gpu_name(raw: str, *, field: str | None = "gpu_name") -> str:
    """``NVIDIA-H100-PCIe`` -> ``H100-PCIe``; :class:`CatalogKeyError` for a GPU that
    ``hardware.csv`` has no name or alias for."""
    key = raw.strip().lower()
    aliases = gpu_aliases()
    if key in aliases:
        return aliases[key]
    if key.replace(" ", "-") in aliases:
        return aliases[key.replace(" ", "-")]
    raise CatalogKeyError("hardware.csv", "gpu_name", raw, hardware_catalog().gpu_name,
                          what="GPU", field=field)


def price_scenario_rows(scenario: str, *, field: str | None = "scenario") -> pd.DataFrame:
    """The rows of ``prices.csv`` of one price scenario (:class:`CatalogKeyError` for an
    unknown scenario)."""
    return catalog_rows("prices.csv", price_catalog(), "scenario", scenario,
                        what="price scenario", field=field)


def gpu_price_usd_per_h(gpu_name: str, scenario: str = "alternative") -> float:
    """Price of one GPU-hour; NaN when the GPU is listed but not offered in ``scenario``;
    :class:`CatalogKeyError` for a scenario or GPU the price catalog does not list."""
    prices = price_scenario_rows(scenario)
    row = prices[prices.gpu_name == gpu_name]
    if row.empty:
        raise CatalogKeyError("prices.csv", "gpu_name", gpu_name, prices.gpu_name,
                              message=f"no price for GPU {gpu_name!r} in scenario {scenario!r}",
                              field="gpu_name")
    return float(row.price_usd_per_gpu_h.iloc[0])


def gpu_price_or_nan(gpu_name: str, scenario: str = "alternative") -> float:
    """:func:`gpu_price_usd_per_h`, or NaN where the catalog has no price (e.g. a CPU), for
    tables that show a cost where one exists."""
    try:
        return gpu_price_usd_per_h(gpu_name, scenario)
    except CatalogKeyError:
        return math.nan


@functools.cache
def power_model_catalog() -> pd.DataFrame:
    """Per-GPU idle and busy power of the utilisation power model (``power_model.csv``):
    ``gpu_name``, ``p_idle_w``/``p_max_w`` with ``_low_w``/``_high_w`` bounds, the board's
    ``power_limit_w``, ``source`` and ``date``. Checks ``low <= central <= high``, busy power
    within the board limit and idle power below busy power."""
    power_columns = ["p_idle_w", "p_idle_low_w", "p_idle_high_w", "p_max_w", "p_max_low_w",
                     "p_max_high_w", "power_limit_w"]
    table = read_catalog(
        "power_model.csv",
        {"gpu_name": "str", "p_idle_w": "W", "p_max_w": "W", "power_limit_w": "W"},
        power_columns, complete=power_columns,
    )
    path = str(catalog_path("power_model.csv"))
    for index, row in table.iterrows():
        line = int(index) + 2
        if not row.p_idle_low_w <= row.p_idle_w <= row.p_idle_high_w:
            raise InputError("expected p_idle_low_w <= p_idle_w <= p_idle_high_w",
                             file=path, line=line, field="p_idle_w")
        if not row.p_max_low_w <= row.p_max_w <= row.p_max_high_w <= row.power_limit_w:
            raise InputError("expected p_max_low_w <= p_max_w <= p_max_high_w <= power_limit_w",
                             file=path, line=line, field="p_max_w")
        if row.p_idle_high_w >= row.p_max_low_w:
            raise InputError("idle power must be below busy power", file=path, line=line,
                             field="p_idle_high_w")
    return table


@functools.cache
def grid_catalog() -> pd.DataFrame:
    """Grid carbon intensities (``grid_carbon.csv``), one row per region: ``region``,
    ``region_name``, ``year``, ``g_co2_per_kwh``, ``basis``, ``source``, ``date``."""
    table = read_catalog("grid_carbon.csv",
                         {"region": "str", "region_name": "str", "year": "int",
                          "g_co2_per_kwh": "g CO2 per kWh", "basis": "str"},
                         ["year", "g_co2_per_kwh"],
                         complete=["region", "year", "g_co2_per_kwh", "basis"])
    if table.region.duplicated().any():
        index = int(table.region.duplicated().idxmax())
        raise InputError("duplicate region", file=str(catalog_path("grid_carbon.csv")),
                         line=index + 2, field="region")
    return table


@functools.cache
def electricity_price_catalog() -> pd.DataFrame:
    """Retail electricity prices (``electricity_prices.csv``), one row per region: ``region``,
    ``price_usd_per_kwh`` (converted where the source publishes another currency, with the rate
    in ``usd_per_local``), ``basis``, ``source``, ``date``. What already-owned hardware pays per
    hour of serving (:mod:`hgresearch.plan`: electricity only)."""
    table = read_catalog("electricity_prices.csv",
                         {"region": "str", "price_usd_per_kwh": "USD per kWh", "basis": "str"},
                         ["price_usd_per_kwh", "price_local_per_kwh", "usd_per_local"],
                         complete=["region", "price_usd_per_kwh", "basis"])
    if table.region.duplicated().any():
        index = int(table.region.duplicated().idxmax())
        raise InputError("duplicate region", file=str(catalog_path("electricity_prices.csv")),
                         line=index + 2, field="region")
    return table


@functools.cache
def embodied_catalog() -> pd.DataFrame:
    """Embodied carbon (``embodied_carbon.csv``): per ``item`` (GPU name) and ``component``
    (``gpu`` or ``host_share``, per GPU slot), ``kg_co2e`` with ``_low``/``_high`` bounds,
    ``gpu_class`` (``consumer``/``datacenter``), ``assumptions``, ``source``, ``date``."""
    table = read_catalog("embodied_carbon.csv",
                         {"item": "str", "component": "str", "gpu_class": "str",
                          "kg_co2e": "kg CO2e", "assumptions": "str"},
                         ["kg_co2e", "kg_co2e_low", "kg_co2e_high"],
                         complete=["item", "component", "gpu_class", "kg_co2e", "kg_co2e_low",
                                   "kg_co2e_high", "assumptions"])
    path = str(catalog_path("embodied_carbon.csv"))
    for index, row in table.iterrows():
        if not row.kg_co2e_low <= row.kg_co2e <= row.kg_co2e_high:
            raise InputError("expected kg_co2e_low <= kg_co2e <= kg_co2e_high",
                             file=path, line=int(index) + 2, field="kg_co2e")
        if row.component not in ("gpu", "host_share"):
            raise InputError(f"expected 'gpu' or 'host_share', got {row.component!r}",
                             file=path, line=int(index) + 2, field="component")
    return table


def model_row(model: str, *, field: str | None = "model") -> pd.Series:
    """The architecture of ``model`` (its row of ``model_architectures.csv``)."""
    return catalog_rows("model_architectures.csv", model_catalog(), "model", model,
                        what="model", field=field).iloc[0]


def grid_row(region: str, *, field: str | None = "grid_region") -> pd.Series:
    """The row of ``region`` in ``grid_carbon.csv``."""
    return catalog_rows("grid_carbon.csv", grid_catalog(), "region", region,
                        what="grid region", field=field).iloc[0]


def electricity_price_row(region: str, *, field: str | None = "electricity_region"
                          ) -> pd.Series:
    """The row of ``region`` in ``electricity_prices.csv``."""
    return catalog_rows("electricity_prices.csv", electricity_price_catalog(), "region", region,
                        what="electricity region", field=field).iloc[0]


def embodied_rows(gpu_name: str, *, field: str | None = "gpu_name") -> pd.DataFrame:
    """The rows (components) of ``gpu_name`` in ``embodied_carbon.csv``."""
    return catalog_rows("embodied_carbon.csv", embodied_catalog(), "item", gpu_name,
                        what="GPU (embodied carbon)", field=field)


# ---------------------------------------------------------------------------------------------
# What the AIBC 2025 paper printed (paper_printed/): the other side of the reproduction audit
# ---------------------------------------------------------------------------------------------

#: Folder of the transcribed printed tables, figure labels and claims (see its README.md).
PRINTED_DIR = "paper_printed"
#: Printed numeric columns of each printed table, with their units.
PRINTED_TABLE2_COLUMNS = {
    "qps": "QPS", "gpus": "GPUs", "duration_s": "s", "cost_run_usd": "USD",
    "cost_per_mtok_usd": "USD per 1M tokens", "tps": "tokens/s", "req_s": "requests/s",
    "ttft_mean_ms": "ms", "ttft_median_ms": "ms", "ttft_p90_ms": "ms", "ttft_p99_ms": "ms"}
PRINTED_TABLE3_COLUMNS = {
    "tps": "tokens/s", "tokens_per_h_m": "1e6 tokens per hour", "energy_kwh": "kWh per hour",
    "tokens_per_kwh_m": "1e6 tokens per kWh", "g_co2_per_mtok": "g CO2 per 1M tokens"}
PRINTED_FIGURE1_COLUMNS = {"target_qps": "QPS", "printed_cost_per_mtok_usd": "USD per 1M tokens",
                           "printed_achieved_rps": "requests/s"}


def _printed(name: str, keys: dict[str, str], numbers: dict[str, str],
             complete: list[str]) -> pd.DataFrame:
    return read_catalog(f"{PRINTED_DIR}/{name}", {**keys, **numbers}, list(numbers),
                        complete=complete)


@functools.cache
def printed_table2() -> pd.DataFrame:
    """Table 2 as the paper printed it (``paper_printed/table2.csv``): ``row``, the configuration
    ``gpus`` x ``gpu`` at ``qps``, and the ten printed values."""
    return _printed("table2.csv", {"row": "int", "gpu": "str"}, PRINTED_TABLE2_COLUMNS,
                    ["row", "gpu", *PRINTED_TABLE2_COLUMNS])


@functools.cache
def printed_table3() -> pd.DataFrame:
    """Table 3 as printed (``paper_printed/table3.csv``): ``config`` (``1xH100-PCIe``) and the
    five printed values."""
    return _printed("table3.csv", {"config": "str"}, PRINTED_TABLE3_COLUMNS,
                    ["config", *PRINTED_TABLE3_COLUMNS])


@functools.cache
def printed_figure1_labels() -> pd.DataFrame:
    """The readable labels of Figure 1 (``paper_printed/figure1_labels.csv``): ``series`` (a
    hardware label, ``4 x (2x RTX-4090)`` for replicas), ``target_qps``, the printed cost per
    1M tokens and, where printed, the achieved request rate."""
    return _printed("figure1_labels.csv", {"series": "str"}, PRINTED_FIGURE1_COLUMNS,
                    ["series", "target_qps", "printed_cost_per_mtok_usd"])


@functools.cache
def printed_claims() -> pd.DataFrame:
    """The paper's headline claims (``paper_printed/claims.csv``): ``id``, ``claim`` (our
    paraphrase), ``quantity`` asserted and ``where`` it appears."""
    return read_catalog(f"{PRINTED_DIR}/claims.csv",
                        {"id": "str", "claim": "str", "quantity": "str", "where": "str"}, [],
                        complete=["id", "claim", "quantity", "where"])


def printed_decimals(name: str) -> pd.DataFrame:
    """Decimals of every printed number of ``paper_printed/<name>`` (``35.10`` -> 2), as the
    text shows them: a printed value stands for the interval its last digit rounds, so the
    audit compares at this precision. Non-numeric cells get -1."""
    text = pd.read_csv(catalog_path(f"{PRINTED_DIR}/{name}"), dtype=str, keep_default_na=False)

    def places(cell: str) -> int:
        try:
            float(cell)
        except ValueError:
            return -1
        return len(cell.split(".")[1]) if "." in cell else 0

    return text.apply(lambda column: column.map(places))
