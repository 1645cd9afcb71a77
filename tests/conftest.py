"""Shared fixtures. The paper's raw results are read from ../shared/reference (CI and the
developers' machines) or wherever the documented lookup order finds them; they are never
copied into the repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from hgresearch.ingest import read_runs
from hgresearch.reference import ReferenceDataError, reference_dir as find_reference_dir

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
