"""Cross-check a run against the server's own accounting (Prometheus ``/metrics``).

The sweep scrapes ``/metrics`` just before and just after each run; the difference is what the
server counted for that run alone (nothing else talks to the server meanwhile). Written as
``server_metrics.json`` beside the run's ``summary.json``
(:func:`hgresearch.data.runfolder.write_server_metrics`):

* ``server``: deltas of finished requests (by finish reason), prompt and generation tokens, and
  TTFT / inter-token / end-to-end latency histograms (count, mean, bucket quantiles);
  ``engine``: the engine's own step and cache accounting — engine steps run
  (``vllm:iteration_tokens_total`` count) and the tokens they scheduled, preemptions, the
  summed prefill / decode / queue times of the requests — and ``kv_cache``: the KV cache the
  server allocated (``vllm:cache_config_info``: ``num_gpu_blocks``, ``block_size``), so analysis
  can use the server's block count instead of a catalog bound;
* ``client``: the same figures from the client's summary;
* ``checks``: agreement of request and token counts; ``token_counts_agree`` is False (and
  ``disagreements`` lists why) when they differ.
"""

from __future__ import annotations

import math
import re
import urllib.error
import urllib.request
from typing import Any

_LINE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+"
                   r"(?P<value>[-+0-9.eEinfINFNa]+)(?:\s+\d+)?$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

#: Histograms compared with the client (vLLM renamed TPOT to inter-token latency in v1).
HISTOGRAMS = {
    "ttft": ("vllm:time_to_first_token_seconds",),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "e2el": ("vllm:e2e_request_latency_seconds",),
}
COUNTERS = {
    "prompt_tokens": "vllm:prompt_tokens_total",
    "generation_tokens": "vllm:generation_tokens_total",
    "requests_finished": "vllm:request_success_total",
}

#: Engine accounting kept per run (delta between the scrapes): key -> metric name.
ENGINE_COUNTERS = {
    "steps": "vllm:iteration_tokens_total_count",
    "step_tokens": "vllm:iteration_tokens_total_sum",
    "preemptions": "vllm:num_preemptions_total",
    "prefill_time_s": "vllm:request_prefill_time_seconds_sum",
    "decode_time_s": "vllm:request_decode_time_seconds_sum",
    "queue_time_s": "vllm:request_queue_time_seconds_sum",
    "inference_time_s": "vllm:request_inference_time_seconds_sum",
}
#: Labels of ``vllm:cache_config_info`` kept as the run's KV cache (numbers where they are).
KV_CACHE_LABELS = ("num_gpu_blocks", "block_size", "kv_cache_size_tokens", "kv_cache_memory_bytes",
                   "num_gpu_blocks_override", "enable_prefix_caching", "cache_dtype")

Sample = tuple[str, tuple[tuple[str, str], ...], float]


def parse_prometheus(text: str) -> list[Sample]:
    """Samples ``(name, sorted labels, value)`` of a Prometheus text exposition."""
    samples: list[Sample] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if not match:
            continue
        labels = tuple(sorted(_LABEL.findall(match["labels"] or "")))
        try:
            value = float(match["value"])
        except ValueError:
            continue
        samples.append((match["name"], labels, value))
    return samples


def scrape(base_url: str, timeout_s: float = 10.0) -> list[Sample] | None:
    """``GET /metrics``; None when the server has no metrics endpoint or does not answer."""
    try:
        with urllib.request.urlopen(base_url + "/metrics", timeout=timeout_s) as resp:  # noqa: S310
            return parse_prometheus(resp.read().decode("utf-8", errors="replace"))
    except (OSError, urllib.error.URLError):
        return None


def _total(samples: list[Sample], name: str, **where: str) -> float:
    values = [v for n, labels, v in samples if n == name
              and all((k, w) in labels for k, w in where.items())]
    return float(sum(values)) if values else math.nan


def _buckets(samples: list[Sample], name: str) -> dict[float, float]:
    out: dict[float, float] = {}
    for n, labels, v in samples:
        if n != name + "_bucket":
            continue
        le = dict(labels).get("le")
        if le is None:
            continue
        bound = math.inf if le in ("+Inf", "Inf") else float(le)
        out[bound] = out.get(bound, 0.0) + v
    return out


def histogram_quantile(buckets: dict[float, float], q: float) -> float:
    """Quantile from cumulative bucket counts, linear within a bucket (Prometheus' method)."""
    bounds = sorted(buckets)
    if not bounds:
        return math.nan
    total = buckets[bounds[-1]]
    if total <= 0:
        return math.nan
    rank = q * total
    lower, below = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                return lower
            width = count - below
            return lower + (bound - lower) * ((rank - below) / width if width > 0 else 1.0)
        lower, below = bound, count
    return lower


