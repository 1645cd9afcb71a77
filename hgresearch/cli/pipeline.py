"""``hgresearch reproduce``: execute the analysis notebooks in order with papermill.

The notebooks run are those in ``notebooks/`` whose metadata has
``{"hgresearch": {"reproduce": true}}``, in file-name order. Each gets the parameters
``reference_dir``, ``build_dir`` and ``paper_dir``; executed copies go to
``<build_dir>/notebooks/``. After the notebooks, the manuscript is built from the tables
(``<paper_dir>/build/paper.pdf``). A failing notebook stops the run and names the notebook, the cell
and the error; its executed copy is kept for inspection. Without a local copy of the reference
data, ``reproduce`` downloads it first (:func:`hgresearch.data.reference.find_or_fetch`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from hgresearch.data.reference import find_or_fetch
from hgresearch.errors import HgResearchError, InputError
from hgresearch.paths import REPO_ROOT
from hgresearch.report.manuscript import build_paper
from hgresearch.report.writers import headline_path

if TYPE_CHECKING:
    from traitlets.config import Config

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
#: The notebook that builds the runs table every later notebook reads, and that table's name
#: under ``build_dir``.
INGEST_NOTEBOOK = "02_ingest"
INGEST_OUTPUT = "runs.parquet"


class NotebookFailed(HgResearchError, RuntimeError):
    """A notebook raised during ``reproduce``."""


def reproduce_notebooks(notebook_dir: Path = NOTEBOOK_DIR) -> list[Path]:
    """Notebooks that ``reproduce`` runs, in order."""
    selected = []
    for path in sorted(notebook_dir.glob("*.ipynb")):
        meta = json.loads(path.read_text(encoding="utf-8")).get("metadata", {})
        if meta.get("hgresearch", {}).get("reproduce"):
            selected.append(path)
    return selected


def select_notebooks(names: list[str], notebook_dir: Path = NOTEBOOK_DIR,
                     build_dir: Path | None = None) -> list[Path]:
    """The reproduce notebooks named by ``names`` (a file name, its stem, or its number prefix:
    ``09_audit.ipynb``, ``09_audit``, ``09``), in run order; with ``build_dir`` lacking the
    ingest notebook's runs table (:data:`INGEST_OUTPUT`), the ingest notebook too, since every
    other notebook reads it. An unknown or ambiguous name is an
    :class:`~hgresearch.errors.InputError` listing the notebooks there are."""
    available = reproduce_notebooks(notebook_dir)
    if build_dir is not None and not (Path(build_dir) / INGEST_OUTPUT).exists():
        names = [INGEST_NOTEBOOK, *names]
    chosen: set[Path] = set()
    for name in names:
        key = name.removesuffix(".ipynb")
        matches = [p for p in available if p.stem == key or p.stem.split("_", 1)[0] == key]
        if len(matches) != 1:
            known = ", ".join(p.stem for p in available)
            why = "matches several" if matches else "is not one of the reproduce notebooks"
            raise InputError(f"--notebook {name!r} {why}: {known}", field="notebook")
        chosen.add(matches[0])
    return [p for p in available if p in chosen]


#: The kernel's own log stays out of our stderr: on Ctrl-C it would print a traceback of its
#: closed socket after the kernel is stopped (cells' errors come back as messages, not logs).
KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=CRITICAL"]


def execute_notebook(notebook: Path, output: Path, parameters: Mapping[str, object]
                     ) -> None:
    """Run one notebook with papermill; raise :class:`NotebookFailed` naming the failing cell."""
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        pm.execute_notebook(str(notebook), str(output), parameters=parameters,
                            progress_bar=False, cwd=str(REPO_ROOT), kernel_name="python3",
                            config=_kernel_config(), extra_arguments=KERNEL_ARGUMENTS)
    except PapermillExecutionError as err:
        raise NotebookFailed(
            f"{notebook} failed in cell {err.exec_count} ({err.ename}: {err.evalue}).\n"
            f"The executed copy is kept at {output} for inspection.") from None


def _kernel_config() -> Config:
    """Kernel manager settings for papermill: CurveZMQ transport encryption where pyzmq has it.

    Without it every kernel logs "Kernel is running over TCP without encryption" to our stderr;
    with ``auto`` the manager provisions keys for kernels whose spec declares support (ipykernel
    does) and falls back to plain TCP for others."""
    import zmq
    from traitlets.config import Config

    config = Config()
    config.KernelManager.transport_encryption = "auto" if zmq.has("curve") else "disabled"
    return config


def run_reproduce(source: Path | None = None, build_dir: Path = Path("build"),
                  paper_dir: Path = Path("paper"),
                  echo: Callable[[str], None] = print,
                  notebooks: list[Path] | None = None,
                  build_manuscript: bool | None = None) -> dict[str, float]:
    """Execute every reproduce notebook (or ``notebooks``), then build the manuscript from the
    tables (:func:`hgresearch.report.manuscript.build_paper`); returns wall seconds per notebook
    (and
    ``manuscript``).

    Prints the headline numbers the notebooks of this run recorded with
    :func:`hgresearch.report.writers.write_headline` (a notebook's old numbers are removed
    before it runs).
    ``build_manuscript`` defaults to True when every notebook runs (a chosen subset of
    notebooks may not have written the tables the manuscript reads).
    """
    if notebooks is None and not NOTEBOOK_DIR.is_dir():
        # an installed (non-editable) package has the library but not the notebooks
        raise HgResearchError(f"no notebooks at {NOTEBOOK_DIR}: reproduce runs the notebooks of "
                              "a source checkout (git clone, then `make reproduce`)")
    ref = find_or_fetch("ionet-aibc2025", source, echo=echo)
    build_dir = Path(build_dir).resolve()
    paper_dir = Path(paper_dir).resolve()
    parameters = {"reference_dir": str(ref), "build_dir": str(build_dir),
                  "paper_dir": str(paper_dir)}
    if build_manuscript is None:
        build_manuscript = notebooks is None
    notebooks = reproduce_notebooks() if notebooks is None else notebooks
    echo(f"reference data: {ref}")
    timings: dict[str, float] = {}
    headline: dict[str, object] = {}
    for index, notebook in enumerate(notebooks, start=1):
        start = time.perf_counter()
        echo(f"[{index}/{len(notebooks)}] {notebook.name} ...")
        headline_path(build_dir, notebook.stem).unlink(missing_ok=True)
        execute_notebook(notebook, build_dir / "notebooks" / notebook.name, parameters)
        timings[notebook.name] = time.perf_counter() - start
        echo(f"[{index}/{len(notebooks)}] {notebook.name} done in {timings[notebook.name]:.1f} s")
        recorded = headline_path(build_dir, notebook.stem)
        if recorded.exists():
            headline.update(json.loads(recorded.read_text()))
    if headline:
        echo("headline numbers:")
        for key, value in headline.items():
            echo(f"  {key}: {value}")
    echo(f"tables in {paper_dir / 'tables'}, figures in {paper_dir / 'figures'}")
    if build_manuscript:
        start = time.perf_counter()
        echo(f"manuscript: {build_paper(paper_dir)}")
        timings["manuscript"] = time.perf_counter() - start
    return timings
