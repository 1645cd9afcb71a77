"""Sweeps on a Ray cluster: placement by resource, the same run folders as a local sweep,
resume across executors, retries after injected task failures, Ctrl-C leaving no server.

The servers are ``engine: mock``: the package's streaming test server (a TEST DOUBLE for vLLM,
which cannot run here) as a real child process of the Ray worker, so the sweep, its client,
the process handling and the cancellation run for real. One local Ray cluster per module
(``ray_cluster`` in conftest.py: 2 CPUs, custom resources GPU-A: 2 and GPU-B: 1)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from signal_fixtures import sigint_as_ctrl_c

from hgresearch.bench.server.process import free_port, port_in_use
from hgresearch.bench.sweep import (
    STATUS_FILE,
    SweepServer,
    configuration_durations_s,
    load_sweep,
    makespan_s,
    parse_sweep,
    run_sweep,
    task_options,
    unplaceable,
)
from hgresearch.data.runfolder import REQUESTS_FILE, is_finished, read_records, read_summary
from hgresearch.errors import InputError
from hgresearch.executors import Executor, ExecutorKind
from hgresearch.paths import REPO_ROOT

pytestmark = pytest.mark.ray
RAY = Executor(ExecutorKind.RAY)


def _server(label: str, resources: dict | None = None, **server: object) -> dict:
    entry = {"label": label, "server": {"model": f"mock-{label}", "engine": "mock",
                                        "port": free_port(),
                                        "extra_args": ["--ttft-ms", "2", "--itl-ms", "1"],
                                        **server}}
    if resources is not None:
        entry["resources"] = resources
    return entry


def _spec(out_dir: Path, servers: list[dict], **top: object) -> dict:
    return {"name": "ray-test", "out_dir": str(out_dir), "qps": ["inf"], "repeats": 2,
            "warmup_requests": 1,
            "bench": {"num_prompts": 4, "telemetry": False, "idle_baseline_s": 0, "seed": 7,
                      "workload": {"kind": "random", "input_len": 8, "output_len": 4}},
            "servers": servers, **top}


def _stable(record: dict) -> dict:
    """A request record without its timings (monotonic clocks differ between runs)."""
    return {k: v for k, v in record.items()
            if not k.endswith(("_ns", "_ms")) and k not in ("event_t_ns",)}


def _records(run_dir: Path) -> list[dict]:
    """The run's request records without timings, by request (completion order varies)."""
    return sorted((_stable(r) for r in read_records(run_dir / REQUESTS_FILE)),
                  key=lambda r: (r["warmup"], r["index"]))


def _status_lines(out_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (out_dir / STATUS_FILE).read_text().splitlines()]


# -- without a cluster ---------------------------------------------------------------------

def test_task_resources_follow_the_gpu_type_or_the_sweep_file() -> None:
    sweep = parse_sweep({"name": "t", "out_dir": "o", "qps": [1], "servers": [
        {"gpu_name": "RTX 4090", "gpu_count": 2, "server": {"model": "m", "port": 1}},
        {"gpu_name": "CPU", "server": {"model": "m", "port": 1}},
        {"server": {"model": "m", "port": 1}, "resources": {"num_gpus": 1, "GPU-B": 1}}]})
    rtx, cpu, named = (task_options(entry) for entry in sweep.servers)
    assert rtx == {"num_cpus": 1.0, "num_gpus": 2.0, "resources": {"RTX-4090": 2.0}}
    assert cpu == {"num_cpus": 1.0, "num_gpus": 0.0}
    assert named == {"num_cpus": 1.0, "num_gpus": 1.0, "resources": {"GPU-B": 1.0}}
    node = {"CPU": 16.0, "GPU": 8.0, "RTX-4090": 8.0}
    assert unplaceable(rtx, [node]) is None
    assert "H100-PCIe" in unplaceable(task_options(SweepServer(
        server=sweep.servers[0].server, gpu_name="H100-PCIe")), [node])


@pytest.mark.parametrize("resources, field", [
    ([1], "servers[0].resources"), ({"GPU-A": -1}, "servers[0].resources.GPU-A"),
    ({"GPU-A": "two"}, "servers[0].resources.GPU-A")])
def test_bad_resources_name_file_and_field(tmp_path: Path, resources, field) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_spec(tmp_path, [_server("a", resources)])))
    with pytest.raises(InputError) as err:
        load_sweep(path)
    assert err.value.field == field and err.value.file == str(path)


def test_sizing_adds_start_warmup_and_arrivals_per_configuration(tmp_path: Path) -> None:
    sweep = parse_sweep(_spec(tmp_path, [_server("a"), _server("b"), _server("c")],
                              qps=[1, 2, "inf"], repeats=1))
    durations = configuration_durations_s(sweep, server_start_s=100, warmup_s=10, run_tail_s=1)
    # 100 + 10 + (4/1 + 1) + (4/2 + 1) + (0 + 1)
    assert durations == [119.0] * 3
    assert makespan_s(durations, 1) == 357.0 and makespan_s(durations, 2) == 238.0
    assert makespan_s(durations, 5) == 119.0


