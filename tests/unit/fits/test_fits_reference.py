"""The models on the paper's 130 reference runs: roofline never exceeded (and the check has
teeth), validation table, run-to-run spread, and the fits' speed (the ratio claims' definition
search: tests/unit/report/test_audit.py)."""

from __future__ import annotations

import time
import warnings

import pytest

from hgresearch.accounting.costs import add_costs
from hgresearch.data.ingest import read_runs
from hgresearch.fits import ModelWarning
from hgresearch.fits.fit_all import fit_models
from hgresearch.fits.roofline import roofline_table
from hgresearch.fits.uncertainty import run_to_run_spread
from hgresearch.fits.validation import fitted_leave_one_qps_out, fitted_validation_table


@pytest.fixture(scope="module")
def runs(reference_dir):
    return add_costs(read_runs([reference_dir]), "alternative")


@pytest.fixture(scope="module")
def models(runs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModelWarning)
        start = time.perf_counter()
        result = fit_models(runs)
        result.seconds = time.perf_counter() - start
    return result


def test_fits_cover_every_configuration(runs, models):
    assert len(models.capacity) == 24
    assert (models.capacity.capacity_rps > 0).all()


def test_no_fitted_capacity_is_below_a_measured_throughput(runs, models):
    """A configuration that completed X req/s in some run sustains at least X: the capacity,
    its interval's lower end and the table all respect every measured run."""
    measured = runs.assign(achieved=runs.completed / runs.duration_s).groupby(
        ["model", "gpu_name", "gpu_count"]).achieved.max()
    for fit in models.capacity_fits.values():
        key = (fit.config["model"], fit.config["gpu_name"], fit.config["gpu_count"])
        assert fit.capacity_rps >= measured[key] * (1 - 1e-9), key
        assert fit.capacity_low_rps >= measured[key] * (1 - 1e-6), key
    table = models.capacity
    assert (table.capacity_rps >= table.max_achieved_rps * (1 - 1e-9)).all()


@pytest.mark.timing
def test_fits_are_fast(models):
    assert models.seconds < 10.0  # a few seconds on a shared 2-core machine


def test_no_reference_run_exceeds_its_roofline(runs):
    table = roofline_table(runs)
    assert len(table) == 130
    assert not table.exceeds_bound.any()
    assert table.decode_ratio.max() < 1.0 and table.prefill_ratio.max() < 1.0


def test_wrong_weight_bytes_would_break_the_bound(runs):
    """The FP8 checkpoint counted at 2 bytes/weight makes its runs beat physics."""
    fp8 = "Llama-3.1-Nemotron-70B-Instruct-HF-FP8-dynamic"
    with pytest.warns(ModelWarning, match="exceed their bound"):
        table = roofline_table(runs, model_overrides={fp8: {"weight_bytes_per_param": 2}})
    assert set(table[table.exceeds_bound].model) == {fp8}


def test_validation_table_on_reference(runs, models):
    predictions = fitted_leave_one_qps_out(runs, models.schedule)
    table = fitted_validation_table(predictions)
    overall = table[table.configuration == "all configurations"].iloc[0]
    assert overall.n_folds == 120
    assert overall.throughput_mape_pct < 15.0
    assert overall.ttft_p90_n > 0


def test_run_to_run_spread_of_repeated_points(runs):
    points, summary = run_to_run_spread(runs)
    assert set(points.model) == {"DeepSeek-R1-Distill-Qwen-1.5B", "DeepSeek-R1-Distill-Qwen-14B"}
    assert (summary.n_points == 10).all()
