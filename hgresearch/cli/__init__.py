"""The command line: ``hgresearch --help``.

One package, one module per command group, one error handler (:mod:`hgresearch.cli.errors`)
and one option name per meaning (:mod:`hgresearch.cli.options`). Every command is registered
here, from :data:`COMMANDS`, behind the error handler; the modules only define them. Commands
are thin: they parse options, call the library and print; heavy imports stay inside the
command so ``--help`` is fast.

| command | module |
|---|---|
| ``reproduce`` | :mod:`hgresearch.cli.reproduce` |
| ``paper build`` | :mod:`hgresearch.cli.paper` |
| ``data fetch``, ``data where`` | :mod:`hgresearch.cli.data` |
| ``ingest`` | :mod:`hgresearch.cli.ingest` |
| ``bench`` | :mod:`hgresearch.cli.bench` |
| ``serve``, ``sweep``, ``model list``, ``model synth`` | :mod:`hgresearch.cli.serve` |
| ``fit`` | :mod:`hgresearch.cli.fit` |
| ``energy`` | :mod:`hgresearch.cli.energy` |
| ``sim run``, ``sim validate``, ``sim fleet``, ``sim calibrate`` | :mod:`hgresearch.cli.sim` |
| ``plan`` | :mod:`hgresearch.cli.plan` |
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from hgresearch.cli import (
    bench,
    data,
    energy,
    fit,
    ingest,
    paper,
    plan,
    reproduce,
    serve,
    sim,
)
from hgresearch.cli.errors import handle_errors

#: Every command, in the order of ``--help``: its name (``GROUP COMMAND`` for a command of a
#: group) and the function that runs it.
COMMANDS: tuple[tuple[str, Callable[..., Any]], ...] = (
    ("reproduce", reproduce.reproduce),
    ("paper build", paper.paper_build),
    ("data fetch", data.data_fetch),
    ("data where", data.data_where),
    ("ingest", ingest.ingest),
    ("bench", bench.bench),
    ("serve", serve.serve),
    ("sweep", serve.sweep),
    ("model list", serve.model_list),
    ("model synth", serve.model_synth),
    ("fit", fit.fit),
    ("energy", energy.energy),
    ("sim run", sim.sim_run),
    ("sim validate", sim.sim_validate),
    ("sim fleet", sim.sim_fleet),
    ("sim calibrate", sim.sim_calibrate),
    ("plan", plan.plan),
)
#: The command groups and their help.
GROUPS: dict[str, str] = {
    "paper": "The manuscript: paper/paper.typ built from paper/tables.",
    "data": "Reference data: fetch and verify the paper's raw results.",
    "model": "Benchmark models (LLM architectures) built offline from the architecture "
             "catalog.",
    "sim": "Simulate vLLM replicas and fleets (docs/simulator.md).",
}


def build_app(commands: tuple[tuple[str, Callable[..., Any]], ...] = COMMANDS,
              groups: dict[str, str] = GROUPS) -> typer.Typer:
    """The ``hgresearch`` application: every command of ``commands`` behind the one error
    handler (:func:`hgresearch.cli.errors.handle_errors`), each group's under its name."""
    root = typer.Typer(help="hgresearch: measure, model and reproduce heterogeneous-GPU LLM "
                       "inference studies.", no_args_is_help=True, add_completion=False)
    group_apps: dict[str, typer.Typer] = {}
    for name, function in commands:
        group, _, command_name = name.rpartition(" ")
        target = root
        if group:
            if group not in group_apps:
                group_apps[group] = typer.Typer(help=groups[group], no_args_is_help=True)
                root.add_typer(group_apps[group], name=group)
            target = group_apps[group]
        target.command(command_name)(handle_errors(function))
    return root


app = build_app()


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