def test_a_returned_run_folder_is_installed_whole_and_replaces_an_unfinished_one(
        tmp_path: Path) -> None:
    from hgresearch.data.runfolder import install_run_folder, pack_run_folder

    source = tmp_path / "remote" / "qps1-rep0"
    (source / "sub").mkdir(parents=True)
    (source / "summary.json").write_text("{}")
    (source / "sub" / "x.txt").write_bytes(b"\x00data")
    target = tmp_path / "out" / "qps1-rep0"
    target.mkdir(parents=True)
    (target / "requests.jsonl").write_text("partial\n")  # an interrupted earlier attempt
    install_run_folder(target, pack_run_folder(source))
    assert sorted(p.relative_to(target).as_posix() for p in target.rglob("*")) == \
        ["sub", "sub/x.txt", "summary.json"]
    assert (target / "sub" / "x.txt").read_bytes() == b"\x00data"
    assert [p.name for p in target.parent.iterdir()] == ["qps1-rep0"]  # no staging left
    with pytest.raises(InputError, match="leaves the run folder"):
        install_run_folder(tmp_path / "out" / "other", {"../escape.txt": b""})
    assert not (tmp_path / "out" / "escape.txt").exists()
    assert [p.name for p in target.parent.iterdir()] == ["qps1-rep0"]


def test_a_sweep_refuses_the_process_executor(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="local or the ray executor"):
        run_sweep(parse_sweep(_spec(tmp_path, [_server("a")])),
                  executor=Executor(ExecutorKind.PROCESS))


# -- on a local Ray cluster ----------------------------------------------------------------

def test_mock_engine_is_a_real_process_and_the_sweep_writes_run_folders(tmp_path) -> None:
    """A local sweep with the mock engine: real child process, warm-up, run folders."""
    out = tmp_path / "out"
    statuses = run_sweep(parse_sweep(_spec(out, [_server("a")])), echo=lambda _: None)
    assert [s["status"] for s in statuses] == ["ok", "ok"], statuses
    log = (out / "a" / "1xCPU" / "server.log").read_text()
    assert "hgresearch.bench.server.mock" in log and "own session" in log
    assert read_summary(out / "a" / "1xCPU" / "qpsinf-rep0")["completed"] == 4


def test_ray_sweep_writes_the_same_run_folders_as_a_local_sweep_and_resumes_across(
        ray_cluster, tmp_path: Path) -> None:
    servers = [_server("a", {"GPU-A": 1}), _server("b", {"GPU-B": 1})]
    local_out, ray_out = tmp_path / "local", tmp_path / "ray"
    local = run_sweep(parse_sweep(_spec(local_out, servers)), echo=lambda _: None)
    messages: list[str] = []
    remote = run_sweep(parse_sweep(_spec(ray_out, servers)), echo=messages.append,
                       executor=RAY)
    assert [s["status"] for s in local] == ["ok"] * 4
    assert sorted(s["status"] for s in remote) == ["ok"] * 4, messages
    for status in local:
        run = Path(status["run_dir"]).relative_to(local_out)
        mine, theirs = local_out / run, ray_out / run
        assert sorted(p.name for p in mine.iterdir()) == sorted(p.name for p in theirs.iterdir())
        assert _records(mine) == _records(theirs)
        assert read_summary(mine)["completed"] == read_summary(theirs)["completed"] == 4
    # No staging folders left; the server log of each configuration came back.
    assert not list(ray_out.rglob(".qps*"))
    assert "own session" in (ray_out / "b" / "1xCPU" / "server.log").read_text()
    # Placement: the status log names the node and the resources each task held.
    by_model = {s["model"]: s for s in _status_lines(ray_out)}
    assert by_model["b"]["node"]["resources"].get("GPU-B") == 1.0
    assert by_model["a"]["node"]["resources"].get("GPU-A") == 1.0
    assert by_model["a"]["node"]["node_id"]
    # The server ran at normal priority, not at Ray's worker niceness (15), where the node
    # allows lowering it (root here; elsewhere config.json records what held).
    nice = json.loads((ray_out / "a" / "1xCPU" / "qpsinf-rep0" / "config.json").read_text())[
        "server_info"]["process_affinity"]["nice"]
    assert nice == 0 if os.geteuid() == 0 else nice >= 0

    # Resume across executors: local skips what Ray made; Ray redoes only an unfinished run.
    again = run_sweep(parse_sweep(_spec(ray_out, servers)), resume=True, echo=lambda _: None)
    assert [s["status"] for s in again] == ["skipped"] * 4
    (local_out / "b" / "1xCPU" / "qpsinf-rep1" / "summary.json").unlink()
    redo = run_sweep(parse_sweep(_spec(local_out, servers)), resume=True, echo=lambda _: None,
                     executor=RAY)
    assert sorted(s["status"] for s in redo) == ["ok", "skipped", "skipped", "skipped"]
    assert is_finished(local_out / "b" / "1xCPU" / "qpsinf-rep1")
    assert _status_lines(local_out)[-1]["node"]["resources"] == {"CPU": 1.0, "GPU-B": 1.0}


