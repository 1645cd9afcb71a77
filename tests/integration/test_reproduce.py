"""`hgresearch reproduce` end to end: notebooks executed by papermill, outputs stable."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import nbformat
import pytest
from typer.testing import CliRunner

from hgresearch.cli import app
from hgresearch.cli.pipeline import (
    NotebookFailed,
    execute_notebook,
    reproduce_notebooks,
    run_reproduce,
)
from hgresearch.errors import HgResearchError
from hgresearch.paths import REPO_ROOT
from hgresearch.report.writers import write_headline


def _digests(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _share_cache(build: Path, into: Path) -> None:
    """Copy the result cache (``cache/models``: calibrations, the simulator's cross-validation,
    steady-state rates; keyed by inputs and code) of ``build`` into ``into``, keeping what is
    there: the later tests that need the reference calibrations then take seconds, not the
    quarter of an hour a cold cross-validation takes on two cores."""
    source = build / "cache" / "models"
    target = into / "cache" / "models"
    target.mkdir(parents=True, exist_ok=True)
    for path in source.glob("*.pkl"):
        if not (target / path.name).exists():
            shutil.copy2(path, target / path.name)


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory, reference_dir):
    root = tmp_path_factory.mktemp("reproduce")
    result = CliRunner().invoke(app, ["reproduce", "--from", str(reference_dir), "--build-dir",
                                      str(root / "build"), "--paper-dir", str(root / "paper")])
    assert result.exit_code == 0, result.output
    # The cold run above is the one that must match the committed outputs; the repository's
    # build folder (the other slow tests' cache) gets its results.
    _share_cache(root / "build", REPO_ROOT / "build")
    return root, result.output


def test_notebooks_are_committed_clean():
    for path in sorted((REPO_ROOT / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert not cell["outputs"] and cell["execution_count"] is None, path
                assert "def " not in "".join(cell["source"]), f"{path}: no def in notebooks"
        tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1, f"{path}: one cell tagged 'parameters'"


@pytest.mark.slow
def test_reproduce_writes_tables_and_figures(reproduced):
    root, output = reproduced
    assert "02_ingest.ipynb done" in output and "03_cost_performance.ipynb done" in output
    lines = output.splitlines()
    header = lines.index("headline numbers:")
    assert lines[header + 1].startswith("  ") and ": " in lines[header + 1]
    assert "  table3_efficiency_ratio: 3.1" in lines[header:]
    assert "without encryption" not in output
    tables = root / "paper" / "tables"
    figures = root / "paper" / "figures"
    for stem in ("table1_gpu_prices", "table2_cost_performance"):
        for suffix in (".csv", ".md", ".tex"):
            assert (tables / f"{stem}{suffix}").stat().st_size > 0
    for stem in ("figure1_scaling", "figure1_scaling_all_configurations",
                 "ttft_percentiles_vs_qps", "cost_vs_qps", "throughput_ratio_heatmap"):
        assert (figures / f"{stem}.png").stat().st_size > 10_000
        assert (figures / f"{stem}.pdf").read_bytes().startswith(b"%PDF")
    assert len((tables / "table2_cost_performance.csv").read_text().splitlines()) == 21
    for notebook in reproduce_notebooks():
        assert (root / "build" / "notebooks" / notebook.name).exists()


@pytest.mark.slow
def test_no_figure_of_any_notebook_has_layout_problems(reproduced):
    """save_figure checks every figure it writes (overlapping labels, annotations outside their
    axes, legends over data, unlabelled axes) and warns; no executed notebook shows a warning."""
    root, _ = reproduced
    for notebook in reproduce_notebooks():
        executed = json.loads((root / "build" / "notebooks" / notebook.name).read_text())
        outputs = json.dumps([cell.get("outputs", []) for cell in executed["cells"]])
        assert "FigureLayoutWarning" not in outputs, notebook.name


@pytest.mark.slow
def test_committed_tables_match_regenerated(reproduced):
    """The tables committed under paper/ are what the pipeline produces from the raw data."""
    root, _ = reproduced
    regenerated = _digests(root / "paper" / "tables")
    committed = _digests(REPO_ROOT / "paper" / "tables")
    assert regenerated == {k: v for k, v in committed.items() if k in regenerated}
    assert set(regenerated) == set(committed)


@pytest.mark.slow
def test_second_run_is_byte_identical(reproduced, reference_dir, tmp_path):
    """A second run, its notebooks executed anew on the first run's result cache (the cold
    computation's own determinism is what test_committed_tables_match_regenerated checks,
    against tables regenerated cold on another machine)."""
    root, _ = reproduced
    _share_cache(root / "build", tmp_path / "build")
    result = CliRunner().invoke(app, ["reproduce", "--from", str(reference_dir), "--build-dir",
                                      str(tmp_path / "build"), "--paper-dir",
                                      str(tmp_path / "paper")])
    assert result.exit_code == 0, result.output
    assert _digests(tmp_path / "paper") == _digests(root / "paper")


@pytest.mark.slow
def test_failing_notebook_names_cell_and_keeps_copy(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("1 / 0")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    source = tmp_path / "broken.ipynb"
    nbformat.write(nb, source)
    output = tmp_path / "out" / "broken.ipynb"
    with pytest.raises(NotebookFailed) as info:
        execute_notebook(source, output, {})
    message = str(info.value)
    assert "broken.ipynb" in message and "cell 2" in message and "ZeroDivisionError" in message
    assert output.exists()


def test_reproduce_prints_no_empty_or_stale_headline_and_no_kernel_warning(reference_dir,
                                                                          tmp_path, capfd):
    """A run whose notebooks record no numbers prints no "headline numbers:" header, nor the
    numbers a notebook of an earlier run left in build/headline; the kernels' "running over
    TCP without encryption" warning (written by the kernel process to the inherited stderr,
    hence capfd) does not appear."""
    nb = nbformat.v4.new_notebook()
    parameters = nbformat.v4.new_code_cell('build_dir = "build"')
    parameters.metadata["tags"] = ["parameters"]
    nb.cells = [parameters, nbformat.v4.new_code_cell(
        "from hgresearch.report.writers import write_headline\n"
        "write_headline(build_dir, '01_silent', {})")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    notebook = tmp_path / "01_silent.ipynb"
    nbformat.write(nb, notebook)
    write_headline(tmp_path / "build", "99_removed_notebook", {"stale number": 1})
    lines: list[str] = []
    run_reproduce(source=reference_dir, build_dir=tmp_path / "build",
                  paper_dir=tmp_path / "paper", echo=lines.append, notebooks=[notebook])
    assert "[1/1] 01_silent.ipynb ..." in lines
    assert "headline numbers:" not in lines
    assert not any("stale number" in line for line in lines)
    captured = capfd.readouterr()
    assert "without encryption" not in captured.err + captured.out


def test_reproduce_without_notebooks_says_it_needs_a_checkout(tmp_path, monkeypatch):
    """As from an installed package: no notebooks folder is an error before any download."""
    from hgresearch.cli import pipeline

    monkeypatch.setattr(pipeline, "NOTEBOOK_DIR", tmp_path / "site-packages" / "notebooks")
    monkeypatch.setattr(pipeline, "find_or_fetch", lambda *a, **k: pytest.fail("fetched"))
    with pytest.raises(HgResearchError, match="reproduce runs the notebooks of a source checkout"):
        run_reproduce(build_dir=tmp_path / "build", paper_dir=tmp_path / "paper")


def test_select_notebooks_by_number_stem_or_file_and_adds_ingest_when_needed(tmp_path):
    from hgresearch.cli.pipeline import INGEST_OUTPUT, select_notebooks
    from hgresearch.errors import InputError

    assert [p.stem for p in select_notebooks(["09", "03_cost_performance.ipynb"])] == \
        ["03_cost_performance", "09_audit"]
    assert [p.stem for p in select_notebooks(["09_audit"], build_dir=tmp_path)] == \
        ["02_ingest", "09_audit"]
    (tmp_path / INGEST_OUTPUT).write_bytes(b"")
    assert [p.stem for p in select_notebooks(["09"], build_dir=tmp_path)] == ["09_audit"]
    with pytest.raises(InputError, match="'99' is not one of the reproduce notebooks: 02_ingest"):
        select_notebooks(["99"])


def test_reproduce_unknown_notebook_is_one_line_exit_2(tmp_path):
    result = CliRunner().invoke(app, ["reproduce", "--notebook", "nope",
                                      "--build-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "--notebook 'nope' is not one of the reproduce notebooks" in result.output
