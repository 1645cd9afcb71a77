"""Read benchmark result files into the **runs** table (one row per benchmark run).

Understands three layouts of the same summary record:

* vLLM 0.8.5 ``benchmark_serving.py`` (the paper's files): the goodput key is literally
  ``"request_goodput:"``, ``gpu_count`` is a string, ``request_rate`` a number or ``"inf"``;
* newer ``vllm bench serve`` output: ``request_goodput``, ``failed``, ``*_e2el_ms``,
  ``max_concurrency``;
* hgresearch's own ``summary.json`` (vLLM's layout plus our keys, see :mod:`hgresearch.metrics`).

A file holds one JSON object, or JSON Lines with one run per line (vLLM's ``--append-result``).
Metadata in the paper's file names
(``{backend}_{N}prompts{qps}qps_{model}_{dataset}_{count}x{gpu}.json``) is parsed and checked
against the record. Errors name the file, the 1-based line and the field.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from hgresearch.catalogs import normalize_gpu_name
from hgresearch.errors import InputError
from hgresearch.keys import POINT_KEYS, hardware_label

FILENAME_PATTERN = re.compile(
    r"^(?P<backend>[A-Za-z0-9-]+)_(?P<num_prompts>\d+)prompts(?P<qps>[0-9.]+|inf)qps_"
    r"(?P<model>.+)_(?P<dataset>[A-Za-z0-9-]+)_(?P<gpu_count>\d+)x(?P<gpu_name>[^_]+)\.jsonl?$"
)

STATS = ("mean", "median", "std", "p50", "p90", "p95", "p99", "p100")
LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")

#: Keys every summary must have, with the type expected.
REQUIRED_FIELDS: dict[str, tuple[type, ...]] = {
    "model_id": (str,),
    "num_prompts": (int,),
    "request_rate": (int, float, str),
    "duration": (int, float),
    "completed": (int,),
    "total_input_tokens": (int,),
    "total_output_tokens": (int,),
    "request_throughput": (int, float),
    "output_throughput": (int, float),
    "total_token_throughput": (int, float),
    **{f"{stat}_{metric}_ms": (int, float) for metric in ("ttft", "tpot", "itl")
       for stat in ("mean", "median", "std", "p50", "p90", "p99")},
}
#: Keys that may be missing; missing values become NaN (never zero).
OPTIONAL_NUMERIC = (
    ["failed", "burstiness", "max_concurrency", "request_goodput"]
    + [f"{stat}_{metric}_ms" for metric in LATENCY_METRICS for stat in STATS]
)

#: Documented columns of the runs table, in order (see docs/tables.md).
RUN_COLUMNS = [
    "run_id", "source_file", "source_line", "source_format", "date",
    "backend", "model_id", "model", "dataset",
    "gpu_name", "gpu_count", "tensor_parallel_size", "replicas", "hardware",
    "num_prompts", "request_rate_qps", "burstiness", "max_concurrency",
    "repeat_index", "repeat_count",
    "duration_s", "completed", "failed", "total_input_tok", "total_output_tok", "total_tok",
    "request_throughput_rps", "request_goodput_rps",
    "output_throughput_tok_per_s", "total_token_throughput_tok_per_s",
    *[f"{stat}_{metric}_ms" for metric in LATENCY_METRICS for stat in STATS],
    "energy_j", "energy_source", "idle_power_w", "client_limited", "run_dir",
]

@dataclass(frozen=True)
class SkippedLine:
    """A line left out by ``on_error="skip"``, with the reason."""

    file: str
    line: int
    reason: str


def parse_filename(name: str) -> dict[str, Any] | None:
    """Metadata encoded in a paper-style result file name, or ``None`` if it has another form."""
    match = FILENAME_PATTERN.match(name)
    if not match:
        return None
    meta = match.groupdict()
    return {
        "backend": meta["backend"],
        "num_prompts": int(meta["num_prompts"]),
        "request_rate_qps": math.inf if meta["qps"] == "inf" else float(meta["qps"]),
        "model": meta["model"],
        "dataset": meta["dataset"],
        "gpu_count": int(meta["gpu_count"]),
        "gpu_name_raw": meta["gpu_name"],
    }


def _number(value: Any, *, file: str, line: int, field: str, allow_none: bool) -> float:
    if value is None:
        if allow_none:
            return math.nan
        raise InputError("expected a number, got null", file=file, line=line, field=field)
    if isinstance(value, bool):
        raise InputError(f"expected a number, got {value!r}", file=file, line=line, field=field)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("inf", "infinity"):
            return math.inf
        try:
            return float(text)
        except ValueError:
            pass
    raise InputError(f"expected a number, got {value!r}", file=file, line=line, field=field)


def parse_record(record: dict[str, Any], *, file: str, line: int) -> dict[str, Any]:
    """One raw summary record -> one row of the runs table (without repeat indices)."""
    if not isinstance(record, dict):
        raise InputError(f"expected a JSON object, got {type(record).__name__}",
                         file=file, line=line)
    # vLLM 0.8.5 wrote the goodput key with a trailing colon.
    if "request_goodput:" in record and "request_goodput" not in record:
        record = {**record, "request_goodput": record["request_goodput:"]}
    for field, types in REQUIRED_FIELDS.items():
        if field not in record:
            raise InputError("required field is missing", file=file, line=line, field=field)
        value = record[field]
        # Our own summaries write null (never 0) for latencies no request produced.
        if value is None and field.endswith("_ms") and "hgresearch_version" in record:
            continue
        if value is None or isinstance(value, bool) or not isinstance(value, types):
            expected = " or ".join(t.__name__ for t in types)
            raise InputError(f"expected {expected}, got {value!r}", file=file, line=line,
                             field=field)
    if "gpu_name" not in record:
        raise InputError("required field is missing", file=file, line=line, field="gpu_name")
    raw_gpu = record["gpu_name"]
    if not isinstance(raw_gpu, str):
        raise InputError(f"expected str, got {raw_gpu!r}", file=file, line=line,
                         field="gpu_name")
    try:
        gpu_name = normalize_gpu_name(raw_gpu)
    except KeyError:
        raise InputError(
            f"unknown GPU {raw_gpu!r}; add it (or an alias) to data/hardware.csv",
            file=file, line=line, field="gpu_name") from None
    gpu_count_raw = record.get("gpu_count", 1)
    try:
        gpu_count = int(str(gpu_count_raw).strip())
        if gpu_count < 1:
            raise ValueError
    except ValueError:
        raise InputError(f"expected a positive integer (number or string), got "
                         f"{gpu_count_raw!r}", file=file, line=line, field="gpu_count") from None

    def num(field: str, allow_none: bool = True) -> float:
        return _number(record.get(field), file=file, line=line, field=field,
                       allow_none=allow_none)

    row: dict[str, Any] = {
        "source_file": file,
        "source_line": line,
        "source_format": record.get("hgresearch_version") and "hgresearch"
        or ("vllm-bench-serve" if "request_goodput:" not in record and "failed" in record
            else "vllm-benchmark-serving"),
        "date": str(record.get("date", "")),
        "backend": str(record.get("backend", "vllm")),
        "model_id": record["model_id"],
        "model": record["model_id"].rstrip("/").split("/")[-1],
        "dataset": str(record.get("dataset", record.get("dataset_name", "")) or ""),
        "gpu_name": gpu_name,
        "gpu_count": gpu_count,
        "tensor_parallel_size": int(record.get("tensor_parallel_size") or gpu_count),
        "replicas": int(record.get("replicas") or 1),
        "num_prompts": int(record["num_prompts"]),
        "request_rate_qps": num("request_rate", allow_none=False),
        "duration_s": num("duration", allow_none=False),
        "completed": int(record["completed"]),
        "total_input_tok": int(record["total_input_tokens"]),
        "total_output_tok": int(record["total_output_tokens"]),
        "request_throughput_rps": num("request_throughput", allow_none=False),
        "request_goodput_rps": num("request_goodput"),
        "output_throughput_tok_per_s": num("output_throughput", allow_none=False),
        "total_token_throughput_tok_per_s": num("total_token_throughput", allow_none=False),
        "burstiness": num("burstiness"),
        "max_concurrency": num("max_concurrency"),
        "failed": num("failed"),
        "energy_j": num("energy_j"),
        "energy_source": record.get("energy_source"),
        "idle_power_w": num("idle_power_w"),
        "client_limited": record.get("client_limited"),
        "run_dir": record.get("run_dir"),
    }
    for metric in LATENCY_METRICS:
        for stat in STATS:
            key = f"{stat}_{metric}_ms"
            row[key] = num(key)
    # 0.8.5 does not store `failed`; all prompts it did not complete failed.
    if math.isnan(row["failed"]):
        row["failed"] = float(row["num_prompts"] - row["completed"])
    row["total_tok"] = row["total_input_tok"] + row["total_output_tok"]
    row["hardware"] = hardware_label(gpu_name, gpu_count, row["replicas"])
    return row


def _check_filename(row: dict[str, Any], meta: dict[str, Any], *, file: str, line: int) -> None:
    try:
        meta_gpu = normalize_gpu_name(meta["gpu_name_raw"])
    except KeyError:
        raise InputError(f"file name names unknown GPU {meta['gpu_name_raw']!r}",
                         file=file, line=line, field="gpu_name") from None
    checks = {
        "backend": (meta["backend"], row["backend"]),
        "num_prompts": (meta["num_prompts"], row["num_prompts"]),
        "request_rate": (meta["request_rate_qps"], row["request_rate_qps"]),
        "model_id": (meta["model"], row["model"]),
        "gpu_count": (meta["gpu_count"], row["gpu_count"]),
        "gpu_name": (meta_gpu, row["gpu_name"]),
    }
    for field, (from_name, from_record) in checks.items():
        if from_name != from_record:
            raise InputError(
                f"file name says {from_name!r} but the record says {from_record!r}",
                file=file, line=line, field=field)


def read_result_file(
    path: str | Path, *, on_error: str = "raise", skipped: list[SkippedLine] | None = None
) -> list[dict[str, Any]]:
    """Rows of one result file (single JSON object or JSON Lines).

    ``on_error="skip"`` leaves bad lines out and appends them to ``skipped``;
    ``"raise"`` (default) raises :class:`InputError` at the first bad line.
    """
    path = Path(path)
    file = str(path)
    text = path.read_text(encoding="utf-8")
    meta = parse_filename(path.name)
    if not text.strip():
        _fail(InputError("file is empty (expected one JSON object per line)", file=file),
              on_error, skipped, file, 0)
        return []
    # One pretty-printed object spans several lines; JSON Lines holds one object per line.
    stripped = text.lstrip()
    records: list[tuple[int, Any]] = []
    if stripped.startswith("{") and "\n" in text.strip() and not _is_json_lines(text):
        try:
            records = [(1, json.loads(text))]
        except json.JSONDecodeError as err:
            _fail(InputError(f"malformed JSON: {err.msg}", file=file, line=err.lineno),
                  on_error, skipped, file, err.lineno)
    else:
        for number, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                records.append((number, json.loads(raw)))
            except json.JSONDecodeError as err:
                _fail(InputError(f"malformed JSON (truncated line?): {err.msg} at column "
                                 f"{err.colno}", file=file, line=number), on_error, skipped,
                      file, number)
    rows = []
    for number, record in records:
        try:
            row = parse_record(record, file=file, line=number)
            if meta is not None:
                _check_filename(row, meta, file=file, line=number)
                if not row["dataset"]:
                    row["dataset"] = meta["dataset"]
            rows.append(row)
        except InputError as err:
            _fail(err, on_error, skipped, file, number)
    return rows


def _is_json_lines(text: str) -> bool:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2:
        return True
    try:
        json.loads(lines[0])
        return True
    except json.JSONDecodeError:
        return False


def _fail(err: InputError, on_error: str, skipped: list[SkippedLine] | None, file: str,
          line: int) -> None:
    if on_error == "raise":
        raise err
    if on_error != "skip":
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if skipped is not None:
        skipped.append(SkippedLine(file, line, str(err)))


def result_files(directory: str | Path) -> list[Path]:
    """Result files under ``directory``, sorted by path: the ``summary.json`` of every
    hgresearch run folder below it (other files of a run folder, such as ``requests.jsonl``
    and ``config.json``, are not results), and ``*.json``/``*.jsonl`` at its top level when
    ``directory`` is not itself a run folder."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError("not a directory", file=str(directory))
    files = set(directory.rglob("summary.json"))
    if not (directory / "summary.json").exists():
        files |= {p for p in directory.glob("*.json") if p.is_file()}
        files |= {p for p in directory.glob("*.jsonl") if p.is_file()}
    return sorted(files)


