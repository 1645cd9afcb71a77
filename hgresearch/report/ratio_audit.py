"""Audit of the paper's headline ratios: which definition of "RTX 4090 vs H100" yields
"62–78 % of H100 throughput", "up to 75 % lower cost per token" and "4–7× more throughput per
dollar", and which rows of the data support or contradict each.

Every comparison pairs an RTX 4090 configuration (1, 2, 4 or 8 GPUs) with the H100
configuration of the same model (one H100-PCIe for the models both ran). Definitions:

* ``matched load @ q`` — the two runs at the same offered rate q (the paper's comparison);
* ``matched load, all rates`` — every rate pooled;
* ``peak measured`` — the best run of each configuration (any rate);
* ``fitted capacity`` — capacity from the capacity model, in tokens/s (cost at capacity);

each over all GPU counts and over single-GPU pairs only. Throughput is total (input + output)
tokens/s as the paper's table; cost per token and throughput per dollar use the price scenario
(``alternative``: H100-PCIe $2.00/h, RTX 4090 $0.25/h).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from hgresearch.accounting.costs import cost_per_million_tok_at_rate_usd
from hgresearch.data.catalogs import gpu_price_usd_per_h
from hgresearch.fits.common import require_columns

#: The paper's claims: (name, kind, low, high). Ratios as fractions / multiples.
CLAIMS = (
    ("throughput 62–78% of H100", "throughput_ratio", 0.62, 0.78),
    ("up to 75% lower cost per token", "cost_reduction", None, 0.75),
    ("4–7x more throughput per dollar", "tok_per_usd_ratio", 4.0, 7.0),
)
#: The RTX 4090 GPU count a claim names: "two RTX 4090s" (4–7x per dollar); "clusters ... at
#: about half the cost" is four cards (4 x $0.25/h against $2.00/h). The closest definition is
#: looked for among that configuration's rows first, so a better-fitting other configuration
#: cannot hide what the named one gives.
NAMED_GPU_COUNT = {"throughput 62–78% of H100": 4, "4–7x more throughput per dollar": 2}
#: Half-width of "the same number" when rounding to the claim's precision.
TOLERANCE = {"throughput_ratio": 0.005, "cost_reduction": 0.005, "tok_per_usd_ratio": 0.5}
#: How close a definition's extreme must come to the claimed end point to "yield" the claim.
YIELD_TOLERANCE = {"throughput_ratio": 0.03, "cost_reduction": 0.03, "tok_per_usd_ratio": 0.5}

AUDIT_RUN_COLUMNS = ["model", "gpu_name", "gpu_count", "request_rate_qps",
                     "total_token_throughput_tok_per_s", "cost_usd_per_1m_tok"]


def _pairs(consumer: pd.DataFrame, enterprise: pd.DataFrame, on: list[str]) -> pd.DataFrame:
    merged = consumer.merge(enterprise, on=on, suffixes=("_4090", "_h100"))
    return merged


def comparison_rows(runs: pd.DataFrame, capacity: pd.DataFrame | None = None,
                    consumer: str = "RTX-4090", enterprise: str = "H100-PCIe",
                    scenario: str = "alternative") -> pd.DataFrame:
    """One row per (definition, model, consumer GPU count, rate): throughput ratio, cost
    reduction and throughput-per-dollar ratio of the consumer configuration vs the enterprise
    one. ``runs`` must carry cost columns (:func:`hgresearch.accounting.costs.add_costs`)."""
    require_columns(runs, AUDIT_RUN_COLUMNS, "ratio audit")
    price_c = gpu_price_usd_per_h(consumer, scenario)
    price_e = gpu_price_usd_per_h(enterprise, scenario)
    metrics = ["total_token_throughput_tok_per_s", "cost_usd_per_1m_tok"]
    points = (runs.groupby(["model", "gpu_name", "gpu_count", "request_rate_qps"])[metrics]
              .mean().reset_index())
    cons = points[points.gpu_name == consumer]
    ent = points[(points.gpu_name == enterprise)]
    # one enterprise configuration per model: the smallest GPU count it ran
    ent = ent[ent.gpu_count == ent.groupby("model").gpu_count.transform("min")]
    out = []
    matched = _pairs(cons, ent.drop(columns="gpu_name"), ["model", "request_rate_qps"])
    for row in matched.itertuples():
        base = {"model": row.model, "gpu_count_4090": int(row.gpu_count_4090),
                "gpu_count_h100": int(row.gpu_count_h100),
                "request_rate_qps": row.request_rate_qps,
                "tok_per_s_4090": row.total_token_throughput_tok_per_s_4090,
                "tok_per_s_h100": row.total_token_throughput_tok_per_s_h100,
                "cost_usd_per_1m_tok_4090": row.cost_usd_per_1m_tok_4090,
                "cost_usd_per_1m_tok_h100": row.cost_usd_per_1m_tok_h100}
        out.append({"definition": f"matched load @ {row.request_rate_qps:g} req/s", **base})
        out.append({"definition": "matched load, all rates", **base})
    peak_c = cons.loc[cons.groupby(["model", "gpu_count"]).total_token_throughput_tok_per_s
                      .idxmax()]
    peak_e = ent.loc[ent.groupby("model").total_token_throughput_tok_per_s.idxmax()]
    for row in _pairs(peak_c, peak_e.drop(columns=["gpu_name", "request_rate_qps"]),
                      ["model"]).itertuples():
        out.append({"definition": "peak measured", "model": row.model,
                    "gpu_count_4090": int(row.gpu_count_4090),
                    "gpu_count_h100": int(row.gpu_count_h100),
                    "request_rate_qps": math.nan,
                    "tok_per_s_4090": row.total_token_throughput_tok_per_s_4090,
                    "tok_per_s_h100": row.total_token_throughput_tok_per_s_h100,
                    "cost_usd_per_1m_tok_4090": row.cost_usd_per_1m_tok_4090,
                    "cost_usd_per_1m_tok_h100": row.cost_usd_per_1m_tok_h100})
    if capacity is not None and not capacity.empty:
        cap = capacity[["model", "gpu_name", "gpu_count", "replicas", "capacity_tok_per_s"]]
        cap_c = cap[cap.gpu_name == consumer]
        cap_e = cap[cap.gpu_name == enterprise]
        cap_e = cap_e[cap_e.gpu_count == cap_e.groupby("model").gpu_count.transform("min")]
        for row in _pairs(cap_c, cap_e.drop(columns="gpu_name"), ["model"]).itertuples():
            out.append({
                "definition": "fitted capacity", "model": row.model,
                "gpu_count_4090": int(row.gpu_count_4090),
                "gpu_count_h100": int(row.gpu_count_h100), "request_rate_qps": math.nan,
                "tok_per_s_4090": row.capacity_tok_per_s_4090,
                "tok_per_s_h100": row.capacity_tok_per_s_h100,
                "cost_usd_per_1m_tok_4090": cost_per_million_tok_at_rate_usd(
                    row.capacity_tok_per_s_4090, row.gpu_count_4090, price_c, row.replicas_4090),
                "cost_usd_per_1m_tok_h100": cost_per_million_tok_at_rate_usd(
                    row.capacity_tok_per_s_h100, row.gpu_count_h100, price_e, row.replicas_h100)})
    table = pd.DataFrame(out)
    table["throughput_ratio"] = table.tok_per_s_4090 / table.tok_per_s_h100
    table["cost_reduction"] = 1.0 - table.cost_usd_per_1m_tok_4090 / table.cost_usd_per_1m_tok_h100
    table["tok_per_usd_ratio"] = table.cost_usd_per_1m_tok_h100 / table.cost_usd_per_1m_tok_4090
    table["price_ratio"] = price_e / price_c
    order = {d: i for i, d in enumerate(sorted(table.definition.unique(), key=_definition_key))}
    table["_order"] = table.definition.map(order)
    table = table.sort_values(["_order", "model", "gpu_count_4090", "request_rate_qps"],
                              kind="stable").drop(columns="_order").reset_index(drop=True)
    return table


def _definition_key(name: str) -> tuple:
    if name.startswith("matched load @"):
        return (0, float(name.split("@")[1].split()[0]))
    return ({"matched load, all rates": 1, "peak measured": 2, "fitted capacity": 3}[name], 0)


def _supports(values: pd.Series, kind: str, low: float | None, high: float) -> pd.Series:
    tol = TOLERANCE[kind]
    if low is None:  # "up to X": a real saving that does not exceed X
        return (values > 0) & (values <= high + tol)
    return (values >= low - tol) & (values <= high + tol)


def _describe(rows: pd.DataFrame, column: str, fmt: str) -> str:
    parts = [f"{r.model} {r.gpu_count_4090}x4090"
             + (f" @{r.request_rate_qps:g}" if np.isfinite(r.request_rate_qps) else "")
             + f" = {format(getattr(r, column), fmt)}" for r in rows.itertuples()]
    return "; ".join(parts[:4]) + (f"; … (+{len(parts) - 4})" if len(parts) > 4 else "")


def audit_table(comparisons: pd.DataFrame) -> pd.DataFrame:
    """For every claim × definition × GPU-count scope: observed range, rows that support or
    contradict the claim, and whether the definition reproduces the claim's numbers."""
    rows = []
    scopes = {"all GPU counts": comparisons}
    for count in sorted(comparisons.gpu_count_4090.unique()):
        scopes[f"{count}x 4090"] = comparisons[comparisons.gpu_count_4090 == count]
    for claim, kind, low, high in CLAIMS:
        fmt = ".2f" if kind == "tok_per_usd_ratio" else ".0%"
        for scope, data in scopes.items():
            for definition, part in data.groupby("definition", sort=False):
                values = part[kind]
                ok = _supports(values, kind, low, high)
                y_tol = YIELD_TOLERANCE[kind]
                if low is None:
                    gap = abs(values.max() - high)
                else:
                    gap = max(abs(values.min() - low), abs(values.max() - high))
                rows.append({
                    "claim": claim, "definition": definition, "scope": scope,
                    "n_rows": len(part), "observed_min": float(values.min()),
                    "observed_max": float(values.max()),
                    "n_supporting": int(ok.sum()), "n_contradicting": int((~ok).sum()),
                    "share_supporting": float(ok.mean()), "endpoint_gap": float(gap),
                    "reproduces_claim": bool(gap <= y_tol and ok.mean() >= 0.75),
                    "supporting_rows": _describe(part[ok], kind, fmt),
                    "contradicting_rows": _describe(part[~ok], kind, fmt)})
    table = pd.DataFrame(rows)
    table["_order"] = table.definition.map(_definition_key)
    return table.sort_values(["claim", "scope", "_order"], kind="stable").drop(
        columns="_order").reset_index(drop=True)


def audit_verdicts(audit: pd.DataFrame) -> pd.DataFrame:
    """One line per claim: the definitions (and scopes) that reproduce it — observed end
    points within rounding of the claim's and ≥ 75 % of rows inside — and, whether or not
    one does, the closest definition *for the configuration the claim names*
    (:data:`NAMED_GPU_COUNT`; every scope where it names none): among that configuration's
    definitions, those with ≥ 75 % of rows inside the claim first, then the smallest end-point
    gap (then the larger share)."""
    rows = []
    for claim, part in audit.groupby("claim", sort=False):
        hits = part[part.reproduces_claim]
        named = NAMED_GPU_COUNT.get(claim)
        scope = f"{named}x 4090" if named else None
        pool = part[part.scope == scope] if scope and (part.scope == scope).any() else part
        ranked = pool.assign(_inside=pool.share_supporting >= 0.75).sort_values(
            ["_inside", "endpoint_gap", "share_supporting", "n_rows"],
            ascending=[False, True, False, False], kind="stable")
        best = ranked.iloc[0]
        rows.append({
            "claim": claim,
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
