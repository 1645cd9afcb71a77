"""Ctrl-C stops a long simulation at once (issue 20, item 1): `hgresearch sim fleet` in its own
process shows a progress bar, gets SIGINT mid-run and exits 130 with one line, its memory
freed with the process. The fleet file gives its replica's step time, so nothing is
calibrated first."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys

from signal_fixtures import sigint_as_ctrl_c

from hgresearch.paths import REPO_ROOT

FLEET = """\
replicas:
  - config: DeepSeek-R1-Distill-Qwen-14B on 1x H100-PCIe
    step_time: {c0_s: 0.02, c_prefill_s_per_token: 2.0e-5, c_decode_s_per_seq: 2.0e-4}
"""


def test_ctrl_c_during_sim_fleet_exits_130_in_one_line(tmp_path):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "hgresearch", "sim", "fleet", str(fleet), "--qps", "20",
         "--num-prompts", "50000", "--workload",
         "random:input_len=16,output_len=512"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, preexec_fn=sigint_as_ctrl_c)
    seen = b""
    try:
        assert process.stderr is not None
        while b"simulated requests" not in seen:  # the progress bar: the simulation runs
            ready, _, _ = select.select([process.stderr], [], [], 120)
            assert ready, f"no progress bar; stderr so far: {seen!r}"
            chunk = os.read(process.stderr.fileno(), 4096)
            assert chunk, f"exited before its progress bar: {seen!r}"
            seen += chunk
        process.send_signal(signal.SIGINT)
        _, rest = process.communicate(timeout=30)  # stops within seconds, or this raises
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130
    lines = (seen + rest).decode().replace("\r", "\n").splitlines()
    assert lines[-1] == "error: interrupted"
    assert not any("Traceback" in line for line in lines)
