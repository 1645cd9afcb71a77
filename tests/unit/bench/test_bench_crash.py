"""``kill -9`` of ``hgresearch bench`` mid-run, then ``--resume``.

The server is the local streaming test double (no vLLM here). The benchmark runs as a real
subprocess of the CLI so the kill is a real SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from hgresearch.bench.run_summary import summarize_run_dir
from hgresearch.bench.server.mock import MockServerConfig, serve_in_thread
from hgresearch.paths import REPO_ROOT

REPO = REPO_ROOT


def _cli(url: str, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "hgresearch", "bench", "--base-url", url,
            "--model", "test-model", "--qps", "60", "--num-prompts", "150",
            "--workload", "random:input_len=8,output_len=12", "--no-telemetry",
            "--no-progress", "--idle-baseline-s", "0", "--warmup", "1", "-o", str(out), *extra]


def test_kill_minus_9_keeps_finished_records_and_resume_finishes(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    out = tmp_path / "sweep"
    jsonl = out / "qps60" / "requests.jsonl"
    with serve_in_thread(MockServerConfig(ttft_ms=10, itl_ms=4)) as url:
        proc = subprocess.Popen(_cli(url, out), env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if jsonl.exists() and jsonl.read_bytes().count(b"\n") >= 40:
                break
            if proc.poll() is not None:
                raise AssertionError(f"bench ended early: {proc.stderr.read().decode()}")
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL

        # Every line written before the kill is a complete record.
        raw = jsonl.read_bytes()
        lines = raw.split(b"\n")
        complete = [json.loads(line) for line in lines[:-1]]
        assert lines[-1] == b"" or len(complete) >= 40
        done_before = {r["index"] for r in complete if not r["warmup"]}
        assert 35 <= len(done_before) < 150
        assert not (out / "qps60" / "summary.json").exists()

        result = subprocess.run(_cli(url, out, "--resume"), env=env, capture_output=True,
                                text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    measured = [r for r in records if not r["warmup"]]
    indices = [r["index"] for r in measured]
    assert sorted(set(indices)) == list(range(150))
    # Finished requests were not sent again; only the ones in flight at the kill were lost.
    assert len(indices) == 150
    assert {r["segment"] for r in measured if r["index"] in done_before} == {0}
    assert {r["segment"] for r in measured if r["index"] not in done_before} == {1}

    summary = json.loads((out / "qps60" / "summary.json").read_text())
    assert summary["completed"] + summary["failed"] == 150 and summary["segments"] == 2
    offline = json.loads(json.dumps(summarize_run_dir(out / "qps60", write=False)))
    assert offline == summary
