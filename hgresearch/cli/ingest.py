"""``hgresearch ingest``: result files or folders → the runs table (and requests table)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated

import typer

from hgresearch.cli.options import SkipBadLines, output_option


def ingest(
    paths: Annotated[list[Path], typer.Argument(
        help="Result files or folders (searched recursively): vLLM benchmark results, "
             "guidellm reports, aiperf exports, hgresearch run folders.")],
    output: Annotated[Path, output_option("Runs table to write (.csv or .parquet).")]
    = Path("build/runs.parquet"),
    hardware: Annotated[str | None, typer.Option(
        "--hardware", help="Hardware of files that name none, e.g. '2x RTX-4090' or "
                           "'4 x (2x RTX-4090)'; a file's hardware sidecar wins.")] = None,
    requests_output: Annotated[Path | None, typer.Option(
        "--requests-output", help="Also write the requests table of files with per-request "
                                  "data (.csv or .parquet).")] = None,
    skip_bad_lines: SkipBadLines = False,
) -> None:
    """Read benchmark results into the runs table (see docs/tables.md)."""
    from hgresearch.data.ingest import parse_hardware_label, read_tables
    from hgresearch.report.writers import check_frame_path, write_frame

    # Bad options fail before any file is read.
    check_frame_path(output)
    if requests_output is not None:
        check_frame_path(requests_output)
    given = parse_hardware_label(hardware, field="--hardware") if hardware else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            tables = read_tables(paths, on_error="skip" if skip_bad_lines else "raise",
                                 hardware=given)
        finally:  # what was skipped is worth knowing even when nothing was left
            for warning in caught:
                typer.echo(f"warning: {warning.message}", err=True)
    write_frame(tables.runs, output)
    if tables.files_ignored:
        typer.echo(f"not results, not read: {len(tables.files_ignored)} file(s): "
                   + ", ".join(map(str, tables.files_ignored)), err=True)
    # Files read are those that gave runs; a file skipped whole is counted apart.
    failed = [f for f in tables.files_failed if f not in tables.files_read]
    partly = len(tables.files_failed) - len(failed)
    skipped = (f" ({len(failed)} file(s) skipped" + (f", {partly} read in part" if partly else "")
               + ")" if tables.files_failed else "")
    typer.echo(f"{len(tables.runs)} runs from {len(tables.files_read)} file(s){skipped} "
               f"-> {output}")
    if requests_output is not None:
        write_frame(tables.requests, requests_output)
        typer.echo(f"{len(tables.requests)} requests -> {requests_output}")
