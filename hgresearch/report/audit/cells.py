"""Printed cells beside regenerated ones, with the explanation the code finds for each
difference (Table 2 and Table 3; the order of preference is in the package docstring).

A printed value with *d* decimals stands for every number that rounds to it, so it is
*reproduced* when the regenerated value is within half a unit of its last digit
(:func:`~hgresearch.report.audit.common.reproduces`). The regenerated value follows the table's
definition (:data:`~hgresearch.report.audit.common.DEFINITIONS`: the first run of a repeated
point). A candidate explanation that also reproduces every other printed cell of its row is
preferred to one that does not; one that contradicts another printed cell of the row says
which.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hgresearch.accounting.costs import (
    cost_per_million_tok_at_rate_usd,
    cost_per_million_tok_usd,
    run_cost_usd,
)
from hgresearch.accounting.energy import (
    PAPER_GRID_G_PER_KWH,
    add_tdp_energy,
    g_co2_per_1m_tok,
    tokens_per_kwh,
)
from hgresearch.data.catalogs import (
    gpu_price_usd_per_h,
    printed_decimals,
    printed_table2,
    printed_table3,
)
from hgresearch.identity import hardware_label
from hgresearch.report.audit.common import (
    MEAN_OF_REPEATS,
    REPEAT_RUN,
    REPRODUCED,
    ROUNDING_CHAIN,
    UNEXPLAINED,
    fmt_value,
    reproduces,
)
from hgresearch.report.paper_tables import (
    PAPER_MODEL,
    TABLE2_HARDWARE,
    TABLE3_CONFIGURATIONS,
    configuration_runs,
)
from hgresearch.units import SECONDS_PER_HOUR, TOKENS_PER_MILLION

#: Table 2's printed columns -> columns of the runs table with costs (:func:`add_costs`).
TABLE2_RUN_COLUMNS = {
    "duration_s": "duration_s", "cost_run_usd": "cost_usd",
    "cost_per_mtok_usd": "cost_usd_per_1m_tok", "tps": "total_token_throughput_tok_per_s",
    "req_s": "request_throughput_rps", "ttft_mean_ms": "mean_ttft_ms",
    "ttft_median_ms": "median_ttft_ms", "ttft_p90_ms": "p90_ttft_ms",
    "ttft_p99_ms": "p99_ttft_ms"}
#: Table 3's printed columns -> columns of :func:`table3_run_values`.
TABLE3_RUN_COLUMNS = {
    "tps": "total_token_throughput_tok_per_s", "tokens_per_h_m": "tok_per_h_m",
    "energy_kwh": "tdp_kwh_per_h", "tokens_per_kwh_m": "tdp_tok_per_kwh_m",
    "g_co2_per_mtok": "tdp_g_co2_per_1m_tok"}
#: Rows of the run-level audit tables that name a point and how it was chosen.
CELL_COLUMNS = ["row", "hardware", "qps", "column", "printed", "printed_decimals",
                "regenerated", "difference",
                "explanation_kind", "explained_by", "explanation", "other_candidates"]



@dataclass(frozen=True)
class RoundingChain:
    """A printed cell recomputed from the row's printed (rounded) cells, as a reader would."""

    column: str
    formula: str
    compute: Callable[[pd.Series], float]


@dataclass
class PrintedRow:
    """One printed row to audit: its printed values and decimals, and every run of its point.

    ``runs`` holds one row per run with the regenerated columns named by the table's column
    map; ``repeat_index`` 0 is the one the table's definition shows."""

    row: str
    hardware: str
    qps: float
    printed: pd.Series
    decimals: pd.Series
    runs: pd.DataFrame


@dataclass
class _Candidate:
    kind: str
    source: str
    detail: str
    contradicts: list[str] = field(default_factory=list)

    def text(self) -> str:
        if not self.contradicts:
            return self.detail
        return f"{self.detail} (but contradicts printed {', '.join(self.contradicts)})"


_PREFERENCE = {REPEAT_RUN: 0, ROUNDING_CHAIN: 1, MEAN_OF_REPEATS: 2}


def _mismatched(values: pd.Series, item: PrintedRow, columns: dict[str, str]) -> list[str]:
    return [c for c in columns
            if not reproduces(float(values[columns[c]]), float(item.printed[c]),
                              int(item.decimals[c]))]


