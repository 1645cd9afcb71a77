"""Measured energy from hgresearch run folders (the run-folder layout of docs/measurement.md).

The run folders are built by ``energy_fixtures.make_run_folder`` with synthetic NVML samples
(a test double: no GPU or NVML here) whose energy is known by construction.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from energy_fixtures import S, make_run_folder

from hgresearch.accounting import energy
from hgresearch.data.ingest import read_runs
from hgresearch.errors import InputError


def test_counter_energy_over_steady_window(tmp_path):
    run = make_run_folder(tmp_path / "run", gpu_count=2, run_power_w=300.0,
                          idle_power_w=50.0, steady=(10.0, 50.0))
    m = energy.measure_run(run)
    assert m["measured_energy_source"] == "nvml_energy_counter"
    assert m["measured_window_s"] == pytest.approx(40.0)
    assert m["measured_energy_j"] == pytest.approx(2 * 300.0 * 40.0)  # 24 kJ
    assert m["measured_mean_power_w"] == pytest.approx(600.0)
    # Idle baseline shown separately: 2 GPUs x 50 W, and its share over the window.
    assert m["measured_idle_power_w"] == pytest.approx(100.0)
    assert m["measured_idle_energy_j"] == pytest.approx(4000.0)
    tok = m["measured_window_tok"]
    assert m["measured_energy_per_tok_j"] == pytest.approx(24000.0 / tok)
    assert m["measured_dynamic_energy_per_tok_j"] == pytest.approx(20000.0 / tok)
    assert m["measured_tok_per_kwh"] == pytest.approx(tok / (24000.0 / 3.6e6))
    low, high = m["measured_energy_per_tok_ci_low_j"], m["measured_energy_per_tok_ci_high_j"]
    assert low < m["measured_energy_per_tok_j"] < high
    assert "block bootstrap" in m["measured_ci_method"]


def test_power_integral_fallback_matches_counter_for_linear_power(tmp_path):
    def ramp(t, gpu):
        return 200.0 + 2.0 * t + 10.0 * gpu

    with_counter = energy.measure_run(make_run_folder(tmp_path / "a", run_power_w=ramp))
    without = energy.measure_run(make_run_folder(tmp_path / "b", run_power_w=ramp,
                                                 counter=False))
    assert without["measured_energy_source"] == "nvml_power_integral"
    # Integral of 200 + 2t over [10, 50] s = 8000 + 2400 = 10400 J; GPU 1 adds 10 W x 40 s.
    expected = 10400.0 + 10400.0 + 400.0
    assert with_counter["measured_energy_j"] == pytest.approx(expected)
    assert without["measured_energy_j"] == pytest.approx(expected)


def test_bootstrap_interval_is_seeded_and_widens_with_noise(tmp_path):
    rng = np.random.default_rng(1)
    noise = rng.normal(0.0, 80.0, size=601)

    def noisy(t, gpu):
        return 300.0 + noise[: len(t)]

    quiet = energy.measure_run(make_run_folder(tmp_path / "q"), seed=3)
    run = make_run_folder(tmp_path / "n", run_power_w=noisy)
    first = energy.measure_run(run, seed=3)
    again = energy.measure_run(run, seed=3)
    other = energy.measure_run(run, seed=4)
    width = first["measured_energy_per_tok_ci_high_j"] - first["measured_energy_per_tok_ci_low_j"]
    quiet_width = (quiet["measured_energy_per_tok_ci_high_j"]
                   - quiet["measured_energy_per_tok_ci_low_j"])
    assert first == again
    assert first["measured_energy_per_tok_ci_low_j"] != other["measured_energy_per_tok_ci_low_j"]
    assert width > quiet_width


def test_tokens_in_window_hand_computed():
    requests = pd.DataFrame({"first_token_ns": [0.0, 10 * S], "done_ns": [10 * S, 20 * S],
                             "prompt_tok": [100.0, 50.0], "output_tok": [1000.0, 400.0]})
    # Window [5 s, 15 s): request 0 contributes half its output (500); request 1 its prompt
    # (first token at 10 s) and half its output (200).
    assert energy.tokens_in_window(requests, 5 * S, 15 * S) == pytest.approx(750.0)
    assert energy.tokens_in_window(requests, 0, 20 * S) == pytest.approx(1550.0)
    assert math.isnan(energy.tokens_in_window(requests.iloc[0:0], 0, S))


def test_missing_telemetry_stays_missing(tmp_path):
    run = make_run_folder(tmp_path / "run", telemetry=False)
    m = energy.measure_run(run)
    assert m["measured_energy_source"] is None
    for key in ("measured_energy_j", "measured_energy_per_tok_j",
                "measured_energy_per_tok_ci_low_j", "measured_tok_per_kwh"):
        assert math.isnan(m[key]), key
    (run / "telemetry.csv").unlink()  # absent file: the same
    assert math.isnan(energy.measure_run(run)["measured_energy_j"])


def test_add_measured_energy_on_runs_table(tmp_path):
    make_run_folder(tmp_path / "runs" / "a", gpu_count=2, run_power_w=300.0)
    make_run_folder(tmp_path / "runs" / "b", gpu_count=1, telemetry=False)
    runs = read_runs(tmp_path / "runs")
    out = energy.energy_per_run(runs)
    measured = out[out.gpu_count == 2].iloc[0]
    missing = out[out.gpu_count == 1].iloc[0]
    # 600 W measured over 2 x 450 W datasheet TDP.
    assert measured.measured_to_tdp_ratio == pytest.approx(600.0 / 900.0)
    assert measured.measured_energy_per_tok_ci_low_j < measured.measured_energy_per_tok_j
    assert pd.isna(missing.measured_energy_source)
    assert math.isnan(missing.measured_energy_per_tok_j)
    assert math.isnan(missing.measured_to_tdp_ratio)
    assert not math.isnan(missing.tdp_energy_per_tok_j)  # the TDP figure is still there


def test_summary_energy_used_when_no_telemetry_file(tmp_path):
    run = make_run_folder(tmp_path / "runs" / "a", telemetry=False)
    summary = json.loads((run / "summary.json").read_text())
    summary.update({"energy_j": 36000.0, "energy_source": "nvml_energy_counter"})
    (run / "summary.json").write_text(json.dumps(summary))
    out = energy.add_measured_energy(read_runs(tmp_path / "runs"))
    row = out.iloc[0]
    assert row.measured_energy_source == "nvml_energy_counter"
    assert row.measured_energy_per_tok_j == pytest.approx(36000.0 / row.measured_window_tok)
    assert math.isnan(row.measured_energy_per_tok_ci_low_j)  # no samples, no interval


def test_bad_telemetry_names_file_line_and_field(tmp_path):
    run = make_run_folder(tmp_path / "run")
    lines = (run / "telemetry.csv").read_text().splitlines()
    lines[3] = lines[3].replace(",idle,0,50.0,", ",idle,0,fifty,")
    (run / "telemetry.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as err:
        energy.measure_run(run)
    assert err.value.line == 4 and err.value.field == "power_w"
    assert err.value.file.endswith("telemetry.csv")


def test_truncated_last_request_line_is_ignored(tmp_path):
    run = make_run_folder(tmp_path / "run")
    before = energy.measure_run(run)["measured_window_tok"]
    with open(run / "requests.jsonl", "a") as handle:
        handle.write('{"index": 99, "t_first_token_ns": ')  # kill -9 mid-write
    assert energy.measure_run(run)["measured_window_tok"] == before
    text = (run / "requests.jsonl").read_text().splitlines()
    text.insert(1, "{broken")
    (run / "requests.jsonl").write_text("\n".join(text) + "\n")
    with pytest.raises(InputError) as err:
        energy.measure_run(run)
    assert err.value.line == 2


def test_cli_prints_measured_interval_and_missing(tmp_path):
    from typer.testing import CliRunner

    from hgresearch.cli import app

    make_run_folder(tmp_path / "runs" / "with_nvml", gpu_count=2)
    make_run_folder(tmp_path / "runs" / "without", gpu_count=1, telemetry=False)
    result = CliRunner().invoke(app, ["energy", str(tmp_path / "runs"), "-o",
                                      str(tmp_path / "energy.csv")])
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line for line in result.output.splitlines() if "J/tok" in line}
    assert "measured 1.86" in lines["with_nvml"] and "measured/TDP 0.67" in lines["with_nvml"]
    assert "measured: none" in lines["without"]
    table = pd.read_csv(tmp_path / "energy.csv")
    assert table.measured_energy_per_tok_j.isna().sum() == 1
    bad = CliRunner().invoke(app, ["energy", str(tmp_path / "nowhere")])
    assert bad.exit_code == 2 and "not found" in bad.output


def test_parquet_telemetry_gives_the_same_energy(tmp_path):
    run = make_run_folder(tmp_path / "run", counter=False)
    csv = energy.measure_run(run)
    frame = pd.read_csv(run / "telemetry.csv")
    frame.to_parquet(run / "telemetry.parquet", index=False)
    (run / "telemetry.csv").unlink()
    parquet = energy.measure_run(run)
    assert parquet["measured_energy_j"] == pytest.approx(csv["measured_energy_j"])
    assert parquet["measured_energy_source"] == "nvml_power_integral"


def test_run_folder_without_summary_is_an_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError) as err:
        energy.measure_run(tmp_path / "empty")
    assert err.value.file.endswith("summary.json")
    with pytest.raises(InputError):
        energy.run_summaries([tmp_path / "missing"])


def test_block_edges_fold_the_last_sliver(tmp_path):
    run = make_run_folder(tmp_path / "run", steady=(10.0, 50.3))
    m = energy.measure_run(run, block_s=2.0)
    assert m["measured_ci_method"].startswith("block bootstrap, 20 blocks")
