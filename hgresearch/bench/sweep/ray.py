"""The Ray executor path of a sweep: each server configuration is one Ray task on a node that
has its resources (:func:`task_options`); the task runs the local steps
(:func:`hgresearch.bench.sweep.local.serve_entry`) in a temporary folder and returns the run
folders, which the driver installs atomically in the same layout (docs/cluster.md). A task
that raises, whose node dies or whose server fails is submitted again for its unfinished runs;
any exit before the end cancels the outstanding tasks, and their servers stop.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hgresearch.bench.server.process import stop_child_sessions
from hgresearch.bench.sweep.local import (
    SUMMARY_STATUS_KEYS,
    SweepLog,
    node_identity,
    record_error,
    serve_entry,
    server_dir,
)
from hgresearch.bench.sweep.spec import RunPoint, Sweep, SweepServer, qps_label, run_points
from hgresearch.data.runfolder import (
    ERROR_FILE,
    SERVER_LOG_FILE,
    install_run_folder,
    is_finished,
    pack_run_folder,
)
from hgresearch.errors import InputError
from hgresearch.executors import Executor, connect_ray

#: Seconds a cancelled Ray task gets to stop its server before its worker is killed.
CANCEL_GRACE_S = 10.0


def task_options(entry: SweepServer) -> dict[str, Any]:
    """The resources a Ray task of ``entry`` requests (``ray.remote(...).options``).

    The sweep file's ``resources`` when given (``num_cpus``, ``num_gpus``, others custom);
    else a CPU-only entry (``gpu_name: CPU``) asks for one CPU, and an entry on N GPUs asks for
    ``num_gpus: N`` plus N of the custom resource named like the GPU (``RTX-4090``,
    ``H100-PCIe``), so a 2x RTX 4090 configuration never lands on an H100 node: start each
    node with ``ray start --resources '{"RTX-4090": 8}'`` (docs/cluster.md).
    """
    if entry.resources is not None:
        wanted = dict(entry.resources)
        options: dict[str, Any] = {"num_cpus": wanted.pop("num_cpus", 1.0),
                                   "num_gpus": wanted.pop("num_gpus", 0.0)}
        if wanted:
            options["resources"] = wanted
        return options
    if entry.gpu_name == "CPU":
        return {"num_cpus": 1.0, "num_gpus": 0.0}
    return {"num_cpus": 1.0, "num_gpus": float(entry.gpu_count),
            "resources": {entry.gpu_name: float(entry.gpu_count)}}


def _demand(options: dict[str, Any]) -> dict[str, float]:
    """Ray's names for what a task requests (``CPU``, ``GPU``, custom), zeros dropped."""
    demand = {"CPU": options.get("num_cpus", 0.0), "GPU": options.get("num_gpus", 0.0),
              **options.get("resources", {})}
    return {name: float(amount) for name, amount in demand.items() if amount}


def unplaceable(options: dict[str, Any], nodes: list[dict[str, float]]) -> str | None:
    """Why no node of ``nodes`` (each node's total resources) can run a task with
    ``options``, or None when one can: a task Ray cannot place would wait for ever."""
    demand = _demand(options)
    if any(all(node.get(name, 0.0) >= amount for name, amount in demand.items())
           for node in nodes):
        return None
    offered = sorted({name for node in nodes for name in node
                      if not name.startswith(("node:", "memory", "object_store"))})
    return (f"no node of the Ray cluster has {demand} (the cluster's resources: {offered}); "
            "start nodes with the GPU type as a custom resource, or set the entry's "
            "resources in the sweep file")


def serve_entry_task(sweep: Sweep, index: int, todo: list[tuple[str, int]]) -> dict[str, Any]:
    """A Ray task: serve entry ``index`` of ``sweep`` for the runs ``todo`` (QPS label,
    repeat) exactly as a local sweep does, in a temporary folder, and return the run folders
    (:func:`hgresearch.data.runfolder.pack_run_folder`), each run's status, the server log and the
    node. A cancelled task stops its server on the way out (the ``with VLLMServer`` block);
    a killed one takes it along by the server's parent-death signal."""
    # Ray runs its workers at nice 15 (below the raylet); the server and the client inherit it.
    # Measure at normal priority where the node allows it; config.json records what held.
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, 0)
    try:
        return _serve_entry_here(sweep, index, todo)
    finally:
        # a cancel that landed inside the server's start (between its fork and the moment the
        # `with VLLMServer` block holds it) leaves a server no block stops, in a worker that
        # lives on: stop every server this worker started and still has
        stop_child_sessions()


def _serve_entry_here(sweep: Sweep, index: int, todo: list[tuple[str, int]]
                      ) -> dict[str, Any]:
    """The body of :func:`serve_entry_task`, in this worker."""
    with tempfile.TemporaryDirectory(prefix="hgr-sweep-") as tmp:
        remote = dataclasses.replace(sweep, out_dir=Path(tmp))
        wanted = set(todo)
        points = [p for p in run_points(remote) if p.server_index == index
                  and (qps_label(p.qps), p.repeat) in wanted]
        entry = remote.servers[index]
        log = SweepLog(remote, len(points), print)
        serve_entry(remote, entry, points, log, progress=False)
        runs = []
        server_failed = False
        for status in log.statuses:
            run_dir = Path(status["run_dir"])
            if (run_dir / ERROR_FILE).is_file():
                stage = json.loads((run_dir / ERROR_FILE).read_text()).get("stage")
                server_failed |= stage == "server"
            runs.append({**{k: status.get(k) for k in ("qps", "repeat", "status", "wall_s",
                                                       "error")},
                         "summary": ({k: status.get(k) for k in SUMMARY_STATUS_KEYS}
                                     if "completed" in status else None),
                         "files": pack_run_folder(run_dir) if run_dir.is_dir() else {}})
        log_path = server_dir(remote, entry) / SERVER_LOG_FILE
        return {"node": node_identity(), "runs": runs, "server_failed": server_failed,
                "server_log": log_path.read_bytes() if log_path.is_file() else b""}


