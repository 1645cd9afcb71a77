"""vLLM serving-benchmark results (and hgresearch's ``summary.json``, which uses vLLM's keys).

Layouts of the same summary record, told apart by their keys (checked on files each version
wrote, tests/data/tools/vllm-*; ``source_version`` names the versions whose layout it is):

* ``benchmarks/benchmark_serving.py`` 0.4.x: ``input_throughput`` (no total), mean/median/p99
  of TTFT and TPOT only, per-request ``input_lens``, ``output_lens``, ``ttfts``, ``itls``,
  ``errors`` (no ``latencies``, so no E2EL); no ``failed``;
* 0.5.x: as 0.4 plus mean/median/p99 ITL;
* 0.6.0-0.6.3: ``total_token_throughput`` instead of ``input_throughput``, ``std_*``,
  ``--metric-percentiles``;
* 0.6.4-0.8.x (the paper's 0.8.5 files): ``burstiness``, ``max_concurrency`` and a goodput key
  that is literally ``"request_goodput:"``; ``gpu_count`` from ``--metadata`` is a string,
  ``request_rate`` a number or ``"inf"``; arrays only with ``--save-detailed`` (0.8.2 on);
* ``vllm bench serve --save-result`` (vLLM 0.6 ``benchmark_serving.py`` to today's
  ``vllm/benchmarks/serve.py``, read at commit 009e6d4 of vllm-project/vllm): ``failed``,
  ``request_goodput`` (null without an SLO), ``max_concurrency``, ``median_*`` and only the
  percentiles asked for with ``--metric-percentiles`` (default ``99``: no ``p50_*``/``p90_*``),
  ``*_e2el_ms`` only when asked; no ``gpu_name``/``gpu_count``. With ``--save-detailed`` (and
  always before it existed) per-request arrays in seconds: ``ttfts``, ``latencies``, ``itls``
  (gaps per request), ``input_lens``, ``output_lens``, ``errors`` (``""`` = success),
  ``start_times``, ``generated_texts``;
* hgresearch's own ``summary.json`` (vLLM's layout plus our keys, see
:mod:`hgresearch.data.summary`).

A statistic the record lacks is taken from ``median`` (p50) or computed from the per-request
arrays with vLLM's definitions (successful requests only; TPOT = (latency - TTFT) /
(output_len - 1) for more than one output token; ITL = every gap) and the project's one
percentile definition (:func:`hgresearch.data.summary.describe`); otherwise it stays NaN.

Metadata in the paper's file names
(``{backend}_{N}prompts{qps}qps_{model}_{dataset}_{count}x{gpu}.json``) is parsed and checked
against the record.
"""

from __future__ import annotations

import contextlib
import math
import re
import warnings
from typing import Any

import numpy as np
import pandas as pd

from hgresearch.data.ingest.common import (
    RUN_LATENCY_METRICS,
    Hardware,
    check_run_values,
    fill_latency_stats,
    missing_fields_error,
    normalized_gpu,
    not_recognised_error,
    number,
    positive_int,
)
from hgresearch.data.runfolder import REQUEST_COLUMNS
from hgresearch.data.summary import STATS
from hgresearch.errors import InputError
from hgresearch.identity import hardware_label

FILENAME_PATTERN = re.compile(
    r"^(?P<backend>[A-Za-z0-9-]+)_(?P<num_prompts>\d+)prompts(?P<qps>[0-9.]+|inf)qps_"
    r"(?P<model>.+)_(?P<dataset>[A-Za-z0-9-]+)_(?P<gpu_count>\d+)x(?P<gpu_name>[^_]+)\.jsonl?$"
)

#: Keys every record must have, with the type expected.
RUN_FIELDS: dict[str, tuple[type, ...]] = {
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
}
#: Latency statistics a record must give, unless its per-request arrays can: the mean and the
#: median (``median_*`` or ``p50_*``) of TTFT and TPOT (ITL too from 0.5 on). Others (std
#: from 0.6 on, percentiles) are optional.
REQUIRED_LATENCY_STATS = ("mean",)
REQUIRED_LATENCY_METRICS = ("ttft", "tpot", "itl")
#: Keys that only vLLM's records (and ours) have: a JSON object with fewer than two of them is
#: not a vLLM result (see :func:`is_vllm_record`).
SIGNATURE_KEYS = ("model_id", "num_prompts", "request_rate", "duration", "completed",
                  "total_input_tokens", "total_output_tokens", "request_throughput")
