"""Ctrl-C during `hgresearch reproduce` (issue 20, item 1): the notebook's kernel is stopped with
the run, and the command says `error: interrupted` (exit 130) — no traceback of the kernel's
closed socket on stderr, which it printed before its log was kept out."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

import pytest
from signal_fixtures import sigint_as_ctrl_c

from hgresearch.paths import REPO_ROOT

pytestmark = pytest.mark.slow


def test_ctrl_c_during_reproduce_stops_the_kernel_and_prints_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "hgresearch", "reproduce", "--notebook", "04",
         "--build-dir", str(tmp_path / "build"), "--paper-dir", str(tmp_path / "paper")],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        preexec_fn=sigint_as_ctrl_c)
    seen = b""
    try:
        assert process.stdout is not None
        while b"04_models.ipynb ..." not in seen:
            ready, _, _ = select.select([process.stdout], [], [], 300)
            assert ready, seen
            chunk = os.read(process.stdout.fileno(), 4096)
            assert chunk, seen
            seen += chunk
        kernels: list[str] = []
        for _ in range(600):  # until the notebook's kernel runs (its child process)
            kernels = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True,
                                     text=True).stdout.split()
            if kernels:
                break
            time.sleep(0.1)
        assert kernels, "no kernel started"
        time.sleep(3)  # let the kernel get into the notebook's cells (any point will do)
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    output = (seen + rest).decode()
    assert process.returncode == 130, output
    assert output.rstrip().splitlines()[-1] == "error: interrupted"
    assert "Traceback" not in output
    for _ in range(100):
        if not any(os.path.exists(f"/proc/{pid}") for pid in kernels):
            break
        time.sleep(0.1)
    assert not any(os.path.exists(f"/proc/{pid}") for pid in kernels), "kernel left running"
