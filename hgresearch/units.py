"""Unit conversions shared by the cost, energy and carbon formulas (one definition each)."""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

SECONDS_PER_HOUR = 3600.0
#: Joules in one kWh.
J_PER_KWH = 3.6e6
#: Tokens in "per 1M tokens" figures.
TOKENS_PER_MILLION = 1e6

#: A scalar, an array or a table column: the formulas work on each alike. To the type checker
#: a pandas column is ``Any`` (pandas ships no types here), so it needs no constraint (as one,
#: it would make every call of a formula ``Any``); an ``int`` is a ``float`` (the numeric
#: tower), which is what every formula returns for one.
Number = TypeVar("Number", float, npt.NDArray[np.float64])


def tokens_per_h(tok_per_s: Number) -> Number:
    """Tokens per hour at a sustained token throughput."""
    return tok_per_s * SECONDS_PER_HOUR
