"""The RTX 4090 against the H100: one row per RTX 4090 configuration and definition of
"against", the rows every ratio claim (C1, C2, C7; :mod:`~hgresearch.report.audit.definitions`)
is tested on.

Each RTX 4090 configuration (1, 2, 4 or 8 GPUs) is compared with one H100-PCIe serving the same
model (every model the reference data ran on RTX 4090s also ran on one H100). Definitions
(:data:`COMPARISON_DEFINITIONS`):

* ``matched load @ q`` — the two at the same offered rate q (the paper's comparison, the
  claims' primary definition: :func:`matched_comparisons`);
* ``matched load, all rates`` — every rate pooled;
* ``peak measured`` — the highest-throughput point of each configuration, any rate;
* ``fitted capacity`` — the capacity model's sustained throughput
  (:func:`hgresearch.fits.saturation.fit_saturations`), cost per token at that throughput.

A measured point is its first run (the audit's :data:`~hgresearch.report.audit.common.
REPEAT_POLICY`); the capacity model is fitted on every run. Throughput is total (input + output)
tokens/s as the paper's tables; costs are per 1M total tokens at the price scenario's hourly
prices (``alternative``: H100-PCIe $2.00/h, RTX 4090 $0.25/h per GPU).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from hgresearch.accounting.costs import (
    add_costs,
    cost_per_million_tok_at_rate_usd,
    hourly_cost_usd,
)
from hgresearch.data.catalogs import gpu_price_usd_per_h
from hgresearch.data.ingest import select_repeats
from hgresearch.identity import hardware_label
from hgresearch.report.audit.common import REPEAT_POLICY, point_label

MATCHED_ALL_RATES = "matched load, all rates"
PEAK_MEASURED = "peak measured"
FITTED_CAPACITY = "fitted capacity"
#: The definitions in the order the tables list them (``matched load @ q`` first, by rate).
COMPARISON_DEFINITIONS = ("matched load @ q", MATCHED_ALL_RATES, PEAK_MEASURED, FITTED_CAPACITY)
#: Columns of every comparison table (:func:`comparisons`; :func:`matched_comparisons` has all
#: but ``definition``). ``qps`` is NaN where the definition has no single offered rate.
COMPARISON_COLUMNS = [
    "definition", "model", "hardware", "gpu_count", "qps", "tok_per_s", "tok_per_s_h100",
    "cost_usd_per_1m_tok", "cost_usd_per_1m_tok_h100", "p99_ttft_ms", "p99_ttft_ms_h100",
    "throughput_ratio", "cost_ratio", "cost_reduction", "tok_per_usd_ratio",
    "hourly_price_ratio", "label"]
#: Columns of a measured point the comparisons read.
_POINT_COLUMNS = ["model", "hardware", "gpu_name", "gpu_count", "request_rate_qps",
                  "total_token_throughput_tok_per_s", "cost_usd_per_1m_tok", "p99_ttft_ms"]


def matched_at(qps: float) -> str:
    """The name of the ``matched load @ q`` definition at offered rate ``qps``."""
    return f"matched load @ {qps:g} req/s"


def comparison_points(runs: pd.DataFrame, scenario: str = "alternative") -> pd.DataFrame:
    """The measured points the comparisons read: single-replica runs, the first run of a
    repeated point (:data:`~hgresearch.report.audit.common.REPEAT_POLICY`), with costs."""
    return add_costs(select_repeats(runs[runs.replicas == 1], REPEAT_POLICY), scenario)


def _ratios(out: pd.DataFrame, price_c: float, price_e: float,
            replicas: pd.Series | int = 1) -> pd.DataFrame:
    """``out`` (one row per pair, both sides' throughput and cost; the consumer side with
    ``replicas`` replicas) with the ratio columns."""
    out["throughput_ratio"] = out.tok_per_s / out.tok_per_s_h100
    out["cost_ratio"] = out.cost_usd_per_1m_tok / out.cost_usd_per_1m_tok_h100
    out["cost_reduction"] = 1.0 - out.cost_ratio
    out["tok_per_usd_ratio"] = 1.0 / out.cost_ratio
    out["hourly_price_ratio"] = (hourly_cost_usd(out.gpu_count, price_c, replicas)
                                 / hourly_cost_usd(1, price_e))
    return out


def _paired_points(cons: pd.DataFrame, ent: pd.DataFrame, on: list[str], price_c: float,
                   price_e: float) -> pd.DataFrame:
    """Consumer points beside the enterprise point they are paired with (``on``)."""
    merged = cons.merge(ent, on=on, suffixes=("", "_h100"))
    out = pd.DataFrame({
        "model": merged.model, "hardware": merged.hardware, "gpu_count": merged.gpu_count,
        "qps": merged.request_rate_qps,
        "tok_per_s": merged.total_token_throughput_tok_per_s,
        "tok_per_s_h100": merged.total_token_throughput_tok_per_s_h100,
        "cost_usd_per_1m_tok": merged.cost_usd_per_1m_tok,
        "cost_usd_per_1m_tok_h100": merged.cost_usd_per_1m_tok_h100,
        "p99_ttft_ms": merged.p99_ttft_ms, "p99_ttft_ms_h100": merged.p99_ttft_ms_h100})
    return _ratios(out, price_c, price_e)


def matched_comparisons(runs: pd.DataFrame, scenario: str = "alternative",
                        consumer: str = "RTX-4090", enterprise: str = "H100-PCIe"
                        ) -> pd.DataFrame:
    """Every ``consumer`` configuration beside one ``enterprise`` GPU of the same model at the
    same offered load (first run of a repeated point; :data:`DEFINITIONS` ``claims``).

    Columns: model, hardware, gpu_count, qps, throughput (total tokens/s) of both and their
    ratio, cost per 1M tokens of both, ``cost_ratio``, ``cost_reduction`` (1 - cost ratio),
    ``tok_per_usd_ratio`` (enterprise cost over consumer cost), ``hourly_price_ratio``, the
    consumer's ``p99_ttft_ms`` and a ``label`` naming the Table 2 row where there is one."""
    data = comparison_points(runs, scenario)
    cons = data[data.gpu_name == consumer][_POINT_COLUMNS]
    ent = data[(data.gpu_name == enterprise) & (data.gpu_count == 1)][_POINT_COLUMNS]
    out = _paired_points(cons, ent, ["model", "request_rate_qps"],
                         gpu_price_usd_per_h(consumer, scenario),
                         gpu_price_usd_per_h(enterprise, scenario))
    out["label"] = [point_label(h, q, m) for h, q, m in zip(out.hardware, out.qps, out.model,
                                                             strict=True)]
    return out.sort_values(["model", "gpu_count", "qps"], kind="stable").reset_index(drop=True)


