"""Arrival schedules: absolute send offsets precomputed from a seed, and precise sleeping.

vLLM's client draws each inter-arrival gap while it runs and sleeps *relative* intervals, so
every delay of the event loop shifts all later requests. We draw the whole schedule up front as
absolute offsets from the run start and sleep until each one, so lag never accumulates and the
per-request lag (actual - intended send) can be recorded.

Gaps follow vLLM's definition: gamma with shape ``burstiness`` and scale
``1 / (rate * burstiness)`` (burstiness 1 is Poisson); ``"constant"`` spaces requests evenly;
an infinite rate sends everything at offset 0.
"""

from __future__ import annotations

import asyncio
import math
import time

import numpy as np

#: The paper's request rates (req/s), in the order it ran them.
PAPER_QPS = (32.0, 16.0, 8.0, 4.0, 1.0)

#: How long before a deadline :func:`sleep_until_ns` stops sleeping in the selector and yields
#: in a loop instead: epoll's timeout has 1 ms resolution (asyncio rounds it up), so a plain
#: ``asyncio.sleep`` overshoots by up to ~1 ms.
DEFAULT_SPIN_NS = 1_500_000


def arrival_offsets_ns(
    n: int, rate_qps: float, *, burstiness: float = 1.0, seed: int = 0,
    kind: str = "gamma",
) -> np.ndarray:
    """Send offsets (ns from the run start, int64, non-decreasing) of ``n`` requests.

    Args:
        n: number of requests.
        rate_qps: mean request rate; ``math.inf`` sends all at offset 0.
        burstiness: gamma shape (1 = Poisson; < 1 burstier, > 1 more regular).
        seed: seed of the gap generator (same seed -> same schedule).
        kind: ``"gamma"`` (Poisson when burstiness is 1) or ``"constant"``.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not rate_qps > 0:
        raise ValueError(f"request rate must be > 0 (or inf), got {rate_qps}")
    if math.isinf(rate_qps):
        return np.zeros(n, dtype=np.int64)
    if kind == "constant":
        gaps = np.full(n, 1.0 / rate_qps)
    elif kind in ("gamma", "poisson"):
        if not burstiness > 0:
            raise ValueError(f"burstiness must be > 0, got {burstiness}")
        rng = np.random.default_rng(seed)
        gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate_qps * burstiness), size=n)
    else:
        raise ValueError(f"schedule kind must be 'gamma', 'poisson' or 'constant', got {kind!r}")
    # The first request goes at offset 0, like vLLM (which sleeps after each send).
    offsets = np.concatenate([[0.0], np.cumsum(gaps[:-1])]) if n else np.zeros(0)
    return np.round(offsets * 1e9).astype(np.int64)


async def sleep_until_ns(deadline_ns: int, spin_ns: int = DEFAULT_SPIN_NS) -> None:
    """Sleep until ``time.monotonic_ns() >= deadline_ns`` with sub-millisecond accuracy.

    Sleeps in the selector until ``spin_ns`` before the deadline, then yields to the event loop
    (``asyncio.sleep(0)``) until it passes: other tasks (streams being read) still run while we
    wait, and their events are timestamped promptly because the selector is polled with a zero
    timeout meanwhile.
    """
    remaining = deadline_ns - time.monotonic_ns()
    if remaining > spin_ns:
        await asyncio.sleep((remaining - spin_ns) / 1e9)
    while time.monotonic_ns() < deadline_ns:
        await asyncio.sleep(0)
