"""Reproduction audit: every number and claim the AIBC 2025 paper printed beside what the raw
runs give, with an explanation found by code.

The printed side is the catalog :mod:`hgresearch.data.catalogs` ``paper_printed/``; the regenerated
side comes from the runs table only, through the library's own formulas
(:mod:`hgresearch.report.paper_tables`
for Table 2, Table 3 and Figure 1).

**Cells** (:func:`audit_table2`, :func:`audit_table3`). A printed value with *d* decimals
stands for every number that rounds to it, so it is *reproduced* when the regenerated value is
within half a unit of its last digit. The regenerated value follows the table's definition
(:data:`DEFINITIONS`: the first run of a repeated point, as :mod:`hgresearch.report.paper_tables`).
Where a
cell differs, the code looks for an explanation, in this order of preference:

* ``repeat run`` — another run of the same point reproduces the cell (every run of the point is
  searched);
* ``rounding chain`` — recomputing the cell from the row's *printed* (rounded) inputs, as a
  reader of the table would, reproduces it;
* ``mean of repeats`` — the mean over the point's runs reproduces it;
* else ``unexplained``.

A candidate that also reproduces every other printed cell of its row is preferred to one that
does not; a candidate that contradicts another printed cell of the row says which.

**Figure 1** (:func:`audit_figure1`): each readable label beside the regenerated value of the
point it sits on; ``mislabel`` when the label is the value of another configuration,
``projection`` when the point is not a measurement (replicas behind a load balancer that were
never run) and the projection rule of :func:`hgresearch.report.paper_tables.project_replicas` gives
it.

**Claims** (:func:`audit_claims`): each claim is tested under its primary definition (the claim
as worded, with the definitions of :data:`DEFINITIONS`) and under alternatives; the verdict is
``reproduced`` (primary holds), ``reproduced only under another definition`` (naming it),
``contradicted`` (tested, nothing holds) or ``not testable with this data``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from hgresearch.accounting.costs import (
    add_costs,
    cost_per_million_tok_at_rate_usd,
    cost_per_million_tok_usd,
    hourly_cost_usd,
    run_cost_usd,
)
from hgresearch.accounting.energy import (
    PAPER_GRID_G_PER_KWH,
    add_power_model,
    add_tdp_energy,
    g_co2_per_1m_tok,
    tokens_per_kwh,
)
from hgresearch.data.catalogs import (
    gpu_price_usd_per_h,
    printed_claims,
    printed_decimals,
    printed_figure1_labels,
    printed_table2,
    printed_table3,
)
from hgresearch.data.ingest import select_repeats
from hgresearch.identity import hardware_label
from hgresearch.plan.hybrid_study import summarize_hybrid_advantage
from hgresearch.report.paper_tables import (
    PAPER_MODEL,
    TABLE2_HARDWARE,
    TABLE3_CONFIGURATIONS,
    configuration_runs,
    project_replicas,
    ratio_estimates,
    scaling_points,
)
from hgresearch.units import SECONDS_PER_HOUR, TOKENS_PER_MILLION

#: Table names (under paper/tables) the model evidence reads: written by notebooks 05 and 08.
CARBON_BREAK_EVEN_TABLE = "carbon_break_even"
HYBRID_ADVANTAGE_TABLE = "fleet_hybrid_advantage"

# ---------------------------------------------------------------------------------------------
# Explanation kinds, verdicts and definitions (one wording each, used by every table)
# ---------------------------------------------------------------------------------------------

REPRODUCED = "reproduced"
REPEAT_RUN = "repeat run"
ROUNDING_CHAIN = "rounding chain"
MEAN_OF_REPEATS = "mean of repeats"
MISLABEL = "mislabel"
PROJECTION = "projection"
UNEXPLAINED = "unexplained"
#: Explanation kinds of a cell, in order of preference.
EXPLANATION_KINDS = (REPRODUCED, REPEAT_RUN, ROUNDING_CHAIN, MEAN_OF_REPEATS, MISLABEL,
                     PROJECTION, UNEXPLAINED)

VERDICT_REPRODUCED = "reproduced"
VERDICT_OTHER_DEFINITION = "reproduced only under another definition"
VERDICT_CONTRADICTED = "contradicted"
VERDICT_NOT_TESTABLE = "not testable with this data"
VERDICTS = (VERDICT_REPRODUCED, VERDICT_OTHER_DEFINITION, VERDICT_CONTRADICTED,
            VERDICT_NOT_TESTABLE)

#: The definition of each audited table's regenerated numbers, stated once.
DEFINITIONS = {
    "table2": ("first run of a repeated point (as listed in its result file); cost per 1M total "
               "(input + output) tokens; alternative prices (catalog prices.csv)"),
    "table3": ("first run of a repeated point; TDP model with the paper's TDP per GPU; tokens = "
               "input + output; paper grid intensity (g CO2 per kWh)"),
    "figure1": "first run of a repeated point; cost per 1M total tokens; alternative prices",
    "claims": ("RTX 4090 configuration vs 1x H100-PCIe at the same offered load (matched QPS), "
               "first run of a repeated point, total tokens, cost per 1M tokens at alternative "
               "prices, the paper's model"),
}

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


def reproduces(value: float, printed: float, decimals: int) -> bool:
    """Whether ``value`` rounds to ``printed`` shown with ``decimals`` decimals (half a unit of
    the last printed digit, plus a hair for binary floating point)."""
    if value is None or printed is None or not np.isfinite(value) or not np.isfinite(printed):
        return False
    return abs(value - printed) <= 0.5 * 10.0 ** -decimals + 1e-9


# ---------------------------------------------------------------------------------------------
# Cell-by-cell comparison with explanations (shared by Table 2 and Table 3)
# ---------------------------------------------------------------------------------------------

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


def _fmt(value: float) -> str:
    return "—" if value is None or not np.isfinite(value) else f"{value:.6g}"


def _mismatched(values: pd.Series, item: PrintedRow, columns: dict[str, str]) -> list[str]:
    return [c for c in columns
            if not reproduces(float(values[columns[c]]), float(item.printed[c]),
                              int(item.decimals[c]))]


def _explain(item: PrintedRow, runs: pd.DataFrame, mean: pd.Series | None, column: str,
             run_column: str, columns: dict[str, str], chains: list[RoundingChain]
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
                                         f"{source} gives {_fmt(float(run[run_column]))}",
                                         _mismatched(run, item, columns)))
    for chain in chains:
        if chain.column == column:
            recomputed = float(chain.compute(item.printed))
            if reproduces(recomputed, printed, decimals):
                candidates.append(_Candidate(ROUNDING_CHAIN, chain.formula,
                                             f"{chain.formula} = {_fmt(recomputed)}"))
    if mean is not None and reproduces(float(mean[run_column]), printed, decimals):
        candidates.append(_Candidate(
            MEAN_OF_REPEATS, f"mean of the {len(runs)} runs",
            f"mean of the {len(runs)} runs gives {_fmt(float(mean[run_column]))}",
            _mismatched(mean, item, columns)))
    if not candidates:
        return UNEXPLAINED, "", "no run of the point, rounding chain or mean gives it", ""
    candidates.sort(key=lambda c: (bool(c.contradicts), _PREFERENCE[c.kind]))
    best = candidates[0]
    return (best.kind, best.source, best.text(),
            "; ".join(f"{c.kind}: {c.text()}" for c in candidates[1:]))


def audit_cells(items: list[PrintedRow], columns: dict[str, str],
                chains: list[RoundingChain] = ()) -> pd.DataFrame:
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
                 configurations: list[tuple[str, int, float]] = TABLE3_CONFIGURATIONS
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
        count, gpu = re.fullmatch(r"(\d+)x\s*(.+)", str(row.config)).groups()
        hardware = hardware_label(gpu, int(count))
        if hardware not in qps_of:
            raise KeyError(f"printed Table 3 row {row.config!r} is not one of {list(qps_of)}")
        qps = qps_of[hardware]
        items.append(PrintedRow(hardware, hardware, qps, row, decimals.loc[index],
                                _point_runs(data, hardware, qps)))
    return audit_cells(items, TABLE3_RUN_COLUMNS, table3_chains())


# ---------------------------------------------------------------------------------------------
# Figure 1
# ---------------------------------------------------------------------------------------------

FIGURE1_COLUMNS = ["series", "target_qps", "quantity", "printed", "printed_decimals",
                   "regenerated", "difference", "explanation_kind", "explanation"]


def _parse_series(series: str) -> tuple[str, int]:
    """``4 x (2x RTX-4090)`` -> (``2x RTX-4090``, 4); ``2x RTX-4090`` -> (itself, 1)."""
    match = re.fullmatch(r"\s*(\d+)\s*x\s*\((.+)\)\s*", series)
    return (match.group(2).strip(), int(match.group(1))) if match else (series.strip(), 1)


def audit_figure1(runs: pd.DataFrame, model: str = PAPER_MODEL,
                  scenario: str = "alternative", labels: pd.DataFrame | None = None,
                  decimals: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each printed label of Figure 1 beside the regenerated value of the point it sits on
    (:data:`FIGURE1_COLUMNS`): reproduced, ``mislabel`` (naming the configuration whose value
    it is), ``projection`` (a point no run measured, given by the projection rule) or
    ``unexplained``. ``labels`` and their printed ``decimals`` default to the catalog's."""
    printed = printed_figure1_labels() if labels is None else labels
    if decimals is None:
        decimals = printed_decimals("figure1_labels.csv")
    every_run = configuration_runs(runs, model, scenario=scenario, repeat_policy="all")
    points = scaling_points(runs, model, scenario=scenario)
    rows = []
    quantities = {"printed_cost_per_mtok_usd": "cost_usd_per_1m_tok",
                  "printed_achieved_rps": "request_throughput_rps"}
    for index, label in printed.iterrows():
        hardware, replicas = _parse_series(str(label.series))
        qps = float(label.target_qps)
        measured = every_run[(every_run.hardware == hardware) & (every_run.replicas == replicas)
                             & np.isclose(every_run.request_rate_qps, qps)]
        projection = None
        if replicas > 1 and measured.empty:
            projection = project_replicas(points, hardware, replicas, qps)
        for column, run_column in quantities.items():
            if pd.isna(label[column]):
                continue
            value_printed = float(label[column])
            places = int(decimals.loc[index, column])
            if projection is not None:
                value = float(projection[run_column])
                kind = PROJECTION if reproduces(value, value_printed, places) else UNEXPLAINED
                text = (f"no run of {label.series} exists; projection rule: "
                        f"{projection['rule']}")
            elif measured.empty:
                value, kind, text = math.nan, UNEXPLAINED, f"no run of {label.series} at {qps:g}"
            else:
                first = measured.sort_values("repeat_index").iloc[0]
                value = float(first[run_column])
                if reproduces(value, value_printed, places):
                    kind, text = REPRODUCED, ""
                else:
                    owners = every_run[[reproduces(float(v), value_printed, places)
                                        for v in every_run[run_column]]]
                    same_load = owners[np.isclose(owners.request_rate_qps, qps)]
                    owners = same_load if not same_load.empty else owners
                    if owners.empty:
                        kind, text = UNEXPLAINED, "no configuration of the model gives it"
                    else:
                        kind = MISLABEL
                        text = "the value of " + "; ".join(
                            f"{o.hardware} @ {o.request_rate_qps:g} QPS "
                            f"({_fmt(float(o[run_column]))})"
                            for _, o in owners.drop_duplicates(
                                ["hardware", "request_rate_qps"]).iterrows())
            rows.append({"series": label.series, "target_qps": qps,
                         "quantity": run_column, "printed": value_printed,
                         "printed_decimals": places,
                         "regenerated": value, "difference": value - value_printed,
                         "explanation_kind": kind, "explanation": text})
    return pd.DataFrame(rows, columns=FIGURE1_COLUMNS)


