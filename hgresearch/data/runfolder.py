"""The run folder: its file names, their columns, and the one reader and writer of each file.

A run folder is what one benchmark point leaves behind (docs/measurement.md, "Run folder"):

=========================  =====================================================================
``config.json``            parameters, versions, host, GPU inventory, segments (at start)
``requests.jsonl``         one JSON record per finished request, appended and flushed at once
``telemetry.csv``          NVML samples (:data:`TELEMETRY_COLUMNS`); ``telemetry.parquet`` is
                           read instead when there is no CSV
``summary.json``           the run's summary; its presence marks the run finished
``server_metrics.json``    the server's ``/metrics`` deltas beside the client's figures (sweeps)
``server.log``             the server's log while the run ran (sweeps)
``error.json``             why the run failed (sweeps)
=========================  =====================================================================

The measurement side (:mod:`hgresearch.bench`, :mod:`hgresearch.bench.sweep`) writes through this
module and the analysis side reads through it, so neither spells a file name or a column list of
its own. Record-level functions (:class:`RecordWriter`, :func:`repair`, :func:`read_records`)
take the ``requests.jsonl`` path; everything else takes the run folder.

Bad content raises :class:`~hgresearch.errors.InputError` naming the file, line and field. A
truncated *last* line of ``requests.jsonl`` or ``telemetry.csv`` (no newline after it: the
process was killed mid-write) is dropped, as it is the expected trace of a crash.
"""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from hgresearch.data.files import iter_json_lines, read_text
from hgresearch.errors import InputError

CONFIG_FILE = "config.json"
REQUESTS_FILE = "requests.jsonl"
TELEMETRY_FILE = "telemetry.csv"
#: Telemetry as Parquet (same columns), read when :data:`TELEMETRY_FILE` is absent.
TELEMETRY_PARQUET_FILE = "telemetry.parquet"
SUMMARY_FILE = "summary.json"
SERVER_METRICS_FILE = "server_metrics.json"
SERVER_LOG_FILE = "server.log"
ERROR_FILE = "error.json"
#: Files a benchmark run writes itself; a fresh start removes them (nothing measured yet).
BENCH_FILES = (REQUESTS_FILE, TELEMETRY_FILE, SUMMARY_FILE, CONFIG_FILE)

#: Columns of ``telemetry.csv``, one row per sample per GPU. ``t_ns``: ``time.monotonic_ns()``
#: (the clock of the request records); ``phase``: ``idle`` (baseline before the run),
#: ``warmup`` or ``run``; power in W, the cumulative energy counter in J, utilisation in %,
#: memory in MiB, SM clock in MHz, temperature in degrees C, the enforced power limit in W.
#: An empty cell is a value NVML could not give.
TELEMETRY_COLUMNS = ["t_ns", "phase", "gpu_index", "power_w", "energy_counter_j",
                     "gpu_util_pct", "mem_util_pct", "mem_used_mib", "sm_clock_mhz",
                     "temperature_c", "power_limit_w"]
TELEMETRY_PHASES = ("idle", "warmup", "run")
_TELEMETRY_REQUIRED = ("t_ns", "phase", "gpu_index", "power_w")
_TELEMETRY_NUMERIC = [c for c in TELEMETRY_COLUMNS if c != "phase"]

#: Columns of the requests table, in order. Record fields as written (times: monotonic ns;
#: token counts), then the derived latencies in ms (see :func:`requests_table`).
REQUEST_COLUMNS = [
    "index", "warmup", "segment", "segment_start_ns", "t_scheduled_ns", "t_sent_ns",
    "cap_wait_ns", "t_first_token_ns", "t_last_token_ns", "t_done_ns",
    "prompt_tokens", "output_tokens", "expected_output_tokens", "usage_source",
    "prompt_tokens_source",
    "http_status", "success", "error_class", "error", "event_t_ns", "event_tokens",
    "endpoint", "ttft_ms", "e2el_ms", "tpot_ms", "schedule_lag_ms", "ttft_from_scheduled_ms",
    "e2el_from_scheduled_ms",
]


# ---------------------------------------------------------------------------------------------
# requests.jsonl
# ---------------------------------------------------------------------------------------------

class RecordWriter:
    """Appends records to ``requests.jsonl``: one ``write`` + ``flush`` per record, so
    ``kill -9`` loses at most the requests in flight."""

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
    """Records of ``requests.jsonl`` (none when the file is absent); a truncated *last* line is
    dropped (crash), any other bad line raises :class:`InputError` naming file and line. Later
    records of an index win."""
    path = Path(path)
    if not path.exists():
        return []
    by_key: dict[tuple[bool, int], dict[str, Any]] = {}
    for number, record in iter_json_lines(path, tolerate_truncated_last=True):
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


