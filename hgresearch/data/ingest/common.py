"""Pieces every ingest format shares: the runs-table columns, value checks, the hardware
label (and its inverse) and hardware taken from outside a result file, and latency statistics
filled from per-request values."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from hgresearch.data.catalogs import normalize_gpu_name
from hgresearch.data.summary import STATS, describe
from hgresearch.errors import InputError
from hgresearch.identity import hardware_label

#: Latency metrics of the runs table's summary columns: vLLM's, ITL included (a per-gap statistic,
#: unlike the per-request metrics of :data:`hgresearch.data.summary.LATENCY_METRICS`).
RUN_LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")

#: Documented columns of the runs table, in order (see docs/tables.md).
RUN_COLUMNS = [
    "run_id", "source_file", "source_line", "source_format", "source_version", "date",
    "backend", "model_id", "model", "dataset",
    "gpu_name", "gpu_count", "tensor_parallel_size", "replicas", "hardware",
    "num_prompts", "request_rate_qps", "burstiness", "max_concurrency",
    "repeat_index", "repeat_count",
    "duration_s", "completed", "failed", "total_input_tok", "total_output_tok", "total_tok",
    "request_throughput_rps", "request_goodput_rps",
    "output_throughput_tok_per_s", "total_token_throughput_tok_per_s",
    *[f"{stat}_{metric}_ms" for metric in RUN_LATENCY_METRICS for stat in STATS],
    "energy_j", "energy_source", "idle_power_w", "client_limited", "run_dir",
]


#: Per-file hardware sidecar: ``<result stem>.hardware.json`` beside the result file; a folder
#: sidecar ``hardware.json`` applies to every result file in that folder. Either holds
#: ``{"hardware": "2x RTX-4090"}`` (the label :func:`parse_hardware_label` reads) or
#: ``{"gpu_name": "...", "gpu_count": 2, "replicas": 1}``.
SIDECAR_SUFFIX = ".hardware.json"
FOLDER_SIDECAR = "hardware.json"

_LABEL = re.compile(r"^\s*(?:(?P<replicas>\d+)\s*x\s*\(\s*(?P<inner>[^()]+?)\s*\)|(?P<plain>.+?))"
                    r"\s*$")
_COUNT_GPU = re.compile(r"^\s*(?:(?P<count>\d+)\s*x\s*)?(?P<gpu>\S.*?)\s*$")


@dataclass(frozen=True)
class SkippedLine:
    """A line (or a whole file, line 0) left out by ``on_error="skip"``, with the reason."""

    file: str
    line: int
    reason: str


@dataclass(frozen=True)
class Hardware:
    """Where a run ran: normalized GPU name, GPUs per replica, replicas."""

    gpu_name: str
    gpu_count: int
    replicas: int = 1

    @property
    def label(self) -> str:
        """The label :func:`hgresearch.identity.hardware_label` writes."""
        return hardware_label(self.gpu_name, self.gpu_count, self.replicas)


def parse_hardware_label(label: str, *, file: str | None = None,
                         field: str = "hardware") -> Hardware:
    """Inverse of :func:`hgresearch.identity.hardware_label`; GPU spellings go through the
    catalog's aliases (``"2x NVIDIA GeForce RTX 4090"`` works). A bare GPU name: one GPU."""
    match = _LABEL.match(label or "")
    inner = match and (match["inner"] or match["plain"])
    part = _COUNT_GPU.match(inner) if inner else None
    if not part or not match:
        raise InputError(f"expected a hardware label like '2x RTX-4090', got {label!r}",
                         file=file, field=field)
    count = int(part["count"] or 1)
    replicas = int(match["replicas"] or 1)
    if count < 1 or replicas < 1:
        raise InputError(f"GPU and replica counts must be positive, got {label!r}",
                         file=file, field=field)
    return Hardware(normalized_gpu(part["gpu"], file=file, field=field), count, replicas)


def normalized_gpu(raw: Any, *, file: str | None, line: int | None = None,
             field: str = "gpu_name") -> str:
    """Normalized GPU name, or an :class:`InputError` naming the unknown spelling."""
    if not isinstance(raw, str):
        raise InputError(f"expected str, got {raw!r}", file=file, line=line, field=field)
    try:
        return normalize_gpu_name(raw)
    except KeyError:
        raise InputError(f"unknown GPU {raw!r}; add it (or an alias) to "
                         "hgresearch/data/catalogs/hardware.csv", file=file, line=line,
                         field=field) from None


