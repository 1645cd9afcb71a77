"""What every part of the audit shares: the explanation kinds and verdicts (one wording each),
the definition of each audited table's regenerated numbers, the repeat policy, the rule for
"reproduced", and how a point is named in evidence rows."""

from __future__ import annotations

import numpy as np

from hgresearch.data.catalogs import printed_table2
from hgresearch.identity import hardware_label
from hgresearch.report.paper_tables import PAPER_MODEL

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
#: Rounding half-widths of the claims' numbers: ratios printed as whole percents, "N x" as
#: whole multiples, dollars to the cent's tenth.
PERCENT_TOLERANCE = 0.005
MULTIPLE_TOLERANCE = 0.5
USD_TOLERANCE = 0.0005
#: "about half": within 10 % of one half.
ABOUT_HALF = (0.45, 0.55)
#: Share of rows inside a claimed range for "across typical request rates" to hold.
RANGE_SHARE = 0.75

#: The repeat policy of the whole audit (:func:`hgresearch.data.ingest.select_repeats`): a
#: point measured more than once is represented by its *first* run as listed in its result file,
#: the run the paper's tables show. The other runs are evidence, never averaged in: the cell
#: explanations search every run of a point (``repeat run``) and their mean (``mean of
#: repeats``). Fitted models (the capacity behind ``fitted capacity``) use every run as data.
REPEAT_POLICY = "first"

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


def reproduces(value: float, printed: float, decimals: int) -> bool:
    """Whether ``value`` rounds to ``printed`` shown with ``decimals`` decimals (half a unit of
    the last printed digit, plus a hair for binary floating point)."""
    if value is None or printed is None or not np.isfinite(value) or not np.isfinite(printed):
        return False
    return abs(value - printed) <= 0.5 * 10.0 ** -decimals + 1e-9



def fmt_value(value: float) -> str:
    """A regenerated value in an explanation: six significant digits, ``—`` when missing."""
    return "—" if value is None or not np.isfinite(value) else f"{value:.6g}"


def _table2_row_numbers() -> dict[tuple[str, float], str]:
    printed = printed_table2()
    return {(hardware_label(str(r.gpu), int(r.gpus)), float(r.qps)): f"#{int(r.row)}"
            for r in printed.itertuples()}


def point_label(hardware: str, qps: float, model: str | None = None) -> str:
    """``#6 2x RTX-4090 @ 4 QPS`` for a point of the printed Table 2, else the model's name
    (when given) before the configuration."""
    number = None
    if model in (None, PAPER_MODEL):
        number = _table2_row_numbers().get((hardware, float(qps)))
    prefix = f"{number} " if number else (f"{model} " if model else "")
    return f"{prefix}{hardware} @ {qps:g} QPS"