def peak_comparisons(runs: pd.DataFrame, scenario: str = "alternative",
                     consumer: str = "RTX-4090", enterprise: str = "H100-PCIe") -> pd.DataFrame:
    """Each ``consumer`` configuration's highest-throughput point beside the ``enterprise``
    GPU's highest-throughput point of the same model (whatever their offered rates)."""
    data = comparison_points(runs, scenario)
    cons = data[data.gpu_name == consumer]
    ent = data[(data.gpu_name == enterprise) & (data.gpu_count == 1)]
    peak_c = cons.loc[cons.groupby(["model", "gpu_count"]).total_token_throughput_tok_per_s
                      .idxmax()][_POINT_COLUMNS]
    peak_e = ent.loc[ent.groupby("model").total_token_throughput_tok_per_s.idxmax()][
        _POINT_COLUMNS].drop(columns=["request_rate_qps", "hardware", "gpu_name", "gpu_count"])
    out = _paired_points(peak_c, peak_e, ["model"], gpu_price_usd_per_h(consumer, scenario),
                         gpu_price_usd_per_h(enterprise, scenario))
    out["qps"] = math.nan
    out["label"] = [f"{m} {h} peak" for m, h in zip(out.model, out.hardware, strict=True)]
    return out


def capacity_comparisons(capacity: pd.DataFrame, scenario: str = "alternative",
                         consumer: str = "RTX-4090", enterprise: str = "H100-PCIe"
                         ) -> pd.DataFrame:
    """Each ``consumer`` configuration's fitted capacity beside the ``enterprise`` GPU's, cost per
    1M tokens when serving at capacity (every GPU of every replica billed). ``capacity``: the
    table of :func:`hgresearch.fits.saturation.fit_saturations`."""
    price_c = gpu_price_usd_per_h(consumer, scenario)
    price_e = gpu_price_usd_per_h(enterprise, scenario)
    cap = capacity[["model", "gpu_name", "gpu_count", "replicas", "capacity_tok_per_s"]].assign(
        cost_usd_per_1m_tok=lambda c: cost_per_million_tok_at_rate_usd(
            c.capacity_tok_per_s, c.gpu_count,
            np.where(c.gpu_name == consumer, price_c, price_e), c.replicas))
    cons = cap[cap.gpu_name == consumer]
    ent = cap[(cap.gpu_name == enterprise) & (cap.gpu_count == 1)]
    merged = cons.merge(ent[["model", "capacity_tok_per_s", "cost_usd_per_1m_tok"]],
                        on="model", suffixes=("", "_h100"))
    out = pd.DataFrame({
        "model": merged.model,
        "hardware": [hardware_label(g, n, r) for g, n, r in
                     zip(merged.gpu_name, merged.gpu_count, merged.replicas, strict=True)],
        "gpu_count": merged.gpu_count, "qps": math.nan,
        "tok_per_s": merged.capacity_tok_per_s,
        "tok_per_s_h100": merged.capacity_tok_per_s_h100,
        "cost_usd_per_1m_tok": merged.cost_usd_per_1m_tok,
        "cost_usd_per_1m_tok_h100": merged.cost_usd_per_1m_tok_h100,
        "p99_ttft_ms": math.nan, "p99_ttft_ms_h100": math.nan})
    out = _ratios(out, price_c, price_e, merged.replicas)
    out["label"] = [f"{m} {h} capacity" for m, h in zip(out.model, out.hardware, strict=True)]
    return out