# ---------------------------------------------------------------------------------------------
# Claims
# ---------------------------------------------------------------------------------------------

#: Rounding half-widths of the claims' numbers: ratios printed as whole percents, "N x" as
#: whole multiples, dollars to the cent's tenth.
PERCENT_TOLERANCE = 0.005
MULTIPLE_TOLERANCE = 0.5
USD_TOLERANCE = 0.0005
#: "about half": within 10 % of one half.
ABOUT_HALF = (0.45, 0.55)
#: Share of rows inside a claimed range for "across typical request rates" to hold.
RANGE_SHARE = 0.75
#: Claim C4's tolerated p99 TTFT window (ms); C2's "latency-tolerant" and C6's bound use it.
C4_WINDOW_MS = (200.0, 500.0)
#: Claim C3's p99 TTFT bound (ms).
C3_BOUND_MS = 55.0

CLAIM_COLUMNS = ["id", "claim", "quantity", "configuration", "definition", "regenerated",
                 "verdict", "holds_under", "supporting_rows", "contradicting_rows",
                 "definitions_tested", "where", "model_evidence"]


@dataclass
class DefinitionTest:
    """A claim tested under one definition: what the data give (``observed``), whether the claim
    holds (None: the definition cannot be tested with this data), and the evidence rows."""

    definition: str
    observed: str
    holds: bool | None
    supporting: list[str] = field(default_factory=list)
    contradicting: list[str] = field(default_factory=list)