#: Kept for callers of the former single module: the keys a complete 0.8.5 record carries.
REQUIRED_FIELDS: dict[str, tuple[type, ...]] = {
    **RUN_FIELDS,
    **{f"{stat}_{metric}_ms": (int, float) for metric in REQUIRED_LATENCY_METRICS
       for stat in ("mean", "median", "std")},
}
#: Keys that may be missing; missing values become NaN (never zero).
OPTIONAL_NUMERIC = (
    ["failed", "burstiness", "max_concurrency", "request_goodput"]
    + [f"{stat}_{metric}_ms" for metric in RUN_LATENCY_METRICS for stat in STATS]
)
#: Per-request arrays of ``--save-detailed`` (seconds, one entry per request sent).
ARRAY_FIELDS = ("ttfts", "latencies", "itls", "input_lens", "output_lens", "errors",
                "start_times")

#: Runs-table column -> the record's field, for error messages.
SOURCE_FIELDS = {"duration_s": "duration", "completed": "completed", "failed": "failed",
                 "num_prompts": "num_prompts", "total_input_tok": "total_input_tokens",
                 "total_output_tok": "total_output_tokens",
                 "request_throughput_rps": "request_throughput",
                 "output_throughput_tok_per_s": "output_throughput",
                 "total_token_throughput_tok_per_s": "total_token_throughput",
                 "request_goodput_rps": "request_goodput"}


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


def is_vllm_record(record: Any) -> bool:
    """Whether a JSON object is a vLLM (or hgresearch) result record, complete or not: ours,
    or at least two of vLLM's :data:`SIGNATURE_KEYS` (one shared key, such as ``duration``,
    does not make another tool's JSON a vLLM result)."""
    return isinstance(record, dict) and ("hgresearch_version" in record or sum(
        key in record for key in SIGNATURE_KEYS) >= 2)


def layout_version(record: dict[str, Any]) -> str:
    """The vLLM versions whose ``--save-result`` layout the record has (see the module
    docstring); the files say no version themselves."""
    if "input_throughput" in record:
        return "0.5" if "mean_itl_ms" in record else "0.4"
    if "request_goodput:" in record:
        return "0.6.4-0.8"
    if "failed" in record or "request_goodput" in record:
        return "0.9+"  # vllm bench serve (benchmark_serving.py wrote the same from 0.9 on)
    if "burstiness" in record or "max_concurrency" in record:
        return "0.6.4-0.8"
    return "0.6.0-0.6.3"


def parse_record(record: dict[str, Any], *, file: str, line: int,
                 hardware: Hardware | None = None) -> dict[str, Any]:
    """One raw summary record -> one row of the runs table (without repeat indices)."""
    return parse_vllm_record(record, file=file, line=line, hardware=hardware)[0]


