"""One server configuration's runs, here: build the model if synthetic, start the server, warm
it up, and for each run scrape ``/metrics``, run one benchmark point with the measurement
client, scrape again and write the server's deltas beside the client's figures; then stop the
server (:func:`serve_entry`). A Ray task runs the same steps on its node
(:mod:`hgresearch.bench.sweep.ray`).

Every run gets its own folder (the run folder of :mod:`hgresearch.bench.runner` plus
``server_metrics.json`` and ``server.log``, the server's log during that run;
:mod:`hgresearch.data.runfolder` names and reads them). Each run's outcome is kept by the
:class:`SweepLog`, appended to ``<out_dir>/_sweep/status.jsonl``; a failed server start or
run is recorded there (and in ``error.json`` in the run folder) and the sweep goes on.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import socket
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hgresearch.bench.server.process import log_tail
from hgresearch.bench.server.vllm import ServerError, VLLMServer, warm_up
from hgresearch.bench.sweep.spec import (
    STATUS_FILE,
    RunPoint,
    Sweep,
    SweepServer,
    bench_config,
    qps_label,
)
from hgresearch.data.runfolder import (
    ERROR_FILE,
    REQUESTS_FILE,
    SERVER_LOG_FILE,
    is_finished,
    read_records,
    write_error,
    write_server_metrics,
)
from hgresearch.errors import InputError

#: Summary figures a run's status line carries (:meth:`SweepLog.note`).
SUMMARY_STATUS_KEYS = ("completed", "failed", "output_throughput", "p99_ttft_ms")


def node_identity() -> dict[str, Any]:
    """Where this code runs: host name, and inside a Ray task the node id and the resources
    the task holds (recorded with each run in ``_sweep/status.jsonl``)."""
    node: dict[str, Any] = {"hostname": socket.gethostname()}
    with contextlib.suppress(Exception):
        if "ray" in sys.modules:  # only where Ray is in use: never import it for a local run
            ray = sys.modules["ray"]
            if ray.is_initialized():
                context = ray.get_runtime_context()
                if context.worker.mode == ray.WORKER_MODE:
                    node["node_id"] = context.get_node_id()
                    node["resources"] = context.get_assigned_resources()
    return node


class SweepLog:
    """Each run's outcome: kept for the caller (``statuses``), appended to
    ``_sweep/status.jsonl`` (skipped runs are not) and echoed as one progress line."""

    def __init__(self, sweep: Sweep, total: int, echo: Callable[[str], None]) -> None:
        self.sweep = sweep
        self.total = total
        self.echo = echo
        self.statuses: list[dict[str, Any]] = []
        #: Server configurations started (here) or submitted (as Ray tasks) so far: what an
        #: interruption has to stop, and says it stopped.
        self.servers_started = 0

    def note(self, point: RunPoint, status: str, wall_s: float, error: str | None = None,
             summary: dict[str, Any] | None = None, node: dict[str, Any] | None = None
             ) -> None:
        """Record one run: ``ok``, ``failed`` (with ``error``) or ``skipped``; ``node``: where
        it ran (default: this machine, :func:`node_identity`)."""
        entry = self.sweep.servers[point.server_index]
        record = {"sweep": self.sweep.name, "model": entry.model_label,
                  "hardware": entry.hardware_label, "qps": qps_label(point.qps),
                  "repeat": point.repeat, "run_dir": str(point.run_dir), "status": status,
                  "wall_s": round(wall_s, 3), "error": error,
                  "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "node": node if node is not None else node_identity()}
        if summary is not None:
            record.update({k: summary.get(k) for k in SUMMARY_STATUS_KEYS})
        if status != "skipped":
            self._append(record)
        self.statuses.append(record)
        detail = ""
        if summary is not None:
            detail = (f": {summary.get('completed')} done, "
                      f"{summary.get('output_throughput', math.nan):.1f} output tok/s")
        if error:
            detail = f": {error.splitlines()[0]}"
        self.echo(f"[{len(self.statuses)}/{self.total}] {entry.model_label} "
                  f"{entry.hardware_label} qps={qps_label(point.qps)} rep={point.repeat} "
                  f"{status}{detail}")

    def count(self, status: str) -> int:
        """Runs recorded with ``status``."""
        return sum(s["status"] == status for s in self.statuses)

    def _append(self, record: dict[str, Any]) -> None:
        path = self.sweep.out_dir / STATUS_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, sort_keys=True, default=str) + "\n")


def record_error(run_dir: Path, stage: str, error: BaseException) -> str:
    """Write the run's ``error.json`` (which step failed, and how); returns the message."""
    text = str(error)
    write_error(run_dir, {
        "stage": stage, "error_type": type(error).__name__, "error": text,
        "traceback": traceback.format_exception_only(type(error), error)})
    return text