def _explain(item: PrintedRow, runs: pd.DataFrame, mean: pd.Series | None, column: str,
             run_column: str, columns: dict[str, str], chains: Sequence[RoundingChain]
             ) -> tuple[str, str, str, str]:
    """A differing printed cell's explanation: (kind, source, text, other candidates) from the
    point's other runs, the rounding chains of ``column`` and the mean of the runs; a
    candidate that contradicts another printed cell of the row ranks below one that does not."""
    printed = float(item.printed[column])
    decimals = int(item.decimals[column])
    candidates: list[_Candidate] = []
    for _, run in runs.iloc[1:].iterrows():
        if reproduces(float(run[run_column]), printed, decimals):
            source = f"run {int(run.repeat_index) + 1} of {len(runs)} of the point"
            candidates.append(_Candidate(REPEAT_RUN, source,
                                         f"{source} gives {fmt_value(float(run[run_column]))}",
                                         _mismatched(run, item, columns)))
    for chain in chains:
        if chain.column == column:
            recomputed = float(chain.compute(item.printed))
            if reproduces(recomputed, printed, decimals):
                candidates.append(_Candidate(ROUNDING_CHAIN, chain.formula,
                                             f"{chain.formula} = {fmt_value(recomputed)}"))
    if mean is not None and reproduces(float(mean[run_column]), printed, decimals):
        candidates.append(_Candidate(
            MEAN_OF_REPEATS, f"mean of the {len(runs)} runs",
            f"mean of the {len(runs)} runs gives {fmt_value(float(mean[run_column]))}",
            _mismatched(mean, item, columns)))
    if not candidates:
        return UNEXPLAINED, "", "no run of the point, rounding chain or mean gives it", ""
    candidates.sort(key=lambda c: (bool(c.contradicts), _PREFERENCE[c.kind]))
    best = candidates[0]
    return (best.kind, best.source, best.text(),
            "; ".join(f"{c.kind}: {c.text()}" for c in candidates[1:]))


def audit_cells(items: list[PrintedRow], columns: dict[str, str],
                chains: Sequence[RoundingChain] = ()) -> pd.DataFrame:
    """Every printed cell of ``items`` beside the regenerated value (run ``repeat_index`` 0),
    the difference and the explanation (module docstring). ``columns`` maps printed column to
    run column. Columns :data:`CELL_COLUMNS`."""
    rows = []
    for item in items:
        runs = item.runs.sort_values("repeat_index", kind="stable").reset_index(drop=True)
        shown = runs[runs.repeat_index == 0]
        if shown.empty:
            raise KeyError(f"no first run for {item.hardware} @ {item.qps:g} QPS")
        shown = shown.iloc[0]
        mean = runs[list(columns.values())].mean() if len(runs) > 1 else None
        for column, run_column in columns.items():
            printed = float(item.printed[column])
            decimals = int(item.decimals[column])
            value = float(shown[run_column])
            if reproduces(value, printed, decimals):
                kind, source, text, others = REPRODUCED, "", "", ""
            else:
                kind, source, text, others = _explain(item, runs, mean, column, run_column,
                                                      columns, chains)
            rows.append({"row": item.row, "hardware": item.hardware, "qps": item.qps,
                         "column": column, "printed": printed,
                         "printed_decimals": decimals, "regenerated": value,
                         "difference": value - printed, "explanation_kind": kind,
                         "explained_by": source, "explanation": text,
                         "other_candidates": others})
    return pd.DataFrame(rows, columns=CELL_COLUMNS)


def summarize_rows(cells: pd.DataFrame) -> pd.DataFrame:
    """One line per audited row: cells printed, cells that differ, their explanation kinds and
    what explains them (a run, a rounding chain, ...)."""
    out = []
    for row, part in cells.groupby("row", sort=False):
        differing = part[part.explanation_kind != REPRODUCED]
        kinds = list(dict.fromkeys(differing.explanation_kind))
        sources = list(dict.fromkeys(s for s in differing.explained_by if s))
        out.append({"row": row, "hardware": part.hardware.iloc[0], "qps": part.qps.iloc[0],
                    "cells": len(part), "cells_differing": len(differing),
                    "differing_columns": ", ".join(differing.column),
                    "explanation_kind": "; ".join(kinds) or REPRODUCED,
                    "explained_by": "; ".join(sources)})
    return pd.DataFrame(out)



# ---------------------------------------------------------------------------------------------
# Table 2 and Table 3
# ---------------------------------------------------------------------------------------------

def _point_runs(runs: pd.DataFrame, hardware: str, qps: float) -> pd.DataFrame:
    point = runs[(runs.hardware == hardware) & np.isclose(runs.request_rate_qps, qps)]
    if point.empty:
        raise KeyError(f"no run of {hardware} at {qps:g} QPS")
    return point


