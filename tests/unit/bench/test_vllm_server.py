"""Server lifecycle parts that need no vLLM: launch command, environment, refusals.

The real start/stop against vLLM for CPU is in tests/integration/test_e2e_vllm_cpu.py.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from hgresearch.bench.server.process import (
    child_setup,
    free_port,
    log_tail,
    parse_cpu_list,
    port_in_use,
)
from hgresearch.bench.server.vllm import (
    LAUNCHER_MODULE,
    ServerError,
    VLLMServer,
    VLLMServerConfig,
)
from hgresearch.errors import InputError


def test_command_uses_module_launcher_and_typed_options(tmp_path: Path) -> None:
    config = VLLMServerConfig(model="/m/tiny", served_model_name="tiny", tensor_parallel_size=2,
                              dtype="float32", max_model_len=1024, load_format="dummy", port=8123,
                              gpu_memory_utilization=0.9, extra_args=["--enforce-eager"],
                              python=sys.executable)
    cmd = VLLMServer(config, tmp_path).build_command()
    assert cmd[:3] == [sys.executable, "-m", LAUNCHER_MODULE]
    joined = " ".join(cmd)
    for part in ("--model /m/tiny", "--served-model-name tiny", "--port 8123",
                 "--tensor-parallel-size 2", "--dtype float32", "--max-model-len 1024",
                 "--load-format dummy", "--gpu-memory-utilization 0.9"):
        assert part in joined
    assert cmd[-1] == "--enforce-eager"


def test_env_is_offline_with_caches_in_the_run_folder(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    server = VLLMServer(VLLMServerConfig(model="m", cuda_visible_devices="1,2",
                                         env={"VLLM_LOGGING_LEVEL": "DEBUG"}), tmp_path)
    server.distribution = {"distribution": "vllm-cpu"}
    env = server.build_env()
    assert env["HF_HUB_OFFLINE"] == "1" and env["VLLM_NO_USAGE_STATS"] == "1"
    assert env["CUDA_VISIBLE_DEVICES"] == "1,2" and env["VLLM_LOGGING_LEVEL"] == "DEBUG"
    for key in ("TMPDIR", "XDG_CACHE_HOME", "VLLM_CACHE_ROOT"):
        assert env[key].startswith(str(server.private_dir))
    assert len(env["TMPDIR"]) < 60  # ZeroMQ socket paths must stay under 107 bytes
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert "PYTHONPATH" not in env
    shutil.rmtree(server.private_dir)


def test_occupied_port_is_refused_before_launch(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert port_in_use("127.0.0.1", port)
        server = VLLMServer(VLLMServerConfig(model=str(tmp_path), port=port), tmp_path / "logs")
        with pytest.raises(ServerError, match=f"port 127.0.0.1:{port} is already in use"):
            server.start()
        assert server.process is None


def test_missing_model_folder_is_a_clear_error(tmp_path: Path) -> None:
    port = free_port()
    with pytest.raises(ServerError, match="does not exist"):
        VLLMServer(VLLMServerConfig(model=str(tmp_path / "nope"), port=port), tmp_path).start()


def test_interpreter_without_vllm_is_a_clear_error(tmp_path: Path) -> None:
    """Runs on every machine, GPU machines with vLLM installed included: the interpreter given
    is this Python started isolated and without site-packages (``-I -S``), a real interpreter
    that cannot see any installed vLLM."""
    python = tmp_path / "python-without-site-packages"
    python.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -I -S \"$@\"\n")
    python.chmod(0o755)
    with pytest.raises(ServerError, match="vLLM is not installed"):
        VLLMServer(VLLMServerConfig(model=str(tmp_path), port=free_port(), python=str(python)),
                   tmp_path).start()


def test_log_tail_returns_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert log_tail(log, 3) == "line 97\nline 98\nline 99"
    assert log_tail(tmp_path / "missing.log") == ""


def test_config_from_dict_rejects_unknown_keys() -> None:
    with pytest.raises(ValueError, match="unknown server option"):
        VLLMServerConfig.from_dict({"model": "m", "tensor_parallel": 2})
    assert VLLMServerConfig.from_dict({"model": "a/b/"}).name == "b"


def test_cpu_split_is_opt_in_and_leaves_the_last_core_to_the_api_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    assert VLLMServer(VLLMServerConfig(model="m"), tmp_path).cpu_split() is None
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    bind, cores = VLLMServer(VLLMServerConfig(model="m", cpu_split=True), tmp_path).cpu_split()
    assert (bind, cores) == ("0-2", {3})
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "0")  # the user's choice wins
    assert VLLMServer(VLLMServerConfig(model="m", cpu_split=True), tmp_path).cpu_split() is None


def test_occupied_port_names_the_server_that_answers_there(tmp_path: Path) -> None:
    """A stand-in HTTP server answers /v1/models like a vLLM server left running."""
    import http.server
    import json
    import threading

    class Models(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = json.dumps({"data": [{"id": "left-over-model"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Models)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        server = VLLMServer(VLLMServerConfig(model=str(tmp_path), port=httpd.server_port),
                            tmp_path / "logs")
        with pytest.raises(ServerError, match=r"serving \['left-over-model'\]"):
            server.start()
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_child_setup_pins_and_lowers_the_launched_process() -> None:
    """The same preexec path the server launch uses, on a trivial Python child: it reports the
    cores and nice the kernel gave it (and its autogroup's nice where the kernel has them)."""
    core = max(os.sched_getaffinity(0))
    code = ("import os, json, pathlib\n"
            "g = pathlib.Path('/proc/self/autogroup')\n"
            "print(json.dumps({'cores': sorted(os.sched_getaffinity(0)), 'nice': os.nice(0),"
            " 'group': g.read_text() if g.exists() else None}))")
    before = os.nice(0)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, start_new_session=True,
                          preexec_fn=child_setup({core}, 7))
    seen = json.loads(done.stdout)
    assert seen["cores"] == [core]
    assert seen["nice"] == before + 7
    if seen["group"] is not None:
        assert seen["group"].strip().endswith("nice 7")
    assert os.nice(0) == before  # the parent keeps its own priority


