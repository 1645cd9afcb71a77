"""The package's layers: the one declared order (README's layout table and
``tests/rules/test_layers.py`` are checked against it).

Data flows one way, top to bottom of :data:`STACK`: a module may import its own package and the
packages of lower layers, never a higher one, and never a sibling package of its own layer
(the modules of ``core`` may import each other). The
measurement side (:data:`MEASURE`, ``hgresearch.bench``) stands beside the stack: it writes run
folders through the data layer and may import only the layers it names, while no analysis
layer may import it (nor the NVML sampler it owns). ``hgresearch.cli`` sits on top of both.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layer:
    """One layer: its name, the top-level names of ``hgresearch`` it holds, and its job."""

    name: str
    packages: tuple[str, ...]
    job: str
    #: For a layer beside the stack: the stack layers it may import (by name).
    may_import: tuple[str, ...] = ()


#: The stack, top first. ``core`` holds the few modules every layer uses.
STACK: tuple[Layer, ...] = (
    Layer("interfaces", ("cli",),
          "the command line (one module per command group) and the reproduce pipeline"),
    Layer("report", ("report",),
          "table writers, the paper's tables, the reproduction audit, figures, the manuscript"),
    Layer("decide", ("plan",),
          "the fleet planner: replica rates from the simulator, a mixed-integer program, checks"),
    Layer("predict", ("sim", "fits"),
          "the serving simulator (sim) and the fitted statistical models (fits)"),
    Layer("account", ("accounting",),
          "cost, energy and carbon of runs; server-versus-client cross-checks"),
    Layer("traffic", ("traffic",),
          "arrival schedules, request lengths and routing policies, shared by bench and sim"),
    Layer("data", ("data",),
          "the run folder's schema, ingest of result files, catalogs, reference data, summaries"),
    Layer("core", ("errors", "units", "identity", "executors", "cache", "paths", "layers",
                   "bounds"),
          "errors, units, configuration identity, executors, the result cache, paths, work "
          "bounds"),
)

#: Beside the stack: the measurement side.
MEASURE = Layer("measure", ("bench",),
                "load generator, servers (vLLM, mock), sweeps, NVML telemetry, dummy models",
                may_import=("account", "traffic", "data", "core"))

#: Top-level names that are not layers: the package root (version, lazy re-exports for
#: notebooks) and ``python -m hgresearch``.
ENTRY_POINTS = ("__init__", "__main__")


def layer_of(module: str) -> Layer | None:
    """The layer holding ``hgresearch.<top>...``; None for the entry points and non-package
    modules."""
    parts = module.split(".")
    if parts[0] != "hgresearch" or len(parts) < 2:
        return None
    for layer in (*STACK, MEASURE):
        if parts[1] in layer.packages:
            return layer
    return None


def may_import(importer: str, imported: str) -> bool:
    """Whether module ``importer`` may import module ``imported`` (both ``hgresearch.…``)."""
    source, target = layer_of(importer), layer_of(imported)
    if source is None or target is None:
        return True
    package_of = importer.split(".")[1], imported.split(".")[1]
    if package_of[0] == package_of[1] or source is target is STACK[-1]:
        return True
    if source is STACK[0]:
        return True
    if target is MEASURE:
        return False
    if source is MEASURE:
        return target.name in MEASURE.may_import
    return STACK.index(target) > STACK.index(source)
