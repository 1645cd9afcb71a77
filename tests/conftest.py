"""Shared fixtures. The paper's raw results are read from ../shared/reference (CI and the
developers' machines) or wherever the documented lookup order finds them; they are never
copied into the repository."""

from __future__ import annotations

from pathlib import Path

import pytest

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