def test_pinned_cpu_server_binds_openmp_threads_to_its_cores(tmp_path: Path) -> None:
    core = max(os.sched_getaffinity(0))
    server = VLLMServer(VLLMServerConfig(model="m", cpu_affinity=str(core), nice=5,
                                         env={"OMP_WAIT_POLICY": "PASSIVE"}), tmp_path)
    server.distribution = {"distribution": "vllm-cpu"}
    env = server.build_env()
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == str(core)
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"
    explicit = VLLMServer(VLLMServerConfig(model="m", cpu_affinity=[core],
                                           env={"VLLM_CPU_OMP_THREADS_BIND": "all"}), tmp_path)
    explicit.distribution = {"distribution": "vllm-cpu"}
    assert explicit.build_env()["VLLM_CPU_OMP_THREADS_BIND"] == "all"
    shutil.rmtree(server.private_dir)
    shutil.rmtree(explicit.private_dir)


@pytest.mark.parametrize(("text", "cores"), [("0", {0}), ("0-2", {0, 1, 2}), ("0,2-3", {0, 2, 3}),
                                             ([1, 3], {1, 3}), (2, {2})])
def test_cpu_lists_parse(text: object, cores: set[int]) -> None:
    assert parse_cpu_list(text) == cores


@pytest.mark.parametrize(("options", "message"), [
    ({"cpu_affinity": "a-b"}, "field 'cpu_affinity': expected a core list"),
    ({"cpu_affinity": [10_000]}, "field 'cpu_affinity': cores .* not all among the usable"),
    ({"nice": 25}, "field 'nice': nice must be an integer 0..19"),
    ({"nice": -1}, "field 'nice': nice must be an integer 0..19"),
])
def test_bad_affinity_or_nice_is_refused_when_read(options: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        VLLMServerConfig.from_dict({"model": "m", **options})


def test_serve_refuses_a_core_it_cannot_use_before_launching(tmp_path: Path) -> None:
    """`hgresearch serve --cpu-affinity` with a core this machine lacks: one line, exit 2, no
    server started (nothing is written to the log folder)."""
    from typer.testing import CliRunner

    from hgresearch.cli import app

    result = CliRunner().invoke(app, ["serve", str(tmp_path), "--cpu-affinity", "10000",
                                      "--log-dir", str(tmp_path / "logs")])
    assert result.exit_code == 2
    assert "field 'cpu_affinity'" in result.output
    assert not (tmp_path / "logs").exists()
