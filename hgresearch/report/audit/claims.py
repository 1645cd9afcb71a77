"""The paper's headline claims, each tested under its primary definition (the claim as worded,
with the definitions of :data:`~hgresearch.report.audit.common.DEFINITIONS`) and under
alternatives.

Each claim has an evaluator (:data:`CLAIM_EVALUATORS`) that names the configuration the claim is
about and returns a :class:`DefinitionTest` per definition. The verdict
(:func:`claim_verdict`) is ``reproduced`` (the primary holds), ``reproduced only under another
definition`` (naming it), ``contradicted`` (tested, nothing holds) or ``not testable with this
data``. For the claims the runs cannot test, :mod:`~hgresearch.report.audit.evidence` adds what
the package's models say, beside the verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from hgresearch.accounting.energy import add_power_model
from hgresearch.data.catalogs import printed_claims, printed_table2
from hgresearch.data.ingest import select_repeats
from hgresearch.identity import hardware_label
from hgresearch.report.audit.common import (
    ABOUT_HALF,
    EXPLANATION_KINDS,
    MULTIPLE_TOLERANCE,
    PERCENT_TOLERANCE,
    PROJECTION,
    RANGE_SHARE,
    REPEAT_POLICY,
    USD_TOLERANCE,
    VERDICT_CONTRADICTED,
    VERDICT_NOT_TESTABLE,
    VERDICT_OTHER_DEFINITION,
    VERDICT_REPRODUCED,
    VERDICTS,
    point_label,
)
from hgresearch.report.audit.comparisons import matched_comparisons
from hgresearch.report.audit.figure1 import audit_figure1
from hgresearch.report.paper_tables import PAPER_MODEL, configuration_runs, ratio_estimates

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


def claim_data(runs: pd.DataFrame, scenario: str = "alternative",
               matched: pd.DataFrame | None = None,
               figure1: pd.DataFrame | None = None) -> ClaimData:
    """Gather :class:`ClaimData` from every run of the runs table (``matched`` and ``figure1``:
    :func:`~hgresearch.report.audit.comparisons.matched_comparisons` and
    :func:`~hgresearch.report.audit.figure1.audit_figure1` of the same runs, when already
    computed)."""
    model_runs = configuration_runs(runs, PAPER_MODEL, scenario=scenario, repeat_policy="all")
    first = select_repeats(runs[runs.model == PAPER_MODEL], REPEAT_POLICY)
    energy_ratios = ratio_estimates(add_power_model(first))
    return ClaimData(model_runs,
                     matched_comparisons(runs, scenario) if matched is None else matched,
                     energy_ratios,
                     audit_figure1(runs, scenario=scenario) if figure1 is None else figure1)


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
    labels = [f"{point_label(r.hardware, r.request_rate_qps)} run {int(r.repeat_index) + 1}: "
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
    first["label"] = [point_label(h, q) for h, q in zip(first.hardware, first.request_rate_qps,
                                                   strict=True)]
    printed_rows = printed_table2().set_index("row").loc[[6, 11]]
    ends = [point_label(hardware_label(str(r.gpu), int(r.gpus)), float(r.qps))
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


def audit_claims(runs: pd.DataFrame, scenario: str = "alternative",
                 data: ClaimData | None = None,
                 evidence: dict[str, str] | None = None) -> pd.DataFrame:
    """Every printed claim (:func:`hgresearch.data.catalogs.printed_claims`) with the configuration
    it names, its primary definition and what the data give under it, the verdict
    (:func:`claim_verdict`) and the definition it holds under, the supporting and contradicting
    rows, every definition tested, and ``evidence``
    (:func:`~hgresearch.report.audit.evidence.model_evidence`: what the models
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
