"""``hgresearch reproduce``: the analysis notebooks, then the manuscript
(:mod:`hgresearch.cli.pipeline` runs them)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hgresearch.cli.options import BuildDir, PaperDir, ReferenceSource


def reproduce(
    source: ReferenceSource = None,
    build_dir: BuildDir = Path("build"),
    paper_dir: PaperDir = Path("paper"),
    notebook: Annotated[list[str] | None, typer.Option(
        "--notebook", help="Run only this notebook (name, stem or number, e.g. 09); repeat for "
        "more. The ingest notebook runs first when the build folder has no runs table yet; the "
        "manuscript is rebuilt only by a full run (or `hgresearch paper build`).")] = None,
) -> None:
    """Run the analysis notebooks in order with papermill and regenerate paper/ outputs."""
    from hgresearch.cli.pipeline import run_reproduce, select_notebooks

    notebooks = select_notebooks(notebook, build_dir=build_dir) if notebook else None
    run_reproduce(source=source, build_dir=build_dir, paper_dir=paper_dir, echo=typer.echo,
                  notebooks=notebooks)
