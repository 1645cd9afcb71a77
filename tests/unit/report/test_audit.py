"""Reproduction audit (:mod:`hgresearch.report.audit`): a small constructed case for each
explanation kind (repeat run, rounding chain, mean of repeats, mislabel, projection,
unexplained), the claim verdict rule, the repeat policy of the comparisons, the definition
search's named-configuration ranking, and the known verdicts on the paper's reference runs."""

from __future__ import annotations

import pandas as pd
import pytest

from hgresearch.data.catalogs import (
    printed_claims,
    printed_decimals,
    printed_table2,
    printed_table3,
)
from hgresearch.report import audit


def _row(printed: dict, runs: list[dict], decimals: int = 2) -> audit.PrintedRow:
    frame = pd.DataFrame([{"repeat_index": i, **r} for i, r in enumerate(runs)])
    return audit.PrintedRow("#1", "1x GPU", 4.0, pd.Series(printed),
                            pd.Series({k: decimals for k in printed}), frame)


COLUMNS = {"a": "a", "b": "b"}
DOUBLE_A = audit.RoundingChain("b", "printed a x 2", lambda r: float(r.a) * 2)


def _kinds(cells: pd.DataFrame) -> dict[str, str]:
    return dict(zip(cells.column, cells.explanation_kind, strict=True))


def test_reproduces_is_half_a_unit_of_the_last_printed_digit():
    assert audit.reproduces(15.449, 15.4, 1)
    assert not audit.reproduces(15.4858, 15.4, 1)
    assert audit.reproduces(12.036, 12, 0)
    assert not audit.reproduces(float("nan"), 1.0, 2)


def test_repeat_run_explains_a_row_that_shows_another_run():
    item = _row({"a": 2.00, "b": 5.00}, [{"a": 1.00, "b": 4.00}, {"a": 2.001, "b": 4.999}])
    cells = audit.audit_cells([item], COLUMNS)
    assert _kinds(cells) == {"a": audit.REPEAT_RUN, "b": audit.REPEAT_RUN}
    assert set(cells.explained_by) == {"run 2 of 2 of the point"}
    assert cells.regenerated.tolist() == [1.00, 4.00]  # the table's definition: first run
    assert cells.difference.tolist() == pytest.approx([-1.0, -1.0])


def test_rounding_chain_recomputes_from_the_printed_inputs():
    # true a = 1.044 prints 1.04; true b = 2 x 1.044 = 2.088 prints 2.09, but the paper
    # printed 2.08 = 2 x the printed 1.04
    item = _row({"a": 1.04, "b": 2.08}, [{"a": 1.044, "b": 2.088}])
    cells = audit.audit_cells([item], COLUMNS, [DOUBLE_A])
    assert _kinds(cells) == {"a": audit.REPRODUCED, "b": audit.ROUNDING_CHAIN}
    assert "printed a x 2 = 2.08" in cells.explanation.iloc[1]


def test_mean_of_repeats_and_unexplained():
    item = _row({"a": 3.00, "b": 99.0}, [{"a": 2.0, "b": 1.0}, {"a": 4.0, "b": 1.0}])
    cells = audit.audit_cells([item], COLUMNS)
    assert _kinds(cells) == {"a": audit.MEAN_OF_REPEATS, "b": audit.UNEXPLAINED}
    # the mean reproduces a but not b: it says which printed cell it contradicts
    assert "contradicts printed b" in cells.explanation.iloc[0]


def test_a_candidate_consistent_with_the_whole_row_wins():
    # the mean of the repeats gives b = 2.08 too, but its a (1.10) contradicts the printed a;
    # the rounding chain from the printed a is consistent with the row
    item = _row({"a": 1.04, "b": 2.08},
                [{"a": 1.044, "b": 2.088}, {"a": 1.156, "b": 2.072}])
    cells = audit.audit_cells([item], COLUMNS, [DOUBLE_A])
    row_b = cells[cells.column == "b"].iloc[0]
    assert row_b.explanation_kind == audit.ROUNDING_CHAIN
    assert "mean of repeats" in row_b.other_candidates
    assert "contradicts printed a" in row_b.other_candidates


def _runs_for_figure() -> pd.DataFrame:
    """Constructed runs table: two configurations of one model at 2 and 8 QPS."""
    rows = []
    for gpu_count, qps, duration_s, rps in ((2, 2.0, 100.0, 2.0), (2, 8.0, 50.0, 3.0),
                                            (4, 8.0, 40.0, 5.0)):
        rows.append({"model": "m", "hardware": f"{gpu_count}x RTX-4090", "gpu_name": "RTX-4090",
                     "gpu_count": gpu_count, "replicas": 1, "request_rate_qps": qps,
                     "repeat_index": 0, "repeat_count": 1, "duration_s": duration_s,
                     "total_input_tok": 50_000, "total_output_tok": 50_000,
                     "request_throughput_rps": rps})
    return pd.DataFrame(rows)


