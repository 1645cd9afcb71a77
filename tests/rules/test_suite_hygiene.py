"""The test suite's own rules: slow tests are marked so that `make test-fast` leaves them out,
markers are registered, and hard dependencies are imported, not skipped when missing; and
every declared dependency is used."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO_ROOT = TESTS.parent
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
#: Import names of distributions whose import name differs from the distribution name.
IMPORT_NAMES = {"nvidia-ml-py": "pynvml", "pyyaml": "yaml"}
#: Functions that execute a notebook (a kernel start and minutes of work).
NOTEBOOK_RUNNERS = {"execute_notebook"}
#: Fixtures that run the whole pipeline.
PIPELINE_FIXTURES = {"reproduced"}
#: Tests that call `hgresearch reproduce` but stop before any notebook runs (seconds).
FAST_REPRODUCE_CALLS = {
    "test_reference.py::test_reproduce_says_what_failed_when_the_download_is_unreachable",
    # an unknown --notebook is refused before the reference data or any notebook is touched
    "test_reproduce.py::test_reproduce_unknown_notebook_is_one_line_exit_2",
}


def _test_functions() -> list[tuple[Path, ast.FunctionDef]]:
    found = []
    for path in sorted(TESTS.rglob("test_*.py")):
        tree = ast.parse(path.read_text())
        found += [(path, node) for node in ast.walk(tree)
                  if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")]
    return found


def _marks(node: ast.FunctionDef) -> set[str]:
    return {ast.unparse(d).split("pytest.mark.")[-1].split("(")[0]
            for d in node.decorator_list if "pytest.mark." in ast.unparse(d)}


def _module_marks(path: Path) -> set[str]:
    source = path.read_text()
    return set(re.findall(r"^pytestmark = pytest\.mark\.(\w+)", source, re.MULTILINE))


def test_markers_are_registered():
    markers = {m.split(":")[0] for m in PYPROJECT["tool"]["pytest"]["ini_options"]["markers"]}
    assert {"slow", "timing", "integration"} <= markers


def test_make_test_fast_leaves_out_slow_timing_and_integration():
    makefile = (REPO_ROOT / "Makefile").read_text()
    rule = re.search(r"^test-fast:.*\n\t(.*)$", makefile, re.MULTILINE)
    assert rule, "Makefile has no test-fast rule"
    assert '-m "not slow and not timing and not integration"' in rule.group(1)
    assert "test-fast" in re.search(r"^\.PHONY:(.*)$", makefile, re.MULTILINE).group(1)


def _runs_notebooks(node: ast.FunctionDef) -> bool:
    """Executes a notebook, calls `hgresearch reproduce` (a ``["reproduce", ...]`` command
    line) or uses a fixture that does."""
    if PIPELINE_FIXTURES & {a.arg for a in node.args.args}:
        return True
    for inner in ast.walk(node):
        if isinstance(inner, ast.Call):
            name = inner.func.attr if isinstance(inner.func, ast.Attribute) else getattr(
                inner.func, "id", "")
            if name in NOTEBOOK_RUNNERS:
                return True
        if (isinstance(inner, ast.List) and inner.elts
                and isinstance(inner.elts[0], ast.Constant) and inner.elts[0].value == "reproduce"):
            return True
    return False


def test_tests_that_run_notebooks_or_reproduce_are_marked_slow():
    unmarked = [f"{path.name}::{node.name}" for path, node in _test_functions()
                if _runs_notebooks(node)
                and not (_marks(node) | _module_marks(path)) & {"slow", "integration"}
                and f"{path.name}::{node.name}" not in FAST_REPRODUCE_CALLS]
    assert not unmarked, f"run notebooks or reproduce but not marked slow: {unmarked}"


#: Assertions on elapsed wall-clock time (flaky on a loaded machine: mark them `timing`).
WALL_CLOCK = re.compile(r"monotonic\(|perf_counter\(|time\.time\(|\bseconds\s*<")


def test_assertions_on_elapsed_time_are_marked_timing():
    unmarked = []
    for path, node in _test_functions():
        asserts = [ast.unparse(n) for n in ast.walk(node) if isinstance(n, ast.Assert)]
        if (any(WALL_CLOCK.search(a) for a in asserts)
                and not (_marks(node) | _module_marks(path)) & {"timing", "integration"}):
            unmarked.append(f"{path.name}::{node.name}")
    assert not unmarked, f"assert on elapsed time but not marked timing: {unmarked}"


def test_hard_dependencies_are_not_importorskipped():
    dependencies = PYPROJECT["project"]["dependencies"]
    names = {re.split(r"[<>=!~\[ ]", d)[0].lower() for d in dependencies}
    hard = {IMPORT_NAMES.get(n, n.replace("-", "_")) for n in names}
    skipped = []
    for path in sorted(TESTS.rglob("*.py")):
        for module in re.findall(r"importorskip\(\s*[\"']([\w.]+)[\"']", path.read_text()):
            if module.split(".")[0] in hard:
                skipped.append(f"{path.name}: {module}")
    assert not skipped, f"hard dependencies must be imported, not skipped: {skipped}"


#: Dependencies used without an import in the package: the kernel papermill starts, the lab
#: of `make lab`, and the engine pandas reads and writes Parquet with.
RUNTIME_ONLY = {"ipykernel", "jupyterlab", "pyarrow"}


def test_every_declared_dependency_is_imported_by_the_package():
    dependencies = PYPROJECT["project"]["dependencies"]
    names = {re.split(r"[<>=!~\[ ]", d)[0].lower() for d in dependencies} - RUNTIME_ONLY
    source = "\n".join(p.read_text() for p in (REPO_ROOT / "hgresearch").rglob("*.py"))
    unused = sorted(n for n in names
                    if not re.search(rf"^\s*(import|from) {IMPORT_NAMES.get(n, n.replace('-', '_'))}\b",
                                     source, re.MULTILINE))
    assert not unused, f"declared in pyproject.toml but never imported: {unused}"
