"""Bounded work: every command estimates what it is about to do before it starts.

A command that could run for hours or exhaust memory (a planner asked for 10⁹ req/s, a
simulation of 10⁷ requests) first builds a :class:`WorkEstimate` from its inputs — replicas,
requests, simulated seconds — and calls :func:`check_work`, which refuses with one line naming
the limit unless the user passed ``--allow-large``. Refusing before the work, rather than
timing out during it, is what keeps a 24 GB laptop usable and a CI job honest.
"""

from __future__ import annotations

from dataclasses import dataclass

from hgresearch.errors import InputError
from hgresearch.units import SECONDS_PER_HOUR

#: Largest memory a command may plan to use without ``--allow-large`` (bytes).
MEMORY_LIMIT_BYTES = 4e9
#: Longest a command may plan to run without ``--allow-large`` (seconds).
TIME_LIMIT_S = SECONDS_PER_HOUR


@dataclass(frozen=True)
class WorkEstimate:
    """What a command is about to do: a short description (``"simulate 10,000,000 requests"``)
    and its estimated peak memory (bytes) and wall time (seconds) on this machine."""

    what: str
    memory_bytes: float
    time_s: float


def _human_bytes(n: float) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.0f} MB"


def _human_seconds(s: float) -> str:
    if s >= SECONDS_PER_HOUR:
        return f"{s / SECONDS_PER_HOUR:.1f} h"
    if s >= 60:
        return f"{s / 60:.0f} min"
    return f"{s:.0f} s"


def check_work(estimate: WorkEstimate, *, allow_large: bool = False,
               memory_limit_bytes: float = MEMORY_LIMIT_BYTES,
               time_limit_s: float = TIME_LIMIT_S) -> None:
    """Raise :class:`~hgresearch.errors.InputError` (one line, exit 2) when ``estimate`` is over
    the memory or the time limit and ``allow_large`` is false; do nothing otherwise."""
    if allow_large:
        return
    over = []
    if estimate.memory_bytes > memory_limit_bytes:
        over.append(f"about {_human_bytes(estimate.memory_bytes)} of memory "
                    f"(limit {_human_bytes(memory_limit_bytes)})")
    if estimate.time_s > time_limit_s:
        over.append(f"about {_human_seconds(estimate.time_s)} "
                    f"(limit {_human_seconds(time_limit_s)})")
    if over:
        raise InputError(f"{estimate.what} would take {' and '.join(over)}; "
                         "reduce the work or pass --allow-large to run it anyway")
