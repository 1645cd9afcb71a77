"""aiperf profile exports (``<artifact dir>/profile_export_aiperf.json`` and, beside it,
``profile_export.jsonl``).

Three layouts, told apart by content (read in the wheels of ai-dynamo/aiperf 0.1.1-0.13.0 and
checked on files each wrote, tests/data/tools/aiperf-*):

* **0.1** (0.1.x): metrics under ``records`` (``{"tag", "unit", "avg", "p50", ...}``; TTFT is
  ``ttft``), no ``benchmark_duration`` or token totals; ``input_config.endpoint.model_names``
  and ``input_config.loadgen``;
* **0.2-0.8**: every metric at the top level (``{"unit", "avg", "p1" ... "p99", "min",
  "max", "std", "count"}``; counters such as ``request_count``, ``error_request_count``,
  ``total_isl``, ``total_osl``, ``benchmark_duration`` carry their value in ``avg``); the load in
  ``input_config.loadgen`` (``request_rate``, ``request_rate_mode``/``arrival_pattern``,
  ``arrival_smoothness``, ``concurrency``, ``request_count``); 0.8 adds ``aiperf_version``;
* **0.9 on** (0.13 current): the same metrics; the model in ``input_config.models.items[].name``
  and the load in ``input_config.phases[]`` (``kind`` ``profiling``/``warmup``; ``type``
  ``poisson``/``gamma`` (``smoothness``)/``constant``/``concurrency``/``user_centric``/
  ``fixed_schedule``; ``rate``, ``concurrency``, ``requests``); ``aiperf_version`` and
  ``schema_version``.

The export keeps only the options the user set: an unset arrival pattern is aiperf's default,
Poisson. Burstiness is vLLM's gamma shape: Poisson 1, gamma its smoothness (1 when unset),
constant ``inf``; no rate (concurrency-driven) is rate ``inf``.

Window and throughputs: ``request_count`` counts *successful* requests and the throughputs are
aiperf's own numbers. aiperf divides by ``benchmark_duration`` (first request to last
response) up to 0.10 and by the profiling phase's window (``start_time`` to ``end_time``) from
later versions on, so ``duration_s`` is the window aiperf used:
``request_count / request_throughput`` (else ``benchmark_duration``, else the phase window).

Definitions mapped onto vLLM's: aiperf's ``inter_token_latency`` is (request latency - TTFT) /
(output tokens - 1), vLLM's **TPOT**; its ``inter_chunk_latency`` (every gap between streamed
chunks) is vLLM's **ITL**; ``request_latency`` is E2EL. Statistics are the export's own
(``max`` is p100, ``p50`` the median); a missing one is computed from ``profile_export.jsonl``
when it is there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hgresearch.data.files import iter_json_lines
from hgresearch.data.ingest.common import (
    Hardware,
    check_run_values,
    client_date,
    derived_run_fields,
    fill_latency_stats,
    http_status,
    missing_fields_error,
    number,
    per_second,
    token_count,
    unsupported_version_error,
)
from hgresearch.data.runfolder import REQUEST_COLUMNS
from hgresearch.errors import InputError

SUMMARY_FILE = "profile_export_aiperf.json"
RECORDS_FILE = "profile_export.jsonl"
#: The layouts read, and the aiperf versions that write each (see the module docstring).
LAYOUTS = {"0.1": "0.1.x", "0.2": "0.2-0.8", "0.9": "0.9-0.13"}
READS = "0.1-0.13"
#: The newest aiperf checked; a file that names a newer one is read when its layout is known.
NEWEST_READ = (0, 13)
#: Our latency metric -> aiperf metric names (the first the file has; 0.1 says ``ttft``).
METRICS = {"ttft": ("time_to_first_token", "ttft"), "tpot": ("inter_token_latency",),
           "itl": ("inter_chunk_latency",), "e2el": ("request_latency",)}
_STAT_KEYS = {"mean": "avg", "p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99",
              "p100": "max", "std": "std"}
#: Arrival pattern -> burstiness (vLLM's gamma shape).
_BURSTINESS = {"poisson": 1.0, "constant": math.inf}


def is_aiperf_export(document: Any) -> bool:
    """Whether a JSON document is an aiperf ``profile_export_aiperf.json`` (any layout)."""
    if not isinstance(document, dict):
        return False
    if "aiperf_version" in document:
        return True
    metrics = document.get("records", document)
    return ("input_config" in document and isinstance(metrics, dict)
            and any(isinstance(metrics.get(name), dict) for name in
                    ("request_latency", "request_count", "request_throughput")))


def layout_of(document: Mapping[str, Any]) -> str | None:
    """The layout key of :data:`LAYOUTS` the export has, or ``None`` for an unknown one."""
    config = document.get("input_config")
    if isinstance(document.get("records"), dict):
        return "0.1"
    if isinstance(config, dict) and isinstance(config.get("phases"), list):
        return "0.9"
    if isinstance(config, dict) and isinstance(_get(config, "endpoint", "model_names"), list):
        return "0.2"
    return None


def _get(data: Any, *path: str | int) -> Any:
    for key in path:
        if isinstance(key, int):
            if not isinstance(data, list) or not -len(data) <= key < len(data):
                return None
        elif not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for part in text.split(".")[:2]:
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def _load(document: Mapping[str, Any], layout: str, *, file: str
          ) -> tuple[str | None, dict[str, Any]]:
    """(model, load) from ``input_config``: load has ``rate``, ``burstiness``,
    ``max_concurrency`` and ``requests`` (None where the file does not say)."""
    config = document.get("input_config") or {}
    if layout == "0.9":
        model = _get(config, "models", "items", 0, "name")
        phases = [p for p in config.get("phases") or [] if isinstance(p, dict)]
        profiling = [p for p in phases if p.get("kind", "profiling") == "profiling"
                     and not p.get("exclude_from_results")]
        phase = profiling[0] if profiling else {}
        kind = str(phase.get("type") or "")
        rate: Any = phase.get("rate")
        burstiness: Any = None
        if kind == "gamma":
            burstiness = phase.get("smoothness") or 1.0
        elif kind in _BURSTINESS and rate is not None:
            burstiness = _BURSTINESS[kind]
        if kind == "concurrency" or (rate is None and kind not in ("fixed_schedule",)):
            rate = math.inf
        elif kind == "fixed_schedule":
            rate = math.nan
        where = "input_config.phases[profiling]"
        return model, {"rate": rate, "burstiness": burstiness,
                       "max_concurrency": phase.get("concurrency"),
                       "requests": phase.get("requests"), "rate_field": f"{where}.rate",
                       "burstiness_field": f"{where}.smoothness",
                       "concurrency_field": f"{where}.concurrency",
                       "requests_field": f"{where}.requests"}
    models = _get(config, "endpoint", "model_names")
    model = models[0] if isinstance(models, list) and models else None
    loadgen = config.get("loadgen") or {}
    rate = loadgen.get("request_rate")
    pattern = str(loadgen.get("arrival_pattern") or loadgen.get("request_rate_mode")
                  or "poisson").lower()
    burstiness = None
    if rate is None or pattern == "concurrency_burst":
        rate = math.inf
    elif pattern == "gamma":
        burstiness = loadgen.get("arrival_smoothness") or 1.0
    else:
        burstiness = _BURSTINESS.get(pattern)
    return model, {"rate": rate, "burstiness": burstiness,
                   "max_concurrency": loadgen.get("concurrency"),
                   "requests": loadgen.get("request_count"),
                   "rate_field": "input_config.loadgen.request_rate",
                   "burstiness_field": "input_config.loadgen.arrival_smoothness",
                   "concurrency_field": "input_config.loadgen.concurrency",
                   "requests_field": "input_config.loadgen.request_count"}


def _window_s(document: Mapping[str, Any]) -> float | None:
    """The profiling phase's window from ``start_time``/``end_time`` (ISO 8601), if given."""
    try:
        start = datetime.fromisoformat(str(document["start_time"]))
        end = datetime.fromisoformat(str(document["end_time"]))
    except (KeyError, ValueError):
        return None
    seconds = (end - start).total_seconds()
    return seconds if seconds > 0 else None


