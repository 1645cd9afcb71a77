"""Energy figures and the 05_energy_carbon notebook executed by papermill (with the paper's
raw results and a synthetic run folder carrying telemetry, see energy_fixtures)."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import pandas as pd
import papermill
import pytest
from energy_fixtures import make_run_folder

from hgresearch.accounting import carbon, energy
from hgresearch.data.ingest import read_runs, select_repeats
from hgresearch.paths import REPO_ROOT
from hgresearch.report import paper_tables as paper
from hgresearch.report.figures import energy as energy_figures
from hgresearch.report.figures.style import save_figure

NOTEBOOK = REPO_ROOT / "notebooks" / "05_energy_carbon.ipynb"


@pytest.fixture(scope="module")
def per_point(reference_dir):
    return energy.energy_per_run(select_repeats(read_runs(reference_dir), "first"))


def test_figures_have_data_and_are_byte_stable(per_point, tmp_path):
    chosen = paper.pick_configurations(per_point, paper.PAPER_MODEL, paper.TABLE3_CONFIGURATIONS)
    table = carbon.configuration_carbon(chosen, ["EU-27", "FR", "PL"])
    crossings = carbon.break_even_table(table)
    grid = carbon.grid_catalog()
    figures = {
        "qps": energy_figures.tokens_per_kwh_vs_qps(per_point, paper.PAPER_MODEL),
        "stacked": energy_figures.carbon_stacked(table),
        "break_even": energy_figures.break_even(
            carbon.totals_vs_intensity(table, [0.0, 400.0, 800.0]), grid, crossings),
        "ratio": energy_figures.efficiency_ratio_bracket(paper.ratio_estimates(per_point)),
    }
    assert len(figures["qps"].axes[0].lines) >= 8  # 4 configurations x (TDP + model)
    assert len(figures["stacked"].axes) == 2  # one panel per scenario
    assert len(figures["stacked"].axes[0].patches) == 2 * 2 * 3  # configs x parts x regions
    for name, fig in figures.items():
        first = save_figure(fig, tmp_path / "a" / name)
        second = save_figure(fig, tmp_path / "b" / name)
        for p1, p2 in zip(first, second, strict=True):
            assert p1.stat().st_size > 5000
            assert p1.read_bytes() == p2.read_bytes(), name
        plt.close(fig)


def test_notebook_is_committed_clean():
    nb = json.loads(NOTEBOOK.read_text())
    assert nb["metadata"]["hgresearch"]["reproduce"] is True
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert "parameters" in code[0]["metadata"].get("tags", [])
    source = "".join(code[0]["source"])
    for name in ("reference_dir", "build_dir", "paper_dir", "model", "configurations",
                 "grid_regions", "lifetime_years", "utilisation"):
        assert f"{name}:" in source
    for cell in code:
        assert cell.get("outputs") == [] and cell.get("execution_count") is None
        assert "def " not in "".join(cell["source"])


@pytest.mark.slow
def test_notebook_runs_under_papermill(reference_dir, tmp_path):
    run = make_run_folder(tmp_path / "runs" / "rtx", gpu_count=2, run_power_w=300.0)
    build, paper = tmp_path / "build", tmp_path / "paper"
    papermill.execute_notebook(
        str(NOTEBOOK), str(tmp_path / "out.ipynb"), progress_bar=False, kernel_name="python3",
        cwd=str(NOTEBOOK.parent.parent),
        parameters={"reference_dir": str(reference_dir), "build_dir": str(build),
                    "paper_dir": str(paper), "run_folders": [str(run)]})
    t3 = pd.read_csv(paper / "tables" / "table3_energy.csv")
    assert list(t3.Hardware) == ["1x H100-PCIe", "2x RTX-4090"]
    assert round(t3["Efficiency ratio"].iloc[0], 1) == 3.1
    assert "first of repeated runs" in (paper / "tables" / "table3_energy.md").read_text()
    per_run = pd.read_csv(paper / "tables" / "energy_per_run.csv")
    assert len(per_run) == 130 and per_run.model_energy_per_tok_high_j.notna().all()
    measured = pd.read_csv(paper / "tables" / "energy_measured.csv")
    assert measured.measured_energy_per_tok_ci_low_j.notna().all()
    for stem in ("energy_tokens_per_kwh_vs_qps", "energy_efficiency_ratio_bracket",
                 "carbon_stacked_per_region", "carbon_break_even"):
        assert (paper / "figures" / f"{stem}.png").stat().st_size > 5000
        assert (paper / "figures" / f"{stem}.pdf").exists()
    headline = json.loads((build / "headline" / "05_energy_carbon.json").read_text())
    assert headline["table3_efficiency_ratio"] == 3.1
    assert headline["break_even_idle_consumer_g_per_kwh"] > 0