@dataclass
class ClaimEvaluation:
    """What a claim evaluator returns: the configuration the claim names and its tests, the
    first being the primary definition (the claim as worded)."""

    configuration: str
    tests: list[DefinitionTest]


def claim_verdict(tests: list[DefinitionTest]) -> tuple[str, str]:
    """The verdict of a claim from its tests (the first is the primary definition) and the
    definition it holds under: ``reproduced`` when the primary holds, ``reproduced only under
    another definition`` when an alternative does, ``contradicted`` when a testable definition
    exists and none holds, else ``not testable with this data``."""
    if tests and tests[0].holds:
        return VERDICT_REPRODUCED, tests[0].definition
    for test in tests[1:]:
        if test.holds:
            return VERDICT_OTHER_DEFINITION, test.definition
    if any(test.holds is not None for test in tests):
        return VERDICT_CONTRADICTED, ""
    return VERDICT_NOT_TESTABLE, ""


def _table2_row_numbers() -> dict[tuple[str, float], str]:
    printed = printed_table2()
    return {(hardware_label(str(r.gpu), int(r.gpus)), float(r.qps)): f"#{int(r.row)}"
            for r in printed.itertuples()}


def _label(hardware: str, qps: float, model: str | None = None) -> str:
    """``#6 2x RTX-4090 @ 4 QPS`` for a point of the printed Table 2, else the model's name
    (when given) before the configuration."""
    number = None
    if model in (None, PAPER_MODEL):
        number = _table2_row_numbers().get((hardware, float(qps)))
    prefix = f"{number} " if number else (f"{model} " if model else "")
    return f"{prefix}{hardware} @ {qps:g} QPS"


