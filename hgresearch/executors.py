"""Where independent pieces of work run: in this process, in local worker processes, or as
tasks on a Ray cluster (docs/cluster.md).

One map-style API serves the simulator's validation folds and calibrations
(:mod:`hgresearch.sim.validation`), the planner's per-configuration capacity searches
(:func:`hgresearch.plan.replica_rates.replica_rate_table`) and, with resources per task, the sweep
(:mod:`hgresearch.bench.sweep`)::

    Executor(ExecutorKind.RAY, address="auto").map(calibrate_configuration, items)

Results come back in the order of the items, whichever executor ran them, so the tables built
from them are identical. Ray is an optional extra (``pip install 'hgresearch[ray]'``) and is
imported only when the ``ray`` executor is chosen.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from hgresearch.errors import InputError

Item = TypeVar("Item")
Result = TypeVar("Result")

RAY_INSTALL_HINT = "pip install 'hgresearch[ray]'"
#: How often a failed task (it raised, its node died, its server failed) is tried again before
#: it is reported failed (a sweep's ``--retries``).
DEFAULT_RETRIES = 2


class ExecutorKind(StrEnum):
    """Where the work runs (the ``--executor`` option)."""

    LOCAL = "local"  #: one after another in this process
    PROCESS = "process"  #: in local worker processes (``max_workers``, default: all cores)
    RAY = "ray"  #: as tasks on a Ray cluster (``address``; none: a local one)


def import_ray() -> Any:
    """The ``ray`` module; :class:`InputError` (exit 2) saying how to install it when missing."""
    try:
        import ray
    except ImportError:
        raise InputError(f"the ray executor needs Ray, which is not installed: "
                         f"{RAY_INSTALL_HINT}", field="executor") from None
    return ray


#: Seconds the address of a Ray cluster gets to accept a connection before the command stops
#: with an error: Ray itself retries an unreachable address for minutes, printing only its
#: own warnings.
RAY_CONNECT_TIMEOUT_S = 10.0


def _stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def probe_ray_address(address: str | None, *, timeout_s: float = RAY_CONNECT_TIMEOUT_S,
                      echo: Callable[[str], None] = _stderr_line) -> None:
    """Before ``ray.init``: check that ``address`` (``HOST:PORT`` of a head's GCS, or
    ``ray://HOST:PORT`` of its Ray Client server) accepts a TCP connection within
    ``timeout_s``, with a progress line; :class:`InputError` (one line, exit 2) saying what
    happened otherwise. ``ray://`` also needs Ray Client (``grpcio``, the ``[ray]`` extra's
    ``ray[client]``). ``None`` and ``"auto"`` (this machine's cluster file) are Ray's to
    resolve and are not probed."""
    if address is None or address in ("auto", "local"):
        return
    client = address.startswith("ray://")
    if client and importlib.util.find_spec("grpc") is None:
        raise InputError(f"--address {address} uses Ray Client, which needs grpcio (not "
                         f"installed): {RAY_INSTALL_HINT} (it installs ray[client])",
                         field="address")
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"expected HOST:PORT (the head's GCS, e.g. 10.0.0.1:6379) or "
                         f"ray://HOST:PORT (Ray Client, e.g. ray://10.0.0.1:10001), got "
                         f"{address!r}", field="address")
    echo(f"connecting to the Ray cluster at {address} (up to {timeout_s:.0f} s) ...")
    start = time.monotonic()
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as err:
        reason = ("no answer" if isinstance(err, TimeoutError)
                  else err.strerror or type(err).__name__)
        raise InputError(f"cannot reach the Ray cluster at {address}: {reason} after "
                         f"{time.monotonic() - start:.1f} s; is a Ray head running there "
                         "(`ray start --head`)? docs/cluster.md", field="address") from None


def connect_ray(address: str | None = None) -> Any:
    """The ``ray`` module, connected: an already initialised session is reused (tests start a
    local cluster themselves); else ``ray.init(address)``: ``None`` joins the cluster named by
    ``$RAY_ADDRESS`` (set inside ``ray job submit``) or starts a local one, ``"auto"`` joins
    the cluster started on this machine with ``ray start``, ``ray://host:10001`` a remote one.
    An address is probed first (:func:`probe_ray_address`): unreachable, it is an error
    within :data:`RAY_CONNECT_TIMEOUT_S`, not a hang.
    """
    ray = import_ray()
    if not ray.is_initialized():
        probe_ray_address(address)
        try:
            # Only the address: options such as include_dashboard are refused by Ray Client
            # (ray://) and when joining a running cluster.
            ray.init(address=address, log_to_driver=True)
        except ConnectionError as err:
            raise InputError(f"cannot reach the Ray cluster at {address!r}: {err}",
                             field="address") from None
    return ray


def _collect(results: Iterable[Result], on_result: Callable[[Result], object] | None
             ) -> list[Result]:
    """The results in order, each passed to ``on_result`` as it comes."""
    collected = []
    for result in results:
        collected.append(result)
        if on_result is not None:
            on_result(result)
    return collected


@dataclass(frozen=True)
class Executor:
    """An executor: its kind, the Ray cluster's address (``ray`` only) and the number of worker
    processes (``process`` only; None: all cores)."""

    kind: ExecutorKind = ExecutorKind.LOCAL
    address: str | None = None
    max_workers: int | None = None

    @classmethod
    def for_jobs(cls, n_jobs: int) -> Executor:
        """``local`` for ``n_jobs`` <= 1, else ``process`` with ``n_jobs`` workers (the
        library's older ``n_jobs`` arguments)."""
        if n_jobs > 1:
            return cls(ExecutorKind.PROCESS, max_workers=n_jobs)
        return cls()

    @classmethod
    def parse(cls, kind: str | ExecutorKind, address: str | None = None) -> Executor:
        """From the command line's ``--executor`` and ``--address`` (:class:`InputError`
        for an unknown kind or an address without ``ray``)."""
        try:
            kind = ExecutorKind(kind)
        except ValueError:
            raise InputError(f"unknown executor {kind!r}; expected one of "
                             f"{[k.value for k in ExecutorKind]}", field="executor") from None
        if address is not None and kind != ExecutorKind.RAY:
            raise InputError("--address is for --executor ray", field="address")
        return cls(kind, address)

    def map(self, function: Callable[[Item], Result], items: Iterable[Item], *,
            on_result: Callable[[Result], object] | None = None) -> list[Result]:
        """``[function(item) for item in items]``, run by this executor; ``on_result`` is
        called with each result as it is collected, in order (progress bars). ``function``
        must be importable by name (module level) for ``process`` and ``ray``."""
        items = list(items)
        if self.kind == ExecutorKind.RAY:
            results = self._map_ray(function, items, on_result)
        elif self.kind == ExecutorKind.PROCESS and len(items) > 1:
            from concurrent.futures import ProcessPoolExecutor

            workers = min(self.max_workers or os.cpu_count() or 1, len(items))
            pool = ProcessPoolExecutor(max_workers=workers)
            try:
                results = _collect(pool.map(function, items), on_result)
            except BaseException:
                _stop_now(pool)
                raise
            pool.shutdown()
        else:
            results = _collect(map(function, items), on_result)
        return results

    def _map_ray(self, function: Callable[[Item], Result], items: list[Item],
                 on_result: Callable[[Result], object] | None) -> list[Result]:
        ray = connect_ray(self.address)
        remote = ray.remote(_apply)
        shared = ray.put(function)  # sent once (a function may carry data, e.g. a partial)
        refs = [remote.remote(shared, item) for item in items]
        results = []
        try:
            for ref in refs:
                try:
                    results.append(ray.get(ref))
                except ray.exceptions.RayTaskError as err:
                    # The item's own error (e.g. an InputError: exit 2), as locally.
                    raise (err.cause or err) from None
                if on_result is not None:
                    on_result(results[-1])
        except BaseException:
            _cancel_unfinished(ray, refs)
            raise
        return results


#: Seconds the unfinished tasks of a Ray map get to stop on a gentle cancel before their
#: workers are killed.
CANCEL_GRACE_S = 5.0


def _cancel_unfinished(ray: Any, refs: list[Any]) -> None:
    """After an error or a Ctrl-C in a Ray map: cancel the tasks that have not finished, and
    only those; gently first (``KeyboardInterrupt`` in the task at its next Python step, the
    worker lives on), then, for those still running after :data:`CANCEL_GRACE_S`, by killing
    their workers (a gentle cancel that lands while a task is starting is lost: the task ran
    on to its end on CI). A finished task is never cancelled: a forced cancel that meets Ray's
    handling of a reply still in flight can end the driver on a failed internal check
    (ray-project/ray#54527; on CI the driver exited with status 1 in the next Ray test after a
    map whose item had failed, when every task of that map was cancelled with ``force``)."""
    with contextlib.suppress(Exception):
        _, unfinished = ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in unfinished:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=False)
        if unfinished:
            _, running = ray.wait(unfinished, num_returns=len(unfinished),
                                  timeout=CANCEL_GRACE_S)
            for ref in running:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)


def _stop_now(pool: Any) -> None:
    """Ctrl-C (or an error) in a process map: end the workers at once. ``shutdown`` alone
    waits for the items they hold — a calibration each, tens of seconds — so a Ctrl-C would
    free nothing until then."""
    for process in (getattr(pool, "_processes", None) or {}).values():
        with contextlib.suppress(Exception):
            process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)


def _apply(function: Callable[[Item], Result], item: Item) -> Result:
    """``function(item)``: the Ray task behind :meth:`Executor.map` (any callable runs)."""
    return function(item)