def read_runs(
    paths: str | Path | Iterable[str | Path], *, on_error: str = "raise",
    relative_to: str | Path | None = None,
) -> pd.DataFrame:
    """Build the runs table from result files and/or folders of them.

    Args:
        paths: a file, a folder (see :func:`result_files`) or a list of either.
        on_error: ``"raise"`` (default) or ``"skip"``; skipped lines are listed in a warning.
        relative_to: store ``source_file`` relative to this folder (stable across machines).

    Returns:
        The runs table, columns :data:`RUN_COLUMNS`, sorted by model, hardware, rate, repeat.
        ``repeat_index`` numbers repeated runs of one operating point in file order (0 first).
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files: list[Path] = []
    for p in paths:
        p = Path(p)
        files.extend(result_files(p) if p.is_dir() else [p])
    skipped: list[SkippedLine] = []
    rows: list[dict[str, Any]] = []
    for file in files:
        for row in read_result_file(file, on_error=on_error, skipped=skipped):
            if file.name == "summary.json" and not row["run_dir"]:
                row["run_dir"] = str(file.parent)
            if relative_to is not None:
                try:
                    row["source_file"] = str(Path(row["source_file"]).relative_to(relative_to))
                except ValueError:
                    pass
            rows.append(row)
    if skipped:
        listing = "\n".join(f"  {s.reason}" for s in skipped)
        warnings.warn(f"skipped {len(skipped)} bad line(s):\n{listing}", stacklevel=2)
    table = pd.DataFrame(rows, columns=[c for c in RUN_COLUMNS if c not in
                                        ("run_id", "repeat_index", "repeat_count")])
    return finalize_runs(table)


def finalize_runs(table: pd.DataFrame) -> pd.DataFrame:
    """Add ``run_id``, ``repeat_index``/``repeat_count`` and the documented column order."""
    table = table.sort_values(["source_file", "source_line"], kind="stable").reset_index(drop=True)
    point = table[POINT_KEYS].apply(lambda col: col.map(str)).agg("|".join, axis=1)
    table["repeat_index"] = point.groupby(point, sort=False).cumcount().astype(int)
    table["repeat_count"] = point.groupby(point, sort=False).transform("size").astype(int)
    # A run folder is named by its path; a result file by its stem and line.
    table["run_id"] = [str(Path(f).parent.as_posix()) if Path(f).name == "summary.json"
                       else f"{Path(f).stem}:{line}"
                       for f, line in zip(table.source_file, table.source_line, strict=True)]
    table = table.sort_values(["model", "gpu_name", "gpu_count", "request_rate_qps",
                               "repeat_index"], kind="stable").reset_index(drop=True)
    for column in ("gpu_count", "tensor_parallel_size", "replicas", "num_prompts", "completed",
                   "total_input_tok", "total_output_tok", "total_tok", "source_line"):
        table[column] = table[column].astype("int64")
    return table[RUN_COLUMNS]


def select_repeats(runs: pd.DataFrame, policy: str = "first") -> pd.DataFrame:
    """One row per operating point from repeated runs.

    ``"first"`` keeps the first run as listed in its file (the paper's tables appear to use it);
    ``"mean"`` averages numeric columns over repeats (``repeat_count`` says how many).
    ``"all"`` returns every run unchanged.
    """
    if policy == "all":
        return runs
    if policy == "first":
        return runs[runs.repeat_index == 0].reset_index(drop=True)
    if policy == "mean":
        numeric = [c for c in runs.columns if pd.api.types.is_numeric_dtype(runs[c])
                   and c not in POINT_KEYS and c not in ("repeat_index", "repeat_count")]
        # Missing keys (e.g. max_concurrency) must still group, so group on their text form.
        point = runs[POINT_KEYS].apply(lambda col: col.map(str)).agg("|".join, axis=1)
        means = runs[numeric].groupby(point).transform("mean")
        averaged = runs.copy()
        averaged[numeric] = means
        return averaged[averaged.repeat_index == 0].reset_index(drop=True)
    raise ValueError(f"repeat policy must be 'first', 'mean' or 'all', got {policy!r}")


def repeat_spread(runs: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Run-to-run spread of ``columns`` over repeated points: mean, std, min, max, n per point."""
    repeated = runs[runs.repeat_count > 1]
    return repeated.groupby(POINT_KEYS, dropna=False)[columns].agg(
        ["mean", "std", "min", "max", "count"])
