"""``sim run`` and ``sim fleet`` check before they work (issue 20, items 1 and 5): the work
bound (memory and time estimated from the requests; refused before anything is read or
calibrated), -o onto a folder holding a run, an unknown configuration with close matches
(before calibrating); long work reports progress."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from hgresearch.bounds import MEMORY_LIMIT_BYTES, TIME_LIMIT_S
from hgresearch.cli import app
from hgresearch.sim import run as run_module
from hgresearch.sim.calibrate import Calibration, StepCoefficients, replica_for
from hgresearch.sim.run import (
    SIM_BYTES_PER_REQUEST,
    check_configuration,
    run_estimate,
    simulate_run,
    write_run_folder,
)

LABEL = "DeepSeek-R1-Distill-Qwen-14B on 1x H100-PCIe"
#: A reference folder that does not exist: a command that got as far as reading the reference
#: data would fail on it, so an error about anything else came before the work.
NO_REFERENCE = ["--from", "/nonexistent/reference"]


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def _calibration() -> tuple[Calibration, pd.DataFrame]:
    """A calibration with plausible coefficients (a real fit takes seconds) and the measured
    means the simulated run replays."""
    replica = replica_for("DeepSeek-R1-Distill-Qwen-14B", "H100-PCIe", 1)
    coefficients = StepCoefficients(c0_s=0.02, c_prefill_s_per_token=2e-5,
                                    c_decode_s_per_seq=2e-4, ttft_offset_s=0.01)
    fit = Calibration(replica=replica, coefficients=coefficients, rel_se=(0.0, 0.0, 0.0),
                      rates_qps=(8.0,), rms_log_error=0.0, num_simulations=0)
    points = pd.DataFrame({"total_input_tok": [46_000], "total_output_tok": [40_000],
                           "completed": [200]})
    return fit, points


def test_the_estimate_grows_with_the_requests_and_crosses_the_limits() -> None:
    small, large = run_estimate(200), run_estimate(10_000_000)
    assert small.memory_bytes < MEMORY_LIMIT_BYTES and small.time_s < 1.0
    assert large.memory_bytes > MEMORY_LIMIT_BYTES  # the 11 GB the issue saw
    assert large.memory_bytes - small.memory_bytes == pytest.approx(
        SIM_BYTES_PER_REQUEST * (10_000_000 - 200))
    assert run_estimate(200, replicas=50_000_000).time_s > TIME_LIMIT_S


def test_sim_run_refuses_ten_million_requests_before_any_work() -> None:
    result = _invoke("sim", "run", "--config", LABEL, "--qps", "8", "--num-prompts",
                     "10000000", *NO_REFERENCE)
    assert result.exit_code == 2, result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith("error: simulating 10,000,000 requests would take about")
    assert "limit 4.0 GB" in line and "--allow-large" in line


def test_sim_fleet_refuses_before_calibrating(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(f"replicas:\n  - config: {LABEL}\n    count: 3\n")
    result = _invoke("sim", "fleet", str(fleet), "--num-prompts", "10000000", *NO_REFERENCE)
    assert result.exit_code == 2, result.output
    assert "simulating 10,000,000 requests on 3 replicas would take about" in result.output
    assert "reference" not in result.output


def test_sim_run_output_holding_a_run_is_refused_before_the_work(tmp_path: Path) -> None:
    fit, points = _calibration()
    target = write_run_folder(simulate_run(fit, points, 8.0, 20), tmp_path / "run")
    result = _invoke("sim", "run", "--config", LABEL, "--qps", "8", "-o", str(target),
                     *NO_REFERENCE)
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (f"error: {target}, field 'output': folder already holds "
                                     "a run; choose another")
    (tmp_path / "file").write_text("x")
    as_file = _invoke("sim", "run", "--config", LABEL, "--qps", "8", "-o",
                      str(tmp_path / "file"), *NO_REFERENCE)
    assert as_file.exit_code == 2 and "is a file" in as_file.output


def test_unknown_configuration_suggests_close_matches() -> None:
    known = [LABEL, "DeepSeek-R1-Distill-Qwen-14B on 2x RTX-4090", "tiny-llama-cpu on 1x CPU"]
    with pytest.raises(Exception, match=r"did you mean 'DeepSeek-R1-Distill-Qwen-14B on 1x "
                                        r"H100-PCIe'") as caught:
        check_configuration("DeepSeek-R1-Distill-Qwen-14B on 1x H100", known)
    assert "known: " in str(caught.value)
    with pytest.raises(Exception) as far:
        check_configuration("nothing like it", known)
    assert "did you mean" not in str(far.value)
    check_configuration(LABEL, known)


def test_sim_run_unknown_configuration_answers_before_calibrating(monkeypatch) -> None:
    """The calibration step is replaced by one that fails the test if it is reached (fitting
    every configuration cold takes 16-50 s): the answer must come from the runs' labels."""
    def must_not_calibrate(*args, **kwargs):
        raise AssertionError("calibrated before checking the configuration")

    monkeypatch.setattr(run_module, "calibrations", must_not_calibrate)
    result = _invoke("sim", "run", "--config", "DeepSeek-R1-Distill-Qwen-14B on 1x H100",
                     "--qps", "4")
    assert result.exit_code == 2, result.output
    assert "did you mean 'DeepSeek-R1-Distill-Qwen-14B on 1x H100-PCIe'" in result.output
    assert "Traceback" not in result.output


