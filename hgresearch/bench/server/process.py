"""The server's child process and its machine, nothing vLLM-specific: which cores it may use
and at which niceness (:func:`child_setup`, with the parent-death signal so no server outlives
the toolkit), whether a port is free, the tail of its log, and SIGTERM turned into an exit so
``with`` blocks stop it. :mod:`hgresearch.bench.server.vllm` launches vLLM with these; scripts
and tests that start servers of their own use them too.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hgresearch.errors import InputError

#: Lines of a server log quoted in an error.
LOG_TAIL_LINES = 40


def parse_cpu_list(cores: list[int] | str | int) -> set[int]:
    """Core numbers from ``[0, 2]``, ``3``, or a Linux cpu list such as ``"0-1,3"``."""
    if isinstance(cores, int):
        return {cores}
    if isinstance(cores, list):
        if not all(isinstance(c, int) and c >= 0 for c in cores):
            raise InputError(f"expected non-negative core numbers, got {cores!r}",
                             field="cpu_affinity")
        return set(cores)
    out: set[int] = set()
    try:
        for part in str(cores).split(","):
            lo, _, hi = part.strip().partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise InputError(f"expected a core list such as '0', '0-1' or '0,2', got {cores!r}",
                         field="cpu_affinity") from None
    return out


def cpu_list_text(cores: set[int]) -> str:
    """``{0, 1, 3}`` -> ``"0,1,3"`` (the form ``VLLM_CPU_OMP_THREADS_BIND`` takes)."""
    return ",".join(str(c) for c in sorted(cores))


def child_setup(cores: set[int] | None, nice: int | None) -> Callable[[], None]:
    """The function a server child runs before ``exec``: die with its parent, then take its
    core affinity and niceness (inherited by every thread and process vLLM starts).

    With scheduler autogroups (``/proc/sys/kernel/sched_autogroup_enabled``), CPU time is
    shared fairly between sessions first; a child started in a new session is a group of its
    own, so the group's nice (``/proc/self/autogroup``) is what lowers it against the client.
    """
    def prepare() -> None:  # pragma: no cover - runs in the child before exec
        set_pdeathsig()
        if cores:
            os.sched_setaffinity(0, cores)
        if nice:
            os.nice(nice)
            with contextlib.suppress(OSError), open("/proc/self/autogroup", "w") as group:
                group.write(str(nice))

    return prepare


def set_pdeathsig() -> None:  # pragma: no cover - runs in the child before exec
    """Ask the kernel to SIGTERM the server if the process that started it dies."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def port_in_use(host: str, port: int) -> bool:
    """True when something already listens on ``host:port`` (or the port cannot be bound)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        if sock.connect_ex((host, port)) == 0:
            return True
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Like uvicorn: connections of a previous server in TIME_WAIT do not block the port.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def child_sessions() -> list[int]:
    """Process ids of this process's live children that lead their own session: the servers it
    started (:class:`~hgresearch.bench.server.vllm.VLLMServer` starts each with
    ``start_new_session``), whether or not a ``VLLMServer`` still holds them."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, ppid, _pgrp, session = fields[0], int(fields[1]), fields[2], int(fields[3])
        if ppid == me and session == int(entry.name) and state != "Z":
            found.append(int(entry.name))
    return found


def stop_child_sessions(grace_s: float = 10.0) -> list[int]:
    """SIGTERM the process group of every child session (:func:`child_sessions`), SIGKILL what
    is left after ``grace_s``; returns the ids signalled.

    A long-lived process that starts servers (a Ray worker, which runs task after task) calls
    it when a task ends: a Ctrl-C (Ray's cancel) can land between the server's fork and the
    moment a ``VLLMServer`` records it — inside ``subprocess.Popen`` — and no ``with`` block
    then stops that server, nor does the parent-death signal, since the worker lives on."""
    pids = child_sessions()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive_child(pid) for pid in pids):
        time.sleep(0.1)
    for pid in pids:
        if _alive_child(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
    return pids


def _alive_child(pid: int) -> bool:
    """True while child ``pid`` runs (a zombie is reaped and counts as gone)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == 0


def free_port(host: str = "127.0.0.1") -> int:
    """A currently free TCP port (for tests and ad-hoc servers)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file ('' if missing)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64_000))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


@contextlib.contextmanager
def sigterm_as_exit() -> Iterator[None]:
    """Turn SIGTERM into ``SystemExit`` while inside, so ``finally`` blocks and context
    managers (the server's stop) run when the toolkit is terminated."""
    def handler(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def process_affinity(pid: int) -> dict[str, Any] | None:
    """The running server's core affinity and nice as the kernel reports them (None if gone)."""
    try:
        return {"cores": sorted(os.sched_getaffinity(pid)),
                "nice": os.getpriority(os.PRIO_PROCESS, pid)}
    except OSError:
        return None