def kv_cache_info(samples: list[Sample]) -> dict[str, Any] | None:
    """The KV cache the server allocated (labels of ``vllm:cache_config_info``); None when the
    server does not expose it. Numeric labels become numbers, ``"None"`` becomes None."""
    for name, labels, _ in samples:
        if name != "vllm:cache_config_info":
            continue
        found = dict(labels)
        info: dict[str, Any] = {}
        for key in KV_CACHE_LABELS:
            if key not in found:
                continue
            text = found[key]
            try:
                info[key] = None if text == "None" else int(float(text))
            except ValueError:
                info[key] = text
        return info
    return None


def server_deltas(before: list[Sample], after: list[Sample]) -> dict[str, Any]:
    """What the server counted between two scrapes (counters and histograms)."""
    result: dict[str, Any] = {}
    result["engine"] = {key: _total(after, name) - _total(before, name)
                        for key, name in ENGINE_COUNTERS.items()}
    result["kv_cache"] = kv_cache_info(after)
    for key, name in COUNTERS.items():
        result[key] = _total(after, name) - _total(before, name)
    reasons = sorted({dict(labels).get("finished_reason", "") for n, labels, _ in after
                      if n == COUNTERS["requests_finished"]} - {""})
    result["requests_finished_by_reason"] = {
        r: _total(after, COUNTERS["requests_finished"], finished_reason=r)
        - _total(before, COUNTERS["requests_finished"], finished_reason=r) for r in reasons}
    for key, names in HISTOGRAMS.items():
        metric = next((n for n in names if any(s[0] == n + "_count" for s in after)), None)
        if metric is None:
            result[key] = None
            continue
        count = _total(after, metric + "_count") - _total(before, metric + "_count")
        total_s = _total(after, metric + "_sum") - _total(before, metric + "_sum")
        b_after, b_before = _buckets(after, metric), _buckets(before, metric)
        delta = {b: b_after[b] - b_before.get(b, 0.0) for b in b_after}
        result[key] = {
            "metric": metric, "count": count,
            "mean_ms": 1000.0 * total_s / count if count > 0 else math.nan,
            "p50_ms": 1000.0 * histogram_quantile(delta, 0.50),
            "p90_ms": 1000.0 * histogram_quantile(delta, 0.90),
            "p99_ms": 1000.0 * histogram_quantile(delta, 0.99),
        }
    return result


def cross_check(summary: dict[str, Any], before: list[Sample] | None,
                after: list[Sample] | None, *,
                excluded: dict[str, int] | None = None) -> dict[str, Any]:
    """Compare the client's summary with the server's deltas (see the module docstring).

    ``excluded`` holds what the server also served between the scrapes but the summary leaves
    out (the run's warm-up requests): ``{"requests": n, "prompt_tokens": n,
    "output_tokens": n}``; it is subtracted from the server's side.
    """
    excluded = excluded or {}
    client = {
        "completed": summary.get("completed"),
        "failed": summary.get("failed"),
        "total_input_tokens": summary.get("total_input_tokens"),
        "total_output_tokens": summary.get("total_output_tokens"),
        **{f"{s}_{m}_ms": summary.get(f"{s}_{m}_ms") for m in ("ttft", "itl", "e2el")
           for s in ("mean", "p50", "p90", "p99")},
    }
    if before is None or after is None:
        return {"available": False, "client": client, "server": None, "checks": {},
                "token_counts_agree": None, "disagreements": []}
    server = server_deltas(before, after)
    server["excluded_warmup"] = excluded
    for key, ex_key in (("requests_finished", "requests"), ("prompt_tokens", "prompt_tokens"),
                        ("generation_tokens", "output_tokens")):
        server[key] -= excluded.get(ex_key, 0)
    disagreements: list[str] = []
    checks: dict[str, Any] = {}
    pairs = {"output_tokens": ("total_output_tokens", "generation_tokens"),
             "input_tokens": ("total_input_tokens", "prompt_tokens"),
             "requests": ("completed", "requests_finished")}
    for label, (client_key, server_key) in pairs.items():
        c_val, s_val = client.get(client_key), server.get(server_key)
        if c_val is None or s_val is None or (isinstance(s_val, float) and math.isnan(s_val)):
            checks[label] = None
            continue
        agree = int(c_val) == int(round(s_val))
        checks[label] = {"client": int(c_val), "server": int(round(s_val)), "agree": agree}
        if not agree:
            disagreements.append(f"{label}: client {int(c_val)} vs server {int(round(s_val))}")
    token_checks = [checks[k] for k in ("output_tokens", "input_tokens") if checks.get(k)]
    return {
        "available": True, "client": client, "server": server, "checks": checks,
        "token_counts_agree": all(c["agree"] for c in token_checks) if token_checks else None,
        "disagreements": disagreements,
    }


def warmup_totals(records: list[dict[str, Any]]) -> dict[str, int]:
    """Requests and tokens of the warm-up records of a run (``warmup: true``)."""
    warm = [r for r in records if r.get("warmup")]
    return {"requests": len(warm),
            "prompt_tokens": int(sum(r.get("prompt_tokens") or 0 for r in warm)),
            "output_tokens": int(sum(r.get("output_tokens") or 0 for r in warm))}
