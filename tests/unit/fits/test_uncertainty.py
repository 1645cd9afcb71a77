"""Bootstrap intervals from our own runs' per-request records."""

from __future__ import annotations

import numpy as np
import pytest

from hgresearch.fits.common import ModelInputError
from hgresearch.paths import REPO_ROOT


def test_run_request_cis_on_committed_cpu_sweep(reference_runs):
    """Intervals from the per-request records of our committed CPU sweep; the paper's
    summary-only runs have no records and are refused."""
    from hgresearch.data.ingest import read_runs
    from hgresearch.fits.uncertainty import run_request_cis

    runs = read_runs(REPO_ROOT / "data" / "raw" / "cpu-tiny")
    cis = run_request_cis(runs, 0.10, n_boot=200, seed=3)
    assert set(cis.run_id) == set(runs.run_id)
    assert len(cis) == len(runs) * 10  # 3 latency columns x 3 percentiles + cost
    assert ((cis.low <= cis.estimate + 1e-9) & (cis.estimate <= cis.high + 1e-9)).all()
    p50 = cis[cis.quantity == "p50_ttft_ms"].set_index("run_id").estimate
    summary_p50 = runs.set_index("run_id").p50_ttft_ms
    assert np.allclose(p50.sort_index(), summary_p50.sort_index(), rtol=1e-6)
    with pytest.raises(ModelInputError, match="per-request records"):
        run_request_cis(reference_runs, 2.0)