def test_figure1_mislabel_and_projection():
    runs = _runs_for_figure()
    # cost per 1M tokens at $0.25/GPU-h: 2x@8 = 50/3600*2*0.25/0.1 = 0.0694;
    # 4x@8 = 40/3600*4*0.25/0.1 = 0.1111; 2x@2 = 100/3600*2*0.25/0.1 = 0.1389
    labels = pd.DataFrame({
        "series": ["2x RTX-4090", "4 x (2x RTX-4090)", "2x RTX-4090"],
        "target_qps": [8.0, 8.0, 2.0],
        "printed_cost_per_mtok_usd": [0.111, 0.139, 0.500],
        "printed_achieved_rps": [None, 8.0, None]})
    decimals = pd.DataFrame({"printed_cost_per_mtok_usd": [3, 3, 3],
                             "printed_achieved_rps": [-1, 0, -1]})
    table = audit.audit_figure1(runs, "m", labels=labels, decimals=decimals)
    assert table.explanation_kind.tolist() == [audit.MISLABEL, audit.PROJECTION,
                                               audit.PROJECTION, audit.UNEXPLAINED]
    assert "4x RTX-4090 @ 8 QPS" in table.explanation.iloc[0]
    assert table.regenerated.iloc[2] == pytest.approx(4 * 2.0)  # 4 replicas x 2 req/s at 2 QPS


def test_claim_verdict_rule():
    holds = audit.DefinitionTest("primary", "x", True)
    fails = audit.DefinitionTest("primary", "x", False)
    other = audit.DefinitionTest("other", "y", True)
    untestable = audit.DefinitionTest("measured", "—", None)
    assert audit.claim_verdict([holds, other]) == (audit.VERDICT_REPRODUCED, "primary")
    assert audit.claim_verdict([fails, other]) == (audit.VERDICT_OTHER_DEFINITION, "other")
    assert audit.claim_verdict([untestable, other])[0] == audit.VERDICT_OTHER_DEFINITION
    assert audit.claim_verdict([fails, fails])[0] == audit.VERDICT_CONTRADICTED
    assert audit.claim_verdict([untestable])[0] == audit.VERDICT_NOT_TESTABLE


def test_definition_search_ranks_the_configuration_the_claim_names():
    """Before: the closest definition needed >= 4 rows, so a 1x scope hid the named 4x one."""
    base = {"id": "C1", "claim": "throughput 62–78% of H100", "share_supporting": 1.0,
            "reproduces_claim": False, "contradicting_rows": "", "observed_min": 0.6,
            "observed_max": 0.7}
    search = pd.DataFrame([
        {**base, "definition": "matched load @ 16 req/s", "scope": "1x 4090", "n_rows": 4,
         "endpoint_gap": 0.01},
        {**base, "definition": "matched load @ 16 req/s", "scope": "4x 4090", "n_rows": 1,
         "endpoint_gap": 0.05}])
    closest = audit.closest_definitions(search).iloc[0]
    assert closest.best_definition == "matched load @ 16 req/s (4x 4090)"
    assert closest.named_configuration == "4x 4090"


def _repeated_point_runs() -> pd.DataFrame:
    """One model on 1x H100 and 2x RTX 4090 at 4 QPS; the H100 point measured twice."""
    rows = []
    for hardware, gpu, count, repeat, tok_per_s in (("1x H100-PCIe", "H100-PCIe", 1, 0, 1000.0),
                                                    ("1x H100-PCIe", "H100-PCIe", 1, 1, 3000.0),
                                                    ("2x RTX-4090", "RTX-4090", 2, 0, 500.0)):
        rows.append({"model": "m", "dataset": "d", "hardware": hardware, "gpu_name": gpu,
                     "gpu_count": count, "tensor_parallel_size": count, "replicas": 1,
                     "num_prompts": 200, "burstiness": 1.0, "max_concurrency": None,
                     "request_rate_qps": 4.0, "repeat_index": repeat,
                     "repeat_count": 2 if gpu == "H100-PCIe" else 1, "duration_s": 100.0,
                     "total_input_tok": tok_per_s * 50, "total_output_tok": tok_per_s * 50,
                     "total_token_throughput_tok_per_s": tok_per_s, "p99_ttft_ms": 50.0})
    return pd.DataFrame(rows)


