"""Reproduction audit: every number and claim the AIBC 2025 paper printed beside what the raw
runs give, with an explanation found by code. One audit, one repeat policy.

The printed side is the catalog :mod:`hgresearch.data.catalogs` ``paper_printed/``; the
regenerated side comes from the runs table only, through the library's own formulas
(:mod:`hgresearch.report.paper_tables` for Table 2, Table 3 and Figure 1).

**Repeat policy** (:data:`REPEAT_POLICY`, everywhere in the audit): a point measured more than
once is represented by its *first* run as listed in its result file, the run the paper's tables
show. The other runs are evidence, never averaged in: a differing cell is explained by another
run (``repeat run``) or by the mean (``mean of repeats``) only when that is what gives the
printed value. Fitted models (the ``fitted capacity`` comparison) use every run as data.

The parts, one module each:

* :mod:`~hgresearch.report.audit.cells` — Table 2 and Table 3 cell by cell
  (:func:`audit_table2`, :func:`audit_table3`): *reproduced* when the regenerated value is
  within half a unit of the printed last digit; else the explanation, in this order of
  preference: ``repeat run`` (another run of the same point gives it), ``rounding chain``
  (recomputing from the row's printed, rounded inputs gives it), ``mean of repeats``, else
  ``unexplained``; a candidate that also reproduces every other printed cell of its row is
  preferred, one that contradicts another printed cell says which.
* :mod:`~hgresearch.report.audit.figure1` — Figure 1's readable labels: ``mislabel`` (the value
  of another configuration), ``projection`` (a point never measured; the projection rule of
  :func:`hgresearch.report.paper_tables.project_replicas` gives it).
* :mod:`~hgresearch.report.audit.claims` — each claim under its primary definition and
  alternatives: ``reproduced``, ``reproduced only under another definition`` (naming it),
  ``contradicted`` or ``not testable with this data``; :mod:`~hgresearch.report.audit.evidence`
  adds what the models say where the runs cannot decide.
* :mod:`~hgresearch.report.audit.comparisons` and :mod:`~hgresearch.report.audit.definitions` —
  the RTX 4090 against the H100 under every definition (matched load, peak, fitted capacity)
  and, for the ratio claims (C1, C2, C7), which definition yields the printed numbers.
* :mod:`~hgresearch.report.audit.tables` — all of it in one call (:func:`audit_paper`) and the
  tables it writes (:data:`AUDIT_TABLES`).
"""

from hgresearch.report.audit.cells import (
    CELL_COLUMNS,
    PrintedRow,
    RoundingChain,
    audit_cells,
    audit_table2,
    audit_table3,
    summarize_rows,
    table2_chains,
    table3_chains,
)
from hgresearch.report.audit.claims import (
    CLAIM_COLUMNS,
    CLAIM_EVALUATORS,
    ClaimData,
    ClaimEvaluation,
    DefinitionTest,
    audit_claims,
    claim_data,
    claim_verdict,
    counts_table,
    verdict_counts,
)
from hgresearch.report.audit.common import (
    DEFINITIONS,
    EXPLANATION_KINDS,
    MEAN_OF_REPEATS,
    MISLABEL,
    PROJECTION,
    REPEAT_POLICY,
    REPEAT_RUN,
    REPRODUCED,
    ROUNDING_CHAIN,
    UNEXPLAINED,
    VERDICT_CONTRADICTED,
    VERDICT_NOT_TESTABLE,
    VERDICT_OTHER_DEFINITION,
    VERDICT_REPRODUCED,
    VERDICTS,
    reproduces,
)
from hgresearch.report.audit.comparisons import (
    COMPARISON_COLUMNS,
    capacity_comparisons,
    comparisons,
    matched_comparisons,
    peak_comparisons,
)
from hgresearch.report.audit.definitions import (
    NAMED_GPU_COUNT,
    RATIO_CLAIMS,
    closest_definitions,
    definition_search,
)
from hgresearch.report.audit.evidence import model_evidence
from hgresearch.report.audit.figure1 import FIGURE1_COLUMNS, audit_figure1
from hgresearch.report.audit.tables import (
    AUDIT_TABLES,
    PaperAudit,
    audit_headline,
    audit_paper,
    audit_tables,
    fitted_capacity,
)

__all__ = [
    "AUDIT_TABLES", "CELL_COLUMNS", "CLAIM_COLUMNS", "CLAIM_EVALUATORS", "COMPARISON_COLUMNS",
    "DEFINITIONS", "EXPLANATION_KINDS", "FIGURE1_COLUMNS", "MEAN_OF_REPEATS", "MISLABEL",
    "NAMED_GPU_COUNT", "PROJECTION", "RATIO_CLAIMS", "REPEAT_POLICY", "REPEAT_RUN",
    "REPRODUCED", "ROUNDING_CHAIN", "UNEXPLAINED", "VERDICTS", "VERDICT_CONTRADICTED",
    "VERDICT_NOT_TESTABLE", "VERDICT_OTHER_DEFINITION", "VERDICT_REPRODUCED", "ClaimData",
    "ClaimEvaluation", "DefinitionTest", "PaperAudit", "PrintedRow", "RoundingChain",
    "audit_cells", "audit_claims", "audit_figure1", "audit_headline", "audit_paper", "audit_table2",
    "audit_table3", "audit_tables", "capacity_comparisons", "claim_data", "claim_verdict",
    "closest_definitions", "comparisons", "counts_table", "definition_search", "fitted_capacity",
    "matched_comparisons", "model_evidence", "peak_comparisons", "reproduces",
    "summarize_rows", "table2_chains", "table3_chains", "verdict_counts",
]
