"""``hgresearch data fetch|where`` and ``hgresearch reproduce``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hgresearch.cli import app
from hgresearch.cli.errors import command
from hgresearch.cli.options import BuildDir, PaperDir, ReferenceSource

data_app = typer.Typer(help="Reference data: fetch and verify the paper's raw results.",
                       no_args_is_help=True)
app.add_typer(data_app, name="data")


@command(data_app, "fetch")
def data_fetch(
    name: Annotated[str, typer.Argument(help="Dataset name.")] = "ionet-aibc2025",
    source: ReferenceSource = None,
) -> None:
    """Download the pinned raw results (or verify a local copy) and print where they are."""
    from hgresearch.data.reference import fetch

    path = fetch(name, source)
    typer.echo(f"{name}: verified copy at {path}")


@command(data_app, "where")
def data_where(name: Annotated[str, typer.Argument(help="Dataset name.")] = "ionet-aibc2025",
               ) -> None:
    """Print the folder the pipeline would read (see the lookup order in the README)."""
    from hgresearch.data.reference import reference_dir

    typer.echo(reference_dir(name))


@command(app, "reproduce")
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
