"""Prediction intervals from held-out residuals and the slow end the planner applies."""

import numpy as np
import pytest

from hgresearch.sim.calibrate import Calibration, StepCoefficients, replica_for
from hgresearch.sim.intervals import PredictionIntervals


def _intervals(tpot: list[float]) -> PredictionIntervals:
    return PredictionIntervals(residuals={"mean_tpot_ms": tpot}, source="test")


def test_interval_covers_the_nominal_share_of_its_own_residuals() -> None:
    rng = np.random.default_rng(0)
    residuals = rng.normal(0.0, 0.2, 2000)
    intervals = _intervals(residuals[:1000].tolist())
    # Fresh draws of measured = predicted / (1 + r): the interval should cover ~90% of them.
    predicted = 100.0
    low, high = intervals.interval("mean_tpot_ms", predicted, 0.9)
    measured = predicted / (1.0 + residuals[1000:])
    coverage = np.mean((measured >= low) & (measured <= high))
    assert 0.86 <= coverage <= 0.94


def test_step_time_factor_is_the_under_prediction_quantile() -> None:
    # Residuals down to -0.2: the simulator predicted TPOT up to 20% too low -> 1.25x slower.
    intervals = _intervals(np.linspace(-0.2, 0.2, 999).tolist())
    assert intervals.step_time_factor(0.999) == pytest.approx(1.25, rel=1e-3)
    assert 1.0 < intervals.step_time_factor(0.9) < 1.25
    assert _intervals([0.1, 0.2]).step_time_factor(0.9) == 1.0


def test_scaled_calibration_slows_every_step() -> None:
    replica = replica_for("DeepSeek-R1-Distill-Qwen-7B", "H100-PCIe", 1)
    fit = Calibration(replica=replica, coefficients=StepCoefficients(0.01, 1e-5, 1e-4, 0.02),
                      rel_se=(0.1, 0.1, 0.1), rates_qps=(1.0,), rms_log_error=0.1,
                      num_simulations=1)
    slow = fit.scaled(1.5)
    for args in [(0, 8, 1000), (4096, 0, 0), (0, 1, 0)]:
        base = fit.coefficients.step_model(fit.replica).step_time_s(*args)
        assert slow.coefficients.step_model(slow.replica).step_time_s(*args) == pytest.approx(
            1.5 * base)
    assert slow.coefficients.ttft_offset_s == pytest.approx(0.03)
    with pytest.raises(ValueError):
        fit.scaled(0.0)
