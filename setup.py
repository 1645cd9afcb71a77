"""Build script: everything but the compiled simulator is declared in pyproject.toml.

The simulator's hot path (hgresearch/sim/compiled.py: COMPILED_MODULES) is compiled with mypyc
from its typed sources when mypyc (part of mypy, a build requirement) and a C compiler are
there — bit-identical results, about twice as fast. Without them, or with
HGRESEARCH_PURE_PYTHON=1, the package installs as plain Python and runs the same code from
source. A failed compilation is reported and the install goes on without it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
SIM_DIR = HERE / "hgresearch" / "sim"


def _compiled_module() -> object:
    """hgresearch/sim/compiled.py, loaded by path (the package's dependencies are not
    installed yet)."""
    spec = importlib.util.spec_from_file_location("_hgresearch_compiled", SIM_DIR / "compiled.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class LenientBuildExt(build_ext):
    """build_ext that warns instead of failing: the compiled copies are an optimisation."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as error:  # noqa: BLE001 - any compiler failure means: go pure
            print(f"warning: the simulator was not compiled ({error}); hgresearch runs it "
                  "from source", file=sys.stderr)


def ext_modules() -> list[object]:
    compiled = _compiled_module()
    if compiled.pure_python_requested():  # type: ignore[attr-defined]
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("warning: mypyc not found; the simulator runs from source", file=sys.stderr)
        return []
    compiled.write_manifest(SIM_DIR)  # type: ignore[attr-defined]
    paths = [f"hgresearch/sim/{name}.py" for name in compiled.COMPILED_MODULES]  # type: ignore[attr-defined]
    try:
        # --ignore-missing-imports: in an isolated build numpy and pandas are absent; the
        # compiled code calls them through Python either way
        return list(mypycify(["--ignore-missing-imports", *paths], opt_level="3",
                             group_name="hgresearch_sim"))
    except Exception as error:  # noqa: BLE001 - a type error in mypyc's view: go pure
        print(f"warning: mypyc could not compile the simulator ({error}); it runs from "
              "source", file=sys.stderr)
        return []


setup(ext_modules=ext_modules(), cmdclass={"build_ext": LenientBuildExt})