def parse_vllm_record(record: Any, *, file: str, line: int, hardware: Hardware | None = None,
                      fallback_hardware: Hardware | None = None
                      ) -> tuple[dict[str, Any], pd.DataFrame | None]:
    """One raw record -> (runs-table row, requests table from its arrays or ``None``).

    ``hardware`` (a sidecar's) applies when the record names no GPU; a record that does name
    one must agree with it. ``fallback_hardware`` (``--hardware``) applies only to a record
    that names none: a record naming its own keeps it (a warning says when they differ).
    """
    if not isinstance(record, dict):
        raise InputError(f"expected a JSON object, got {type(record).__name__}",
                         file=file, line=line)
    # vLLM 0.8.5 wrote the goodput key with a trailing colon.
    if "request_goodput:" in record and "request_goodput" not in record:
        record = {**record, "request_goodput": record["request_goodput:"]}
    ours = "hgresearch_version" in record
    arrays = _request_arrays(record, file=file, line=line)
    samples = _samples_ms(arrays, record) if arrays is not None else {}

    version = layout_version(record)
    missing = [f for f in RUN_FIELDS if f not in record
               and not (f == "total_token_throughput" and "input_throughput" in record)]
    for metric in REQUIRED_LATENCY_METRICS:
        if samples.get(metric) is not None or (metric == "itl" and version == "0.4"):
            continue
        for stat in REQUIRED_LATENCY_STATS:
            if f"{stat}_{metric}_ms" not in record:
                missing.append(f"{stat}_{metric}_ms")
        if f"median_{metric}_ms" not in record and f"p50_{metric}_ms" not in record:
            missing.append(f"median_{metric}_ms")
    if hardware is None and "gpu_name" in record and fallback_hardware is not None:
        _warn_own_hardware(record, fallback_hardware, file=file, line=line)
    hardware = hardware or fallback_hardware if "gpu_name" not in record else hardware
    if "gpu_name" not in record and hardware is None:
        missing.append("gpu_name (or a --hardware option / hardware sidecar)")
    if missing and len(missing) > len(REQUIRED_FIELDS) // 2:
        # most of a result's fields absent: another kind of JSON that shares a few key names
        # (a run folder's config.json, a tool's settings), not a result with gaps
        raise not_recognised_error(record, file=file, line=line)
    if missing:
        raise missing_fields_error(missing, file=file, line=line)

    for field, types in REQUIRED_FIELDS.items():
        if field not in record:
            continue
        value = record[field]
        # Our own summaries write null (never 0) for latencies no request produced.
        if value is None and field.endswith("_ms") and ours:
            continue
        if value is None or isinstance(value, bool) or not isinstance(value, types):
            expected = " or ".join(t.__name__ for t in types)
            raise InputError(f"expected {expected}, got {value!r}", file=file, line=line,
                             field=field)

    where = _hardware(record, hardware, file=file, line=line)

    def num(field: str, allow_none: bool = True, allow_inf: bool = False) -> float:
        return number(record.get(field), file=file, line=line, field=field,
                      allow_none=allow_none, allow_inf=allow_inf)

    row: dict[str, Any] = {
        "source_file": file,
        "source_line": line,
        "source_format": "hgresearch" if ours
        else ("vllm-bench-serve" if version == "0.9+" else "vllm-benchmark-serving"),
        "source_version": str(record.get("hgresearch_version", "")) if ours else version,
        "date": str(record.get("date", "")),
        "backend": str(record.get("backend", "vllm")),
        "model_id": record["model_id"],
        "model": record["model_id"].rstrip("/").split("/")[-1],
        "dataset": str(record.get("dataset", record.get("dataset_name", "")) or ""),
        "gpu_name": where.gpu_name,
        "gpu_count": where.gpu_count,
        "tensor_parallel_size": int(record.get("tensor_parallel_size") or where.gpu_count),
        "replicas": int(record.get("replicas") or where.replicas),
        "num_prompts": int(record["num_prompts"]),
        "request_rate_qps": num("request_rate", allow_none=False, allow_inf=True),
        "duration_s": num("duration", allow_none=False),
        "completed": int(record["completed"]),
        "total_input_tok": int(record["total_input_tokens"]),
        "total_output_tok": int(record["total_output_tokens"]),
        "request_throughput_rps": num("request_throughput", allow_none=False),
        "request_goodput_rps": num("request_goodput"),
        "output_throughput_tok_per_s": num("output_throughput", allow_none=False),
        # 0.4-0.5 wrote input throughput; the total is input + output over the same duration.
        "total_token_throughput_tok_per_s": num("total_token_throughput", allow_none=False)
        if "total_token_throughput" in record else num("input_throughput", allow_none=False)
        + num("output_throughput", allow_none=False),
        "burstiness": num("burstiness", allow_inf=True),
        "max_concurrency": num("max_concurrency"),
        "failed": num("failed"),
        "energy_j": num("energy_j"),
        "energy_source": record.get("energy_source"),
        "idle_power_w": num("idle_power_w"),
        "client_limited": record.get("client_limited"),
        "run_dir": record.get("run_dir"),
    }
    for metric in RUN_LATENCY_METRICS:
        for stat in STATS:
            key = f"{stat}_{metric}_ms"
            row[key] = num(key)
    # Before 0.6.4 the script drew Poisson arrivals only and wrote no burstiness.
    if math.isnan(row["burstiness"]) and version in ("0.4", "0.5", "0.6.0-0.6.3") \
            and math.isfinite(row["request_rate_qps"]):
        row["burstiness"] = 1.0
    fill_latency_stats(row, samples)
    # 0.8.5 does not store `failed`; all prompts it did not complete failed.
    if math.isnan(row["failed"]):
        row["failed"] = float(row["num_prompts"] - row["completed"])
    row["total_tok"] = row["total_input_tok"] + row["total_output_tok"]
    row["hardware"] = hardware_label(row["gpu_name"], row["gpu_count"], row["replicas"])
    check_run_values(row, file=file, line=line, source_fields=SOURCE_FIELDS)
    requests = _requests_frame(arrays, record) if arrays is not None else None
    return row, requests


