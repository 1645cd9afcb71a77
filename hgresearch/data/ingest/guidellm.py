"""guidellm benchmark reports (``guidellm run --output kind=json,...`` from 0.8,
``guidellm benchmark --output-path benchmarks.json`` before).

Two layouts, told apart by content (read in the wheels of guidellm 0.2.1-0.8.1 and checked on
files 0.3.1 and 0.8.1 wrote, tests/data/tools/guidellm-*):

* **0.4 on** (0.8.1 current; ``metadata.version`` 2 and ``metadata.guidellm_version`` from
  0.7): ``{"metadata", "config"|"args", "benchmarks": [...]}``, each benchmark with
  ``config.strategy`` (``type_`` ``constant``/``poisson`` with ``rate``, ``concurrent`` with
  ``streams``, ``synchronous``, ``throughput``) and ``config.backend.model``; the
  concurrency the user set is ``config.profile.max_concurrency`` (``strategy.max_concurrency``
  holds guidellm's built-in ceiling, 512 or 10240, when none was set, so it is not read);
* **0.2-0.3**: no metadata; each benchmark with ``args.strategy``/``args.profile``,
  ``worker.backend_model``, ``request_totals`` beside ``metrics``, and per-request
  ``start_time``/``first_token_time``/``last_token_time``/``end_time``;

and in both
* ``duration`` (s; else ``scheduler_metrics.measure_end_time - measure_start_time``);
* ``metrics``: ``request_totals`` (``successful``/``errored``/``incomplete``/``total``) and
  status distributions (``{"successful": {"mean", "median", "std_dev", "max", "total_sum",
  "percentiles": {"p50", "p90", "p95", "p99", ...}}, ...}``) of ``prompt_token_count``,
  ``output_token_count``, ``time_to_first_token_ms``, ``inter_token_latency_ms``,
  ``request_latency`` (s);
* ``requests``: ``successful``/``errored``/``incomplete`` lists with ``request_start_time``,
  ``request_end_time`` (s), ``prompt_tokens``, ``output_tokens``, ``time_to_first_token_ms``,
  ``inter_token_latency_ms``, ``request_latency`` (s).

Definitions mapped onto vLLM's: guidellm's per-request ``inter_token_latency_ms`` is
(last token - first token) / (output tokens - 1), vLLM's **TPOT**; but the report's
distribution of it weighs each request by its output tokens (vLLM's weighs requests equally),
so TPOT statistics come from the per-request values only (NaN without ``requests``).
guidellm's ``time_per_output_token_ms`` includes the first token and has no vLLM counterpart;
vLLM's ITL (every gap) is not in the report, so the ``*_itl_ms`` columns stay NaN. TTFT and
E2EL statistics are the report's own (its percentile method, over successful requests); only
missing ones are computed from the per-request values. Throughputs are completed requests
(tokens) over the benchmark duration, as vLLM's. One benchmark is one run; its 1-based
position in ``benchmarks`` is the row's ``source_line``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from hgresearch.data.ingest.common import (
    Hardware,
    check_run_values,
    client_date,
    derived_run_fields,
    fill_latency_stats,
    http_status,
    missing_fields_error,
    number,
    token_count,
    unsupported_version_error,
)
from hgresearch.data.runfolder import requests_table

#: Our latency metric -> (guidellm metric summarized over requests, factor to ms).
METRICS = {"ttft": ("time_to_first_token_ms", 1.0), "e2el": ("request_latency", 1000.0)}
_STAT_KEYS = {"mean": ("mean",), "median": ("median",), "std": ("std_dev",),
              "p100": ("max",), **{p: ("percentiles", p) for p in ("p50", "p90", "p95", "p99")}}
_STATUSES = ("successful", "errored", "incomplete")
#: The status in guidellm's error text (httpx's ``HTTPStatusError`` message).
_STATUS_IN_ERROR = re.compile(r"(?:Server|Client) error '(\d{3}) ")


#: The report layouts read (see the module docstring) and the newest metadata version.
READS = "0.2-0.8 (report metadata version 2)"
METADATA_VERSIONS = (2,)


def is_guidellm_report(document: Any) -> bool:
    """Whether a JSON document is a guidellm benchmarks report."""
    return (isinstance(document, dict) and isinstance(document.get("benchmarks"), list)
            and all(isinstance(b, dict) and "metrics" in b for b in document["benchmarks"]))


def report_version(document: Mapping[str, Any]) -> str:
    """The guidellm version the report names (0.7 on), else the range whose layout it has."""
    version = _get(document, "metadata", "guidellm_version")
    if version:
        return str(version)
    first = (document.get("benchmarks") or [{}])[0]
    return "0.2-0.3" if isinstance(first, dict) and "args" in first else "0.4-0.6"


def check_report(document: Mapping[str, Any], *, file: str) -> None:
    """A report whose metadata version is not one read is one error naming it."""
    meta_version = _get(document, "metadata", "version")
    if meta_version is not None and meta_version not in METADATA_VERSIONS:
        raise unsupported_version_error(
            "guidellm", f"{report_version(document)} (report metadata version {meta_version})",
            READS, file=file, line=0)


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def parse_benchmark(bench: dict[str, Any], document: dict[str, Any], *, file: str, line: int,
                    hardware: Hardware | None) -> tuple[dict[str, Any], pd.DataFrame | None]:
    """One benchmark of a report (``line``: its 1-based position) -> (runs-table row,
    requests table or ``None``)."""
    metrics = bench["metrics"]
    legacy = "args" in bench  # 0.2-0.3
    settings = bench["args"] if legacy else bench.get("config")
    model = (_get(bench, "worker", "backend_model") if legacy else None) or _get(
        settings, "backend", "model") or _get(document, "config", "backend", "model") or _get(
        document, "config", "spec", "backend", "model") or _get(document, "args", "model")
    strategy = _get(settings, "strategy")
    duration = bench.get("duration")
    if duration is None:
        start = _get(bench, "scheduler_metrics", "measure_start_time")
        end = _get(bench, "scheduler_metrics", "measure_end_time")
        duration = end - start if isinstance(start, (int, float)) and isinstance(
            end, (int, float)) else None
    totals = bench.get("request_totals") if legacy else metrics.get("request_totals")
    where = "args" if legacy else "config"
    totals_at = "request_totals" if legacy else "metrics.request_totals"
    required = {
        f"{where}.backend.model": model,
        f"{where}.strategy.type_": _get(strategy, "type_"),
        "duration": duration,
        f"{totals_at}.successful": _get(totals, "successful"),
        f"{totals_at}.total": _get(totals, "total"),
        "metrics.prompt_token_count.successful.total_sum": _get(
            metrics, "prompt_token_count", "successful", "total_sum"),
        "metrics.output_token_count.successful.total_sum": _get(
            metrics, "output_token_count", "successful", "total_sum"),
        **{f"metrics.{name}.successful": _get(metrics, name, "successful")
           for name, _ in METRICS.values()},
    }
    missing = [field for field, value in required.items() if value is None]
    if hardware is None:
        missing.append("hardware (a --hardware option or hardware sidecar)")
    if missing:
        raise missing_fields_error(missing, file=file, line=line)
    assert hardware is not None

    def num(field: str, value: Any) -> float:
        return number(value, file=file, line=line, field=field, allow_none=False)

    kind = strategy["type_"]
    rate = math.inf
    burstiness = math.nan
    # The cap the user set (guidellm's own ceiling sits in strategy.max_concurrency).
    max_concurrency = number(_get(settings, "profile", "max_concurrency"), file=file,
                             line=line, field=f"{where}.profile.max_concurrency")
    if kind in ("constant", "poisson"):
        rate = num(f"{where}.strategy.rate", strategy.get("rate"))
        burstiness = 1.0 if kind == "poisson" else math.inf
    elif kind == "concurrent":
        max_concurrency = num(f"{where}.strategy.streams", strategy.get("streams"))
    elif kind == "synchronous":
        max_concurrency = 1.0
    duration_s = num("duration", duration)
    completed = token_count(required[f"{totals_at}.successful"], file=file, line=line,
                            field=f"{totals_at}.successful")
    sent = token_count(required[f"{totals_at}.total"], file=file, line=line,
                       field=f"{totals_at}.total")
    tokens_in = token_count(required["metrics.prompt_token_count.successful.total_sum"],
                            file=file, line=line,
                            field="metrics.prompt_token_count.successful.total_sum")
    tokens_out = token_count(required["metrics.output_token_count.successful.total_sum"],
                             file=file, line=line,
                             field="metrics.output_token_count.successful.total_sum")
    start_s = bench.get("start_time") or _get(bench, "scheduler_metrics", "measure_start_time")
    row: dict[str, Any] = {
        "source_file": file, "source_line": line, "source_format": "guidellm",
        "source_version": report_version(document),
        "date": client_date(start_s),
        "backend": str(_get(settings, "backend", "kind") or _get(bench, "worker", "backend_type")
                       or "guidellm"),
        "model_id": str(model), "model": str(model).rstrip("/").split("/")[-1],
        "dataset": "",
        "gpu_name": hardware.gpu_name, "gpu_count": hardware.gpu_count,
        "tensor_parallel_size": hardware.gpu_count, "replicas": hardware.replicas,
        "hardware": hardware.label,
        "num_prompts": sent, "request_rate_qps": rate, "burstiness": burstiness,
        "max_concurrency": max_concurrency, "duration_s": duration_s,
        "completed": completed, "failed": float(sent - completed),
        **derived_run_fields(duration_s, completed, tokens_in, tokens_out),
        "request_goodput_rps": math.nan,
    }
    for metric, (name, factor) in METRICS.items():
        summary = metrics[name]["successful"]
        for stat, path in _STAT_KEYS.items():
            value = _get(summary, *path)
            if value is not None:
                field = f"metrics.{name}.successful.{'.'.join(path)}"
                row[f"{stat}_{metric}_ms"] = num(field, value) * factor
    requests = _requests_frame(bench, file=file, line=line)
    samples: dict[str, np.ndarray | None] = {}
    if requests is not None:
        ok = requests[requests.success]
        samples = {m: ok[f"{m}_ms"].to_numpy(dtype="float64") for m in ("ttft", "tpot", "e2el")}
    fill_latency_stats(row, samples)
    check_run_values(row, file=file, line=line)
    return row, requests


def _status_in(error: Any) -> int | None:
    match = _STATUS_IN_ERROR.search(str(error)) if error else None
    return int(match[1]) if match else None


def _ns(seconds: Any) -> int | None:
    """Epoch seconds (float) -> integer ns, ``None`` when absent."""
    return None if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) \
        else int(round(seconds * 1e9))


def _requests_frame(bench: dict[str, Any], *, file: str, line: int) -> pd.DataFrame | None:
    """The requests table (:func:`hgresearch.data.runfolder.requests_table`) from the report's
    per-request statistics (``None`` when absent). Times: 0.4 on, ``info.timings``
    (``request_start``, ``first_token_iteration``, ``last_token_iteration``,
    ``request_end``); 0.2-0.3, ``start_time``/``first_token_time``/``last_token_time``/
    ``end_time``. Without them TTFT and E2EL come from the request's own ms values."""
    groups = bench.get("requests")
    if not isinstance(groups, dict) or not any(isinstance(groups.get(s), list)
                                               for s in _STATUSES):
        return None
    records: list[dict[str, Any]] = []
    own: list[dict[str, float]] = []  # guidellm's own per-request latencies, by index
    for status in _STATUSES:
        for request in groups.get(status) or []:
            if not isinstance(request, dict):
                continue
            field = f"requests.{status}"
            own.append({
                column: number(request.get(key), file=file, line=line,
                               field=f"{field}.{key}") * factor
                for column, key, factor in (("ttft_ms", "time_to_first_token_ms", 1.0),
                                            ("tpot_ms", "inter_token_latency_ms", 1.0),
                                            ("e2el_ms", "request_latency", 1000.0))})
            timings = _get(request, "info", "timings") or {}
            sent = _ns(timings.get("request_start", request.get("start_time")))
            if sent is None:
                sent = _ns(request.get("request_start_time"))
            first = _ns(timings.get("first_token_iteration", request.get("first_token_time")))
            last = _ns(timings.get("last_token_iteration", request.get("last_token_time")))
            done = _ns(timings.get("request_end", request.get("end_time")))
            if done is None:
                done = _ns(request.get("request_end_time"))
            if first is None and sent is not None and request.get("time_to_first_token_ms"):
                first = sent + int(round(number(request["time_to_first_token_ms"], file=file,
                                                line=line, field=f"{field}.time_to_first_token_ms")
                                         * 1e6))
            error = _get(request, "info", "error") or request.get("error")
            records.append({
                "index": len(records), "warmup": False,
                "t_sent_ns": sent, "t_first_token_ns": first, "t_last_token_ns": last,
                "t_done_ns": done,
                "prompt_tokens": request.get("prompt_tokens"),
                "output_tokens": request.get("output_tokens"),
                "usage_source": "guidellm", "success": status == "successful",
                "http_status": http_status(_get(request, "info", "status_code"))
                or _status_in(error),
                "error_class": None if status == "successful" else status,
                "error": None if status == "successful" else (str(error) if error else None),
            })
    frame = requests_table(records)
    # The latencies guidellm computed itself win over ones from its float-second timestamps.
    by_index = pd.DataFrame(own, index=range(len(own)))
    for column in ("ttft_ms", "tpot_ms", "e2el_ms"):
        values = by_index[column].reindex(frame["index"].astype(int)).to_numpy()
        frame[column] = np.where(np.isnan(values), frame[column].to_numpy(dtype="float64"),
                                 values)
    return frame