def matched_comparisons(runs: pd.DataFrame, scenario: str = "alternative",
                        consumer: str = "RTX-4090", enterprise: str = "H100-PCIe"
                        ) -> pd.DataFrame:
    """Every ``consumer`` configuration beside one ``enterprise`` GPU of the same model at the
    same offered load (first run of a repeated point; :data:`DEFINITIONS` ``claims``).

    Columns: model, hardware, gpu_count, qps, throughput (total tokens/s) of both and their
    ratio, cost per 1M tokens of both, ``cost_ratio``, ``cost_reduction`` (1 - cost ratio),
    ``tok_per_usd_ratio`` (enterprise cost over consumer cost), ``hourly_price_ratio``, the
    consumer's ``p99_ttft_ms`` and a ``label`` naming the Table 2 row where there is one."""
    data = add_costs(select_repeats(runs[runs.replicas == 1], "first"), scenario)
    keep = ["model", "hardware", "gpu_name", "gpu_count", "request_rate_qps",
            "total_token_throughput_tok_per_s", "cost_usd_per_1m_tok", "p99_ttft_ms"]
    cons = data[data.gpu_name == consumer][keep]
    ent = data[(data.gpu_name == enterprise) & (data.gpu_count == 1)][keep]
    merged = cons.merge(ent, on=["model", "request_rate_qps"], suffixes=("", "_h100"))
    price_c = gpu_price_usd_per_h(consumer, scenario)
    price_e = gpu_price_usd_per_h(enterprise, scenario)
    out = pd.DataFrame({
        "model": merged.model, "hardware": merged.hardware, "gpu_count": merged.gpu_count,
        "qps": merged.request_rate_qps,
        "tok_per_s": merged.total_token_throughput_tok_per_s,
        "tok_per_s_h100": merged.total_token_throughput_tok_per_s_h100,
        "cost_usd_per_1m_tok": merged.cost_usd_per_1m_tok,
        "cost_usd_per_1m_tok_h100": merged.cost_usd_per_1m_tok_h100,
        "p99_ttft_ms": merged.p99_ttft_ms, "p99_ttft_ms_h100": merged.p99_ttft_ms_h100})
    out["throughput_ratio"] = out.tok_per_s / out.tok_per_s_h100
    out["cost_ratio"] = out.cost_usd_per_1m_tok / out.cost_usd_per_1m_tok_h100
    out["cost_reduction"] = 1.0 - out.cost_ratio
    out["tok_per_usd_ratio"] = 1.0 / out.cost_ratio
    out["hourly_price_ratio"] = (hourly_cost_usd(out.gpu_count, price_c)
                                 / hourly_cost_usd(1, price_e))
    out["label"] = [_label(h, q, m) for h, q, m in zip(out.hardware, out.qps, out.model,
                                                        strict=True)]
    return out.sort_values(["model", "gpu_count", "qps"], kind="stable").reset_index(drop=True)


def _rows(frame: pd.DataFrame, column: str, fmt: str) -> list[str]:
    return [f"{r.label}: {format(r[column], fmt)}" for _, r in frame.iterrows()]


@dataclass
class ClaimData:
    """What the claim evaluators read: the paper model's runs with costs (every run), the matched
    comparisons of every model, Table 3's efficiency-ratio estimates and Figure 1's audit."""

    runs: pd.DataFrame
    matched: pd.DataFrame
    energy_ratios: pd.DataFrame
    figure1: pd.DataFrame
    model: str = PAPER_MODEL

    @property
    def paper_matched(self) -> pd.DataFrame:
        return self.matched[self.matched.model == self.model]


def claim_data(runs: pd.DataFrame, scenario: str = "alternative") -> ClaimData:
    """Gather :class:`ClaimData` from every run of the runs table."""
    model_runs = configuration_runs(runs, PAPER_MODEL, scenario=scenario, repeat_policy="all")
    first = select_repeats(runs[runs.model == PAPER_MODEL], "first")
    energy_ratios = ratio_estimates(add_power_model(first))
    return ClaimData(model_runs, matched_comparisons(runs, scenario), energy_ratios,
                     audit_figure1(runs, scenario=scenario))