def _warn_own_hardware(record: dict[str, Any], option: Hardware, *, file: str,
                       line: int) -> None:
    """A warning when a record names other hardware than ``--hardware`` (which applies only
    to records that name none)."""
    with contextlib.suppress(InputError):
        name = normalized_gpu(record["gpu_name"], file=file, line=line)
        count = positive_int(record.get("gpu_count", 1), file=file, line=line,
                             field="gpu_count")
        if (name, count) != (option.gpu_name, option.gpu_count):
            warnings.warn(f"{file}:{line}: names its own hardware, "
                          f"{hardware_label(name, count)}, which is kept: --hardware "
                          f"{option.label} applies only to files that name none", stacklevel=2)


def _hardware(record: dict[str, Any], given: Hardware | None, *, file: str,
              line: int) -> Hardware:
    if "gpu_name" not in record:
        assert given is not None  # checked with the other missing fields
        return given
    name = normalized_gpu(record["gpu_name"], file=file, line=line)
    count = positive_int(record.get("gpu_count", 1), file=file, line=line, field="gpu_count")
    if given is not None and (given.gpu_name, given.gpu_count) != (name, count):
        raise InputError(f"the record says {hardware_label(name, count)} but the hardware "
                         f"given says {hardware_label(given.gpu_name, given.gpu_count)}",
                         file=file, line=line, field="gpu_name")
    return Hardware(name, count, given.replicas if given else 1)


def _request_arrays(record: dict[str, Any], *, file: str, line: int
                    ) -> dict[str, list[Any]] | None:
    """The per-request arrays when the record has any (``ttfts`` or ``latencies``, which vLLM
    keeps even without ``--save-detailed``), checked for equal lengths and finite values."""
    arrays = {k: record[k] for k in ARRAY_FIELDS if isinstance(record.get(k), list)}
    base = next((k for k in ("ttfts", "latencies") if k in arrays), None)
    if base is None:
        return None
    n = len(arrays[base])
    for key, values in arrays.items():
        if len(values) != n:
            raise InputError(f"has {len(values)} entries but {base} has {n}", file=file,
                             line=line, field=key)
    for key in ("ttfts", "latencies", "start_times", "input_lens", "output_lens"):
        for value in arrays.get(key, []):
            number(value, file=file, line=line, field=key, allow_none=False)
    for gaps in arrays.get("itls", []):
        if not isinstance(gaps, list):
            raise InputError(f"expected a list of gaps per request, got {gaps!r}", file=file,
                             line=line, field="itls")
        for value in gaps:
            number(value, file=file, line=line, field="itls", allow_none=False)
    return arrays


def _count(arrays: dict[str, list[Any]]) -> int:
    return len(arrays["ttfts"] if "ttfts" in arrays else arrays["latencies"])


def _ms(arrays: dict[str, list[Any]], key: str) -> np.ndarray:
    """An array of seconds in ms (NaN where the file has no such array)."""
    if key not in arrays:
        return np.full(_count(arrays), np.nan)
    return np.asarray(arrays[key], dtype="float64") * 1000


def _success(arrays: dict[str, list[Any]], record: dict[str, Any]) -> np.ndarray | None:
    """Which requests succeeded: ``errors`` says (empty = success); without it only when every
    request completed. ``None`` when the file cannot tell."""
    n = _count(arrays)
    if "errors" in arrays:
        return np.array([not err for err in arrays["errors"]], dtype=bool)
    if record.get("completed") == n:
        return np.ones(n, dtype=bool)
    return None