def table2_chains(scenario: str = "alternative") -> list[RoundingChain]:
    """Table 2's cells recomputed from the printed duration, throughput and run cost."""

    def price(row: pd.Series) -> float:
        return gpu_price_usd_per_h(str(row.gpu), scenario)

    return [
        RoundingChain("cost_run_usd", "printed duration x GPUs x price",
                      lambda r: run_cost_usd(float(r.duration_s), float(r.gpus), price(r))),
        RoundingChain("cost_per_mtok_usd", "GPUs x price / printed tokens per hour",
                      lambda r: cost_per_million_tok_at_rate_usd(float(r.tps), float(r.gpus),
                                                                 price(r))),
        RoundingChain("cost_per_mtok_usd",
                      "printed run cost / (printed tokens/s x printed duration)",
                      lambda r: cost_per_million_tok_usd(float(r.cost_run_usd),
                                                         float(r.tps) * float(r.duration_s))),
    ]


def audit_table2(runs: pd.DataFrame, model: str = PAPER_MODEL,
                 scenario: str = "alternative") -> pd.DataFrame:
    """Table 2, printed vs regenerated, one line per printed cell (:data:`CELL_COLUMNS`).

    ``runs``: every run (repeats included) of the runs table
    (:func:`hgresearch.data.ingest.read_runs`).
    """
    printed = printed_table2()
    decimals = printed_decimals("table2.csv")
    data = configuration_runs(runs, model, TABLE2_HARDWARE, scenario, repeat_policy="all")
    items = []
    for index, row in printed.iterrows():
        hardware = hardware_label(str(row.gpu), int(row.gpus))
        items.append(PrintedRow(f"#{int(row.row)}", hardware, float(row.qps), row,
                                decimals.loc[index], _point_runs(data, hardware, row.qps)))
    return audit_cells(items, TABLE2_RUN_COLUMNS, table2_chains(scenario))


def table3_run_values(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs with Table 3's columns (TDP model, paper TDP;
    :func:`hgresearch.report.paper_tables.table3`),
    in the printed units (millions)."""
    out = add_tdp_energy(runs, "paper")
    out["tok_per_h_m"] = out.tok_per_h / TOKENS_PER_MILLION
    out["tdp_tok_per_kwh_m"] = out.tdp_tok_per_kwh / TOKENS_PER_MILLION
    return out


def table3_chains(grid_g_per_kwh: float = PAPER_GRID_G_PER_KWH) -> list[RoundingChain]:
    """Table 3's cells recomputed from the printed tokens per hour, kWh and tokens per kWh."""
    return [
        RoundingChain("tokens_per_h_m", "printed tokens/s x seconds per hour",
                      lambda r: float(r.tps) * SECONDS_PER_HOUR / TOKENS_PER_MILLION),
        RoundingChain(
            "tokens_per_kwh_m", "printed M tokens per hour / printed kWh per hour",
            lambda r: tokens_per_kwh(float(r.tokens_per_h_m) * TOKENS_PER_MILLION
                                     / SECONDS_PER_HOUR, float(r.energy_kwh) * 1000.0)
            / TOKENS_PER_MILLION),
        RoundingChain(
            "g_co2_per_mtok", f"{grid_g_per_kwh:g} g/kWh / printed M tokens per kWh",
            lambda r: g_co2_per_1m_tok(float(r.tokens_per_kwh_m) * TOKENS_PER_MILLION,
                                       grid_g_per_kwh)),
    ]


def audit_table3(runs: pd.DataFrame, model: str = PAPER_MODEL,
                 configurations: Iterable[tuple[str, int, float]] = TABLE3_CONFIGURATIONS
                 ) -> pd.DataFrame:
    """Table 3, printed vs regenerated, one line per printed cell (:data:`CELL_COLUMNS`).

    The printed rows name a configuration but no offered load; the load is that of
    ``configurations`` (the library's Table 3 definition)."""
    printed = printed_table3()
    decimals = printed_decimals("table3.csv")
    qps_of = {hardware_label(g, n): q for g, n, q in configurations}
    data = table3_run_values(runs[runs.model == model])
    items = []
    for index, row in printed.iterrows():
        match = re.fullmatch(r"(\d+)x\s*(.+)", str(row.config))
        hardware = hardware_label(match.group(2), int(match.group(1))) if match else ""
        if hardware not in qps_of:
            raise KeyError(f"printed Table 3 row {row.config!r} is not one of {list(qps_of)}")
        qps = qps_of[hardware]
        items.append(PrintedRow(hardware, hardware, qps, row, decimals.loc[index],
                                _point_runs(data, hardware, qps)))
    return audit_cells(items, TABLE3_RUN_COLUMNS, table3_chains())