def run_on_ray(sweep: Sweep, todo: dict[int, list[RunPoint]], log: SweepLog,
                executor: Executor, retries: int) -> None:
    """Each server configuration of ``todo`` as one Ray task (:func:`serve_entry_task`) with
    its resources (:func:`task_options`); results installed as they come back. A task that
    raises, whose worker or node dies, or whose server fails is submitted again for its
    unfinished runs, up to ``retries`` times; then those runs are recorded failed. Any exit
    before the end (Ctrl-C, SIGTERM) cancels the outstanding tasks (:func:`_cancel`)."""
    ray = connect_ray(executor.address)
    remote = ray.remote(serve_entry_task)
    nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]
    outstanding: dict[Any, tuple[int, list[RunPoint], int]] = {}

    def submit(index: int, pending: list[RunPoint], attempt: int) -> None:
        entry = sweep.servers[index]
        options = task_options(entry)
        # Ray's own retries are off: the driver retries, so it can report each attempt.
        ref = remote.options(**options, max_retries=0, retry_exceptions=False,
                             name=f"sweep:{entry.model_label}:{entry.hardware_label}").remote(
            sweep, index, [(qps_label(p.qps), p.repeat) for p in pending])
        outstanding[ref] = (index, pending, attempt)
        log.servers_started += 1
        log.echo(f"submitted {entry.model_label} on {entry.hardware_label} "
                 f"({len(pending)} run(s), attempt {attempt + 1}/{retries + 1}, "
                 f"resources {_demand(options)})")

    for index, pending in todo.items():
        reason = unplaceable(task_options(sweep.servers[index]), nodes)
        if reason is None:
            submit(index, pending, 0)
            continue
        for point in pending:
            log.note(point, "failed", 0.0,
                     record_error(point.run_dir, "placement", InputError(reason)))
    try:
        while outstanding:
            ready, _ = ray.wait(list(outstanding), num_returns=1)
            index, pending, attempt = outstanding.pop(ready[0])
            entry = sweep.servers[index]
            try:
                result = ray.get(ready[0])
            except Exception as err:  # noqa: BLE001 - the task raised, or its node died
                cause = getattr(err, "cause", None) or err
                remaining = [p for p in pending if not is_finished(p.run_dir)]
                if attempt < retries:
                    log.echo(f"{entry.model_label} on {entry.hardware_label}: attempt "
                             f"{attempt + 1} failed ({type(cause).__name__}: "
                             f"{str(cause).splitlines()[0] if str(cause) else ''}); trying "
                             "again")
                    submit(index, remaining, attempt + 1)
                    continue
                for point in remaining:
                    log.note(point, "failed", 0.0, record_error(point.run_dir, "task", cause))
                continue
            again = result["server_failed"] and attempt < retries
            _install(sweep, entry, pending, result, log, keep_failed=not again)
            if again:
                remaining = [p for p in pending if not is_finished(p.run_dir)]
                log.echo(f"{entry.model_label} on {entry.hardware_label}: the server failed "
                         f"on {result['node'].get('hostname')}; trying again")
                submit(index, remaining, attempt + 1)
    finally:
        if outstanding:
            _cancel(ray, list(outstanding), log.echo)


def _install(sweep: Sweep, entry: SweepServer, pending: list[RunPoint],
             result: dict[str, Any], log: SweepLog, *, keep_failed: bool) -> None:
    """Install a task's run folders under ``sweep.out_dir`` and record each run with the node
    that ran it; failed runs only when ``keep_failed`` (else they are tried again)."""
    by_key = {(qps_label(p.qps), p.repeat): p for p in pending}
    if result["server_log"]:
        folder = server_dir(sweep, entry)
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / SERVER_LOG_FILE, "ab") as handle:
            handle.write(result["server_log"])
    for run in result["runs"]:
        point = by_key[(run["qps"], run["repeat"])]
        if run["status"] == "failed" and not keep_failed:
            continue
        if run["files"]:
            install_run_folder(point.run_dir, run["files"])
        log.note(point, run["status"], run["wall_s"] or 0.0, run["error"],
                 summary=run["summary"], node=result["node"])


def _cancel(ray: Any, refs: list[Any], echo: Callable[[str], None]) -> None:
    """Cancel outstanding tasks: first gently (the task gets ``KeyboardInterrupt`` and stops
    its server), then, after :data:`CANCEL_GRACE_S`, by killing the worker (its server gets
    SIGTERM from the kernel: the parent-death signal :class:`VLLMServer` sets)."""
    echo(f"cancelling {len(refs)} outstanding task(s); their servers stop")
    for ref in refs:
        with contextlib.suppress(Exception):
            ray.cancel(ref, force=False)
    with contextlib.suppress(Exception):
        ray.wait(refs, num_returns=len(refs), timeout=CANCEL_GRACE_S)
    for ref in refs:
        with contextlib.suppress(Exception):
            ray.cancel(ref, force=True)