def comparisons(runs: pd.DataFrame, capacity: pd.DataFrame | None = None,
                scenario: str = "alternative", consumer: str = "RTX-4090",
                enterprise: str = "H100-PCIe") -> pd.DataFrame:
    """Every comparison row under every definition (:data:`COMPARISON_COLUMNS`), in the order of
    :data:`COMPARISON_DEFINITIONS` (matched loads by rate), then model, GPU count and rate.
    Without ``capacity`` there is no ``fitted capacity`` row."""
    matched = matched_comparisons(runs, scenario, consumer, enterprise)
    parts = [matched.assign(definition=[matched_at(q) for q in matched.qps]),
             matched.assign(definition=MATCHED_ALL_RATES),
             peak_comparisons(runs, scenario, consumer, enterprise).assign(
                 definition=PEAK_MEASURED)]
    if capacity is not None and not capacity.empty:
        parts.append(capacity_comparisons(capacity, scenario, consumer, enterprise).assign(
            definition=FITTED_CAPACITY))
    table = pd.concat(parts, ignore_index=True)[COMPARISON_COLUMNS]
    table["_order"] = [definition_order(d) for d in table.definition]
    return table.sort_values(["_order", "model", "gpu_count", "qps"], kind="stable").drop(
        columns="_order").reset_index(drop=True)


def definition_order(definition: str) -> tuple[int, float]:
    """Sort key of a definition: matched loads first (by rate), then the others in the order
    of :data:`COMPARISON_DEFINITIONS`."""
    if definition.startswith("matched load @"):
        return (0, float(definition.split("@")[1].split()[0]))
    return (COMPARISON_DEFINITIONS.index(definition), 0.0)