def test_a_configuration_no_node_can_hold_is_reported_not_left_waiting(
        ray_cluster, tmp_path: Path) -> None:
    """Checked against the nodes' resources before submitting: a task Ray cannot place would
    wait for ever."""
    messages: list[str] = []
    statuses = run_sweep(parse_sweep(_spec(tmp_path / "out", [_server("c", {"GPU-C": 1})])),
                         echo=messages.append, executor=RAY)
    assert not any(m.startswith("submitted") for m in messages), messages
    assert [s["status"] for s in statuses] == ["failed"] * 2
    assert "no node of the Ray cluster has" in statuses[0]["error"]
    error = json.loads((tmp_path / "out" / "c" / "1xCPU" / "qpsinf-rep0" / "error.json")
                       .read_text())
    assert error["stage"] == "placement"


def _crashing_python(folder: Path, name: str, *, always: bool) -> tuple[Path, Path]:
    """An interpreter stand-in that kills its parent, the Ray worker running the task (as a
    node dying would), always or only the first time, then runs the real interpreter."""
    counter, marker = folder / f"{name}.count", folder / f"{name}.crashed"
    script = folder / f"{name}.sh"
    condition = "true" if always else f'[ ! -e "{marker}" ]'
    script.write_text(f'#!/bin/sh\necho x >> "{counter}"\nif {condition}; then\n'
                      f'  touch "{marker}"; kill -9 $PPID; sleep 30; exit 1\nfi\n'
                      f'exec "{sys.executable}" "$@"\n')
    script.chmod(0o755)
    return script, counter


def test_failed_tasks_are_retried_then_reported_and_the_others_go_on(
        ray_cluster, tmp_path: Path) -> None:
    always, always_count = _crashing_python(tmp_path, "always", always=True)
    once, once_count = _crashing_python(tmp_path, "once", always=False)
    servers = [_server("ok"), _server("dies", python=str(always)),
               _server("dies-once", python=str(once)),
               _server("bad-server", extra_args=["--no-such-option"])]
    messages: list[str] = []
    statuses = run_sweep(parse_sweep(_spec(tmp_path / "out", servers, repeats=1)),
                         echo=messages.append, executor=RAY, retries=1)
    by_model = {s["model"]: s for s in statuses}
    assert by_model["ok"]["status"] == "ok"
    assert by_model["dies-once"]["status"] == "ok", messages  # survived one injected failure
    assert len(once_count.read_text().split()) == 2
    assert by_model["dies"]["status"] == "failed"
    assert len(always_count.read_text().split()) == 2  # tried, and tried once more
    assert by_model["bad-server"]["status"] == "failed"
    assert "exited with code 2" in by_model["bad-server"]["error"]
    error = json.loads((tmp_path / "out" / "dies" / "1xCPU" / "qpsinf-rep0" / "error.json")
                       .read_text())
    assert error["stage"] == "task"
    assert sum("trying again" in m for m in messages) == 3


def _pids_of(port: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"hgresearch.bench.server.mock" in cmdline and str(port).encode() in cmdline:
            pids.append(int(entry.name))
    return pids


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_ctrl_c_cancels_the_tasks_and_leaves_no_server_process(ray_cluster,
                                                              tmp_path: Path) -> None:
    """`hgresearch sweep --executor ray` in its own process, joined to the test's cluster; a
    slow run (4 requests at 0.05 req/s) is interrupted once its server is up."""
    server = _server("slow", {"GPU-A": 1})
    port = server["server"]["port"]
    sweep_file = tmp_path / "slow.yaml"
    sweep_file.write_text(yaml.safe_dump(_spec(tmp_path / "out", [server], qps=[0.05])))
    address = ray_cluster.get_runtime_context().gcs_address
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    driver = subprocess.Popen([sys.executable, "-m", "hgresearch", "sweep", str(sweep_file),
                               "--executor", "ray", "--address", address],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                              text=True, preexec_fn=sigint_as_ctrl_c)
    try:
        deadline = time.monotonic() + 90
        while not (pids := _pids_of(port)) and time.monotonic() < deadline:
            assert driver.poll() is None, driver.communicate()[0]
            time.sleep(0.5)
        assert pids, "the mock server never started"
        # Interrupt once the server listens (not after a fixed sleep: under load the task could
        # still be inside the server's start; a Ctrl-C there is covered too, by the task's
        # stop_child_sessions, see test_a_server_no_block_holds_is_stopped_with_its_session).
        while not port_in_use("127.0.0.1", port) and time.monotonic() < deadline:
            assert driver.poll() is None, driver.communicate()[0]
            time.sleep(0.2)
        driver.send_signal(signal.SIGINT)
        output = driver.communicate(timeout=60)[0]
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 130, output
    assert "cancelling 1 outstanding task" in output
    deadline = time.monotonic() + 20
    while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not any(_running(pid) for pid in pids), f"server process(es) {pids} left running"