def parse_export(document: dict[str, Any], *, file: str, hardware: Hardware | None
                 ) -> tuple[dict[str, Any], pd.DataFrame | None]:
    """One aiperf export -> (runs-table row, requests table from ``profile_export.jsonl``)."""
    line = 1
    layout = layout_of(document)
    version = str(document.get("aiperf_version") or "")
    if layout is None:
        found = version or "(no aiperf_version)"
        raise unsupported_version_error(
            "aiperf", found, READS, file=file, line=line,
            detail="input_config has neither endpoint.model_names nor phases")
    metrics: Mapping[str, Any] = document["records"] if layout == "0.1" else document
    model, load = _load(document, layout, file=file)

    def metric(*names: str) -> Any:
        return next((metrics[n] for n in names if isinstance(metrics.get(n), dict)), None)

    count = _get(metric("request_count"), "avg")
    throughput = _get(metric("request_throughput"), "avg")
    required: dict[str, Any] = {
        ("input_config.models.items[0].name" if layout == "0.9"
         else "input_config.endpoint.model_names"): model,
        "request_count.avg": count,
        "time_to_first_token.avg": _get(metric(*METRICS["ttft"]), "avg"),
        "request_latency.avg": _get(metric("request_latency"), "avg"),
    }
    missing = [field for field, value in required.items() if value is None]
    if hardware is None:
        missing.append("hardware (a --hardware option or hardware sidecar)")
    if missing:
        if version and _version_tuple(version) > NEWEST_READ:
            raise unsupported_version_error("aiperf", version, READS, file=file, line=line,
                                            detail=f"missing {', '.join(missing)}")
        raise missing_fields_error(missing, file=file, line=line)
    assert hardware is not None
    for names in METRICS.values():
        unit = _get(metric(*names), "unit")
        if unit is not None and unit != "ms":
            raise InputError(f"expected unit 'ms', got {unit!r}", file=file, line=line,
                             field=f"{names[0]}.unit")

    def num(field: str, value: Any, allow_none: bool = False, allow_inf: bool = False
            ) -> float:
        return number(value, file=file, line=line, field=field, allow_none=allow_none,
                      allow_inf=allow_inf)

    completed = token_count(count, file=file, line=line, field="request_count.avg")
    errors = _get(metric("error_request_count"), "avg")
    failed = 0 if errors is None else token_count(errors, file=file, line=line,
                                                  field="error_request_count.avg")
    sent = (token_count(load["requests"], file=file, line=line, field=load["requests_field"])
            if load["requests"] is not None else completed + failed)
    if sent < completed + failed:  # a run stopped by duration sends fewer than asked
        sent = completed + failed

    # aiperf's own window: count / its request throughput; else what the file says.
    duration_s = math.nan
    if throughput is not None and num("request_throughput.avg", throughput) > 0:
        duration_s = completed / num("request_throughput.avg", throughput)
    elif _get(metric("benchmark_duration"), "avg") is not None:
        duration_s = num("benchmark_duration.avg", _get(metric("benchmark_duration"), "avg"))
    elif _window_s(document) is not None:
        duration_s = float(_window_s(document) or math.nan)
    if math.isnan(duration_s):
        raise missing_fields_error(["request_throughput.avg (or benchmark_duration.avg)"],
                                   file=file, line=line)

    tokens_in = _total(metric, "total_isl", "input_sequence_length", completed, file=file)
    tokens_out = _total(metric, "total_osl", "output_sequence_length", completed, file=file)
    rate = num(load["rate_field"], load["rate"], allow_none=True, allow_inf=True)
    cap = load["max_concurrency"]
    row: dict[str, Any] = {
        "source_file": file, "source_line": line, "source_format": "aiperf",
        "source_version": version or LAYOUTS[layout],
        "date": client_date(document.get("start_time")),
        "backend": str(_get(document, "input_config", "endpoint", "type") or "aiperf"),
        "model_id": str(model), "model": str(model).rstrip("/").split("/")[-1],
        "dataset": _dataset(document, layout),
        "gpu_name": hardware.gpu_name, "gpu_count": hardware.gpu_count,
        "tensor_parallel_size": hardware.gpu_count, "replicas": hardware.replicas,
        "hardware": hardware.label,
        "num_prompts": sent, "request_rate_qps": rate,
        "burstiness": num(load["burstiness_field"], load["burstiness"], allow_none=True,
                          allow_inf=True),
        "max_concurrency": (num(load["concurrency_field"], cap, allow_none=True)
                            if not isinstance(cap, list) else math.nan),
        "duration_s": duration_s, "completed": completed, "failed": float(failed),
        **derived_run_fields(duration_s, completed, tokens_in, tokens_out),
        "request_goodput_rps": per_second(num("good_request_count.avg", _get(
            metric("good_request_count"), "avg"), allow_none=True), duration_s),
    }
    # aiperf's own throughputs (over its window) win over the ones derived above.
    for column, name in (("request_throughput_rps", "request_throughput"),
                         ("output_throughput_tok_per_s", "output_token_throughput"),
                         ("total_token_throughput_tok_per_s", "total_token_throughput"),
                         ("request_goodput_rps", "goodput")):
        value = _get(metric(name), "avg")
        if value is not None:
            row[column] = num(f"{name}.avg", value)
    for ours, names in METRICS.items():
        summary = metric(*names)
        for stat, key in _STAT_KEYS.items():
            value = _get(summary, key)
            if value is not None:
                row[f"{stat}_{ours}_ms"] = num(f"{names[0]}.{key}", value)
    records_path = Path(file).with_name(RECORDS_FILE)
    requests = read_records(records_path) if records_path.is_file() else None
    samples: dict[str, np.ndarray | None] = {}
    if requests is not None and not requests.empty:
        ok = requests[requests.success & ~requests.warmup]
        samples = {m: ok[f"{m}_ms"].to_numpy(dtype="float64") for m in ("ttft", "tpot", "e2el")}
        events = [np.diff(np.asarray(t, dtype="int64")) / 1e6 for t in ok.event_t_ns
                  if isinstance(t, list)]
        samples["itl"] = np.concatenate(events) if events else None
    fill_latency_stats(row, samples)
    check_run_values(row, file=file, line=line)
    return row, requests


