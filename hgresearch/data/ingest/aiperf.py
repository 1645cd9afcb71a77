"""aiperf profile exports (``artifacts/<run>/profile_export_aiperf.json`` and, beside it,
``profile_export.jsonl``).

Format read: aiperf 0.1.1 (ai-dynamo/aiperf, October 2025; ``JsonExportData`` and
``MetricRecordInfo``, see its docs/tutorials/working-with-profile-exports.md):

* ``profile_export_aiperf.json``: one object; each metric is ``{"unit", "avg", "p50", "p90",
  "p95", "p99", "min", "max", "std"}`` (display units: ms for latencies, s for
  ``benchmark_duration``); counters (``request_count``, ``error_request_count``,
  ``total_isl``, ``total_osl``, ``benchmark_duration``) carry their value in ``avg``;
  ``input_config`` holds the options the user set (``endpoint.model_names``,
  ``loadgen.request_rate``/``concurrency``/``request_count``, ``input.public_dataset``);
* ``profile_export.jsonl``: one request per line, ``{"metadata": {"request_start_ns",
  "request_end_ns", ...}, "metrics": {name: {"value", "unit"}}, "error": null | {...}}``.

Definitions mapped onto vLLM's: aiperf's ``inter_token_latency`` is (request latency - TTFT) /
(output tokens - 1), vLLM's **TPOT**; its ``inter_chunk_latency`` (every gap between streamed
chunks) is vLLM's **ITL**; ``request_latency`` is E2EL. Statistics are the export's own; a
missing one is computed from ``profile_export.jsonl`` when it is there.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hgresearch.data.ingest.common import (
    RUN_LATENCY_METRICS,
    Hardware,
    check_run_values,
    client_date,
    derived_run_fields,
    fill_latency_stats,
    missing_fields_error,
    number,
    per_second,
)
from hgresearch.data.runfolder import REQUEST_COLUMNS
from hgresearch.errors import InputError

SUMMARY_FILE = "profile_export_aiperf.json"
RECORDS_FILE = "profile_export.jsonl"
#: Our latency metric -> aiperf metric (all in ms in the export).
METRICS = {"ttft": "time_to_first_token", "tpot": "inter_token_latency",
           "itl": "inter_chunk_latency", "e2el": "request_latency"}
_STAT_KEYS = {"mean": "avg", "p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99",
              "p100": "max", "std": "std"}


def is_aiperf_export(document: Any) -> bool:
    """Whether a JSON document is an aiperf ``profile_export_aiperf.json``."""
    return (isinstance(document, dict) and "input_config" in document
            and isinstance(document.get("request_latency", document.get("request_count")),
                           dict))


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def parse_export(document: dict[str, Any], *, file: str, hardware: Hardware | None
                 ) -> tuple[dict[str, Any], pd.DataFrame | None]:
    """One aiperf export -> (runs-table row, requests table from ``profile_export.jsonl``)."""
    line = 1
    models = _get(document, "input_config", "endpoint", "model_names")
    required = {
        "input_config.endpoint.model_names": models[0] if isinstance(models, list) and models
        else None,
        "benchmark_duration.avg": _get(document, "benchmark_duration", "avg"),
        "request_count.avg": _get(document, "request_count", "avg"),
        "total_isl.avg": _get(document, "total_isl", "avg"),
        "total_osl.avg": _get(document, "total_osl", "avg"),
        **{f"{name}.avg": _get(document, name, "avg")
           for name in ("time_to_first_token", "request_latency")},
    }
    missing = [field for field, value in required.items() if value is None]
    if hardware is None:
        missing.append("hardware (a --hardware option or hardware sidecar)")
    if missing:
        raise missing_fields_error(missing, file=file, line=line)
    assert hardware is not None
    for name in METRICS.values():
        unit = _get(document, name, "unit")
        if unit is not None and unit != "ms":
            raise InputError(f"expected unit 'ms', got {unit!r}", file=file, line=line,
                             field=f"{name}.unit")

    def num(field: str, value: Any, allow_none: bool = False, allow_inf: bool = False
            ) -> float:
        return number(value, file=file, line=line, field=field, allow_none=allow_none,
                      allow_inf=allow_inf)

    duration_s = num("benchmark_duration.avg", required["benchmark_duration.avg"])
    completed = int(num("request_count.avg", required["request_count.avg"]))
    failed = num("error_request_count.avg", _get(document, "error_request_count", "avg"),
                 allow_none=True)
    failed = 0.0 if math.isnan(failed) else failed
    loadgen = _get(document, "input_config", "loadgen") or {}
    sent = loadgen.get("request_count")
    sent = int(num("input_config.loadgen.request_count", sent)) if sent is not None \
        else int(completed + failed)
    rate = num("input_config.loadgen.request_rate", loadgen.get("request_rate"),
               allow_none=True, allow_inf=True)
    tokens_in = int(num("total_isl.avg", required["total_isl.avg"]))
    tokens_out = int(num("total_osl.avg", required["total_osl.avg"]))

    model = str(required["input_config.endpoint.model_names"])
    row: dict[str, Any] = {
        "source_file": file, "source_line": line, "source_format": "aiperf",
        "date": client_date(document.get("start_time")),
        "backend": str(_get(document, "input_config", "endpoint", "type") or "aiperf"),
        "model_id": model, "model": model.rstrip("/").split("/")[-1],
        "dataset": str(_get(document, "input_config", "input", "public_dataset") or ""),
        "gpu_name": hardware.gpu_name, "gpu_count": hardware.gpu_count,
        "tensor_parallel_size": hardware.gpu_count, "replicas": hardware.replicas,
        "hardware": hardware.label,
        "num_prompts": sent, "request_rate_qps": math.inf if math.isnan(rate) else rate,
        "burstiness": math.nan,
        "max_concurrency": num("input_config.loadgen.concurrency", loadgen.get("concurrency"),
                               allow_none=True),
        "duration_s": duration_s, "completed": completed, "failed": failed,
        **derived_run_fields(duration_s, completed, tokens_in, tokens_out),
        "request_goodput_rps": per_second(num("good_request_count.avg", _get(
            document, "good_request_count", "avg"), allow_none=True), duration_s),
    }
    for metric in RUN_LATENCY_METRICS:
        summary = document.get(METRICS[metric])
        for stat, key in _STAT_KEYS.items():
            value = _get(summary, key)
            if value is not None:
                row[f"{stat}_{metric}_ms"] = num(f"{METRICS[metric]}.{key}", value)
    records_path = Path(file).with_name(RECORDS_FILE)
    requests = read_records(records_path) if records_path.is_file() else None
    samples: dict[str, np.ndarray | None] = {}
    if requests is not None and not requests.empty:
        ok = requests[requests.success & ~requests.warmup]
        samples = {m: ok[f"{m}_ms"].to_numpy(dtype="float64") for m in ("ttft", "tpot", "e2el")}
        samples["itl"] = (np.concatenate([np.diff(np.asarray(t, dtype="int64")) / 1e6
                                          for t in ok.event_t_ns if isinstance(t, list)])
                          if ok.event_t_ns.map(lambda t: isinstance(t, list)).any() else None)
    fill_latency_stats(row, samples)
    check_run_values(row, file=file, line=line)
    return row, requests


def read_records(path: Path) -> pd.DataFrame:
    """The requests table from aiperf's ``profile_export.jsonl`` (errors name file:line)."""
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError("not a UTF-8 text file", file=file) from None
    records = []
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as err:
            raise InputError(f"malformed JSON: {err.msg}", file=file, line=line) from None
        meta, metrics = record.get("metadata"), record.get("metrics") or {}
        if not isinstance(meta, dict) or not isinstance(metrics, dict):
            raise InputError("expected 'metadata' and 'metrics' objects", file=file, line=line,
                             field="metadata")

        def value(name: str, metrics: dict[str, Any] = metrics, line: int = line) -> float:
            return number(_get(metrics, name, "value"), file=file, line=line,
                          field=f"metrics.{name}.value")
        number(meta.get("request_start_ns"), file=file, line=line,
               field="metadata.request_start_ns", allow_none=False)
        sent = int(meta["request_start_ns"])  # epoch ns: float64 would round them
        ttft = value("time_to_first_token")
        gaps = _get(metrics, "inter_chunk_latency", "value")
        events = None
        if isinstance(gaps, list) and not math.isnan(ttft):
            first = sent + round(ttft * 1e6)
            events = [first] + [first + round(g * 1e6) for g in np.cumsum(
                [number(g, file=file, line=line, field="metrics.inter_chunk_latency.value",
                        allow_none=False) for g in gaps])]
        error = record.get("error")
        records.append({
            "index": meta.get("session_num", len(records)), "warmup":
            meta.get("benchmark_phase") == "warmup",
            "t_sent_ns": sent, "t_done_ns": number(meta.get("request_end_ns"), file=file,
                                                   line=line, field="metadata.request_end_ns"),
            "t_first_token_ns": sent + ttft * 1e6,
            "prompt_tokens": value("input_sequence_length"),
            "output_tokens": value("output_sequence_length"), "usage_source": "aiperf",
            "http_status": error.get("code") if isinstance(error, dict) else None,
            "success": error is None,
            "error_class": error.get("type") if isinstance(error, dict) else None,
            "error": error.get("message") if isinstance(error, dict) else None,
            "event_t_ns": events, "ttft_ms": ttft, "tpot_ms": value("inter_token_latency"),
            "e2el_ms": value("request_latency"),
        })
    frame = pd.DataFrame.from_records(records)
    for column in REQUEST_COLUMNS:
        if column not in frame.columns:
            frame[column] = None
    if not frame.empty:
        frame["success"] = frame["success"].astype(bool)
        frame["t_last_token_ns"] = frame["t_sent_ns"] + frame["e2el_ms"] * 1e6
    for column in ("ttft_ms", "e2el_ms", "tpot_ms", "schedule_lag_ms", "ttft_from_scheduled_ms",
                   "e2el_from_scheduled_ms"):
        frame[column] = frame[column].astype("float64")
    return frame[REQUEST_COLUMNS]
