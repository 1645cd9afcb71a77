"""The simulator's hot path compiled with mypyc, used only while it matches its sources.

``setup.py`` compiles :data:`COMPILED_MODULES` (the request and replica entities, the step
times, the event heap, vLLM's scheduler, the event loop) with mypyc from the same typed
sources — the same float operations in the same order, so every simulated time is
bit-identical (a test runs both and compares); only about twice as fast (the steady-state
searches run millions of engine steps). Beside the compiled copies it writes
:data:`MANIFEST`: the SHA-256 of each source it compiled.

An editable install leaves the compiled copies next to the sources, and Python imports a
compiled copy before its source — so a source edited since the build would silently not run.
:func:`activate` (called by ``hgresearch/sim/__init__.py`` before anything imports these
modules) therefore uses the compiled copies only when every one's source is the one compiled;
otherwise it warns and imports the sources instead (``make install`` rebuilds). Setting
:data:`PURE_PYTHON_ENV` (to anything but empty or ``0``) imports the sources always (for
profiling or stepping through the simulator) and builds nothing at install time.

No imports beyond the standard library: ``setup.py`` loads this file before any dependency is
installed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

#: Modules of ``hgresearch.sim`` that setup.py compiles, in import order (each imports only
#: earlier ones of the list).
COMPILED_MODULES = ("entities", "step_time", "events", "scheduler", "simulator")
#: File beside the sources: ``{module: sha256 of the source compiled}``.
MANIFEST = "_compiled_sources.json"
#: Environment variable that turns compilation and the compiled copies off.
PURE_PYTHON_ENV = "HGRESEARCH_PURE_PYTHON"
PACKAGE = "hgresearch.sim"
PACKAGE_DIR = Path(__file__).resolve().parent


def reduce_by_fields(obj: Any) -> tuple[type, tuple[object, ...]]:
    """``__reduce__`` of the dataclasses of :data:`COMPILED_MODULES`: rebuilt by calling their
    class (found by name when read: the compiled or the source one, whichever runs there) with
    their fields. mypyc's own pickling sets the fields one by one, which a frozen dataclass
    refuses, and the source class could not read it (caches, worker processes)."""
    return type(obj), tuple(getattr(obj, field.name) for field in dataclasses.fields(obj))


def pure_python_requested() -> bool:
    """Whether :data:`PURE_PYTHON_ENV` asks for the sources."""
    return os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")


def source_digests(package_dir: Path = PACKAGE_DIR) -> dict[str, str]:
    """SHA-256 of each compiled module's source in ``package_dir``."""
    return {name: hashlib.sha256((package_dir / f"{name}.py").read_bytes()).hexdigest()
            for name in COMPILED_MODULES}


def write_manifest(package_dir: Path = PACKAGE_DIR) -> Path:
    """Record the sources about to be compiled (setup.py calls it before building)."""
    path = package_dir / MANIFEST
    path.write_text(json.dumps(source_digests(package_dir), indent=1, sort_keys=True) + "\n")
    return path


def compiled_copies(package_dir: Path = PACKAGE_DIR) -> dict[str, Path]:
    """The compiled copy of each module found in ``package_dir`` (by extension suffix)."""
    found = {}
    for name in COMPILED_MODULES:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            if (package_dir / f"{name}{suffix}").is_file():
                found[name] = package_dir / f"{name}{suffix}"
                break
    return found


def stale_modules(package_dir: Path = PACKAGE_DIR) -> list[str]:
    """Modules whose compiled copy is missing or was built from another source (all of them
    when the manifest is missing or unreadable)."""
    try:
        built = json.loads((package_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return list(COMPILED_MODULES)
    present = compiled_copies(package_dir)
    current = source_digests(package_dir)
    return [name for name in COMPILED_MODULES
            if name not in present or not isinstance(built, dict)
            or built.get(name) != current[name]]


def _import_sources(package_dir: Path) -> None:
    """Import every compiled module from its ``.py`` source instead of its compiled copy."""
    package = sys.modules.get(PACKAGE)
    for name in COMPILED_MODULES:
        full_name = f"{PACKAGE}.{name}"
        loader = importlib.machinery.SourceFileLoader(full_name, str(package_dir / f"{name}.py"))
        spec = importlib.util.spec_from_loader(full_name, loader)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[full_name] = module
        loader.exec_module(module)
        if package is not None:
            setattr(package, name, module)


def activate(package_dir: Path = PACKAGE_DIR) -> bool:
    """Decide, before the first import of :data:`COMPILED_MODULES`, whether the compiled
    copies run; returns True when they do. With no compiled copy there is nothing to decide
    (plain imports find the sources); with copies that do not match their sources (or
    :data:`PURE_PYTHON_ENV` set), the sources are imported explicitly, with a warning for
    stale copies."""
    present = compiled_copies(package_dir)
    if not present:
        return False
    if pure_python_requested():
        _import_sources(package_dir)
        return False
    stale = stale_modules(package_dir)
    if stale:
        warnings.warn(
            f"{PACKAGE}: the compiled simulator ({', '.join(stale)}) was not built from the "
            "current sources; running the sources instead (slower). Rebuild with "
            "`make install`.", RuntimeWarning, stacklevel=2)
        _import_sources(package_dir)
        return False
    return True
