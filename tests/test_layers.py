"""Layering: analysis modules import neither the measurement side (``hgresearch.bench``) nor the
NVML sampler (``hgresearch.telemetry``, ``pynvml``), and run-folder file names are spelled only
in :mod:`hgresearch.runfolder`.

Imports are read from the source (every ``import`` statement, also inside functions, where the
lazy imports are), and followed through the package, so a forbidden module reached through
another ``hgresearch`` module counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "hgresearch"

#: Analysis modules: they read run folders and tables, never measure.
ANALYSIS = sorted(
    {f"hgresearch.{name}" for name in ("energy", "carbon", "costs", "metrics", "serving",
                                       "paper", "tables", "ingest", "runfolder", "paper_audit")}
    | {f"hgresearch.models.{p.stem}" for p in (PACKAGE / "models").glob("*.py")
       if p.stem not in ("__init__", "cli")}
    | {f"hgresearch.figures.{p.stem}" for p in (PACKAGE / "figures").glob("*.py")
       if p.stem != "__init__"}
    # The simulator (predict layer) and the arrival schedules it shares with the bench.
    | {"hgresearch.arrivals", "hgresearch.lengths"} | {f"hgresearch.sim.{p.stem}" for p in (PACKAGE / "sim").glob("*.py")}
    # Routing policies (decide layer), shared by the fleet simulator and the live bench.
    | {"hgresearch.routing"}
    # The fleet planner (decide layer).
    | {f"hgresearch.plan.{p.stem}" for p in (PACKAGE / "plan").glob("*.py")})
FORBIDDEN = ("hgresearch.bench", "hgresearch.telemetry", "pynvml")


def _path(module: str) -> Path | None:
    parts = module.split(".")[1:]
    file = PACKAGE.joinpath(*parts).with_suffix(".py")
    if file.is_file():
        return file
    init = PACKAGE.joinpath(*parts, "__init__.py")
    return init if init.is_file() else None


def _imports(module: str) -> set[str]:
    """Modules named by the import statements of ``module`` (anywhere in the file)."""
    path = _path(module)
    assert path is not None, module
    names: set[str] = set()
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            names.add(source)
            # ``from hgresearch import telemetry`` imports a module, not a name.
            names.update(f"{source}.{alias.name}" for alias in node.names
                         if source.startswith("hgresearch") and _path(f"{source}.{alias.name}"))
    return names


def _reachable(module: str) -> dict[str, str]:
    """Every module reachable from ``module`` by imports, with the module that imports it."""
    seen: dict[str, str] = {module: ""}
    todo = [module]
    while todo:
        current = todo.pop()
        for name in _imports(current):
            if name in seen:
                continue
            seen[name] = current
            if name.startswith("hgresearch") and _path(name) is not None:
                todo.append(name)
    return seen


def _is_forbidden(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FORBIDDEN)


def test_the_analysis_module_list_is_complete_enough():
    assert "hgresearch.models.uncertainty" in ANALYSIS
    assert "hgresearch.figures.energy" in ANALYSIS


@pytest.mark.parametrize("module", ANALYSIS)
def test_analysis_module_imports_neither_bench_nor_the_sampler(module):
    reached = _reachable(module)
    bad = {name: via for name, via in reached.items() if _is_forbidden(name)}
    assert not bad, f"{module} reaches {bad} (module: imported by)"


def test_the_check_sees_lazy_and_transitive_imports(tmp_path, monkeypatch):
    """The checker itself: a function-level import of bench, reached through another module,
    is found (so a green test above means something)."""
    fake = tmp_path / "hgresearch"
    (fake / "sub").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "sub" / "__init__.py").write_text("")
    (fake / "a.py").write_text("from hgresearch.sub import b\n")
    (fake / "sub" / "b.py").write_text("def f():\n    from hgresearch import telemetry\n")
    (fake / "telemetry.py").write_text("import pynvml\n")
    monkeypatch.setitem(globals(), "PACKAGE", fake)
    reached = _reachable("hgresearch.a")
    assert reached["hgresearch.telemetry"] == "hgresearch.sub.b"
    assert "pynvml" in reached


#: Names only a run folder has (``config.json`` is also a Hugging Face model file, so it is
#: not checked here).
RUN_FOLDER_NAMES = {"requests.jsonl", "summary.json", "telemetry.csv", "telemetry.parquet",
                    "server_metrics.json", "error.json"}
#: Modules still spelling a run-folder name, to switch to the runfolder constants.
NOT_YET_SWITCHED: set[str] = set()


def test_run_folder_file_names_are_spelled_only_in_runfolder():
    spelled = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in ({"runfolder.py"} | NOT_YET_SWITCHED):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in RUN_FOLDER_NAMES:
                spelled.setdefault(relative, []).append(f"{node.value} (line {node.lineno})")
    assert not spelled, f"use the hgresearch.runfolder constants: {spelled}"
