"""``hgresearch ingest``: result files or folders → the runs table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hgresearch.cli import app
from hgresearch.cli.errors import command
from hgresearch.cli.options import SkipBadLines, output_option


@command(app, "ingest")
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Result files or folders.")],
    output: Annotated[Path, output_option("Runs table to write (.csv or .parquet).")]
    = Path("build/runs.parquet"),
    skip_bad_lines: SkipBadLines = False,
) -> None:
    """Read vLLM benchmark results (and hgresearch run folders) into the runs table."""
    from hgresearch.ingest import read_runs
    from hgresearch.tables import write_frame

    runs = read_runs(paths, on_error="skip" if skip_bad_lines else "raise")
    write_frame(runs, output)
    typer.echo(f"{len(runs)} runs -> {output}")
