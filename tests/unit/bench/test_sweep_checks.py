"""A sweep is checked in full before any server starts (issue 20, items 4 and 5): a typo in a
``bench:`` section or its workload, a missing model folder; a run folder that holds only a
failed attempt's error is run again without --resume; Ctrl-C before any server started says
so instead of "servers stopped".

The servers are ``engine: mock``: the package's streaming test server (a TEST DOUBLE for vLLM,
which cannot run here) as a real child process, so the sweep's process handling runs for real.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from hgresearch.bench.server.process import free_port
from hgresearch.bench.sweep import load_sweep, parse_sweep, run_sweep
from hgresearch.bench.sweep.run import SweepInterrupted
from hgresearch.cli import app
from hgresearch.data.runfolder import ERROR_FILE, is_finished
from hgresearch.errors import InputError


def _spec(out_dir: Path, *, bench: dict | None = None, server: dict | None = None) -> dict:
    return {"name": "checks", "out_dir": str(out_dir), "qps": ["inf"], "warmup_requests": 0,
            "bench": {"num_prompts": 2, "telemetry": False, "idle_baseline_s": 0,
                      "bootstrap_reps": 0,
                      "workload": {"kind": "random", "input_len": 4, "output_len": 2},
                      **(bench or {})},
            "servers": [{"label": "m", "server": {"model": "mock-m", "engine": "mock",
                                                  "port": free_port(), **(server or {})}}]}


def _write(path: Path, spec: dict) -> Path:
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.mark.parametrize("bench, field", [
    ({"num_promtps": 3}, "bench.num_promtps"),  # a key BenchConfig does not have
    ({"workload": {"kind": "random", "input_len": 4, "output_len": 2, "num_promtps": 3}},
     "bench.workload"),  # a key the workload does not have
    ({"num_prompts": 0}, "bench.num_prompts"),  # a value bench would refuse
])
def test_a_typo_in_bench_is_an_error_at_its_line_before_any_server(tmp_path, bench, field):
    sweep_file = _write(tmp_path / "sweep.yaml", _spec(tmp_path / "out", bench=bench))
    with pytest.raises(InputError) as caught:
        load_sweep(sweep_file)
    err = caught.value
    assert err.file == str(sweep_file) and err.field == field
    key = field.split(".")[-1]
    lines = sweep_file.read_text().splitlines()
    assert key in lines[err.line - 1]  # the line of the bad key (or of its section)
    assert not (tmp_path / "out").exists()


def test_a_missing_model_folder_stops_the_sweep_before_anything_is_written(tmp_path):
    spec = _spec(tmp_path / "out", server={"engine": "vllm", "model": str(tmp_path / "nope")})
    sweep = parse_sweep(spec, file=str(tmp_path / "sweep.yaml"))
    with pytest.raises(InputError, match="model folder .*nope does not exist") as caught:
        run_sweep(sweep, echo=lambda line: None)
    assert caught.value.field == "servers[0].server.model"
    assert not (tmp_path / "out").exists()  # no server started, no error.json written


def test_a_folder_holding_only_errors_is_run_again_without_resume(tmp_path):
    """First the server cannot start (a bad argument: the mock server exits at once), so each
    run folder holds only error.json; then, fixed, the same sweep runs without --resume."""
    broken = parse_sweep(_spec(tmp_path / "out", server={"extra_args": ["--no-such-flag"]}))
    [failed] = run_sweep(broken, echo=lambda line: None)
    run_dir = Path(failed["run_dir"])
    assert failed["status"] == "failed" and (run_dir / ERROR_FILE).is_file()
    fixed = parse_sweep(_spec(tmp_path / "out"))
    [ok] = run_sweep(fixed, echo=lambda line: None)
    assert ok["status"] == "ok" and is_finished(run_dir)
    assert not (run_dir / ERROR_FILE).exists()
    # a folder with results is still refused without --resume
    with pytest.raises(FileExistsError, match="--resume"):
        run_sweep(parse_sweep(_spec(tmp_path / "out")), echo=lambda line: None)


def test_ctrl_c_before_any_server_started_says_so(tmp_path):
    """Ctrl-C arrives while the sweep announces its first server (injected through the echo,
    the last thing before the server starts): nothing started, so nothing was stopped."""
    def interrupt(line: str) -> None:
        if line.startswith("starting server"):
            raise KeyboardInterrupt

    with pytest.raises(SweepInterrupted) as caught:
        run_sweep(parse_sweep(_spec(tmp_path / "out")), echo=interrupt)
    assert caught.value.message() == ("interrupted before any server started; nothing to "
                                      "resume")
    assert "stopped" in SweepInterrupted(1, 2).message()


def test_sweep_on_an_unreachable_ray_address_fails_in_one_line(tmp_path):
    """It used to hang 10+ minutes printing only Ray's warnings."""
    pytest.importorskip("ray")
    sweep_file = _write(tmp_path / "sweep.yaml", _spec(tmp_path / "out"))
    result = CliRunner().invoke(app, ["sweep", str(sweep_file), "--executor", "ray",
                                      "--address", "127.0.0.1:1"])
    assert result.exit_code == 2, result.output
    assert "connecting to the Ray cluster at 127.0.0.1:1" in result.output
    [error] = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert "cannot reach the Ray cluster at 127.0.0.1:1" in error
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_a_server_no_block_holds_is_stopped_with_its_session():
    """What a Ctrl-C inside `subprocess.Popen` leaves in a Ray worker (the cause of the Ray
    Ctrl-C test's rare failure): a server in its own session that no `VLLMServer` holds.
    The task's `stop_child_sessions` stops it; a child in this session is left alone."""
    import subprocess
    import sys

    from hgresearch.bench.server.process import child_sessions, stop_child_sessions

    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                              start_new_session=True)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        assert orphan.pid in child_sessions() and bystander.pid not in child_sessions()
        assert stop_child_sessions(grace_s=10) == [orphan.pid]
        assert orphan.poll() is not None or orphan.wait(timeout=5) is not None
        assert bystander.poll() is None
    finally:
        for process in (orphan, bystander):
            process.kill()
            process.wait(timeout=10)


def test_a_local_sweep_over_an_hour_is_refused_before_any_server(tmp_path):
    """The paper's protocol (13 configurations, about 3 h by the dry run's sizing)."""
    from hgresearch.paths import REPO_ROOT

    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["sweep", str(REPO_ROOT / "sweeps" / "paper-h100.yaml"),
                                      "--dummy-weights", "-o", str(out)])
    assert result.exit_code == 2, result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith("error: sweep paper-h100-dummy (13 server configurations) would "
                           "take about 3.0 h (limit 1.0 h)")
    assert "--allow-large" in line and not out.exists()


def test_bench_over_an_hour_is_refused_before_anything_is_sent(tmp_path):
    """The server address is a closed port: reaching it would be a different error."""
    result = CliRunner().invoke(app, [
        "bench", "--base-url", f"http://127.0.0.1:{free_port()}", "--model", "m", "--qps",
        "1,2", "--num-prompts", "100000", "-o", str(tmp_path / "runs")])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: benchmarking 100,000 requests at each of 2 "
                                    "rate(s) would take about 41.7 h (limit 1.0 h)")
    assert not (tmp_path / "runs").exists()
