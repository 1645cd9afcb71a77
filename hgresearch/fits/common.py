"""Shared pieces of the fitted models: configuration keys (from :mod:`hgresearch.identity`), input
checks, warnings."""

from __future__ import annotations

import warnings
from typing import Any, TypeAlias

import numpy as np
import pandas as pd

from hgresearch.errors import InputError
from hgresearch.identity import CONFIG_KEYS, config_label

__all__ = ["CONFIG_KEYS", "ConfigKey", "ModelInputError", "ModelWarning", "config_groups",
           "config_label", "mape_pct", "require_columns", "warn"]

#: One configuration's values of :data:`CONFIG_KEYS`, in that order (a groupby key).
ConfigKey: TypeAlias = tuple[Any, ...]


class ModelWarning(UserWarning):
    """A fit ran but its result should be read with care (degenerate or ill-fitting input)."""


class ModelInputError(InputError):
    """Input a fit cannot use at all (missing columns, too few points, bad values)."""


def warn(message: str) -> None:
    """Emit a :class:`ModelWarning` (explicit, filterable, shown once per message)."""
    warnings.warn(message, ModelWarning, stacklevel=3)


def require_columns(frame: pd.DataFrame, columns: list[str], what: str) -> None:
    """Raise :class:`ModelInputError` naming every missing column."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ModelInputError(f"{what}: missing column(s) {missing}; "
                              f"expected a runs table (hgresearch.data.ingest.read_runs)")


def config_groups(runs: pd.DataFrame) -> list[tuple[ConfigKey, pd.DataFrame]]:
    """Runs grouped by configuration, in a fixed (sorted) order, rows sorted by offered rate."""
    require_columns(runs, CONFIG_KEYS, "configurations")
    out = []
    for key, group in runs.groupby(CONFIG_KEYS, sort=True, dropna=False):
        sort_cols = ["request_rate_qps"] + (["repeat_index"] if "repeat_index" in group else [])
        out.append((key, group.sort_values(sort_cols, kind="stable")))
    return out


def mape_pct(predicted: np.ndarray, observed: np.ndarray) -> float:
    """Mean absolute percentage error (NaN pairs ignored; NaN when nothing is left)."""
    predicted = np.asarray(predicted, float)
    observed = np.asarray(observed, float)
    ok = np.isfinite(predicted) & np.isfinite(observed) & (observed != 0)
    if not ok.any():
        return float("nan")
    return float(np.mean(np.abs(predicted[ok] / observed[ok] - 1.0)) * 100.0)