def test_progress_counts_every_simulated_request() -> None:
    fit, points = _calibration()
    done: list[int] = []
    run = simulate_run(fit, points, 8.0, 300, on_completions=done.append)
    assert sum(done) == 300 == run.summary["completed"]
    assert len(done) > 1  # reported as the run goes, not once at the end


def _shared_fit_only(monkeypatch) -> None:
    """Stand in a small shared fit of the RTX 4090 (the step_model tests' starting values, no
    fitting) for the reference runs' fits, which take minutes to fit cold; and fail the test
    if ``sim run`` calibrated every measured configuration (not needed for a prediction)."""
    from hgresearch.sim import validation as validation_module
    from hgresearch.sim.step_model import INITIAL, PARAMETERS, GpuFit

    fit = GpuFit(gpu_name="RTX-4090", values=dict(INITIAL),
                 rel_se=dict.fromkeys(PARAMETERS, 0.1),
                 status=dict.fromkeys(PARAMETERS, "free"), configurations=("a", "b"),
                 num_points=10, num_residuals=50, rms_log_error=0.1, num_evaluations=1)

    def must_not_calibrate(*args, **kwargs):
        raise AssertionError("calibrated every configuration for a prediction")

    monkeypatch.setattr(validation_module, "reference_shared_fits",
                        lambda *args, **kwargs: {"RTX-4090": fit})
    monkeypatch.setattr(run_module, "calibrations", must_not_calibrate)
    # the intervals' residuals (the reference cross-validation takes minutes): every metric
    # predicted between 20 % too low and 50 % too high
    from hgresearch.sim import intervals as intervals_module

    residuals = dict.fromkeys(intervals_module.VALIDATION_METRIC, [-0.2, 0.0, 0.5] * 10)
    monkeypatch.setattr(intervals_module, "reference_intervals", lambda *args, **kwargs:
                        intervals_module.PredictionIntervals(residuals, "stand-in residuals"))


