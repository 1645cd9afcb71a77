"""Layering, checked against the one declared order (:mod:`hgresearch.layers`):

* every import of every module (also inside functions, where the lazy imports are) points to
  its own package or down the stack; the measurement side (``hgresearch.bench``) imports only
  the layers it names, and no analysis layer imports it;
* nothing outside ``bench`` reaches the NVML sampler or ``pynvml``, even transitively;
* every module of the package belongs to a declared layer, and README's layout table lists the
  declared layers, in order, with their packages;
* run-folder file names are spelled only in :mod:`hgresearch.data.runfolder`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from hgresearch import layers
from hgresearch.paths import PACKAGE_DIR, REPO_ROOT

PACKAGE = PACKAGE_DIR


def _module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(package: Path = PACKAGE) -> list[str]:
    return sorted(_module_name(p, package) for p in package.rglob("*.py"))


def _path(module: str, package: Path = PACKAGE) -> Path | None:
    parts = module.split(".")[1:]
    file = package.joinpath(*parts).with_suffix(".py")
    if file.is_file():
        return file
    init = package.joinpath(*parts, "__init__.py")
    return init if init.is_file() else None


def _imports(module: str, package: Path = PACKAGE) -> dict[str, int]:
    """Modules named by the import statements of ``module`` (anywhere in the file), with the
    line of the first one; ``from X import name`` counts ``X.name`` when that is a module."""
    path = _path(module, package)
    assert path is not None, module
    names: dict[str, int] = {}
    is_package = path.name == "__init__.py"
    parent = module if is_package else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.setdefault(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = parent.rsplit(".", node.level - 1)[0] if node.level > 1 else parent
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            names.setdefault(source, node.lineno)
            for alias in node.names:
                full = f"{source}.{alias.name}"
                if source.startswith("hgresearch") and _path(full, package):
                    names.setdefault(full, node.lineno)
    return names


def _reachable(module: str, package: Path = PACKAGE) -> dict[str, str]:
    """Every module reachable from ``module`` by imports, with the module that imports it."""
    seen: dict[str, str] = {module: ""}
    todo = [module]
    while todo:
        current = todo.pop()
        for name in _imports(current, package):
            if name in seen:
                continue
            seen[name] = current
            if name.startswith("hgresearch") and _path(name, package) is not None:
                todo.append(name)
    return seen


def test_every_module_is_in_a_declared_layer():
    top_level = {p.stem if p.suffix == ".py" else p.name for p in PACKAGE.iterdir()
                 if (p.suffix == ".py" or (p / "__init__.py").exists())}
    declared = {name for layer in (*layers.STACK, layers.MEASURE) for name in layer.packages}
    assert top_level - set(layers.ENTRY_POINTS) == declared, (
        f"undeclared: {sorted(top_level - declared - set(layers.ENTRY_POINTS))}, "
        f"declared but missing: {sorted(declared - top_level)}")


@pytest.mark.parametrize("module", _modules())
def test_imports_follow_the_declared_order(module):
    bad = [f"{name} (line {line}, {layers.layer_of(name).name})"
           for name, line in _imports(module).items()
           if name.startswith("hgresearch.") and _path(name)
           and not layers.may_import(module, name)]
    layer = layers.layer_of(module)
    assert not bad, f"{module} ({layer.name if layer else 'entry point'}) imports {bad}"


@pytest.mark.parametrize("module", _modules())
def test_the_package_root_is_imported_only_for_its_version(module):
    """The root re-exports library functions for notebooks; a library module taking one from
    there would bypass the order."""
    path = _path(module)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module == "hgresearch" and not node.level:
            names = {a.name for a in node.names}
            modules = {n for n in names if _path(f"hgresearch.{n}")}
            assert names - modules <= {"__version__"}, f"{module}:{node.lineno} imports {names}"


NVML = ("hgresearch.bench.telemetry", "pynvml")


@pytest.mark.parametrize("module", [m for m in _modules() if not m.startswith(
    ("hgresearch.bench", "hgresearch.cli")) and m not in ("hgresearch", "hgresearch.__main__")])
def test_analysis_reaches_neither_bench_nor_the_sampler(module):
    reached = _reachable(module)
    bad = {name: via for name, via in reached.items()
           if name.startswith("hgresearch.bench") or name in NVML or name.startswith("pynvml.")}
    assert not bad, f"{module} reaches {bad} (module: imported by)"


def test_the_order_check_can_fail():
    """The rule itself: upward, sibling and into-bench imports are refused; downward ones and
    the command line's are allowed."""
    assert layers.may_import("hgresearch.report.audit", "hgresearch.plan.solve")
    assert not layers.may_import("hgresearch.plan.solve", "hgresearch.report.writers")
    assert not layers.may_import("hgresearch.sim.fleet", "hgresearch.fits.common")
    assert not layers.may_import("hgresearch.data.summary", "hgresearch.bench.runner")
    assert not layers.may_import("hgresearch.bench.runner", "hgresearch.sim.fleet")
    assert layers.may_import("hgresearch.bench.runner", "hgresearch.traffic.routing")
    assert layers.may_import("hgresearch.identity", "hgresearch.units")
    assert layers.may_import("hgresearch.cli.sim", "hgresearch.bench.prompts")


def test_the_reach_check_sees_lazy_and_transitive_imports(tmp_path):
    """The checker itself: a function-level import of the sampler, reached through another
    module, is found (so a green test above means something)."""
    fake = tmp_path / "hgresearch"
    (fake / "sub").mkdir(parents=True)
    (fake / "bench").mkdir()
    for init in (fake, fake / "sub", fake / "bench"):
        (init / "__init__.py").write_text("")
    (fake / "a.py").write_text("from hgresearch.sub import b\n")
    (fake / "sub" / "b.py").write_text("def f():\n    from hgresearch.bench import telemetry\n")
    (fake / "bench" / "telemetry.py").write_text("import pynvml\n")
    reached = _reachable("hgresearch.a", fake)
    assert reached["hgresearch.bench.telemetry"] == "hgresearch.sub.b"
    assert "pynvml" in reached


def test_readme_layout_table_is_the_declared_order():
    """README's "The library, by layer" table: one row per declared layer, in order, naming
    each of its packages."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("\n| layer | packages |\n", 1)[1].split("\n\n", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    names = [row.split("|")[1].strip() for row in rows]
    assert names == [layer.name for layer in (*layers.STACK, layers.MEASURE)]
    for row, layer in zip(rows, (*layers.STACK, layers.MEASURE), strict=True):
        for package in layer.packages:
            assert re.search(rf"`{package}(/|\.py)?`", row), f"README row {layer.name}: {package}"


#: Names only a run folder has (``config.json`` is also a Hugging Face model file, so it is
#: not checked here).
RUN_FOLDER_NAMES = {"requests.jsonl", "summary.json", "telemetry.csv", "telemetry.parquet",
                    "server_metrics.json", "error.json"}


def test_run_folder_file_names_are_spelled_only_in_runfolder():
    spelled = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative == "data/runfolder.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in RUN_FOLDER_NAMES:
                spelled.setdefault(relative, []).append(f"{node.value} (line {node.lineno})")
    assert not spelled, f"use the hgresearch.data.runfolder constants: {spelled}"