def _c1_throughput_at_half_cost(data: ClaimData) -> ClaimEvaluation:
    low, high = 0.62 - PERCENT_TOLERANCE, 0.78 + PERCENT_TOLERANCE
    clusters = data.paper_matched[data.paper_matched.gpu_count > 1]
    half = clusters[clusters.hourly_price_ratio.between(*ABOUT_HALF)]
    named = ", ".join(dict.fromkeys(half.hardware)) + " (half the H100's hourly price)"
    in_range = half.throughput_ratio.between(low, high)
    per_token_half = half.cost_ratio.between(*ABOUT_HALF)
    both = half[in_range & per_token_half]

    def described(rows: pd.DataFrame) -> list[str]:
        return [f"{r.label}: throughput {r.throughput_ratio:.2f}, cost {r.cost_ratio:.2f}"
                for _, r in rows.iterrows()]

    primary = DefinitionTest(
        "throughput at matched offered load, cost = cost per 1M tokens at that load",
        f"throughput ratio {half.throughput_ratio.min():.2f}–{half.throughput_ratio.max():.2f}, "
        f"cost ratio {half.cost_ratio.min():.2f}–{half.cost_ratio.max():.2f}",
        not both.empty, described(both), described(half[~(in_range & per_token_half)]))
    hourly = half[in_range]
    alternative = DefinitionTest(
        "cost = hourly rental price (not per token), throughput at matched offered load",
        f"hourly price ratio {half.hourly_price_ratio.iloc[0]:.2f}; throughput ratio in range at "
        + (", ".join(f"{q:g}" for q in hourly.qps) or "no") + " QPS",
        not hourly.empty,
        _rows(hourly, "throughput_ratio", ".2f"), _rows(half[~in_range], "throughput_ratio",
                                                        ".2f"))
    any_cluster = clusters[clusters.throughput_ratio.between(low, high)]
    info = DefinitionTest(
        "throughput only, any RTX 4090 cluster (2, 4 or 8 GPUs) at matched offered load",
        f"{len(any_cluster)} of {len(clusters)} points in range", not any_cluster.empty,
        _rows(any_cluster, "throughput_ratio", ".2f"), [])
    return ClaimEvaluation(named, [primary, alternative, info])


def _c2_up_to_75_percent(data: ClaimData) -> ClaimEvaluation:
    """Primary: the claim in its context (batch: the highest offered load; latency-tolerant:
    p99 TTFT within claim C4's window); alternative: any load, no latency bound."""
    matched = data.paper_matched
    target = 0.75

    def largest(rows: pd.DataFrame) -> pd.DataFrame:
        return rows.loc[[rows.cost_reduction.idxmax()]]

    def test(rows: pd.DataFrame, definition: str, best: pd.DataFrame) -> DefinitionTest:
        value = float(best.cost_reduction.iloc[0])
        holds = abs(value - target) <= PERCENT_TOLERANCE
        near = rows[(rows.cost_reduction - target).abs() <= PERCENT_TOLERANCE]
        return DefinitionTest(
            definition, f"largest reduction {value:.1%} ({best.label.iloc[0]}, p99 TTFT "
                        f"{best.p99_ttft_ms.iloc[0]:.0f} ms)", holds,
            _rows(near, "cost_reduction", ".1%"),
            [] if holds else _rows(best, "cost_reduction", ".1%"))

    batch = matched[matched.qps == matched.qps.max()]
    tolerant = matched[matched.p99_ttft_ms <= C4_WINDOW_MS[1]]
    in_context = pd.concat([batch, tolerant])
    context = test(in_context,
                   f"in its context: batch (highest offered load, {matched.qps.max():g} QPS) or "
                   f"latency-tolerant (p99 TTFT ≤ {C4_WINDOW_MS[1]:g} ms, claim C4's window)",
                   largest(in_context))
    if not context.holds:  # the best of each context, both short of the claim
        context.contradicting = (_rows(largest(batch), "cost_reduction", ".1%")
                                 + _rows(largest(tolerant), "cost_reduction", ".1%"))
    anywhere = test(matched, "any RTX 4090 configuration at matched offered load, no latency "
                             "bound", largest(matched))
    return ClaimEvaluation("cheapest RTX 4090 configuration vs 1x H100-PCIe", [context, anywhere])


def _c3_h100_p99(data: ClaimData) -> ClaimEvaluation:
    h100 = data.runs[data.runs.hardware == "1x H100-PCIe"].sort_values(
        ["request_rate_qps", "repeat_index"])
    labels = [f"{_label(r.hardware, r.request_rate_qps)} run {int(r.repeat_index) + 1}: "
              f"{r.p99_ttft_ms:.1f} ms" for r in h100.itertuples()]
    under = (h100.p99_ttft_ms < C3_BOUND_MS).to_numpy()

    def test(rate: float, definition: str) -> DefinitionTest:
        at = (h100.request_rate_qps == rate).to_numpy()
        return DefinitionTest(
            definition, "p99 TTFT " + ", ".join(f"{v:.1f}" for v in h100.p99_ttft_ms[at])
            + " ms", bool(under[at].all()),
            [x for x, a, u in zip(labels, at, under, strict=True) if a and u],
            [x for x, a, u in zip(labels, at, under, strict=True) if a and not u])

    first = (h100.repeat_index == 0).to_numpy()

    def first_run(rate: float, definition: str) -> DefinitionTest:
        """The table's definition (first run) decides; other runs of the point are evidence."""
        tested = test(rate, definition)
        at = (h100.request_rate_qps == rate).to_numpy()
        tested.holds = bool(under[at & first].all())
        return tested

    top = float(h100.request_rate_qps.max())
    primary = first_run(top, f"high load = highest offered load measured ({top:g} QPS)")
    keeps = float(h100[first & under].request_rate_qps.max())
    alternative = first_run(keeps, f"high load = {keeps:g} QPS (Table 2's highest load with "
                                   f"p99 under {C3_BOUND_MS:g} ms)")
    return ClaimEvaluation("1x H100-PCIe", [primary, alternative])


