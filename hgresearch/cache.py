"""Cache fitted models on disk, keyed by a hash of their inputs and of the model code.

``cached(build_dir, "capacity", runs, {"drain": "constant"}, compute)`` returns the stored
result when the same runs (every value of every column), the same parameters and the same
source of :mod:`hgresearch.fits` were seen before; otherwise it computes, stores and returns.
Files live in ``<build_dir>/cache/models/<name>-<hash>.pkl``; deleting the folder is always
safe.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from hgresearch.paths import PACKAGE_DIR

T = TypeVar("T")


def source_digest(*parts: str) -> str:
    """SHA-256 of the package's source at ``parts`` (paths relative to the package folder: a
    file, a folder's ``*.py`` or a glob such as ``data/catalogs/*.csv``), so a result cached from
    that code is recomputed when the code changes."""
    digest = hashlib.sha256()
    for part in parts:
        target = PACKAGE_DIR / part
        if "*" in part:
            files = sorted(PACKAGE_DIR.glob(part))
        elif target.is_dir():
            files = sorted(target.glob("*.py"))
        else:
            files = [target]
        for path in files:
            digest.update(path.relative_to(PACKAGE_DIR).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _code_digest() -> str:
    return source_digest("fits")


def input_hash(frames: pd.DataFrame | list[pd.DataFrame], params: dict[str, Any]) -> str:
    """SHA-256 over the frames' columns and values, the JSON of ``params`` and the code."""
    digest = hashlib.sha256()
    for frame in frames if isinstance(frames, list) else [frames]:
        digest.update(json.dumps([str(c) for c in frame.columns]).encode())
        values = pd.util.hash_pandas_object(frame.astype(str), index=False)
        digest.update(values.to_numpy().tobytes())
    digest.update(json.dumps(params, sort_keys=True, default=str).encode())
    digest.update(_code_digest().encode())
    return digest.hexdigest()


def cache_path(build_dir: str | Path, name: str, key: str) -> Path:
    """Where the result for ``key`` is stored."""
    return Path(build_dir) / "cache" / "models" / f"{name}-{key[:20]}.pkl"


def cached(build_dir: str | Path | None, name: str,
           frames: pd.DataFrame | list[pd.DataFrame], params: dict[str, Any],
           compute: Callable[[], T]) -> T:
    """Return the cached result of ``compute`` for these inputs, computing it if needed.

    ``build_dir=None`` disables the cache. A corrupt or unreadable file is recomputed.
    """
    if build_dir is None:
        return compute()
    path = cache_path(build_dir, name, input_hash(frames, params))
    if path.exists():
        try:
            with path.open("rb") as handle:
                stored: T = pickle.load(handle)  # what compute() returned for these inputs
            return stored
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError):
            pass  # recompute below
    result = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as handle:
        pickle.dump(result, handle, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(path)
    return result
