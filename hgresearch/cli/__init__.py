"""The command line: ``hgresearch --help``.

One package, one module per area, one error handler (:mod:`hgresearch.cli.errors`). Commands
are thin: they parse options, call the library and print; heavy imports stay inside the
command so ``--help`` is fast.

| command | module |
|---|---|
| ``data fetch``, ``data where``, ``reproduce`` | :mod:`hgresearch.cli.data` |
| ``ingest`` | :mod:`hgresearch.cli.ingest` |
| ``bench`` | :mod:`hgresearch.cli.bench` |
| ``serve``, ``sweep``, ``model list``, ``model synth`` | :mod:`hgresearch.cli.serve` |
| ``fit`` | :mod:`hgresearch.cli.fit` |
| ``energy`` | :mod:`hgresearch.cli.energy` |
| ``sim run``, ``sim fleet`` | :mod:`hgresearch.cli.sim` |
| ``fleet plan`` | :mod:`hgresearch.cli.plan` |
| ``paper build`` | :mod:`hgresearch.cli.paper` |
"""

from __future__ import annotations

import typer

app = typer.Typer(help="hgresearch: measure, model and reproduce heterogeneous-GPU LLM "
                  "inference studies.", no_args_is_help=True, add_completion=False)

# Each module registers its commands on `app` (imported for that effect).
from hgresearch.cli import bench, data, energy, fit, ingest, paper, plan, serve, sim  # noqa: E402, F401


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
