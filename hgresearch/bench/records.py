"""Crash-safe request records (``requests.jsonl``) and the **requests** table built from them.

Each finished request is one JSON line, written with a single ``write`` and flushed at once, so
``kill -9`` loses at most the requests in flight (and, at worst, leaves a truncated last line,
which :func:`read_records` drops and :func:`repair` cuts off before a resumed run appends).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from hgresearch.errors import InputError

#: Columns of the requests table, in order (times: monotonic ns; derived latencies in ms).
REQUEST_COLUMNS = [
    "index", "warmup", "segment", "segment_start_ns", "t_scheduled_ns", "t_sent_ns",
    "cap_wait_ns", "t_first_token_ns", "t_last_token_ns", "t_done_ns",
    "prompt_tokens", "output_tokens", "expected_output_tokens", "usage_source",
    "http_status", "success", "error_class", "error", "event_t_ns", "event_tokens",
    "ttft_ms", "e2el_ms", "tpot_ms", "schedule_lag_ms", "ttft_from_scheduled_ms",
    "e2el_from_scheduled_ms",
]


class RecordWriter:
    """Appends records to ``requests.jsonl``: one ``write`` + ``flush`` per record."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fh: IO[str] = open(self.path, "a", encoding="utf-8")  # noqa: SIM115

    def write(self, record: dict[str, Any]) -> None:
        """Append one record and hand it to the OS (survives the process being killed)."""
        self._fh.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._fh.flush()

    def close(self) -> None:
        """Flush to disk and close."""
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()


def repair(path: Path) -> int:
    """Cut a truncated last line (left by a kill mid-write); returns the bytes removed."""
    path = Path(path)
    if not path.exists():
        return 0
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return 0
    keep = data.rfind(b"\n") + 1
    with open(path, "r+b") as fh:
        fh.truncate(keep)
    return len(data) - keep


def read_records(path: Path) -> list[dict[str, Any]]:
    """Records of ``requests.jsonl``; a truncated *last* line is dropped (crash), any other bad
    line raises :class:`InputError` naming file and line. Later records of an index win."""
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")
    by_key: dict[tuple[bool, int], dict[str, Any]] = {}
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as err:
            if number == len(lines):  # no newline after it: cut by a crash
                continue
            raise InputError(f"malformed JSON: {err.msg}", file=str(path), line=number) from None
        if not isinstance(record, dict) or not isinstance(record.get("index"), int):
            raise InputError("expected an object with an integer index", file=str(path),
                             line=number, field="index")
        by_key[(bool(record.get("warmup")), record["index"])] = record
    return list(by_key.values())


def _ms(a: pd.Series, b: pd.Series) -> pd.Series:
    return (a.astype("float64") - b.astype("float64")) / 1e6


def requests_table(records: list[dict[str, Any]]) -> pd.DataFrame:
    """The requests table (:data:`REQUEST_COLUMNS`) from records, sorted by warm-up, index.

    Derived columns follow vLLM's benchmark_serving.py: ``ttft_ms`` = first token - sent,
    ``e2el_ms`` = last token - sent, ``tpot_ms`` = (e2el - ttft) / (output_tokens - 1) for more
    than one output token (NaN otherwise). Also ``schedule_lag_ms`` (sent - scheduled, less the
    wait for a concurrency slot) and latencies counted from the scheduled time.
    """
    frame = pd.DataFrame.from_records(records)
    for column in REQUEST_COLUMNS:
        if column not in frame.columns:
            frame[column] = None
    if frame.empty:
        return frame[REQUEST_COLUMNS]
    frame["warmup"] = frame["warmup"].fillna(False).astype(bool)
    frame["success"] = frame["success"].fillna(False).astype(bool)
    frame = frame.sort_values(["warmup", "segment", "index"], kind="stable",
                              na_position="first").reset_index(drop=True)
    frame["ttft_ms"] = _ms(frame.t_first_token_ns, frame.t_sent_ns)
    frame["e2el_ms"] = _ms(frame.t_last_token_ns, frame.t_sent_ns)
    out_tok = frame.output_tokens.astype("float64")
    frame["tpot_ms"] = np.where(out_tok > 1, (frame.e2el_ms - frame.ttft_ms) / (out_tok - 1),
                                np.nan)
    cap_wait = frame.cap_wait_ns.astype("float64").fillna(0.0)
    frame["schedule_lag_ms"] = (_ms(frame.t_sent_ns, frame.t_scheduled_ns) - cap_wait / 1e6)
    frame["ttft_from_scheduled_ms"] = _ms(frame.t_first_token_ns, frame.t_scheduled_ns)
    frame["e2el_from_scheduled_ms"] = _ms(frame.t_last_token_ns, frame.t_scheduled_ns)
    return frame[REQUEST_COLUMNS]
