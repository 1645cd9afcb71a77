"""``hgresearch plan``: the issue's command end to end (capacities from the simulator,
plan, simulated check, baselines, fleet file), and bad input as one line with exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from hgresearch.cli import app
from hgresearch.errors import InputError
from hgresearch.plan.options import parse_candidate, parse_caps, parse_length, parse_slo
from hgresearch.sim.fleet import sim_replicas
from hgresearch.sim.fleet_spec import load_fleet


def test_plan_command(tmp_path: Path) -> None:
    """The issue's command, on the roofline step times (the calibrated default fits every
    reference configuration first, minutes: see the next test for that path)."""
    out = tmp_path / "fleet.yaml"
    result = CliRunner().invoke(app, [
        "plan", "--model", "DeepSeek-R1-Distill-Qwen-14B", "--qps", "20", "--slo",
        "p99_ttft:500", "--objective", "cost", "--max", "H100-PCIe=2", "--prices",
        "alternative", "--grid", "DE", "--check-seeds", "2", "-o", str(out),
        "--step-times", "roofline", "--build-dir", str(tmp_path / "build")])
    assert result.exit_code == 0, result.output
    for part in ("plan (load", "simulated check", "passed", "H100-PCIe only", "RTX-4090 only",
                 "sized at the slow end", "interval_ms", "stress_p99_ttft_ms", "load_vs_nominal",
                 "best single configuration", f"wrote {out}"):
        assert part in result.stdout
    replicas = sim_replicas(load_fleet(out), fits={})
    assert replicas and sum(r.num_gpus for r in replicas if r.gpu_name == "H100-PCIe") <= 2
    assert list((tmp_path / "build" / "cache" / "models").glob("plan-capacity-*.pkl"))
    # the same plan with its live endpoints: a fleet file the bench accepts
    urls = [f"--base-url={r.num_gpus}x {r.gpu_name}=http://h{i}:8000"
            for i, r in enumerate(replicas)]
    live = tmp_path / "live.yaml"
    again = CliRunner().invoke(app, [
        "plan", "--qps", "20", "--slo", "p99_ttft:500", "--max", "H100-PCIe=2",
        "--grid", "DE", "--check-seeds", "1", "-o", str(live), *urls,
        "--step-times", "roofline", "--build-dir", str(tmp_path / "build")])
    assert again.exit_code == 0, again.output
    from hgresearch.sim.fleet_spec import bench_endpoints

    assert [e["base_url"] for e in bench_endpoints(load_fleet(live), "m")] == \
        [f"http://h{i}:8000" for i in range(len(replicas))]


@pytest.mark.parametrize(("args", "message"), [
    (["--slo", "p99_foo:5"], "field '--slo': expected 'batch' or pXX_ttft:MS"),
    (["--candidate", "1x H100-PCIe", "--max", "H100-PCIe=0"],
     "field 'caps': demand of 20 req/s exceeds what the candidates serve"),
    (["--grid", "XX"], "unknown grid region 'XX'"),
    (["--prices", "cheap"], "unknown price scenario 'cheap'"),
    (["--step-times", "fitted"], "'fitted' is not one of"),
])
def test_plan_bad_input_is_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["plan", "--qps", "20", "--build-dir",
                                      str(tmp_path), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_option_parsers() -> None:
    chat = parse_slo("chat=p90_ttft:2000,p99_tpot:80@0.7")
    assert (chat.name, chat.share, chat.ttft_ms, chat.ttft_percentile, chat.tpot_ms) == \
        ("chat", 0.7, 2000.0, 90.0, 80.0)
    assert parse_slo("batch@0.3").is_batch
    assert parse_length("short=256:128@0.6") == parse_length(" short=256:128@0.6 ")
    candidates, gpu_caps = parse_caps(["H100-PCIe=2", "4x RTX-4090=1"],
                                      [parse_candidate("1x H100-PCIe"),
                                       parse_candidate("4x RTX-4090")])
    assert gpu_caps == (("H100-PCIe", 2),) and candidates[1].max_replicas == 1
    with pytest.raises(InputError, match="is not a candidate"):
        parse_caps(["8x RTX-4090=1"], candidates)
    with pytest.raises(InputError, match="NAME=PROMPT:OUTPUT"):
        parse_length("256:128")


def test_plan_uses_the_calibration_by_default(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --step-times the capacities come from the simulator's calibrations. A stand-in
    that raises proves they are asked for (fitting the real ones takes minutes)."""
    from hgresearch.sim import fleet as sim_fleet

    asked = []

    def stand_in(build_dir, reference=None, executor=None):
        asked.append(build_dir)
        raise InputError("stand-in calibrations asked for", field="calibration")

    monkeypatch.setattr(sim_fleet, "fleet_calibrations", stand_in)
    result = CliRunner().invoke(app, ["plan", "--qps", "20", "--build-dir",
                                      str(tmp_path)])
    assert result.exit_code == 2 and asked == [tmp_path]
    assert "stand-in calibrations asked for" in result.output


@pytest.mark.parametrize(("qps", "message"), [
    ("1e9", "checking a plan at 1e+09 req/s"),
    ("1e6", "checking a plan at 1e+06 req/s"),
])
def test_plan_refuses_an_absurd_demand_before_any_work(tmp_path: Path, qps: str,
                                                       message: str) -> None:
    """Issue 20: the check's size follows the demand, and is refused in one line before the
    calibrations, the rates or the program (none of which is written to the build folder)."""
    result = CliRunner().invoke(app, ["plan", "--qps", qps, "--slo", "p99_ttft:500",
                                      "--build-dir", str(tmp_path / "build")])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "--allow-large" in lines[0]
    assert not (tmp_path / "build").exists()


def test_plan_checks_the_output_target_before_the_work(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["plan", "--qps", "20", "-o",
                                      str(tmp_path / "missing" / "fleet.yaml"),
                                      "--build-dir", str(tmp_path / "build")])
    assert result.exit_code == 2 and "does not exist" in result.output
    assert not (tmp_path / "build").exists()