def test_comparisons_follow_the_repeat_policy():
    """A repeated point is its first run in every comparison (the mean would give 0.25)."""
    assert audit.REPEAT_POLICY == "first"
    table = audit.comparisons(_repeated_point_runs())
    assert set(table.definition) == {"matched load @ 4 req/s", "matched load, all rates",
                                     "peak measured"}
    assert table.throughput_ratio.tolist() == pytest.approx([0.5, 0.5, 0.5])
    # 2 GPUs x $0.25/h against 1 x $2.00/h
    assert table.hourly_price_ratio.tolist() == pytest.approx([0.25, 0.25, 0.25])
    assert table.label.iloc[0] == "m 2x RTX-4090 @ 4 QPS"


def test_printed_catalog_keeps_sources_and_printed_decimals():
    assert len(printed_table2()) == 20 and len(printed_table3()) == 2
    assert printed_claims().source.str.contains("10.1145/3775043.3775047").all()
    decimals = printed_decimals("table3.csv")
    assert decimals.tokens_per_kwh_m.tolist() == [1, 1]
    assert printed_decimals("table2.csv").cost_per_mtok_usd.eq(3).all()


# --- the paper's reference runs ------------------------------------------------------------

@pytest.fixture(scope="module")
def claims(reference_runs):
    return audit.audit_claims(reference_runs).set_index("id")


def test_table2_row_17_is_the_second_run_of_its_point(reference_runs):
    rows = audit.summarize_rows(audit.audit_table2(reference_runs)).set_index("row")
    assert rows.loc["#17", "cells_differing"] == 7
    assert rows.loc["#17", "explanation_kind"] == audit.REPEAT_RUN
    assert rows.loc["#17", "explained_by"] == "run 2 of 2 of the point"
    assert (rows.drop("#17").cells_differing == 0).all()


def test_table3_h100_row_is_a_rounding_chain(reference_runs):
    cells = audit.audit_table3(reference_runs).set_index(["row", "column"])
    h100 = cells.loc["1x H100-PCIe"]
    assert h100.loc["tokens_per_kwh_m", "explanation_kind"] == audit.ROUNDING_CHAIN
    assert h100.loc["g_co2_per_mtok", "explanation_kind"] == audit.ROUNDING_CHAIN
    # the mean of repeats gives 15.4 too, but not the printed tokens/s of the same row
    assert "contradicts printed tps" in h100.loc["tokens_per_kwh_m", "other_candidates"]


def test_figure1_labels_on_reference(reference_runs):
    kinds = audit.audit_figure1(reference_runs).explanation_kind.tolist()
    assert kinds == [audit.MISLABEL, audit.PROJECTION, audit.PROJECTION]


def test_known_claim_verdicts(claims):
    # 2x RTX-4090 is cheaper, and the printed lower end (#6) is not a four-card row
    assert claims.loc["C6", "verdict"] == audit.VERDICT_CONTRADICTED
    assert "#6 2x RTX-4090 @ 4 QPS" in claims.loc["C6", "configuration"] + claims.loc["C6", "supporting_rows"]
    assert "#14 2x RTX-4090 @ 16 QPS: 0.086" in claims.loc["C6", "contradicting_rows"]
    assert claims.loc["C1", "configuration"].startswith("4x RTX-4090")
    assert "hourly" in claims.loc["C1", "holds_under"]
    assert "no latency bound" in claims.loc["C2", "holds_under"]
    assert claims.loc["C7", "verdict"] == audit.VERDICT_OTHER_DEFINITION
    assert claims.loc["C8", "holds_under"].startswith("projection")
    assert claims.loc["C5", "verdict"] == audit.VERDICT_REPRODUCED  # Table 3's own definition
    assert "datasheet TDP (350 W/450 W): 6.19" in claims.loc["C5", "contradicting_rows"]
    assert "16 QPS" in claims.loc["C3", "holds_under"]
    assert claims.loc["C9", "verdict"] == audit.VERDICT_NOT_TESTABLE
    assert set(claims.verdict) <= set(audit.VERDICTS)


def test_a_typo_in_the_printed_catalog_names_file_line_and_field(tmp_path, monkeypatch):
    from hgresearch.data import catalogs
    from hgresearch.errors import InputError

    folder = tmp_path / catalogs.PRINTED_DIR
    folder.mkdir()
    text = (catalogs.CATALOG_DIR / catalogs.PRINTED_DIR / "table3.csv").read_text()
    (folder / "table3.csv").write_text(text.replace("15.4", "15.4x", 1))
    monkeypatch.setattr(catalogs, "CATALOG_DIR", tmp_path)
    catalogs.printed_table3.cache_clear()
    try:
        with pytest.raises(InputError) as err:
            catalogs.printed_table3()
    finally:
        catalogs.printed_table3.cache_clear()
    assert err.value.file.endswith("table3.csv") and err.value.line == 2
    assert err.value.field == "tokens_per_kwh_m"


