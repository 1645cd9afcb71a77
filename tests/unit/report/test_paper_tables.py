"""Table 1, Table 2, Table 3 (with its ratio under every energy estimate) and the figure data,
checked against the raw files themselves."""

from __future__ import annotations

import json

import pytest

from hgresearch.accounting import energy
from hgresearch.data.ingest import select_repeats
from hgresearch.report import paper_tables as paper
from hgresearch.report.writers import write_table

RAW = "vllm_200prompts{qps}qps_DeepSeek-R1-Distill-Qwen-14B_sharegpt_{hw}.json"
HW_FILE = {"1x H100-PCIe": "1xNVIDIA-H100-PCIe", "2x RTX-4090": "2xNVIDIA-GeForce-RTX-4090",
           "4x RTX-4090": "4xNVIDIA-GeForce-RTX-4090", "8x RTX-4090": "8xNVIDIA-GeForce-RTX-4090"}
PRICE = {"1x H100-PCIe": 2.00, "2x RTX-4090": 0.25, "4x RTX-4090": 0.25, "8x RTX-4090": 0.25}
GPUS = {"1x H100-PCIe": 1, "2x RTX-4090": 2, "4x RTX-4090": 4, "8x RTX-4090": 8}


def test_table2_rows_from_raw_files(reference_dir, reference_runs):
    table = paper.table2_cost_performance(reference_runs)
    assert len(table) == 20
    assert list(table["#"]) == [f"#{i}" for i in range(1, 21)]
    assert list(table.QPS) == [q for q in ("1", "4", "8", "16", "32") for _ in range(4)]
    assert list(table.Hardware[:4]) == paper.TABLE2_HARDWARE
    for row in table.itertuples(index=False):
        hw, qps = row[2], row[1]
        raw = json.loads((reference_dir / RAW.format(qps=qps, hw=HW_FILE[hw]))
                         .read_text().splitlines()[0])  # first run as listed
        cost = raw["duration"] / 3600 * GPUS[hw] * PRICE[hw]
        tokens = raw["total_input_tokens"] + raw["total_output_tokens"]
        assert row[3] == pytest.approx(raw["duration"])
        assert row[4] == pytest.approx(cost)
        assert row[5] == pytest.approx(cost / tokens * 1e6)
        assert row[6] == pytest.approx(raw["total_token_throughput"])
        assert row[7] == pytest.approx(raw["request_throughput"])
        assert (row[8], row[9], row[10], row[11]) == pytest.approx(
            (raw["mean_ttft_ms"], raw["median_ttft_ms"], raw["p90_ttft_ms"], raw["p99_ttft_ms"]))


def test_table2_published_rounding(reference_runs, tmp_path):
    table = paper.table2_cost_performance(reference_runs)
    write_table(table, tmp_path / "t2", caption="c", label="l", decimals=paper.TABLE2_DECIMALS)
    md = (tmp_path / "t2.md").read_text().splitlines()
    # H100 @ 16 QPS, first run: 27.68 s, $0.015 per run, $0.185 per 1M tokens.
    row13 = next(line for line in md if line.startswith("| #13 |"))
    assert "| 16 | 1x H100-PCIe | 27.68 | 0.015 | 0.185 | 3011.13 | 7.22 | 40.89 |" in row13
    tex = (tmp_path / "t2.tex").read_text()
    assert r"\toprule" in tex and r"\bottomrule" in tex and r"\#13" in tex


def test_repeat_note_names_the_points(reference_runs):
    note = paper.repeat_note(reference_runs, paper.PAPER_MODEL, paper.TABLE2_HARDWARE, "first")
    assert note.startswith("5 points were measured more than once")
    assert "1x H100-PCIe @ 16 QPS" in note and "first run" in note


def test_table1_prices():
    table = paper.table1_prices().set_index("GPU")
    assert table.loc["H100-PCIe", "Alternative provider ($/GPU-h)"] == "2.00"
    assert table.loc["H100-PCIe", "Hyperscaler ($/GPU-h)"] == "8.00–10.00"
    assert table.loc["RTX-4090", "Hyperscaler ($/GPU-h)"] == "—"
    assert table.loc["H100-SXM", "Hyperscaler ($/GPU-h)"] == "12.29"


def test_projection_rule(reference_runs):
    points = paper.scaling_points(reference_runs)
    projected = paper.project_replicas(points, "2x RTX-4090", 4, 16.0)
    at4 = points[(points.hardware == "2x RTX-4090") & (points.request_rate_qps == 4)].iloc[0]
    assert projected["request_throughput_rps"] == pytest.approx(4 * at4.request_throughput_rps)
    assert projected["cost_usd_per_1m_tok"] == pytest.approx(at4.cost_usd_per_1m_tok)
    with pytest.raises(KeyError, match="not measured at 3 QPS"):
        paper.project_replicas(points, "2x RTX-4090", 4, 12.0)


