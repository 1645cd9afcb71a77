"""Shared fixtures. The paper's raw results are read from ../shared/reference (CI and the
developers' machines) or wherever the documented lookup order finds them; they are never
copied into the repository."""

from __future__ import annotations

from pathlib import Path

import pytest
from ray_isolation import RAY_CHILD_ENV, RAY_ISOLATED_MODULES, RAY_WRAPPER_MODULE

from hgresearch.data.ingest import read_runs
from hgresearch.data.reference import ReferenceDataError
from hgresearch.data.reference import reference_dir as find_reference_dir

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    """Verified folder of the paper's 120 raw result files."""
    try:
        return find_reference_dir("ionet-aibc2025")
    except ReferenceDataError as err:
        pytest.fail(f"reference data not available: {err}")


@pytest.fixture(scope="session")
def reference_runs(reference_dir: Path):
    """The runs table of the whole reference set (do not mutate)."""
    return read_runs(reference_dir, relative_to=reference_dir)


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster started by the test module (one per module: Ray takes seconds to
    start): 2 CPUs and custom resources standing for GPU types (``GPU-A``: 2, ``GPU-B``: 1).
    Ray is the ``[ray]`` extra; CI installs it (a missing Ray fails there, skips elsewhere)."""
    import os

    ray = __import__("ray") if os.environ.get("CI") else pytest.importorskip("ray")
    # address="local": always a new cluster of the test's own, never one found on the machine
    ray.init(address="local", num_cpus=2, resources={"GPU-A": 2, "GPU-B": 1},
             include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.hookimpl(trylast=True)  # after -k/-m have deselected what they deselect
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """When the wrapper (test_ray_isolated.py) is selected, it runs the Ray modules in a child
    pytest; their in-process copies are deselected so that nothing runs twice. Running a Ray
    module on its own (no wrapper selected) runs it in this process, as before."""
    import os

    if os.environ.get(RAY_CHILD_ENV):
        return

    def module(item: pytest.Item) -> str:
        return item.path.resolve().relative_to(REPO_ROOT).as_posix()

    if not any(module(item) == RAY_WRAPPER_MODULE for item in items):
        return
    inner = [item for item in items if module(item) in RAY_ISOLATED_MODULES]
    if inner:
        config.hook.pytest_deselected(items=inner)
        items[:] = [item for item in items if module(item) not in RAY_ISOLATED_MODULES]
