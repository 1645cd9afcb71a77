"""Options shared by several commands: one name and one help text per meaning.

- ``-o/--output``: where a command writes its main result (a file or a folder, per command);
- ``--from``: a local copy of the reference data instead of the lookup order;
- ``--build-dir``: executed notebooks, caches and derived tables;
- ``--paper-dir``: where ``tables/`` and ``figures/`` go;
- ``--skip-bad-lines``: skip malformed input lines (listed in a warning) instead of stopping;
- ``--resume``: continue a killed run or sweep;
- ``--seed``: the seed of everything random in the command;
- ``--executor`` / ``--address``: where independent pieces of work run (local, local worker
  processes, or a Ray cluster; docs/cluster.md);
- ``--allow-large``: run work estimated over the memory or time limit (:mod:`hgresearch.bounds`);
- ``--candidate-file``: a calibration file (``hgresearch sim calibrate``) offered beside the
  paper's configurations; ``--price GPU=USD`` (per GPU-hour) and ``--tdp GPU=W`` for GPUs the
  catalogs do not price or power.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hgresearch.executors import Executor, ExecutorKind

ReferenceSource = Annotated[Path | None, typer.Option(
    "--from", help="Local copy of the reference results (verified) instead of the lookup "
                   "order.")]
BuildDir = Annotated[Path, typer.Option(
    "--build-dir", help="Executed notebooks, caches and derived tables.")]
PaperDir = Annotated[Path, typer.Option("--paper-dir", help="Where tables/ and figures/ go.")]
SkipBadLines = Annotated[bool, typer.Option(
    "--skip-bad-lines", help="Skip malformed lines and files (listed in a warning) instead of "
                             "stopping.")]
Resume = Annotated[bool, typer.Option("--resume", help="Continue a killed run or sweep.")]
Seed = Annotated[int, typer.Option("--seed", help="Seed of everything random in the command.")]

ExecutorOption = Annotated[ExecutorKind, typer.Option(
    "--executor", help="Where the independent pieces of work run: local (this process), "
                       "process (local worker processes) or ray (tasks on a Ray cluster; "
                       "pip install 'hgresearch\\[ray]'; docs/cluster.md).")]
Address = Annotated[str | None, typer.Option(
    "--address", help="Ray cluster (--executor ray): 'auto' (started here with `ray start`), "
                      "ray://HOST:10001, or none: $RAY_ADDRESS (set by `ray job submit`), "
                      "else a local cluster.")]

AllowLarge = Annotated[bool, typer.Option(
    "--allow-large", help="Run even when the work is estimated over the limits (4 GB of memory, "
                          "1 hour); without it such work is refused before it starts.")]


CandidateFiles = Annotated[list[Path] | None, typer.Option(
    "--candidate-file", help="Calibration file (YAML, written by `hgresearch sim calibrate`) of "
                             "a configuration measured by you, repeatable: simulated with its "
                             "calibration beside the paper's configurations.")]
PriceOverrides = Annotated[list[str] | None, typer.Option(
    "--price", help="GPU=USD: price per GPU-hour of a GPU, repeatable; required for GPUs "
                    "hgresearch/data/catalogs/prices.csv does not price (a calibration file's "
                    "H200, CPU, ...); wins over the catalog.")]
TdpOverrides = Annotated[list[str] | None, typer.Option(
    "--tdp", help="GPU=W: power of one GPU for the TDP energy and carbon model, repeatable; "
                  "required for GPUs hgresearch/data/catalogs/hardware.csv gives no TDP "
                  "(CPU, a GPU outside the catalogs); wins over the catalog.")]


def output_option(help_text: str) -> typer.models.OptionInfo:
    """``-o/--output`` with a command-specific description of what is written there."""
    # typer.Option is typed as returning Any (it is used as a default value); it is an OptionInfo
    option: typer.models.OptionInfo = typer.Option("-o", "--output", help=help_text)
    return option


def executor_of(kind: ExecutorKind, address: str | None) -> Executor:
    """The :class:`~hgresearch.executors.Executor` of ``--executor`` and ``--address``."""
    return Executor.parse(kind, address)