def _c4_tolerant_window(data: ClaimData) -> ClaimEvaluation:
    clusters = data.paper_matched[data.paper_matched.gpu_count > 1]
    inside = clusters.p99_ttft_ms.between(*C4_WINDOW_MS)
    reached = clusters[inside].groupby("hardware").size()
    never = sorted(set(clusters.hardware) - set(reached.index))
    primary = DefinitionTest(
        "every RTX 4090 cluster (2, 4, 8 GPUs) reaches the window at some offered load",
        f"reached by {', '.join(reached.index) or 'none'}; never by {', '.join(never) or 'none'}",
        not never, _rows(clusters[inside], "p99_ttft_ms", ".0f"),
        [f"{h}: lowest p99 TTFT {clusters[clusters.hardware == h].p99_ttft_ms.min():.0f} ms"
         for h in never])
    alternative = DefinitionTest(
        f"the clusters that reach it ({', '.join(reached.index)})",
        f"{int(inside.sum())} points in the window", bool(inside.any()),
        _rows(clusters[inside], "p99_ttft_ms", ".0f"), [])
    return ClaimEvaluation("RTX 4090 clusters", [primary, alternative])


def _c5_energy_ratio(data: ClaimData) -> ClaimEvaluation:
    """Primary: Table 3's own definition (:data:`DEFINITIONS` ``table3``, the paper's TDP);
    the other energy estimates are alternatives, and contradict the primary where they give
    another ratio."""
    estimates = data.energy_ratios
    target = 3.1
    order = sorted(range(len(estimates)),
                   key=lambda i: 0 if "paper TDP" in estimates.estimate.iloc[i] else 1)
    tests = []
    for i in order:
        row = estimates.iloc[i]
        bracket = ("" if pd.isna(row.low) else f" [{row.low:.2f}–{row.high:.2f}]")
        holds = abs(row.ratio - target) <= 0.05
        text = f"{row.estimate}: {row.ratio:.2f}{bracket}"
        tests.append(DefinitionTest(row.estimate, f"{row.ratio:.2f}{bracket}", bool(holds),
                                    [text] if holds else [], [] if holds else [text]))
    tests[0].contradicting = [c for t in tests[1:] for c in t.contradicting]
    return ClaimEvaluation("1x H100-PCIe @ 16 QPS vs 2x RTX-4090 @ 4 QPS (Table 3)", tests)


def _c6_lowest_cost(data: ClaimData) -> ClaimEvaluation:
    """Holds under a definition when its cheapest point is a four-card one within the printed
    range and both printed end points (rows #6 and #11) are points of that definition."""
    low, high = 0.111 - USD_TOLERANCE, 0.149 + USD_TOLERANCE
    first = data.runs[data.runs.repeat_index == 0].copy()
    first["label"] = [_label(h, q) for h, q in zip(first.hardware, first.request_rate_qps,
                                                   strict=True)]
    printed_rows = printed_table2().set_index("row").loc[[6, 11]]
    ends = [_label(hardware_label(str(r.gpu), int(r.gpus)), float(r.qps))
            for _, r in printed_rows.iterrows()]

    def test(rows: pd.DataFrame, definition: str) -> DefinitionTest:
        cheapest = rows.loc[rows.cost_usd_per_1m_tok.idxmin()]
        missing = [e for e in ends if e not in set(rows.label)]
        four_card = int(cheapest.gpu_count) == 4
        holds = bool(low <= cheapest.cost_usd_per_1m_tok <= high and four_card
                     and not missing)
        below = rows[rows.cost_usd_per_1m_tok < low].sort_values("cost_usd_per_1m_tok")
        against = _rows(below, "cost_usd_per_1m_tok", ".3f")
        against += [f"{e}: printed end point, not a point of this definition" for e in missing]
        if not four_card:
            against.append(f"cheapest is {cheapest.hardware}")
        return DefinitionTest(
            definition, f"lowest ${cheapest.cost_usd_per_1m_tok:.3f} ({cheapest.label})", holds,
            _rows(rows[rows.cost_usd_per_1m_tok.between(low, high)], "cost_usd_per_1m_tok",
                  ".3f"), list(dict.fromkeys(against)))

    tests = [test(first, "every Table 2 configuration and load"),
             test(first[first.p99_ttft_ms <= C4_WINDOW_MS[1]],
                  f"only points with p99 TTFT ≤ {C4_WINDOW_MS[1]:g} ms (claim C4's window)"),
             test(first[first.gpu_count == 4], "four-card configurations only")]
    named = "; ".join(f"#{n} is {hardware_label(str(r.gpu), int(r.gpus))} @ {r.qps:g} QPS"
                      for n, r in printed_rows.iterrows())
    return ClaimEvaluation(f"four-card RTX 4090 ({named})", tests)