def hardware_from_mapping(data: Mapping[str, Any], *, file: str) -> Hardware:
    """Hardware from a sidecar's object (``hardware`` label, or ``gpu_name``/``gpu_count``)."""
    if "hardware" in data:
        return parse_hardware_label(str(data["hardware"]), file=file)
    if "gpu_name" not in data:
        raise InputError("expected 'hardware' or 'gpu_name'", file=file, field="gpu_name")
    count = positive_int(data.get("gpu_count", 1), file=file, line=None, field="gpu_count")
    replicas = positive_int(data.get("replicas", 1), file=file, line=None, field="replicas")
    return Hardware(normalized_gpu(data["gpu_name"], file=file), count, replicas)


def sidecar_hardware(result: Path) -> Hardware | None:
    """Hardware from the result file's sidecar, else its folder's (see :data:`SIDECAR_SUFFIX`)."""
    for candidate in (result.with_name(result.stem + SIDECAR_SUFFIX),
                      result.parent / FOLDER_SIDECAR):
        if candidate.is_file() and candidate != result:
            try:
                data = json.loads(candidate.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as err:
                raise InputError(f"unreadable hardware sidecar: {err}",
                                 file=str(candidate)) from None
            if not isinstance(data, dict):
                raise InputError("expected a JSON object", file=str(candidate))
            return hardware_from_mapping(data, file=str(candidate))
    return None


def positive_int(value: Any, *, file: str | None, line: int | None, field: str) -> int:
    """A positive integer given as a number or a string (vLLM 0.8.5 wrote ``"1"``)."""
    try:
        number = int(str(value).strip())
        if number < 1 or isinstance(value, bool):
            raise ValueError
    except ValueError:
        raise InputError(f"expected a positive integer (number or string), got {value!r}",
                         file=file, line=line, field=field) from None
    return number


def number(value: Any, *, file: str, line: int, field: str, allow_none: bool = True,
           allow_inf: bool = False) -> float:
    """A finite number (``"inf"``/``Infinity`` only with ``allow_inf``); ``None`` -> NaN when
    allowed. ``NaN`` in a file is always rejected: missing values are absent or null."""
    if value is None:
        if allow_none:
            return math.nan
        raise InputError("expected a number, got null", file=file, line=line, field=field)
    result: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        result = float(value)
    elif isinstance(value, str):
        try:
            result = float(value.strip().lower().replace("infinity", "inf"))
        except ValueError:
            result = None
    if result is None:
        raise InputError(f"expected a number, got {value!r}", file=file, line=line, field=field)
    if math.isnan(result) or (math.isinf(result) and not allow_inf):
        raise InputError(f"impossible value {value!r} (expected a finite number)", file=file,
                         line=line, field=field)
    return result


def token_count(value: Any, *, file: str, line: int | None, field: str) -> int:
    """A token or request count the file gives as a number, rounded to the nearest integer:
    tools write sums of floats (guidellm's ``total_sum`` 901.9999999 is 902 tokens) that
    ``int()`` would truncate."""
    result = number(value, file=file, line=line or 0, field=field, allow_none=False)
    return int(round(result))


def unsupported_version_error(tool: str, found: str, reads: str, *, file: str,
                              line: int | None = None, detail: str = "") -> InputError:
    """One line naming the tool, the version the file says (or the layout it has) and the
    versions this package reads."""
    why = f" ({detail})" if detail else ""
    return InputError(f"{tool} {found} is not a version this reader knows{why}; it reads "
                      f"{tool} {reads}", file=file, line=line)


def not_recognised_error(document: Any, *, file: str, line: int | None) -> InputError:
    """A JSON value that is none of the formats read (with its top-level keys, to tell)."""
    if isinstance(document, dict):
        keys = ", ".join(sorted(map(str, document))[:8])
        seen = f"an object with keys {keys}{', ...' if len(document) > 8 else ''}"
    else:
        seen = f"a JSON {type(document).__name__}"
    return InputError(f"not a recognised format: expected a vLLM benchmark result, a guidellm "
                      f"report, an aiperf export or an hgresearch summary; found {seen}",
                      file=file, line=line)


def http_status(value: Any) -> int | None:
    """An HTTP status code as an integer (files hold 500, 500.0 or "500"); None otherwise."""
    if value is None or isinstance(value, bool):
        return None
    try:
        code = float(value)
    except (TypeError, ValueError):
        return None
    return int(code) if math.isfinite(code) and code.is_integer() else None


def client_date(value: Any) -> str:
    """A run's date as vLLM writes it (``YYYYMMDD-HHMMSS``) from epoch seconds (guidellm) or
    ISO 8601 (aiperf); "" when absent, the text unchanged when it is neither."""
    if value is None or value == "":
        return ""
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            moment = datetime.fromtimestamp(float(value), tz=UTC)
        else:
            moment = datetime.fromisoformat(str(value))
    except (ValueError, OverflowError, OSError):
        return str(value)
    return moment.strftime("%Y%m%d-%H%M%S")


def missing_fields_error(missing: list[str], *, file: str, line: int | None) -> InputError:
    """One error naming every missing field (never one error per attempt)."""
    noun = "required field is" if len(missing) == 1 else f"{len(missing)} required fields are"
    return InputError(f"{noun} missing: {', '.join(missing)}", file=file, line=line,
                      field=", ".join(missing))


#: Row fields (runs-table names) that must not be negative, and the file field each comes from
#: is given by the caller's ``source_fields`` map.
_NON_NEGATIVE = ("duration_s", "completed", "failed", "num_prompts", "total_input_tok",
                 "total_output_tok", "request_throughput_rps", "output_throughput_tok_per_s",
                 "total_token_throughput_tok_per_s", "request_goodput_rps")


def check_run_values(row: Mapping[str, Any], *, file: str, line: int,
                     source_fields: Mapping[str, str] | None = None) -> None:
    """Reject values no run can have: negative counts, durations, throughputs or latencies;
    more completed requests than were sent. ``source_fields`` maps a row column to the file's
    field name, so the error names the field as the file spells it."""
    names = dict(source_fields or {})
    # First: a derived `failed` would otherwise report this as a negative failure count.
    completed, sent = row.get("completed"), row.get("num_prompts")
    if isinstance(completed, (int, float)) and isinstance(sent, (int, float)) \
            and completed > sent:
        raise InputError(f"impossible value {completed!r}: more than num_prompts ({sent!r})",
                         file=file, line=line, field=names.get("completed", "completed"))
    columns = list(_NON_NEGATIVE) + [f"{s}_{m}_ms" for m in RUN_LATENCY_METRICS for s in STATS]
    for column in columns:
        value = row.get(column)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
            raise InputError(f"impossible value {value!r} (must not be negative)", file=file,
                             line=line, field=names.get(column, column))


def fill_latency_stats(row: dict[str, Any], samples_ms: Mapping[str, np.ndarray | None]) -> None:
    """Complete ``{stat}_{metric}_ms`` in ``row``: p50 from median (and back), then every stat
    still missing from ``samples_ms[metric]`` (per-request values, ms) with the project's
    statistics (:func:`hgresearch.data.summary.describe`). A stat neither given nor computable stays
    NaN; nothing is interpolated from other percentiles."""
    for metric in RUN_LATENCY_METRICS:
        median_key, p50_key = f"median_{metric}_ms", f"p50_{metric}_ms"
        if _is_missing(row.get(p50_key)) and not _is_missing(row.get(median_key)):
            row[p50_key] = row[median_key]
        if _is_missing(row.get(median_key)) and not _is_missing(row.get(p50_key)):
            row[median_key] = row[p50_key]
        values = samples_ms.get(metric)
        if values is None or not any(_is_missing(row.get(f"{s}_{metric}_ms")) for s in STATS):
            continue
        for stat, value in describe(values).items():
            key = f"{stat}_{metric}_ms"
            if _is_missing(row.get(key)):
                row[key] = math.nan if value is None else value


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def per_second(count: float, duration_s: float) -> float:
    """``count`` per second of the run (NaN for a run without duration)."""
    return count / duration_s if duration_s > 0 else math.nan


def derived_run_fields(duration_s: float, completed: float, tokens_in: int,
                       tokens_out: int) -> dict[str, Any]:
    """Runs-table columns a result file without them gets from its totals: token total,
    throughputs over the run, every latency statistic missing (NaN until the file's own
    values fill it), and no energy or client-limited information."""
    fields: dict[str, Any] = {
        "total_input_tok": tokens_in, "total_output_tok": tokens_out,
        "total_tok": tokens_in + tokens_out,
        "request_throughput_rps": per_second(completed, duration_s),
        "output_throughput_tok_per_s": per_second(tokens_out, duration_s),
        "total_token_throughput_tok_per_s": per_second(tokens_in + tokens_out, duration_s),
        "energy_j": math.nan, "energy_source": None, "idle_power_w": math.nan,
        "client_limited": None, "run_dir": None,
    }
    for metric in RUN_LATENCY_METRICS:
        for stat in STATS:
            fields[f"{stat}_{metric}_ms"] = math.nan
    return fields