def _total(metric: Any, total: str, per_request: str, completed: int, *, file: str) -> int:
    """A token total: ``total_*`` (0.2 on), else the per-request metric's ``sum``, else its
    mean times its count (0.1 writes no total)."""
    value = _get(metric(total), "avg")
    if value is not None:
        return token_count(value, file=file, line=1, field=f"{total}.avg")
    summary = metric(per_request)
    if _get(summary, "sum") is not None:
        return token_count(summary["sum"], file=file, line=1, field=f"{per_request}.sum")
    mean, count = _get(summary, "avg"), _get(summary, "count")
    if mean is None:
        raise missing_fields_error([f"{total}.avg"], file=file, line=1)
    n = completed if count is None else count
    return token_count(number(mean, file=file, line=1, field=f"{per_request}.avg") * n,
                       file=file, line=1, field=f"{per_request}.avg")


def _dataset(document: Mapping[str, Any], layout: str) -> str:
    if layout == "0.9":
        name = (_get(document, "input_config", "datasets", 0, "public_dataset")
                or _get(document, "input_config", "datasets", 0, "type"))
    else:
        name = (_get(document, "input_config", "input", "public_dataset")
                or _get(document, "input_config", "input", "custom_dataset_type"))
    return str(name or "")


def read_records(path: Path) -> pd.DataFrame:
    """The requests table from aiperf's ``profile_export.jsonl`` (errors name file:line)."""
    file = str(path)
    records: list[dict[str, Any]] = []
    for line, record in iter_json_lines(path):
        meta = record.get("metadata") if isinstance(record, dict) else None
        metrics = (record.get("metrics") or {}) if isinstance(record, dict) else None
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
        if math.isnan(ttft):
            ttft = value("ttft")
        gaps = _get(metrics, "inter_chunk_latency", "value")
        events = None
        if isinstance(gaps, list) and not math.isnan(ttft):
            first = sent + round(ttft * 1e6)
            offsets = np.cumsum([number(g, file=file, line=line,
                                        field="metrics.inter_chunk_latency.value",
                                        allow_none=False) for g in gaps])
            events = [first] + [first + round(g * 1e6) for g in offsets]
        error = record.get("error")
        phase = meta.get("phase_kind") or meta.get("benchmark_phase")
        prompt = value("input_sequence_length")
        if math.isnan(prompt):
            prompt = value("error_isl")
        records.append({
            "index": meta.get("session_num", len(records)), "warmup": phase == "warmup",
            "t_sent_ns": sent, "t_done_ns": number(meta.get("request_end_ns"), file=file,
                                                   line=line, field="metadata.request_end_ns"),
            "t_first_token_ns": sent + ttft * 1e6,
            "prompt_tokens": prompt, "output_tokens": value("output_sequence_length"),
            "usage_source": "aiperf",
            "http_status": http_status(error.get("code")) if isinstance(error, dict) else None,
            "success": error is None,
            "error_class": error.get("type") if isinstance(error, dict) else None,
            "error": (str(error.get("message") or error.get("type") or error)
                      if isinstance(error, dict) else (str(error) if error else None)),
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
        frame["http_status"] = frame["http_status"].astype("Int64")
    for column in ("ttft_ms", "e2el_ms", "tpot_ms", "schedule_lag_ms", "ttft_from_scheduled_ms",
                   "e2el_from_scheduled_ms"):
        frame[column] = frame[column].astype("float64")
    return frame[REQUEST_COLUMNS]
