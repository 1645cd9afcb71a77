"""Arrival schedules: seeded absolute offsets with vLLM's gamma/Poisson definition."""

from __future__ import annotations

import asyncio
import math
import time

import numpy as np
import pytest

from hgresearch.bench.schedule import SendGuard, arrival_offsets_ns, sleep_until_ns


def test_same_seed_same_schedule_and_first_at_zero():
    a = arrival_offsets_ns(100, 8.0, seed=5)
    assert np.array_equal(a, arrival_offsets_ns(100, 8.0, seed=5))
    assert not np.array_equal(a, arrival_offsets_ns(100, 8.0, seed=6))
    assert a[0] == 0 and np.all(np.diff(a) >= 0)


@pytest.mark.parametrize("burstiness", [1.0, 0.25, 4.0])
def test_gamma_gaps_have_the_requested_rate_and_variability(burstiness):
    """Gamma(shape k, scale 1/(rate k)): mean gap 1/rate, coefficient of variation 1/sqrt(k)."""
    offsets = arrival_offsets_ns(20001, 10.0, burstiness=burstiness, seed=0)
    gaps = np.diff(offsets) / 1e9
    assert gaps.mean() == pytest.approx(0.1, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(1 / math.sqrt(burstiness), rel=0.05)


def test_constant_and_infinite_rates():
    assert np.diff(arrival_offsets_ns(5, 4.0, kind="constant")).tolist() == [250_000_000] * 4
    assert arrival_offsets_ns(7, math.inf).tolist() == [0] * 7
    with pytest.raises(ValueError, match="rate"):
        arrival_offsets_ns(3, 0.0)


@pytest.mark.timing
def test_sleep_until_is_never_early_and_rarely_late():
    """Never before the deadline; median lateness well under a millisecond (generous bound,
    the machine is shared; precise numbers are in benchmarks/client_overhead.py)."""

    async def run() -> list[int]:
        lates = []
        for _ in range(30):
            deadline = time.monotonic_ns() + 3_000_000
            await sleep_until_ns(deadline)
            lates.append(time.monotonic_ns() - deadline)
        return lates

    lates = asyncio.run(run())
    assert min(lates) >= 0
    assert float(np.median(lates)) < 1_000_000


def test_send_guard_holds_record_work_back_until_a_close_send_happened() -> None:
    """A finished request's post-processing waits while a send is due within the window and
    goes on as soon as the send loop reports the send; far from a send it does not wait."""
    async def scenario() -> list[str]:
        order: list[str] = []
        guard = SendGuard(window_ns=50_000_000)

        async def finished_request() -> None:
            await guard.clear()
            order.append("record")

        guard.next_send(time.monotonic_ns() + 20_000_000)  # due in 20 ms: inside the window
        task = asyncio.create_task(finished_request())
        await asyncio.sleep(0.005)
        order.append("send")
        guard.sent()
        await task
        guard.next_send(time.monotonic_ns() + 1_000_000_000)  # due in 1 s: far away
        await asyncio.wait_for(finished_request(), timeout=0.5)
        guard.sent()
        return order

    assert asyncio.run(scenario()) == ["send", "record", "record"]