def server_dir(sweep: Sweep, entry: SweepServer) -> Path:
    """The folder of one server configuration's runs (and of its server log)."""
    return sweep.out_dir / entry.model_label / entry.hardware_label


def serve_entry(sweep: Sweep, entry: SweepServer, pending: list[RunPoint], log: SweepLog,
                progress: bool) -> None:
    """Build the model if synthetic, start the entry's server, warm it up and run ``pending``
    on it. A server that fails to start (or a model that cannot be built) fails every pending
    run that has no result or error yet; the sweep goes on with the next entry."""
    try:
        if entry.synth is not None:
            from hgresearch.bench.dummy_model import synth_model

            synth_model(entry.synth, entry.server.model)
        log.echo(f"starting server for {entry.model_label} on {entry.hardware_label} ...")
        log.servers_started += 1
        with VLLMServer(entry.server, server_dir(sweep, entry)) as server:
            log.echo(f"server healthy after {server.ready_after_s:.1f} s at {server.base_url}")
            if sweep.warmup_requests:
                warm_up(server.base_url, entry.server.name, requests=sweep.warmup_requests)
            for point in pending:
                _run_point(sweep, entry, point, server, log, progress)
    except (ServerError, OSError, InputError) as err:
        for point in pending:
            if not is_finished(point.run_dir) and not (point.run_dir / ERROR_FILE).exists():
                log.note(point, "failed", 0.0, record_error(point.run_dir, "server", err))


def _run_point(sweep: Sweep, entry: SweepServer, point: RunPoint, server: VLLMServer,
               log: SweepLog, progress: bool) -> None:
    """One run on a started server, recorded ``ok`` or ``failed``; a failed run does not stop
    the sweep (Ctrl-C and SIGTERM do); nor does a run whose requests all failed (its folder is
    kept, its status is ``failed``)."""
    from hgresearch.bench.preflight import every_request_failed, failure_text

    start = time.monotonic()
    if not server.alive():
        log.note(point, "failed", 0.0, record_error(
            point.run_dir, "server",
            ServerError("server died", server.log_path, log_tail(server.log_path))))
        return
    try:
        summary = _one_run(sweep, entry, point, server, progress)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as err:  # noqa: BLE001 - recorded, sweep goes on
        log.note(point, "failed", time.monotonic() - start,
                 record_error(point.run_dir, "run", err))
        return
    if every_request_failed(summary):  # kept, but not a result
        log.note(point, "failed", time.monotonic() - start, failure_text(summary),
                 summary=summary)
        return
    log.note(point, "ok", time.monotonic() - start, summary=summary)


def _one_run(sweep: Sweep, entry: SweepServer, point: RunPoint, server: VLLMServer,
             progress: bool) -> dict[str, Any]:
    """One benchmark point with the server-side cross-check around it."""
    from hgresearch.bench.runner import run_benchmark
    from hgresearch.bench.server.prometheus import cross_check, scrape, warmup_totals

    config = bench_config(sweep, entry, point.qps, server.base_url)
    # An unfinished folder (interrupted or failed earlier) is not a result: start it afresh,
    # so the server's counters before/after cover exactly this run.
    if point.run_dir.exists():
        shutil.rmtree(point.run_dir)
    point.run_dir.mkdir(parents=True)
    log_start = server.log_path.stat().st_size if server.log_path.exists() else 0
    before = scrape(server.base_url)
    info = server.info()
    info["sweep"] = {"name": sweep.name, "file": sweep.source, "qps": qps_label(point.qps),
                     "repeat": point.repeat, "repeats": sweep.repeats,
                     "synth_model": entry.synth}
    summary = run_benchmark(config, point.run_dir, resume=False, progress=progress,
                            server_info=info)
    after = scrape(server.base_url)
    excluded = warmup_totals(read_records(point.run_dir / REQUESTS_FILE))
    result = cross_check(summary, before, after, excluded=excluded)
    write_server_metrics(point.run_dir, result)
    _copy_log_slice(server.log_path, log_start, point.run_dir / SERVER_LOG_FILE)
    if result.get("disagreements"):
        raise_text = "; ".join(result["disagreements"])
        # Recorded, not fatal: the run's data stand, the flag says the counts differ.
        summary = {**summary, "server_disagreement": raise_text}
    return summary


def _copy_log_slice(log_path: Path, start: int, dest: Path) -> None:
    """The server log from byte ``start`` on (what it wrote during one run) into ``dest``."""
    try:
        with open(log_path, "rb") as src:
            src.seek(start)
            dest.write_bytes(src.read())
    except OSError:
        pass