def read_requests(run_dir: str | Path) -> pd.DataFrame:
    """The run's requests table (:func:`requests_table` of ``requests.jsonl``; empty, with the
    columns, when the file is absent). Warm-up requests are included (column ``warmup``)."""
    return requests_table(read_records(Path(run_dir) / REQUESTS_FILE))


# ---------------------------------------------------------------------------------------------
# telemetry.csv
# ---------------------------------------------------------------------------------------------

def _telemetry_text_table(path: Path) -> pd.DataFrame | None:
    """``telemetry.csv`` as strings; None when it holds no header."""
    text = read_text(path)
    if not text.endswith("\n"):
        text = text[:text.rfind("\n") + 1]  # a kill mid-write cuts the last line
    if not text.strip():
        return None
    try:
        table = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except pd.errors.ParserError as err:
        raise InputError(f"malformed CSV: {err}", file=str(path)) from None
    return table.fillna("")  # short rows leave NaN even without default NA values


def read_telemetry(run_dir: str | Path) -> pd.DataFrame:
    """The run's NVML samples (:data:`TELEMETRY_COLUMNS`), sorted by GPU and time.

    Reads ``telemetry.csv``, or ``telemetry.parquet`` when there is no CSV. A missing or
    header-only file gives an empty table with the columns (a run without NVML). Values are
    checked: a non-number, a missing ``t_ns``/``gpu_index`` or an unknown ``phase`` raises
    :class:`InputError` naming the file, line (data row + 2 for Parquet too) and field; empty
    cells of the other columns are NaN.
    """
    run_dir = Path(run_dir)
    path = run_dir / TELEMETRY_FILE
    parquet = run_dir / TELEMETRY_PARQUET_FILE
    table: pd.DataFrame | None
    if path.exists():
        table = _telemetry_text_table(path)
    elif parquet.exists():
        path = parquet
        table = pd.read_parquet(path).map(lambda v: "" if pd.isna(v) else str(v))
    else:
        table = None
    if table is None:
        return pd.DataFrame(columns=TELEMETRY_COLUMNS)
    for column in _TELEMETRY_REQUIRED:
        if column not in table.columns:
            raise InputError("required column is missing", file=str(path), field=column)
    for column in _TELEMETRY_NUMERIC:
        if column not in table.columns:
            table[column] = ""
        raw = table[column].str.strip()
        values = pd.to_numeric(raw.replace("", np.nan), errors="coerce")
        bad = raw.ne("") & values.isna()
        if bad.any():
            index = int(bad.idxmax())
            raise InputError(f"expected a number, got {table[column][index]!r}",
                             file=str(path), line=index + 2, field=column)
        if column in ("t_ns", "gpu_index") and values.isna().any():
            index = int(values.isna().idxmax())
            raise InputError("value is required", file=str(path), line=index + 2, field=column)
        table[column] = values
    bad_phase = ~table.phase.isin(TELEMETRY_PHASES)
    if bad_phase.any():
        index = int(bad_phase.idxmax())
        raise InputError(f"expected 'idle', 'warmup' or 'run', got {table.phase[index]!r}",
                         file=str(path), line=index + 2, field="phase")
    table["t_ns"] = table.t_ns.astype("int64")
    table["gpu_index"] = table.gpu_index.astype("int64")
    return table[TELEMETRY_COLUMNS].sort_values(["gpu_index", "t_ns"], kind="stable"
                                                ).reset_index(drop=True)


# ---------------------------------------------------------------------------------------------
# JSON files: config, summary, server metrics, error
# ---------------------------------------------------------------------------------------------

def _read_json(path: Path, missing: str) -> Any:
    if not path.exists():
        raise InputError(missing, file=str(path))
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as err:
        raise InputError(f"malformed JSON: {err.msg}", file=str(path), line=err.lineno) from None


def _read_object(path: Path, missing: str) -> dict[str, Any]:
    data = _read_json(path, missing)
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", file=str(path))
    return data


def _write_json(path: Path, data: Any, *, sort_keys: bool = False) -> Path:
    path.write_text(json.dumps(data, indent=1, sort_keys=sort_keys) + "\n", encoding="utf-8")
    return path


def read_config(run_dir: str | Path) -> dict[str, Any]:
    """``config.json`` of a run folder (:class:`InputError` when missing or malformed)."""
    return _read_object(Path(run_dir) / CONFIG_FILE, f"run folder has no {CONFIG_FILE}")


def write_config(run_dir: str | Path, meta: dict[str, Any]) -> Path:
    """Write ``config.json`` (rewritten at each start and segment end)."""
    return _write_json(Path(run_dir) / CONFIG_FILE, meta)


