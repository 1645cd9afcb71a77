"""``hgresearch models``: fit, validate and audit the models from the command line."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Annotated

import typer

models_app = typer.Typer(help="Cost-performance models: capacity, latency, scaling, SLO "
                         "capacity, roofline, validation, ratio audit.", no_args_is_help=True)


@models_app.command("fit")
def fit(
    paths: Annotated[list[Path] | None, typer.Argument(
        help="Result files or folders (default: the paper's reference data).")] = None,
    tables_dir: Annotated[Path, typer.Option(help="Where the tables go.")]
    = Path("paper/tables"),
    build_dir: Annotated[Path, typer.Option(help="Cache folder parent.")] = Path("build"),
    scenario: Annotated[str, typer.Option(help="Price scenario of data/prices.csv.")]
    = "alternative",
) -> None:
    """Fit every model, write the model tables and print the headline numbers."""
    from hgresearch.errors import InputError
    from hgresearch.ingest import read_runs
    from hgresearch.models.common import ModelInputError, ModelWarning
    from hgresearch.models.report import analyse, headline, write_tables
    from hgresearch.reference import ReferenceDataError, reference_dir

    try:
        sources = paths or [reference_dir("ionet-aibc2025")]
        runs = read_runs(sources)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ModelWarning)
            report = analyse(runs, scenario=scenario, build_dir=build_dir)
    except (InputError, ModelInputError, ReferenceDataError, KeyError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    written = write_tables(report, tables_dir)
    typer.echo(f"{len(runs)} runs, {len(report.models.capacity)} configurations; "
               f"{len(written)} table files in {tables_dir}")
    typer.echo(json.dumps(headline(report), indent=1, ensure_ascii=False))
