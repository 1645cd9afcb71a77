"""``run_sweep``: every run of a sweep, on either executor — here, one server configuration
after another (:mod:`hgresearch.bench.sweep.local`), or each configuration as a Ray task
(:mod:`hgresearch.bench.sweep.ray`) — with the same run folders and status records, so a sweep
started on one executor can be resumed on the other.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hgresearch.bench.server.process import sigterm_as_exit
from hgresearch.bench.sweep.local import SweepLog, serve_entry
from hgresearch.bench.sweep.ray import run_on_ray
from hgresearch.bench.sweep.spec import (
    SWEEP_COPY,
    RunPoint,
    Sweep,
    check_before_start,
    run_points,
)
from hgresearch.data.runfolder import ERROR_FILE, SERVER_LOG_FILE, is_finished
from hgresearch.errors import InputError
from hgresearch.executors import DEFAULT_RETRIES, Executor, ExecutorKind, connect_ray


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep, after its servers (or Ray tasks) were stopped: what had happened
    by then, so the message says so (:meth:`message`)."""

    def __init__(self, servers_started: int, runs_finished: int) -> None:
        super().__init__()
        self.servers_started = servers_started
        self.runs_finished = runs_finished

    def message(self) -> str:
        """One line: nothing started, or the servers stopped and how to continue."""
        if not self.servers_started:
            return "interrupted before any server started; nothing to resume"
        return (f"interrupted; {self.servers_started} server configuration(s) started and "
                f"stopped, {self.runs_finished} run(s) finished and kept. Continue with "
                "--resume.")


def run_sweep(sweep: Sweep, *, resume: bool = False, echo: Callable[[str], None] = print,
              progress: bool = False, executor: Executor | None = None,
              retries: int = DEFAULT_RETRIES) -> list[dict[str, Any]]:
    """Run every point of ``sweep``; returns one status per run (what ``_sweep/status.jsonl``
    records).

    Without ``resume``, a run folder that already holds results is an error (nothing is
    overwritten). A ``KeyboardInterrupt`` (Ctrl-C) or SIGTERM stops the sweep after stopping
    the server (on Ray: after cancelling the outstanding tasks, whose servers stop); finished
    runs stay, and ``resume=True`` continues from there, whichever executor made them.

    ``executor``: ``local`` (default: one server after another here) or ``ray`` (each server
    configuration a Ray task, :func:`~hgresearch.bench.sweep.ray.run_on_ray`; a task that
    raises, whose node dies or whose server fails is tried again up to ``retries`` times, then
    its runs are reported failed).

    Steps: check the model folders and the runs' files here (on Ray: reach the cluster)
    (:func:`~hgresearch.bench.sweep.spec.check_before_start`; the sweep file itself was
    checked in full when it was read), refuse to overwrite (:func:`_refuse_started_runs`; a
    folder holding only the error of a failed attempt is cleared and run again), keep a copy
    of the sweep file (:func:`_prepare_out_dir`), then per server entry skip finished runs and
    serve the rest (:func:`~hgresearch.bench.sweep.local.serve_entry`), and print the tally.
    Ctrl-C raises :class:`SweepInterrupted` once everything started is stopped.
    """
    executor = executor or Executor()
    if executor.kind == ExecutorKind.PROCESS:
        raise InputError("a sweep runs on the local or the ray executor (servers need their "
                         "own GPUs and ports, not a process pool)", field="executor")
    if retries < 0:
        raise InputError(f"expected a non-negative number of retries, got {retries}",
                         field="retries")
    if executor.kind == ExecutorKind.RAY:
        # the model folders and data files are the nodes' (not checked here); an unreachable
        # cluster is an error before anything is written
        connect_ray(executor.address)
    else:
        check_before_start(sweep)
    points = run_points(sweep)
    if not resume:
        _refuse_started_runs(points)
    for point in points:  # a failed attempt's error is no result: this attempt records anew
        if point.run_dir.is_dir() and holds_only_errors(point.run_dir):
            shutil.rmtree(point.run_dir)
    _prepare_out_dir(sweep)
    log = SweepLog(sweep, len(points), echo)

    def pending_of(index: int) -> list[RunPoint]:
        """The entry's runs to do; the finished ones are noted as skipped."""
        mine = [p for p in points if p.server_index == index]
        pending = [p for p in mine if not (resume and is_finished(p.run_dir))]
        for p in mine:
            if p not in pending:
                log.note(p, "skipped", 0.0)
        return pending

    try:
        with sigterm_as_exit():
            if executor.kind == ExecutorKind.RAY:
                todo = {index: pending_of(index) for index in range(len(sweep.servers))}
                run_on_ray(sweep, {i: p for i, p in todo.items() if p}, log, executor, retries)
            else:
                for index, entry in enumerate(sweep.servers):
                    pending = pending_of(index)
                    if pending:
                        serve_entry(sweep, entry, pending, log, progress)
    except KeyboardInterrupt:
        raise SweepInterrupted(log.servers_started, log.count("ok")) from None
    echo(f"sweep {sweep.name}: {log.count('ok')} ok, {log.count('failed')} failed, "
         f"{log.count('skipped')} skipped; runs in {sweep.out_dir}")
    return log.statuses


#: What a run folder holds when its run never started (its server failed to start, the task
#: could not be placed): no result, so it is run again without --resume.
ERROR_ONLY_FILES = frozenset({ERROR_FILE, SERVER_LOG_FILE})


def holds_only_errors(run_dir: Path) -> bool:
    """True when ``run_dir`` holds nothing but a failed attempt's ``error.json`` (and the
    server log beside it): no request was recorded."""
    names = {p.name for p in run_dir.iterdir()}
    return bool(names) and names <= ERROR_ONLY_FILES


def _refuse_started_runs(points: list[RunPoint]) -> None:
    """FileExistsError when a run folder of the sweep already holds results (a folder holding
    only a failed attempt's error is not a result: it is run again)."""
    started = [p.run_dir for p in points if p.run_dir.exists() and any(p.run_dir.iterdir())
               and not holds_only_errors(p.run_dir)]
    if started:
        raise FileExistsError(f"{len(started)} run folder(s) already hold results, e.g. "
                              f"{started[0]}; use --resume to continue, or another out_dir")


def _prepare_out_dir(sweep: Sweep) -> None:
    """Create ``out_dir`` and keep the sweep file used beside the runs (``_sweep/sweep.yaml``)."""
    sweep.out_dir.mkdir(parents=True, exist_ok=True)
    if sweep.source and Path(sweep.source).is_file():
        (sweep.out_dir / SWEEP_COPY).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(sweep.source, sweep.out_dir / SWEEP_COPY)
