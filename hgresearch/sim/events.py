"""Events of the replica simulator and the heap that orders them.

An event is ``(time_s, kind, seq, payload)``: ordered by time, then kind (so at one instant
arrivals are queued before a step ends and before an idle engine starts a step, which then
sees them all), then insertion order (``seq``), which makes runs deterministic.

Only events that change the scheduler's state go through the heap: stretches of decode-only
steps in which no request arrives, finishes or needs a KV block are run back to back by
:meth:`~hgresearch.sim.scheduler.VllmV1Scheduler.skip_quiet_steps` (each still a step of its
own duration, counted as an event).
"""

from __future__ import annotations

import heapq
import itertools
from typing import Any

#: A request reaches the replica (payload: the request).
ARRIVAL = 0
#: The engine step in flight ends (payload: None).
STEP_END = 1
#: An idle engine starts a step (payload: None).
STEP_START = 2


class EventQueue:
    """A min-heap of events with a deterministic tie-break.

    ``heap`` is a plain :mod:`heapq` list: the event loop pops it directly (one call less per
    event on the hot path).
    """

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, int, Any]] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self.heap)

    def push(self, time_s: float, kind: int, payload: Any = None) -> None:
        """Schedule an event of ``kind`` at ``time_s``."""
        heapq.heappush(self.heap, (time_s, kind, next(self._seq), payload))

    def pop(self) -> tuple[float, int, int, Any]:
        """The earliest event, removed."""
        return heapq.heappop(self.heap)
