"""Which definition of "the RTX 4090 against the H100" yields each ratio claim's numbers.

The claims that state a ratio (:data:`RATIO_CLAIMS`: C1's "62–78 % of the throughput", C2's
"up to 75 % lower cost per token", C7's "4–7x more throughput per dollar") are recomputed under
every definition of :mod:`~hgresearch.report.audit.comparisons` and every RTX 4090 GPU-count
scope (:func:`definition_search`). A definition *reproduces* a claim when its observed end points
match the claim's within :data:`YIELD_TOLERANCE` and at least
:data:`~hgresearch.report.audit.common.RANGE_SHARE` of its rows fall inside the claim (within
the claim's rounding). :func:`closest_definitions` names, per claim, the definitions that
reproduce it and the closest one for the configuration the claim names. The verdict of each
claim is :func:`hgresearch.report.audit.claims.audit_claims`'s; this search says where its
numbers could have come from.
"""

from __future__ import annotations

import pandas as pd

from hgresearch.report.audit.common import MULTIPLE_TOLERANCE, PERCENT_TOLERANCE, RANGE_SHARE
from hgresearch.report.audit.comparisons import definition_order

#: The ratio claims: (claim id of the printed claims, the ratio it states, comparison column,
#: low end or None for "up to", high end). Ratios as fractions or multiples.
RATIO_CLAIMS: tuple[tuple[str, str, str, float | None, float], ...] = (
    ("C1", "throughput 62–78% of H100", "throughput_ratio", 0.62, 0.78),
    ("C2", "up to 75% lower cost per token", "cost_reduction", None, 0.75),
    ("C7", "4–7x more throughput per dollar", "tok_per_usd_ratio", 4.0, 7.0),
)
#: The RTX 4090 GPU count a claim names: "two RTX 4090s" (C7); "clusters ... at about half the
#: cost" is four cards (C1: 4 x $0.25/h against $2.00/h). The closest definition is looked for
#: among that configuration's rows first, so a better-fitting other configuration cannot hide
#: what the named one gives.
NAMED_GPU_COUNT = {"C1": 4, "C7": 2}
#: Half-width of "the same number" when rounding to the claim's precision.
TOLERANCE = {"throughput_ratio": PERCENT_TOLERANCE, "cost_reduction": PERCENT_TOLERANCE,
             "tok_per_usd_ratio": MULTIPLE_TOLERANCE}
#: How close a definition's extreme must come to the claimed end point to "yield" the claim.
YIELD_TOLERANCE = {"throughput_ratio": 0.03, "cost_reduction": 0.03, "tok_per_usd_ratio": 0.5}


def _supports(values: pd.Series, kind: str, low: float | None, high: float) -> pd.Series:
    tol = TOLERANCE[kind]
    if low is None:  # "up to X": a real saving that does not exceed X
        return (values > 0) & (values <= high + tol)
    return (values >= low - tol) & (values <= high + tol)


def _describe(rows: pd.DataFrame, column: str, fmt: str) -> str:
    parts = [f"{r.label} = {format(getattr(r, column), fmt)}" for r in rows.itertuples()]
    return "; ".join(parts[:4]) + (f"; … (+{len(parts) - 4})" if len(parts) > 4 else "")


def scope_name(gpu_count: int | None) -> str:
    """``4x 4090`` for the rows of one RTX 4090 GPU count, ``all GPU counts`` for every row."""
    return "all GPU counts" if gpu_count is None else f"{gpu_count}x 4090"


def definition_search(comparisons: pd.DataFrame) -> pd.DataFrame:
    """For every ratio claim × definition × GPU-count scope: observed range, rows that support
    or contradict the claim, and whether the definition reproduces the claim's numbers.
    ``comparisons``: :func:`hgresearch.report.audit.comparisons.comparisons`."""
    rows = []
    scopes = {scope_name(None): comparisons}
    for count in sorted(comparisons.gpu_count.unique()):
        scopes[scope_name(int(count))] = comparisons[comparisons.gpu_count == count]
    for claim_id, claim, kind, low, high in RATIO_CLAIMS:
        fmt = ".2f" if kind == "tok_per_usd_ratio" else ".0%"
        for scope, data in scopes.items():
            for definition, part in data.groupby("definition", sort=False):
                values = part[kind]
                ok = _supports(values, kind, low, high)
                if low is None:
                    gap = abs(values.max() - high)
                else:
                    gap = max(abs(values.min() - low), abs(values.max() - high))
                rows.append({
                    "id": claim_id, "claim": claim, "definition": definition, "scope": scope,
                    "n_rows": len(part), "observed_min": float(values.min()),
                    "observed_max": float(values.max()),
                    "n_supporting": int(ok.sum()), "n_contradicting": int((~ok).sum()),
                    "share_supporting": float(ok.mean()), "endpoint_gap": float(gap),
                    "reproduces_claim": bool(gap <= YIELD_TOLERANCE[kind]
                                             and ok.mean() >= RANGE_SHARE),
                    "supporting_rows": _describe(part[ok], kind, fmt),
                    "contradicting_rows": _describe(part[~ok], kind, fmt)})
    table = pd.DataFrame(rows)
    table["_order"] = [definition_order(d) for d in table.definition]
    return table.sort_values(["id", "scope", "_order"], kind="stable").drop(
        columns="_order").reset_index(drop=True)


def closest_definitions(search: pd.DataFrame) -> pd.DataFrame:
    """One line per ratio claim: the definitions (and scopes) that reproduce it — observed end
    points within rounding of the claim's and at least
    :data:`~hgresearch.report.audit.common.RANGE_SHARE` of rows inside — and, whether or not one
    does, the closest definition *for the configuration the claim names*
    (:data:`NAMED_GPU_COUNT`; every scope where it names none): among that configuration's
    definitions, those with enough rows inside the claim first, then the smallest end-point
    gap (then the larger share). ``search``: :func:`definition_search`."""
    rows = []
    for claim_id, part in search.groupby("id", sort=False):
        hits = part[part.reproduces_claim]
        named = NAMED_GPU_COUNT.get(str(claim_id))
        scope = scope_name(named) if named else None
        pool = part[part.scope == scope] if scope and (part.scope == scope).any() else part
        ranked = pool.assign(_inside=pool.share_supporting >= RANGE_SHARE).sort_values(
            ["_inside", "endpoint_gap", "share_supporting", "n_rows"],
            ascending=[False, True, False, False], kind="stable")
        best = ranked.iloc[0]
        rows.append({
            "id": claim_id, "claim": part.claim.iloc[0],
            "named_configuration": scope or "any",
            "reproduced_by": "; ".join(f"{r.definition} ({r.scope})"
                                       for r in hits.itertuples()) or "none",
            "best_definition": f"{best.definition} ({best.scope})",
            "best_share_supporting": float(best.share_supporting),
            "best_observed_min": float(best.observed_min),
            "best_observed_max": float(best.observed_max),
            "best_contradicting_rows": best.contradicting_rows,
            "n_definitions_tested": len(part)})
    return pd.DataFrame(rows)

