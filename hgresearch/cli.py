"""Command-line front: thin wrappers over library calls (``hgresearch --help``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="hgresearch: measure, model and reproduce heterogeneous-GPU LLM "
                  "inference studies.", no_args_is_help=True, add_completion=False)
data_app = typer.Typer(help="Reference data: fetch and verify the paper's raw results.",
                       no_args_is_help=True)
app.add_typer(data_app, name="data")


@data_app.command("fetch")
def data_fetch(
    name: Annotated[str, typer.Argument(help="Dataset name.")] = "ionet-aibc2025",
    source: Annotated[Path | None, typer.Option(
        "--from", help="Use (and verify) this local copy instead of downloading.")] = None,
) -> None:
    """Download the pinned raw results (or verify a local copy) and print where they are."""
    from hgresearch.reference import ReferenceDataError, fetch

    try:
        path = fetch(name, source)
    except ReferenceDataError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{name}: verified copy at {path}")


@data_app.command("where")
def data_where(name: Annotated[str, typer.Argument()] = "ionet-aibc2025") -> None:
    """Print the folder the pipeline would read (see the lookup order in the README)."""
    from hgresearch.reference import ReferenceDataError, reference_dir

    try:
        typer.echo(reference_dir(name))
    except ReferenceDataError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None


@app.command("ingest")
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Result files or folders.")],
    output: Annotated[Path, typer.Option("-o", "--output",
                                         help="Runs table to write (.csv or .parquet).")]
    = Path("build/runs.parquet"),
    skip_bad_lines: Annotated[bool, typer.Option(
        help="Skip malformed lines with a warning instead of stopping.")] = False,
) -> None:
    """Read vLLM benchmark results (and hgresearch run folders) into the runs table."""
    from hgresearch.errors import InputError
    from hgresearch.ingest import read_runs
    from hgresearch.tables import write_frame

    try:
        runs = read_runs(paths, on_error="skip" if skip_bad_lines else "raise")
    except InputError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    write_frame(runs, output)
    typer.echo(f"{len(runs)} runs -> {output}")


@app.command("reproduce")
def reproduce(
    source: Annotated[Path | None, typer.Option(
        "--from", help="Local copy of the reference results (else the lookup order).")] = None,
    build_dir: Annotated[Path, typer.Option(help="Executed notebooks and derived tables.")]
    = Path("build"),
    paper_dir: Annotated[Path, typer.Option(help="Where tables/ and figures/ go.")]
    = Path("paper"),
) -> None:
    """Run the analysis notebooks in order with papermill and regenerate paper/ outputs."""
    from hgresearch.pipeline import NotebookFailed, run_reproduce
    from hgresearch.reference import ReferenceDataError

    try:
        run_reproduce(source=source, build_dir=build_dir, paper_dir=paper_dir, echo=typer.echo)
    except (ReferenceDataError, NotebookFailed) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(1) from None


# Sub-commands defined beside the code they drive (each module keeps its heavy imports lazy).
from hgresearch.bench.cli import bench  # noqa: E402
from hgresearch.cli_serve import register as _register_serve  # noqa: E402
from hgresearch.energy_cli import energy_command  # noqa: E402
from hgresearch.models.cli import models_app  # noqa: E402

app.command("bench")(bench)
app.command("energy")(energy_command)
app.add_typer(models_app, name="models")
_register_serve(app)  # serve, model synth|list, sweep

if __name__ == "__main__":  # pragma: no cover
    app()
