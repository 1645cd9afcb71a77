"""Unit conversions shared by the cost, energy and carbon formulas (one definition each)."""

from __future__ import annotations

from typing import TypeVar

import numpy as np

SECONDS_PER_HOUR = 3600.0
#: Joules in one kWh.
J_PER_KWH = 3.6e6
#: Tokens in "per 1M tokens" figures.
TOKENS_PER_MILLION = 1e6

#: A scalar, an array or a table column: the formulas work on each alike. (An ``int`` argument
#: counts as a float; pandas has no type information here, so a Series is accepted as any.)
Number = TypeVar("Number", float, np.ndarray)


def tokens_per_h(tok_per_s: Number) -> Number:
    """Tokens per hour at a sustained token throughput."""
    return tok_per_s * SECONDS_PER_HOUR
