"""``hgresearch paper build``: the manuscript (``paper/paper.typ``) to PDF."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hgresearch.cli.options import PaperDir, output_option


def paper_build(
    paper_dir: PaperDir = Path("paper"),
    output: Annotated[Path | None, output_option(
        "The PDF (default: <paper-dir>/build/paper.pdf).")] = None,
) -> None:
    """Compile the manuscript from the tables and figures under --paper-dir (deterministic)."""
    from hgresearch.report.manuscript import build_paper

    typer.echo(f"manuscript: {build_paper(paper_dir, output)}")
