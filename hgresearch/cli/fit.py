"""``hgresearch fit``: fit, validate and audit the cost-performance models."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Annotated

import typer

from hgresearch.cli.options import BuildDir, output_option


def fit(
    paths: Annotated[list[Path] | None, typer.Argument(
        help="Result files or folders (default: the paper's reference data).")] = None,
    output: Annotated[Path, output_option("Folder the model tables are written to.")]
    = Path("paper/tables"),
    build_dir: BuildDir = Path("build"),
    scenario: Annotated[str, typer.Option(
        help="Price scenario of hgresearch/data/catalogs/prices.csv.")] = "alternative",
) -> None:
    """Fit and validate the cost-performance models; write their tables.

    Capacity, latency, scaling, the cost-latency frontier, roofline, leave-one-out validation
    and the run-to-run spread; prints the headline numbers.
    """
    from hgresearch.data.ingest import read_runs
    from hgresearch.data.reference import reference_dir
    from hgresearch.fits.common import ModelWarning
    from hgresearch.report.fits import MODEL_TABLES, analyse_models, model_tables, models_headline
    from hgresearch.report.writers import write_tables

    sources = paths or [reference_dir("ionet-aibc2025")]
    runs = read_runs(sources)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModelWarning)
        report = analyse_models(runs, scenario=scenario, build_dir=build_dir)
    written = write_tables(model_tables(report), MODEL_TABLES, output)
    typer.echo(f"{len(runs)} runs, {len(report.models.capacity)} configurations; "
               f"{len(written)} table files in {output}")
    typer.echo(json.dumps(models_headline(report), indent=1, ensure_ascii=False))
