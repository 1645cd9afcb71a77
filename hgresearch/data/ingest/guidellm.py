"""guidellm benchmark reports (``guidellm benchmark --output-path benchmarks.json``).

Format read: guidellm v0.7 (``GenerativeBenchmarksReport``, metadata ``version: 2``; read at
vllm-project/guidellm v0.7.3-12-gee7a774): ``{"metadata", "config", "benchmarks": [...]}``,
each benchmark with

* ``config.strategy`` (``type_`` ``constant``/``poisson`` with ``rate``, ``concurrent`` with
  ``streams``, ``synchronous``, ``throughput``; ``max_concurrency``) and ``config.backend``
  (``model``);
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
from typing import Any

import numpy as np
import pandas as pd

from hgresearch.data.ingest.common import (
    Hardware,
    check_run_values,
    client_date,
    derived_run_fields,
    fill_latency_stats,
    missing_fields_error,
    number,
)
from hgresearch.data.runfolder import REQUEST_COLUMNS

#: Our latency metric -> (guidellm metric summarized over requests, factor to ms).
METRICS = {"ttft": ("time_to_first_token_ms", 1.0), "e2el": ("request_latency", 1000.0)}
_STAT_KEYS = {"mean": ("mean",), "median": ("median",), "std": ("std_dev",),
              "p100": ("max",), **{p: ("percentiles", p) for p in ("p50", "p90", "p95", "p99")}}
_STATUSES = ("successful", "errored", "incomplete")


def is_guidellm_report(document: Any) -> bool:
    """Whether a JSON document is a guidellm benchmarks report."""
    return (isinstance(document, dict) and isinstance(document.get("benchmarks"), list)
            and all(isinstance(b, dict) and "metrics" in b for b in document["benchmarks"]))


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
    model = _get(bench, "config", "backend", "model") or _get(document, "config", "backend",
                                                               "model")
    strategy = _get(bench, "config", "strategy")
    duration = bench.get("duration")
    if duration is None:
        start = _get(bench, "scheduler_metrics", "measure_start_time")
        end = _get(bench, "scheduler_metrics", "measure_end_time")
        duration = end - start if isinstance(start, (int, float)) and isinstance(
            end, (int, float)) else None
    totals = metrics.get("request_totals")
    required = {
        "config.backend.model": model,
        "config.strategy.type_": _get(strategy, "type_"),
        "duration": duration,
        "metrics.request_totals.successful": _get(totals, "successful"),
        "metrics.request_totals.total": _get(totals, "total"),
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
    max_concurrency = number(strategy.get("max_concurrency"), file=file, line=line,
                             field="config.strategy.max_concurrency")
    if kind in ("constant", "poisson"):
        rate = num("config.strategy.rate", strategy.get("rate"))
        burstiness = 1.0 if kind == "poisson" else math.nan
    elif kind == "concurrent":
        max_concurrency = num("config.strategy.streams", strategy.get("streams"))
    elif kind == "synchronous":
        max_concurrency = 1.0
    duration_s = num("duration", duration)
    completed = int(num("metrics.request_totals.successful", totals["successful"]))
    sent = int(num("metrics.request_totals.total", totals["total"]))
    tokens_in = int(num("metrics.prompt_token_count.successful.total_sum",
                        required["metrics.prompt_token_count.successful.total_sum"]))
    tokens_out = int(num("metrics.output_token_count.successful.total_sum",
                         required["metrics.output_token_count.successful.total_sum"]))

    row: dict[str, Any] = {
        "source_file": file, "source_line": line, "source_format": "guidellm",
        "date": client_date(_get(bench, "scheduler_metrics", "measure_start_time")),
        "backend": str(_get(bench, "config", "backend", "kind") or "guidellm"),
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


def _requests_frame(bench: dict[str, Any], *, file: str, line: int) -> pd.DataFrame | None:
    """The requests table from the report's per-request statistics (``None`` when absent)."""
    groups = bench.get("requests")
    if not isinstance(groups, dict) or not any(isinstance(groups.get(s), list)
                                               for s in _STATUSES):
        return None
    records = []
    for status in _STATUSES:
        for request in groups.get(status) or []:
            def value(key: str, request: dict[str, Any] = request, status: str = status
                      ) -> float:
                return number(request.get(key), file=file, line=line,
                              field=f"requests.{status}.{key}")
            sent_s, done_s = value("request_start_time"), value("request_end_time")
            records.append({
                "index": len(records), "warmup": False,
                "t_sent_ns": sent_s * 1e9, "t_done_ns": done_s * 1e9,
                "prompt_tokens": value("prompt_tokens"),
                "output_tokens": value("output_tokens"),
                "usage_source": "guidellm", "success": status == "successful",
                "error_class": None if status == "successful" else status,
                "error": request.get("error") if status != "successful" else None,
                "ttft_ms": value("time_to_first_token_ms"),
                "tpot_ms": value("inter_token_latency_ms"),
                "e2el_ms": value("request_latency") * 1000,
            })
    frame = pd.DataFrame.from_records(records)
    for column in REQUEST_COLUMNS:
        if column not in frame.columns:
            frame[column] = None
    for column in ("ttft_ms", "e2el_ms", "tpot_ms", "schedule_lag_ms", "ttft_from_scheduled_ms",
                   "e2el_from_scheduled_ms"):
        frame[column] = frame[column].astype("float64")
    frame["success"] = frame["success"].astype(bool)
    return frame[REQUEST_COLUMNS]
