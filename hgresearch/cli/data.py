"""``hgresearch data fetch|where``: the reference data (README "The reference data")."""

from __future__ import annotations

from typing import Annotated

import typer

from hgresearch.cli.options import ReferenceSource


def data_fetch(
    name: Annotated[str, typer.Argument(help="Dataset name.")] = "ionet-aibc2025",
    source: ReferenceSource = None,
) -> None:
    """Download the pinned raw results (or verify a local copy) and print where they are."""
    from hgresearch.data.reference import fetch

    path = fetch(name, source)
    typer.echo(f"{name}: verified copy at {path}")


def data_where(name: Annotated[str, typer.Argument(help="Dataset name.")] = "ionet-aibc2025",
               ) -> None:
    """Print the folder the pipeline would read (see the lookup order in the README)."""
    from hgresearch.data.reference import reference_dir

    typer.echo(reference_dir(name))