def read_summary(run_dir: str | Path) -> dict[str, Any]:
    """``summary.json`` of a run folder (:class:`InputError` when missing or malformed)."""
    return _read_object(Path(run_dir) / SUMMARY_FILE, f"run folder has no {SUMMARY_FILE}")


def write_summary(run_dir: str | Path, summary: dict[str, Any]) -> Path:
    """Write ``summary.json``: from then on the run counts as finished."""
    return _write_json(Path(run_dir) / SUMMARY_FILE, summary)


def _nan_to_none(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_to_none(v) for v in value]
    return value


def read_server_metrics(run_dir: str | Path) -> dict[str, Any] | None:
    """``server_metrics.json`` (the server's ``/metrics`` cross-check), None when the run has
    none (runs outside a sweep); :class:`InputError` when malformed."""
    path = Path(run_dir) / SERVER_METRICS_FILE
    if not path.is_file():
        return None
    return _read_object(path, f"run folder has no {SERVER_METRICS_FILE}")


def write_server_metrics(run_dir: str | Path, result: dict[str, Any]) -> Path:
    """Write ``server_metrics.json`` (NaN and infinities written as null)."""
    return _write_json(Path(run_dir) / SERVER_METRICS_FILE, _nan_to_none(result),
                       sort_keys=True)


def write_error(run_dir: str | Path, error: dict[str, Any]) -> Path:
    """Write ``error.json`` (why a sweep's run failed), creating the folder if needed."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    return _write_json(run_dir / ERROR_FILE, error)


def pack_run_folder(run_dir: str | Path) -> dict[str, bytes]:
    """Every file of a run folder (``relative path -> content``): what a sweep's remote task
    sends back to the driver (a run folder is small: records, summary, config, telemetry,
    server log)."""
    run_dir = Path(run_dir)
    return {path.relative_to(run_dir).as_posix(): path.read_bytes()
            for path in sorted(run_dir.rglob("*")) if path.is_file()}


def install_run_folder(run_dir: str | Path, files: dict[str, bytes]) -> Path:
    """Write a packed run folder (:func:`pack_run_folder`) to ``run_dir`` atomically: into a
    temporary sibling folder first, then renamed into place, replacing an unfinished folder of
    an earlier attempt; a reader never sees half a run (``summary.json`` without records)."""
    import shutil
    import tempfile

    run_dir = Path(run_dir)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{run_dir.name}.", dir=run_dir.parent))
    try:
        for name, content in files.items():
            target = staging / name
            if staging.resolve() not in target.resolve().parents:
                raise InputError("file name leaves the run folder", field=name)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        if run_dir.exists():
            shutil.rmtree(run_dir)
        os.rename(staging, run_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return run_dir


# ---------------------------------------------------------------------------------------------
# Finding run folders
# ---------------------------------------------------------------------------------------------

def is_finished(run_dir: str | Path) -> bool:
    """A run is finished when its folder holds ``summary.json``."""
    return (Path(run_dir) / SUMMARY_FILE).is_file()


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Finished run folders named in ``paths``: each path is a run folder itself or a folder
    searched recursively for them (sorted by path). A path that does not exist raises
    :class:`InputError`; unfinished run folders (no ``summary.json``) are not returned."""
    found: list[Path] = []
    for path in map(Path, paths):
        if is_finished(path):
            found.append(path)
        elif path.is_dir():
            found.extend(summary.parent for summary in sorted(path.rglob(SUMMARY_FILE)))
        else:
            raise InputError("run folder not found", file=str(path))
    return found


# ---------------------------------------------------------------------------------------------
# The server's KV cache
# ---------------------------------------------------------------------------------------------

def read_server_kv_cache(run_dir: str | Path) -> dict[str, Any] | None:
    """The KV cache the server reported for a run (``server_metrics.json``'s
    ``server.kv_cache``: the labels of vLLM's ``vllm:cache_config_info``, e.g.
    ``num_gpu_blocks`` and ``block_size``); None when the run folder has no such record or the
    server did not expose it."""
    metrics = read_server_metrics(run_dir)
    server = (metrics or {}).get("server")
    kv = server.get("kv_cache") if isinstance(server, dict) else None
    return kv if isinstance(kv, dict) and kv.get("num_gpu_blocks") else None


def server_log_paths(run_dir: str | Path) -> list[Path]:
    """Where a sweep leaves the server's log of a run: the run folder's ``server.log`` (the
    log while the run ran), then its server configuration folder's (the whole server life,
    start-up included); only those that exist."""
    run_dir = Path(run_dir)
    return [p for p in (run_dir / SERVER_LOG_FILE, run_dir.parent / SERVER_LOG_FILE)
            if p.is_file()]