def test_hybrid_advantage_and_the_claim_evidence_read_from_the_planner_table(tmp_path):
    """The hybrid's saving against the cheaper single-hardware fleet, on a constructed sweep;
    then C10's model evidence read back from the table as notebook 08 writes it."""
    from hgresearch.plan.hybrid_study import hybrid_advantage, summarize_hybrid_advantage

    cost = {  # rate -> (hybrid, H100 only, RTX only); at 2 req/s the RTX fleet has no plan
        1.0: (0.5, 0.5, 0.6), 2.0: (0.3, 0.4, None), 3.0: (0.15, 0.4, 0.2)}
    sweep = pd.DataFrame([
        {"scenario": "s", "rate_rps": rate, "plan": plan, "cost_usd_per_1m_tok": value,
         "passed": True}
        for rate, values in cost.items()
        for plan, value in zip(("hybrid", "H100-PCIe only", "RTX-4090 only"), values,
                               strict=True) if value is not None])
    advantage = hybrid_advantage(sweep)
    assert advantage.saving.round(6).tolist() == [0.0, 0.25, 0.25]
    assert advantage.saving_vs_h100.round(6).tolist() == [0.0, 0.25, 0.625]
    gain = summarize_hybrid_advantage(advantage)
    assert (gain.points, gain.cheaper_than_both) == (3, 2)
    assert gain.max_saving == pytest.approx(0.25)
    advantage.to_csv(tmp_path / "fleet_hybrid_advantage.csv", index=False)
    evidence = audit.model_evidence(tmp_path)
    assert "at 2 of 3 demand points, by up to 25.0%" in evidence["C10"]
    assert "0%–62% cheaper than the H100-only fleet" in evidence["C10"]
    assert "nominal and stressed" in evidence["C10"]
    # a plan that failed its check is no price: the hybrid at 3 req/s no longer counts
    failed = sweep.assign(passed=~((sweep.rate_rps == 3.0) & (sweep.plan == "hybrid")))
    assert hybrid_advantage(failed).saving.isna().tolist() == [False, False, True]
    # never cheaper than both: C10's evidence says so
    hybrid_advantage(sweep.assign(cost_usd_per_1m_tok=sweep.cost_usd_per_1m_tok.where(
        sweep.plan != "hybrid", 1.0))).to_csv(tmp_path / "fleet_hybrid_advantage.csv",
                                               index=False)
    assert "at none of the 3 demand points" in audit.model_evidence(tmp_path)["C10"]
    assert evidence["C9"].startswith("not computed: carbon_break_even.csv is missing")


def test_break_even_evidence_names_the_grid_below_which_reuse_wins(tmp_path):
    rows = [("idle_consumer", e, b, v) for e, b, v in (
        ("TDP model", "central", 18.0), ("TDP model", "low", 11.0), ("power model", "high", 97.0))]
    rows += [("new", "TDP model", "central", None)]
    pd.DataFrame([{"scenario": s, "energy_estimate": e, "embodied_bound": b,
                   "a": "1x H100", "b": "2x 4090", "break_even_g_per_kwh": v,
                   "lower_below": "2x 4090" if v else "1x H100", "lower_above": "1x H100"}
                  for s, e, b, v in rows]).to_csv(tmp_path / "carbon_break_even.csv", index=False)
    evidence = audit.model_evidence(tmp_path)["C9"]
    assert "reusing idle 2x 4090 instead of a new 1x H100" in evidence
    assert "below 18 g CO2/kWh (paper's TDP model" in evidence
    assert "11–97 g CO2/kWh" in evidence
    assert "bought new, the consumer cards are never lower" in evidence


def test_definition_search_on_reference(reference_runs):
    """The 'up to 75%' saving is the 2x RTX 4090 at matched load; at 1 req/s every
    configuration keeps up, so the throughput ratio is about 1."""
    every = audit.comparisons(reference_runs, audit.fitted_capacity(reference_runs))
    assert set(every.definition) >= {"matched load, all rates", "peak measured",
                                     "fitted capacity"}
    closest = audit.closest_definitions(audit.definition_search(every)).set_index("id")
    assert "2x 4090" in closest.loc["C2", "reproduced_by"]
    assert closest.loc["C1", "named_configuration"] == "4x 4090"
    at_one = every[every.definition == "matched load @ 1 req/s"]
    assert at_one.throughput_ratio.between(0.97, 1.03).all()