def test_sim_run_predicts_an_unmeasured_configuration(monkeypatch, tmp_path: Path) -> None:
    """32B on 8x RTX-4090 was never measured: the shared model predicts it (a note on stderr,
    the source in the summary and the run folder), with the 32B's measured lengths."""
    import json

    from hgresearch.sim.step_model import PREDICTED_UNMEASURED

    _shared_fit_only(monkeypatch)
    label = "DeepSeek-R1-Distill-Qwen-32B on 8x RTX-4090"
    result = CliRunner().invoke(app, ["sim", "run", "--config", label, "--qps", "2",
                                      "--num-prompts", "40", "--build-dir", str(tmp_path),
                                      "-o", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    [note] = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert note.startswith("note: prediction of an unmeasured configuration: "
                           f"{label} was not measured")
    assert "DeepSeek-R1-Distill-Qwen-32B's measured runs on 1x H100-PCIe" in note
    summary = json.loads(result.stdout)
    assert summary["configuration"] == label and summary["completed"] == 40
    assert summary["calibration_source"] == PREDICTED_UNMEASURED
    assert "was not measured" in summary["calibration_note"]
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["calibration_source"] == PREDICTED_UNMEASURED
    # the interval of each metric around the prediction: [p / 1.5, p / 0.8]
    assert "90% prediction intervals (stand-in residuals):" in result.stderr
    p90 = summary["p90_ttft_ms"]
    assert f"  p90_ttft_ms: {p90:.4g} [{p90 / 1.5:.4g}, {p90 / 0.8:.4g}]" in result.stderr
    assert "  request_throughput: " in result.stderr


def test_sim_run_without_intervals(monkeypatch, tmp_path: Path) -> None:
    """--confidence 0 prints no interval (and never runs the cross-validation behind them);
    a confidence of 1 or more is refused in one line."""
    _shared_fit_only(monkeypatch)
    from hgresearch.sim import intervals as intervals_module

    def must_not_validate(*args, **kwargs):
        raise AssertionError("cross-validated for intervals nobody asked for")

    monkeypatch.setattr(intervals_module, "reference_intervals", must_not_validate)
    label = "DeepSeek-R1-Distill-Qwen-32B on 8x RTX-4090"
    result = CliRunner().invoke(app, ["sim", "run", "--config", label, "--qps", "2",
                                      "--num-prompts", "20", "--build-dir", str(tmp_path),
                                      "--confidence", "0"])
    assert result.exit_code == 0, result.output
    assert "prediction intervals" not in result.stderr
    result = _invoke("sim", "run", "--config", label, "--qps", "2", "--confidence", "1")
    assert result.exit_code == 2 and "expected a confidence in [0, 1)" in result.output


@pytest.mark.parametrize(("label", "expected"), [
    # an unknown model, and a GPU type the shared model has no fit for: the closest labels
    ("DeepSeek-R1-Distill-Qwen-15B on 3x RTX-4090",
     "unknown configuration 'DeepSeek-R1-Distill-Qwen-15B on 3x RTX-4090'; did you mean "),
    ("tiny-llama-cpu on 2x CPU", "did you mean 'tiny-llama-cpu on 1x CPU'"),
    # known, but 70B's weights (131 GiB) leave no KV room on one 24 GiB GPU
    ("DeepSeek-R1-Distill-Llama-70B on 1x RTX-4090",
     "cannot predict 'DeepSeek-R1-Distill-Llama-70B on 1x RTX-4090': no room for KV cache"),
    # vLLM cannot split 40 attention heads over 3 GPUs
    ("DeepSeek-R1-Distill-Qwen-14B on 3x RTX-4090",
     "cannot predict 'DeepSeek-R1-Distill-Qwen-14B on 3x RTX-4090': tensor parallelism over 3 "
     "GPUs needs 3 to divide DeepSeek-R1-Distill-Qwen-14B's 40 attention heads"),
])
def test_sim_run_refuses_what_it_cannot_predict_at_once(monkeypatch, label: str,
                                                        expected: str) -> None:
    _shared_fit_only(monkeypatch)
    from hgresearch.sim import validation as validation_module

    def must_not_fit(*args, **kwargs):
        raise AssertionError("fitted before checking the configuration")

    monkeypatch.setattr(validation_module, "reference_shared_fits", must_not_fit)
    result = _invoke("sim", "run", "--config", label, "--qps", "2")
    assert result.exit_code == 2, result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith("error: ") and expected in line, line
    assert "Traceback" not in result.output


def test_configuration_labels_parse_back() -> None:
    from hgresearch.identity import config_label, parse_config_label

    row = {"model": "DeepSeek-R1-Distill-Qwen-14B", "gpu_name": "RTX-4090", "gpu_count": 3}
    assert parse_config_label(config_label(row)) == ("DeepSeek-R1-Distill-Qwen-14B",
                                                     "RTX-4090", 3)
    for other in ("4 x (2x RTX-4090)", "m on 0x H100-PCIe", "m on H100-PCIe", ""):
        assert parse_config_label(other) is None


def test_an_unmeasured_configuration_takes_its_models_lengths_or_none() -> None:
    """Catalog lookups only (no fit): the same model's measured points give the lengths; a
    model without any is refused naming what is missing; an alias of a measured
    configuration's GPU is that configuration; a GPU type nothing measured is not predicted."""
    from hgresearch.errors import InputError
    from hgresearch.sim.run import unmeasured_configuration

    def points(model: str, gpu: str, count: int) -> pd.DataFrame:
        return pd.DataFrame({"model": [model], "gpu_name": [gpu], "gpu_count": [count],
                             "total_input_tok": [46_000], "total_output_tok": [40_000],
                             "completed": [200]})

    measured = {"DeepSeek-R1-Distill-Qwen-7B on 1x RTX-4090":
                points("DeepSeek-R1-Distill-Qwen-7B", "RTX-4090", 1)}
    target = unmeasured_configuration("DeepSeek-R1-Distill-Qwen-7B on 2x RTX-4090", measured)
    assert target is not None and target.gpu_count == 2
    assert target.lengths_from == ("1x RTX-4090",) and len(target.points) == 1
    with pytest.raises(InputError, match=r"cannot predict 'DeepSeek-R1-Distill-Qwen-14B on 2x "
                                         r"RTX-4090': request lengths .* has none"):
        unmeasured_configuration("DeepSeek-R1-Distill-Qwen-14B on 2x RTX-4090", measured)
    alias = unmeasured_configuration("DeepSeek-R1-Distill-Qwen-7B on 1x NVIDIA-GeForce-RTX-4090",
                                     measured)
    assert alias is not None and alias.label == "DeepSeek-R1-Distill-Qwen-7B on 1x RTX-4090"
    assert unmeasured_configuration("DeepSeek-R1-Distill-Qwen-7B on 1x H100-PCIe",
                                    measured) is None
