"""Notebook 10 (issue 19, item 5): committed clean, parameterized, not part of `reproduce`; run
by papermill on the committed CPU sweep it writes its tables, figure, calibration file and
headline into its own output folder, and refuses one inside paper/."""

from __future__ import annotations

import json

import pandas as pd
import papermill
import pytest

from hgresearch.cli.pipeline import reproduce_notebooks
from hgresearch.paths import REPO_ROOT
from hgresearch.sim.calibration_file import read_calibration_file

NOTEBOOK = REPO_ROOT / "notebooks" / "10_your_hardware.ipynb"
PARAMETERS = ("runs_path", "gpu_name", "gpu_count", "model", "price_usd_per_gpu_h",
              "price_is_placeholder", "tdp_w", "slo_limits_ms", "plan_slos", "demand_rps",
              "max_replicas", "method", "paper_step_times", "output_dir", "build_dir",
              "reference_dir")


def test_notebook_is_committed_clean_parameterized_and_not_reproduced() -> None:
    nb = json.loads(NOTEBOOK.read_text())
    assert nb["metadata"]["hgresearch"]["reproduce"] is False
    assert NOTEBOOK not in reproduce_notebooks()
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code[0]["metadata"].get("tags") == ["parameters"]
    source = "".join(code[0]["source"])
    for name in PARAMETERS:
        assert f"\n{name}:" in f"\n{source}", name
    assert 'output_dir: str = "build/' in source
    for cell in code:
        assert cell["outputs"] == [] and cell["execution_count"] is None
        assert "def " not in "".join(cell["source"])


@pytest.mark.slow
def test_notebook_runs_on_the_committed_cpu_sweep(tmp_path) -> None:
    out = tmp_path / "yours"
    papermill.execute_notebook(
        str(NOTEBOOK), str(tmp_path / "out.ipynb"), progress_bar=False, kernel_name="python3",
        cwd=str(REPO_ROOT),
        parameters={"output_dir": str(out), "build_dir": str(tmp_path / "build")})
    tables = out / "tables"
    table2 = pd.read_csv(tables / "your_table2_cost_performance.csv")
    assert list(table2.QPS) == [1, 4, 8, 16, 32] and (table2.Hardware == "1x CPU").all()
    assert table2["Cost per 1M tokens ($)"].notna().all()
    assert "placeholders for the demo" in (tables / "your_table2_cost_performance.md").read_text()
    table3 = pd.read_csv(tables / "your_table3_energy.csv")
    assert (table3["TDP per GPU (W)"] == 65).all()
    assert "kv_source server_metrics" in (tables / "your_calibration.md").read_text()
    validation = pd.read_csv(tables / "your_validation.csv")
    assert validation["held out"].tolist()[-1] == "MAPE"
    methods = pd.read_csv(tables / "your_method_comparison.csv")
    assert methods.method.tolist() == ["summaries", "steps"]
    assert methods["mean_tpot_ms MAPE (%)"].notna().all()
    steps = pd.read_csv(tables / "your_steps_check.csv")
    assert len(steps) == 10 and (steps.steps_error_pct.abs() <= 0.1).all()
    slo = pd.read_csv(tables / "your_slo_capacity.csv")
    assert (slo.slo_rate_low_qps <= slo.slo_rate_high_qps).all()
    assert (slo.capacity_slow_rps < slo.capacity_rps).all()
    assert (slo.capacity_rps < slo.capacity_fast_rps).all()
    fleet = pd.read_csv(tables / "your_plan_fleet.csv")
    assert fleet.replicas.sum() >= 1
    baselines = pd.read_csv(tables / "your_plan_baselines.csv")
    assert "only 1x CPU" in set(baselines.plan) and "only 1x H100-PCIe" in set(baselines.plan)
    assert (out / "figures" / "your_figure1_scaling.png").stat().st_size > 5000
    calibration = read_calibration_file(out / "1x_CPU.calibration.yaml")
    assert calibration.kv_cache.source == "server_metrics"
    headline = json.loads((out / "headline" / "10_your_hardware.json").read_text())
    assert headline["configuration"] == "tiny-llama-cpu on 1x CPU"
    assert headline["plan check"] == "passed"
    # sized at the slow end of the calibration's own interval, with headroom
    assert (fleet.load_vs_slow_end <= 0.9 + 1e-9).all() and (fleet.load_vs_nominal < 0.9).all()
    with pytest.raises(papermill.PapermillExecutionError, match="lies in paper/"):
        papermill.execute_notebook(
            str(NOTEBOOK), str(tmp_path / "refused.ipynb"), progress_bar=False,
            kernel_name="python3", cwd=str(REPO_ROOT),
            parameters={"output_dir": str(REPO_ROOT / "paper" / "yours")})
