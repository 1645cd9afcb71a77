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
from hgresearch.bench.sweep.spec import SWEEP_COPY, RunPoint, Sweep, run_points
from hgresearch.data.runfolder import is_finished
from hgresearch.errors import InputError
from hgresearch.executors import DEFAULT_RETRIES, Executor, ExecutorKind


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

    Steps: refuse to overwrite (:func:`_refuse_started_runs`), keep a copy of the sweep file
    (:func:`_prepare_out_dir`), then per server entry skip finished runs and serve the rest
    (:func:`~hgresearch.bench.sweep.local.serve_entry`), and print the tally.
    """
    executor = executor or Executor()
    if executor.kind == ExecutorKind.PROCESS:
        raise InputError("a sweep runs on the local or the ray executor (servers need their "
                         "own GPUs and ports, not a process pool)", field="executor")
    if retries < 0:
        raise InputError(f"expected a non-negative number of retries, got {retries}",
                         field="retries")
    points = run_points(sweep)
    if not resume:
        _refuse_started_runs(points)
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

    with sigterm_as_exit():
        if executor.kind == ExecutorKind.RAY:
            todo = {index: pending_of(index) for index in range(len(sweep.servers))}
            run_on_ray(sweep, {i: p for i, p in todo.items() if p}, log, executor, retries)
        else:
            for index, entry in enumerate(sweep.servers):
                pending = pending_of(index)
                if pending:
                    serve_entry(sweep, entry, pending, log, progress)
    echo(f"sweep {sweep.name}: {log.count('ok')} ok, {log.count('failed')} failed, "
         f"{log.count('skipped')} skipped; runs in {sweep.out_dir}")
    return log.statuses


def _refuse_started_runs(points: list[RunPoint]) -> None:
    """FileExistsError when a run folder of the sweep already holds anything."""
    started = [p.run_dir for p in points if p.run_dir.exists() and any(p.run_dir.iterdir())]
    if started:
        raise FileExistsError(f"{len(started)} run folder(s) already hold results, e.g. "
                              f"{started[0]}; use --resume to continue, or another out_dir")


def _prepare_out_dir(sweep: Sweep) -> None:
    """Create ``out_dir`` and keep the sweep file used beside the runs (``_sweep/sweep.yaml``)."""
    sweep.out_dir.mkdir(parents=True, exist_ok=True)
    if sweep.source and Path(sweep.source).is_file():
        (sweep.out_dir / SWEEP_COPY).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(sweep.source, sweep.out_dir / SWEEP_COPY)
