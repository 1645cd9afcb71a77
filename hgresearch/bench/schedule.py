"""Arrival schedules: absolute send offsets precomputed from a seed, and precise sleeping.

The schedule itself (:func:`arrival_offsets_ns`, :data:`PAPER_QPS`) is defined in
:mod:`hgresearch.traffic.arrivals` (shared with the simulator) and re-exported here.

vLLM's client draws each inter-arrival gap while it runs and sleeps *relative* intervals (with
asyncio's millisecond-resolution timers), so every delay of the event loop shifts all later
requests. We draw the whole schedule up front as
absolute offsets from the run start and sleep until each one, so lag never accumulates and the
per-request lag (actual - intended send) can be recorded.

Gaps follow vLLM's definition: gamma with shape ``burstiness`` and scale
``1 / (rate * burstiness)`` (burstiness 1 is Poisson); ``"constant"`` spaces requests evenly;
an infinite rate sends everything at offset 0.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
import time

from hgresearch.traffic.arrivals import PAPER_QPS, arrival_offsets_ns

__all__ = ["DEFAULT_SPIN_NS", "PAPER_QPS", "RECORD_GUARD_NS", "PreciseTimer", "SendGuard",
           "arrival_offsets_ns", "precise_timer", "sleep_until_ns"]

#: How long before a deadline :func:`sleep_until_ns` stops waiting on the timer thread and
#: yields to the event loop in a tight loop instead (the last stretch, for microsecond accuracy).
DEFAULT_SPIN_NS = 250_000
#: How close to a send the client's own post-processing of a finished request (parsing its
#: stream, writing its record) is held back: a record of a few hundred tokens takes ~1 ms to
#: build, which would otherwise delay a send due meanwhile.
RECORD_GUARD_NS = 2_000_000


class PreciseTimer:
    """Wakes asyncio futures at monotonic-ns deadlines from a helper thread.

    asyncio's own timers go through epoll, whose timeout has 1 ms resolution (asyncio rounds it
    up), so ``asyncio.sleep`` wakes up to ~1 ms late. This thread waits with the OS's
    high-resolution timed wait instead and hands each due future to its loop with
    ``call_soon_threadsafe`` (which wakes the selector at once). One thread serves every loop
    of the process; it costs no CPU while waiting.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._thread = threading.Thread(target=self._run, name="precise-timer", daemon=True)
        self._thread.start()

    def wait_until(self, deadline_ns: int) -> asyncio.Future[None]:
        """A future of the running loop that completes at ``deadline_ns`` (or just after)."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        with self._cond:
            heapq.heappush(self._heap, (deadline_ns, next(self._seq), loop, fut))
            if self._heap[0][3] is fut:  # new earliest deadline: re-arm the wait
                self._cond.notify()
        return fut

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap:
                    self._cond.wait()
                due, _, loop, fut = self._heap[0]
                delay_ns = due - time.monotonic_ns()
                if delay_ns > 0:
                    self._cond.wait(delay_ns / 1e9)
                    continue
                heapq.heappop(self._heap)
            try:
                loop.call_soon_threadsafe(_wake, fut)
            except RuntimeError:
                pass  # that loop is closed


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


_TIMER: PreciseTimer | None = None
_TIMER_LOCK = threading.Lock()


def precise_timer() -> PreciseTimer:
    """The process-wide :class:`PreciseTimer` (started on first use)."""
    global _TIMER
    with _TIMER_LOCK:
        if _TIMER is None:
            _TIMER = PreciseTimer()
        return _TIMER


async def sleep_until_ns(deadline_ns: int, spin_ns: int = DEFAULT_SPIN_NS) -> None:
    """Sleep until ``time.monotonic_ns() >= deadline_ns`` with microsecond-level accuracy.

    Waits on :class:`PreciseTimer` until ``spin_ns`` before the deadline, then yields to the
    event loop (``asyncio.sleep(0)``) until it passes: other tasks (streams being read) still
    run meanwhile, and the selector is polled without timeout so their events are timestamped
    promptly. ``spin_ns`` trades CPU for accuracy.
    """
    if deadline_ns - time.monotonic_ns() > spin_ns:
        await precise_timer().wait_until(deadline_ns - spin_ns)
    while time.monotonic_ns() < deadline_ns:
        await asyncio.sleep(0)


class SendGuard:
    """Keeps the client's own work out of the moments just before a scheduled send.

    The send loop announces each due time (:meth:`next_send`) before it sleeps and calls
    :meth:`sent` right after sending; :meth:`clear` (awaited by a finished request before it
    builds and writes its record) returns at once when the next send is more than
    ``window_ns`` away, else after that send. Only the event loop's own work is moved: the
    request's times are taken before it waits.
    """

    def __init__(self, window_ns: int = RECORD_GUARD_NS) -> None:
        self.window_ns = window_ns
        self.next_due_ns: int | None = None
        self._sent: asyncio.Event | None = None

    def next_send(self, due_ns: int) -> None:
        """The send loop will send at ``due_ns`` next."""
        self.next_due_ns = due_ns

    def sent(self) -> None:
        """The announced send happened (or there is none left): wake the held-back work."""
        self.next_due_ns = None
        if self._sent is not None:
            self._sent.set()
            self._sent = None

    async def clear(self) -> None:
        """Return once no send is due within ``window_ns``."""
        while (self.next_due_ns is not None
               and self.next_due_ns - time.monotonic_ns() < self.window_ns):
            if self._sent is None:
                self._sent = asyncio.Event()
            await self._sent.wait()