def test_throughput_ratio(reference_runs):
    ratios = paper.throughput_ratio_table(reference_runs)
    row = ratios[(ratios.model == "DeepSeek-R1-Distill-Qwen-14B") & (ratios.gpu_count == 2)
                 & (ratios.request_rate_qps == 16)].iloc[0]
    assert row.throughput_ratio == pytest.approx(row.output_throughput_tok_per_s
                                                 / row.output_throughput_tok_per_s_reference)
    assert set(ratios.model) >= {"DeepSeek-R1-Distill-Qwen-14B", "Meta-Llama-3-8B-Instruct"}
    assert 0.4 < ratios.throughput_ratio.min() < ratios.throughput_ratio.max() < 1.1


def test_unknown_model_or_hardware(reference_runs):
    with pytest.raises(KeyError, match="no runs for model"):
        paper.table2_cost_performance(reference_runs, model="GPT-5")
    with pytest.raises(KeyError, match="has no runs on"):
        paper.table2_cost_performance(reference_runs, hardware=["1x H200"])


def test_table3_reproduces_the_paper_from_raw_runs(reference_runs):
    runs = select_repeats(reference_runs, "first")
    t3 = paper.table3(runs)
    h100, rtx = t3.iloc[0], t3.iloc[1]
    assert (h100.Hardware, rtx.Hardware) == ("1x H100-PCIe", "2x RTX-4090")
    # First run of the 14B H100 16-QPS point: 3011.13 tok/s -> 10.84 M tok/h over 0.7 kWh.
    assert h100["Tokens/s"] == pytest.approx(3011.13, abs=0.01)
    assert h100["Tokens per kWh (M)"] == pytest.approx(15.486, abs=0.001)
    assert rtx["Tokens per kWh (M)"] == pytest.approx(5.002, abs=0.001)  # paper: ~5.0 M
    assert round(h100["Efficiency ratio"], 1) == 3.1  # paper: "H100 ~3.1x more efficient"
    assert rtx["Efficiency ratio"] == 1.0
    assert h100["g CO2 per 1M tokens"] == pytest.approx(242 / 15.486, rel=1e-3)
    # The paper's "~15.4 M": the mean of the two repeats rounds to it.
    repeats = paper.table3_repeats(reference_runs)
    h100_repeats = repeats[repeats.hardware == "1x H100-PCIe"].tdp_tok_per_kwh
    assert len(h100_repeats) == 2
    assert round(h100_repeats.mean() / 1e6, 1) == 15.4
    # The H100 PCIe's real 350 W limit doubles the ratio.
    datasheet = paper.table3(runs, tdp="datasheet")
    assert datasheet["Efficiency ratio"].max() == pytest.approx(2 * h100["Efficiency ratio"])


def test_pick_configurations_names_a_missing_point(reference_runs):
    with pytest.raises(KeyError, match="3x RTX-4090"):
        paper.pick_configurations(reference_runs, paper.PAPER_MODEL, [("RTX-4090", 3, 4.0)])


def test_table3_note_gives_every_repeat(reference_runs):
    note = paper.table3_repeat_note(reference_runs, repeat_policy="first")
    assert "Repeated points use the first of repeated runs as listed in the result file" in note
    h100 = paper.table3_repeats(reference_runs)
    h100 = h100[h100.hardware == "1x H100-PCIe"].tdp_tok_per_kwh / 1e6
    assert f"1x H100-PCIe: {h100.iloc[0]:.2f} / {h100.iloc[1]:.2f} M" in note
    assert "2x RTX-4090:" not in note  # measured once: nothing to compare
    assert "the mean of repeated runs" in paper.table3_repeat_note(reference_runs,
                                                                   repeat_policy="mean")


def test_ratio_estimates_bracket(reference_runs):
    per_point = energy.energy_per_run(select_repeats(reference_runs, "first"))
    est = paper.ratio_estimates(per_point).set_index("estimate")
    assert est.ratio.iloc[0] == pytest.approx(3.0957, abs=1e-3)
    assert est.ratio.iloc[1] == pytest.approx(6.1914, abs=1e-3)
    model = est.iloc[2]
    assert model.low < model.ratio < model.high
    assert est.iloc[3].low >= model.low and est.iloc[3].high <= model.high
