"""The whole audit in one call (:func:`audit_paper`, notebook ``09_audit``) and the tables it
writes (:data:`AUDIT_TABLES`, written by :func:`hgresearch.report.writers.write_tables`)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from hgresearch.fits.common import ModelWarning
from hgresearch.fits.saturation import fit_saturations
from hgresearch.report.audit.cells import audit_table2, audit_table3, summarize_rows
from hgresearch.report.audit.claims import audit_claims, claim_data, counts_table, verdict_counts
from hgresearch.report.audit.common import DEFINITIONS, REPEAT_POLICY
from hgresearch.report.audit.comparisons import comparisons, matched_comparisons
from hgresearch.report.audit.definitions import closest_definitions, definition_search
from hgresearch.report.audit.evidence import model_evidence
from hgresearch.report.audit.figure1 import audit_figure1
from hgresearch.report.writers import TableSpec


@dataclass
class PaperAudit:
    """Everything notebook 09 shows: the cells of Table 2 (and one line per row), Table 3 and
    Figure 1's labels; the claims and the verdict counts; the ratio claims' comparison rows,
    definition search and closest definitions."""

    table2: pd.DataFrame
    table2_rows: pd.DataFrame
    table3: pd.DataFrame
    figure1: pd.DataFrame
    claims: pd.DataFrame
    counts: dict[str, int]
    comparisons: pd.DataFrame
    definitions: pd.DataFrame
    closest: pd.DataFrame


def fitted_capacity(runs: pd.DataFrame) -> pd.DataFrame:
    """The capacity model's table (:func:`hgresearch.fits.saturation.fit_saturations`, the fit
    notebook 04 shows) on every run, for the ``fitted capacity`` comparisons."""
    with warnings.catch_warnings():
        # the fits' warnings are notebook 04's to show; the audit only reads the capacities
        warnings.simplefilter("ignore", ModelWarning)
        capacity, _ = fit_saturations(runs)
    return capacity


def audit_paper(runs: pd.DataFrame, scenario: str = "alternative",
                evidence_dir: str | Path | None = None) -> PaperAudit:
    """Audit every printed cell, label and claim of the paper against ``runs`` (every run of
    the runs table, repeats included), at the price ``scenario``. ``evidence_dir``: the tables
    folder holding notebook 05's and 08's tables for the claims the runs cannot test
    (:func:`~hgresearch.report.audit.evidence.model_evidence`; None: no evidence)."""
    table2 = audit_table2(runs, scenario=scenario)
    table3 = audit_table3(runs)
    figure1 = audit_figure1(runs, scenario=scenario)
    matched = matched_comparisons(runs, scenario)
    claims = audit_claims(runs, scenario, data=claim_data(runs, scenario, matched, figure1),
                          evidence=model_evidence(evidence_dir) if evidence_dir else None)
    every = comparisons(runs, fitted_capacity(runs), scenario)
    search = definition_search(every)
    return PaperAudit(table2=table2, table2_rows=summarize_rows(table2), table3=table3,
                      figure1=figure1, claims=claims,
                      counts=verdict_counts(claims, table2, table3, figure1),
                      comparisons=every, definitions=search,
                      closest=closest_definitions(search))


#: Decimals of the cell-by-cell tables.
_CELL_DECIMALS = {"qps": 0, "printed": 3, "regenerated": 4, "difference": 4}
_POLICY_NOTE = (f"Points measured more than once: the {REPEAT_POLICY} run as listed in the "
                "result file; fitted capacity from every run.")

#: The audit's tables (``paper/tables``), in the order they are written.
AUDIT_TABLES = (
    TableSpec("audit_table2",
              "Table 2 as printed vs regenerated from the raw runs, cell by cell",
              "tab:audit-table2", decimals=_CELL_DECIMALS,
              notes=(f"Regenerated: {DEFINITIONS['table2']}.",)),
    TableSpec("audit_table2_rows",
              "Table 2 rows: printed cells that differ from the regenerated row, and why",
              "tab:audit-table2-rows", decimals={"qps": 0},
              notes=(f"Regenerated: {DEFINITIONS['table2']}.",)),
    TableSpec("audit_table3",
              "Table 3 as printed vs regenerated from the raw runs, cell by cell",
              "tab:audit-table3", decimals=_CELL_DECIMALS,
              notes=(f"Regenerated: {DEFINITIONS['table3']}.",)),
    TableSpec("audit_figure1", "Figure 1's printed labels vs the regenerated point they sit on",
              "tab:audit-figure1",
              decimals={"target_qps": 0, "printed": 3, "regenerated": 3, "difference": 3},
              notes=(f"Regenerated: {DEFINITIONS['figure1']}.",)),
    TableSpec("audit_claims", "The paper's headline claims: verdict and evidence",
              "tab:audit-claims", notes=(f"Primary definition: {DEFINITIONS['claims']}.",)),
    TableSpec("audit_counts", "Audit verdict counts", "tab:audit-counts"),
    TableSpec("audit_ratio_comparisons",
              "RTX 4090 vs H100 comparison rows behind the ratio claims, every definition",
              "tab:audit-ratio-comparisons", default_decimals=3, notes=(_POLICY_NOTE,)),
    TableSpec("audit_ratio_definitions",
              "The ratio claims under each definition and RTX 4090 GPU-count scope",
              "tab:audit-ratio-definitions", default_decimals=3, notes=(_POLICY_NOTE,)),
    TableSpec("audit_ratio_closest", "Which definition yields each ratio claim",
              "tab:audit-ratio-closest", default_decimals=3, notes=(_POLICY_NOTE,)),
)


def audit_tables(audit: PaperAudit) -> dict[str, pd.DataFrame | None]:
    """The frames of :data:`AUDIT_TABLES`, by file stem."""
    return {"audit_table2": audit.table2, "audit_table2_rows": audit.table2_rows,
            "audit_table3": audit.table3, "audit_figure1": audit.figure1,
            "audit_claims": audit.claims, "audit_counts": counts_table(audit.counts),
            "audit_ratio_comparisons": audit.comparisons,
            "audit_ratio_definitions": audit.definitions,
            "audit_ratio_closest": audit.closest}


def audit_headline(audit: PaperAudit) -> dict[str, object]:
    """Numbers ``hgresearch reproduce`` prints for notebook 09: the verdict counts, then per
    ratio claim the definitions that reproduce it (else the closest one)."""
    numbers: dict[str, object] = dict(audit.counts)
    for row in audit.closest.itertuples():
        numbers[f"ratio claim {row.id} ({row.claim})"] = (
            row.reproduced_by if row.reproduced_by != "none"
            else f"closest: {row.best_definition}")
    return numbers
