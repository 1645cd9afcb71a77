"""The shared step-time model on the reference runs: no prediction contradicts a met SLO
without a reason (issue 18 item 7), every configuration is validated out of its own runs, and
the intervals cover held-out configurations near their nominal level (item 3). Slow: the
cross-validation takes ~17 minutes uncached (``build/cache/models`` after ``hgresearch
reproduce`` makes it seconds)."""

from __future__ import annotations

import pytest

from hgresearch.paths import REPO_ROOT
from hgresearch.sim.intervals import coverage_table, intervals_from_points
from hgresearch.sim.run import calibration_runs
from hgresearch.sim.validation import (
    cached_cross_validation,
    calibrations_from,
    configuration_points,
    slo_contradictions,
    unbounded_kv_predictions,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def validation():
    return cached_cross_validation(calibration_runs(), REPO_ROOT / "build")


def test_every_met_slo_is_reproduced_or_listed_with_a_reason(validation):
    points = validation.points
    runs = calibration_runs()
    unbounded = unbounded_kv_predictions(calibrations_from(validation, runs),
                                         dict(configuration_points(runs)))
    table = slo_contradictions(points, intervals_from_points(points, scheme="LOCO"),
                               excluded=validation.excluded, unbounded_kv=unbounded)
    met = table[table.measured_met]
    assert (met.reason != "").all(), met[met.reason == ""].to_string()


def test_every_gpu_configuration_is_predicted_without_its_runs(validation):
    loco = validation.points[validation.points.scheme == "LOCO"]
    assert loco.configuration.nunique() == 24
    for (scheme, name), fit in validation.fold_fits.items():
        if scheme == "LOCO":
            assert name not in fit.configurations


def test_ninety_percent_intervals_cover_85_to_95_percent_of_held_out_points(validation):
    table = coverage_table(validation.points)
    ninety = table[table.nominal_pct == 90.0]
    assert ninety.coverage_pct.between(85.0, 95.0).all(), ninety.to_string()