def _c7_throughput_per_dollar(data: ClaimData) -> ClaimEvaluation:
    low, high = 4.0 - MULTIPLE_TOLERANCE, 7.0 + MULTIPLE_TOLERANCE

    def test(rows: pd.DataFrame, definition: str) -> DefinitionTest:
        inside = rows.tok_per_usd_ratio.between(low, high)
        return DefinitionTest(
            definition, f"{rows.tok_per_usd_ratio.min():.2f}–{rows.tok_per_usd_ratio.max():.2f}x "
            f"({int(inside.sum())} of {len(rows)} points in range)",
            bool(inside.mean() >= RANGE_SHARE), _rows(rows[inside], "tok_per_usd_ratio", ".2f"),
            _rows(rows[~inside], "tok_per_usd_ratio", ".2f"))

    two = data.paper_matched[data.paper_matched.gpu_count == 2]
    one = data.matched[data.matched.gpu_count == 1]
    return ClaimEvaluation("2x RTX-4090", [
        test(two, "2x RTX-4090 vs 1x H100-PCIe at matched offered load (the paper's model)"),
        test(one, "1x RTX-4090 vs 1x H100-PCIe at matched offered load (the models that fit "
                  "one RTX 4090)")])


def _c8_replicas(data: ClaimData) -> ClaimEvaluation:
    labels = data.figure1[data.figure1.series.str.contains(r"\(")]
    measured = DefinitionTest("measured: a run of the replicated configuration at that load",
                              "no such run in the data", None)
    holds = bool(not labels.empty and (labels.explanation_kind == PROJECTION).all())
    observed = ", ".join(f"{q}: {v:.3f}" for q, v in zip(labels.quantity, labels.regenerated,
                                                         strict=True))
    rows = [f"{r.series} @ {r.target_qps:g} QPS {r.quantity} = {r.regenerated:.3f}"
            for r in labels.itertuples()]
    projection = DefinitionTest(
        "projection: replicas behind an ideal load balancer "
        "(hgresearch.report.paper_tables.project_replicas)",
        observed, holds, rows if holds else [], [] if holds else rows)
    return ClaimEvaluation(", ".join(dict.fromkeys(labels.series)), [measured, projection])


def _not_testable(reason: str) -> Callable[[ClaimData], ClaimEvaluation]:
    def evaluate(data: ClaimData) -> ClaimEvaluation:
        return ClaimEvaluation("—", [DefinitionTest(reason, "—", None)])
    return evaluate


#: The evaluator of each claim id of the printed claims.
CLAIM_EVALUATORS: dict[str, Callable[[ClaimData], ClaimEvaluation]] = {
    "C1": _c1_throughput_at_half_cost,
    "C2": _c2_up_to_75_percent,
    "C3": _c3_h100_p99,
    "C4": _c4_tolerant_window,
    "C5": _c5_energy_ratio,
    "C6": _c6_lowest_cost,
    "C7": _c7_throughput_per_dollar,
    "C8": _c8_replicas,
    "C9": _not_testable("qualitative: the runs hold no hardware lifetimes or embodied carbon "
                        "accounting of reuse"),
    "C10": _not_testable("qualitative: every run serves one configuration alone; no run routes "
                         "between enterprise and consumer GPUs"),
}


def _join(items: list[str], limit: int = 6) -> str:
    shown = items[:limit]
    more = f"; … (+{len(items) - limit})" if len(items) > limit else ""
    return "; ".join(shown) + more


def _break_even_evidence(tables_dir: Path) -> str:
    path = tables_dir / f"{CARBON_BREAK_EVEN_TABLE}.csv"
    if not path.is_file():
        return f"not computed: {path.name} is missing (notebook 05_energy_carbon writes it)"
    table = pd.read_csv(path)
    idle = table[table.scenario == "idle_consumer"].dropna(subset=["break_even_g_per_kwh"])
    new = table[table.scenario == "new"]
    if idle.empty:
        return "carbon model: reused consumer cards never have lower total carbon than the H100"
    paper = idle[(idle.energy_estimate == "TDP model") & (idle.embodied_bound == "central")]
    central = (f"{paper.break_even_g_per_kwh.iloc[0]:.0f} g CO2/kWh (paper's TDP model, "
               "central embodied estimate); " if len(paper) else "")
    new_verdict = ("bought new, the consumer cards are never lower"
                   if new.break_even_g_per_kwh.isna().all() and
                   (new.lower_below == new.a).all() else
                   "bought new, the ranking depends on the grid")
    return (f"carbon model (assumed embodied carbon and lifetimes, not measured): reusing idle "
            f"{idle.b.iloc[0]} instead of a new {idle.a.iloc[0]} gives lower total carbon only "
            f"on grids below {central}{idle.break_even_g_per_kwh.min():.0f}–"
            f"{idle.break_even_g_per_kwh.max():.0f} g CO2/kWh over every energy estimate and "
            f"embodied bound; {new_verdict} ({path.name})")