def _samples_ms(arrays: dict[str, list[Any]], record: dict[str, Any]
                ) -> dict[str, np.ndarray | None]:
    """Per-request values (ms) of successful requests, as vLLM's ``calculate_metrics``."""
    ok = _success(arrays, record)
    if ok is None:
        return {}
    ttft = _ms(arrays, "ttfts")
    out: dict[str, np.ndarray | None] = {"ttft": ttft[ok] if "ttfts" in arrays else None,
                                         "tpot": None, "e2el": None, "itl": None}
    if "itls" in arrays:
        gaps = [np.asarray(g, dtype="float64") for g, good in zip(arrays["itls"], ok,
                                                                  strict=True) if good]
        out["itl"] = np.concatenate(gaps) * 1000 if gaps else np.zeros(0)
    if "latencies" in arrays:
        e2el = np.asarray(arrays["latencies"], dtype="float64") * 1000
        out["e2el"] = e2el[ok]
        if "output_lens" in arrays and "ttfts" in arrays:
            out_len = np.asarray(arrays["output_lens"], dtype="float64")
            multi = ok & (out_len > 1)
            out["tpot"] = (e2el[multi] - ttft[multi]) / (out_len[multi] - 1)
    return out


def _requests_frame(arrays: dict[str, list[Any]], record: dict[str, Any]) -> pd.DataFrame:
    """The requests table (same columns as our own runs') from vLLM's arrays. Times exist only
    where ``start_times`` does (vLLM's ``perf_counter`` seconds); token events are unknown
    (vLLM keeps gaps, not token counts per event)."""
    n = _count(arrays)
    ok = _success(arrays, record)
    ttft_ms, e2el_ms = _ms(arrays, "ttfts"), _ms(arrays, "latencies")
    out_len = (np.asarray(arrays["output_lens"], dtype="float64") if "output_lens" in arrays
               else np.full(n, np.nan))
    frame = pd.DataFrame({column: [None] * n for column in REQUEST_COLUMNS})
    frame["index"] = np.arange(n)
    frame["warmup"] = False
    frame["success"] = ok if ok is not None else None
    if "errors" in arrays:
        frame["error"] = [err or None for err in arrays["errors"]]
    frame["prompt_tokens"] = arrays.get("input_lens", [None] * n)
    frame["output_tokens"] = arrays.get("output_lens", [None] * n)
    frame["usage_source"] = "vllm-bench"
    failed = ~ok if ok is not None else np.zeros(n, dtype=bool)
    frame["ttft_ms"] = np.where(failed, np.nan, ttft_ms)
    frame["e2el_ms"] = np.where(failed, np.nan, e2el_ms)
    frame["tpot_ms"] = np.where(~failed & (out_len > 1), (e2el_ms - ttft_ms) / (out_len - 1),
                                np.nan)
    if "start_times" in arrays:
        sent_ns = np.asarray(arrays["start_times"], dtype="float64") * 1e9
        first_ns = sent_ns + ttft_ms * 1e6
        frame["t_sent_ns"] = sent_ns.astype("int64")
        frame["t_first_token_ns"] = np.where(failed, np.nan, first_ns)
        frame["t_last_token_ns"] = np.where(failed, np.nan, sent_ns + e2el_ms * 1e6)
        frame["t_done_ns"] = frame["t_last_token_ns"]
        if "itls" in arrays:
            frame["event_t_ns"] = [
                None if bad else [int(first)] + [int(first + g) for g in
                                                 np.cumsum(np.asarray(gaps) * 1e9)]
                for bad, first, gaps in zip(failed, first_ns, arrays["itls"], strict=True)]
    for column in ("ttft_ms", "e2el_ms", "tpot_ms", "schedule_lag_ms", "ttft_from_scheduled_ms",
                   "e2el_from_scheduled_ms"):
        frame[column] = frame[column].astype("float64")
    return frame[REQUEST_COLUMNS]


def check_filename(row: dict[str, Any], meta: dict[str, Any], *, file: str, line: int) -> None:
    """The record must agree with what a paper-style file name says."""
    meta_gpu = normalized_gpu(meta["gpu_name_raw"], file=file, line=line)
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
