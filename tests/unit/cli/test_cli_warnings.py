"""A warning during a command is one line `warning: ...` on stderr, not Python's
`file:line: UserWarning: ...` with a source line (issue 20, item 6: NVML absent)."""

from __future__ import annotations

import subprocess
import sys
import time
import warnings

from typer.testing import CliRunner

from hgresearch.bench.server.process import free_port, port_in_use
from hgresearch.cli import build_app
from hgresearch.paths import REPO_ROOT


def test_a_warning_is_one_line_through_the_one_handler():
    def command() -> None:
        """Warn once."""
        warnings.warn("telemetry unavailable (NVML not found); energy fields will be missing",
                      stacklevel=2)

    app = build_app((("warn", command),), {})
    result = CliRunner().invoke(app, [])
    assert result.exit_code == 0, result.output
    assert result.output == ("warning: telemetry unavailable (NVML not found); energy fields "
                             "will be missing\n")
    assert warnings.showwarning.__name__ != "show_warning_line"  # restored afterwards


def test_bench_without_nvml_warns_in_one_line(tmp_path):
    """A real `hgresearch bench` against the package's streaming test server (a TEST DOUBLE
    for vLLM) on this machine, which has no NVML: telemetry is asked for and unavailable."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "hgresearch.bench.server.mock", "--port",
                               str(port), "--ttft-ms", "1", "--itl-ms", "1"], cwd=REPO_ROOT)
    try:
        for _ in range(300):  # until it listens (a few seconds at most)
            if port_in_use("127.0.0.1", port):
                break
            time.sleep(0.1)
        result = subprocess.run(
            [sys.executable, "-m", "hgresearch", "bench", "--base-url",
             f"http://127.0.0.1:{port}", "--model", "m", "--qps", "inf", "--num-prompts", "2",
             "--workload", "random:input_len=4,output_len=2", "-o", str(tmp_path / "runs")],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "UserWarning" not in result.stderr
    telemetry = [line for line in result.stderr.splitlines() if "telemetry unavailable" in line]
    assert telemetry and all(line.startswith("warning: ") for line in telemetry), result.stderr