def _hybrid_evidence(tables_dir: Path) -> str:
    path = tables_dir / f"{HYBRID_ADVANTAGE_TABLE}.csv"
    if not path.is_file():
        return f"not computed: {path.name} is missing (notebook 08_fleet writes it)"
    advantage = pd.read_csv(path)
    gain = summarize_hybrid_advantage(advantage)
    most = f", by up to {gain.max_saving:.1%}" if gain.max_saving is not None else ""
    return (f"planner with simulated capacities (calibrated on the reference runs; simulated, not "
            f"measured): the cheapest hybrid fleet that holds its SLOs is cheaper than both "
            f"single-hardware fleets at {gain.cheaper_than_both} of {gain.points} demand points"
            f"{most}, and {gain.saving_vs_h100_min:.0%}–{gain.saving_vs_h100_max:.0%} cheaper "
            f"than the H100-only fleet ({'; '.join(dict.fromkeys(advantage.scenario))}; "
            f"{path.name})")


#: Evidence from the package's models (not a verdict: the runs cannot test these claims),
#: read from the tables other notebooks wrote.
MODEL_EVIDENCE: dict[str, Callable[[Path], str]] = {
    "C9": _break_even_evidence,
    "C10": _hybrid_evidence,
}


def model_evidence(tables_dir: str | Path) -> dict[str, str]:
    """For the claims the measured runs cannot test (:data:`MODEL_EVIDENCE`), what the
    package's models say, read from ``tables_dir`` (the carbon break-even table of notebook 05
    and the hybrid-advantage table of notebook 08); a missing table is named in the text."""
    return {claim: evidence(Path(tables_dir)) for claim, evidence in MODEL_EVIDENCE.items()}


def audit_claims(runs: pd.DataFrame, scenario: str = "alternative",
                 data: ClaimData | None = None,
                 evidence: dict[str, str] | None = None) -> pd.DataFrame:
    """Every printed claim (:func:`hgresearch.data.catalogs.printed_claims`) with the configuration
    it names, its primary definition and what the data give under it, the verdict
    (:func:`claim_verdict`) and the definition it holds under, the supporting and contradicting
    rows, every definition tested, and ``evidence`` (:func:`model_evidence`: what the models
    say where the runs cannot decide; not part of the verdict) (:data:`CLAIM_COLUMNS`)."""
    data = data or claim_data(runs, scenario)
    evidence = evidence or {}
    rows = []
    for claim in printed_claims().itertuples():
        if claim.id not in CLAIM_EVALUATORS:
            raise KeyError(f"no evaluator for claim {claim.id!r}; add one to CLAIM_EVALUATORS")
        evaluation = CLAIM_EVALUATORS[claim.id](data)
        verdict, holds_under = claim_verdict(evaluation.tests)
        primary = evaluation.tests[0]
        holding = next((t for t in evaluation.tests if t.definition == holds_under), primary)
        rows.append({
            "id": claim.id, "claim": claim.claim, "quantity": claim.quantity,
            "configuration": evaluation.configuration, "definition": primary.definition,
            "regenerated": primary.observed, "verdict": verdict, "holds_under": holds_under,
            "supporting_rows": _join(holding.supporting),
            "contradicting_rows": _join(list(dict.fromkeys(
                primary.contradicting + (holding.contradicting if holding is not primary
                                         else [])))),
            "definitions_tested": " | ".join(
                f"{t.definition}: {t.observed} -> "
                + {True: "holds", False: "fails", None: "not testable"}[t.holds]
                for t in evaluation.tests),
            "where": claim.where, "model_evidence": evidence.get(claim.id, "")})
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)


def verdict_counts(claims: pd.DataFrame, *cells: pd.DataFrame) -> dict[str, int]:
    """Headline counts: claims in all and per verdict, then printed values (the audited cells
    and labels) in all and per explanation kind (kinds that occur)."""
    counts: dict[str, int] = {"claims": len(claims)}
    counts.update({f"claims {v}": int((claims.verdict == v).sum()) for v in VERDICTS})
    every_cell = pd.concat([c[["explanation_kind"]] for c in cells], ignore_index=True)
    counts["printed values"] = len(every_cell)
    for kind in EXPLANATION_KINDS:
        n = int((every_cell.explanation_kind == kind).sum())
        if n:
            counts[f"printed values {kind}"] = n
    return counts


def counts_table(counts: dict[str, int]) -> pd.DataFrame:
    """:func:`verdict_counts` as a two-column table (``quantity``, ``count``), the form the
    manuscript reads its numbers from."""
    return pd.DataFrame({"quantity": list(counts), "count": list(counts.values())})
