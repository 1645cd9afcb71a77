"""Requests table -> run summary, with vLLM ``benchmark_serving.py``'s definitions.

Per request (successful ones only, as vLLM):

* TTFT = first token event - send; E2E latency (``e2el``) = last token event - send;
* TPOT = (E2E - TTFT) / (output_tokens - 1) for requests with more than one output token;
* ITL = every gap between consecutive streamed token events (vLLM's "ITL"; one event may carry
  several tokens, so we also report ``itl_per_tok``: each gap divided by the tokens it brought,
  weighted by them).

Statistics: mean, median, std (population, ``np.std``), p50/p90/p95/p99/p100 with numpy's
default linear interpolation. vLLM writes 0 for a statistic of an empty set; we write ``None``
(missing, never zero). Totals and throughputs count successful requests over the run duration
(first send to last finished request, summed over resumed segments).

Ours on top: latencies from the *scheduled* send time (client queueing included), schedule lag,
goodput for SLOs, error counts, throughput over a steady-state window, and seeded bootstrap
confidence intervals. See docs/measurement.md for the glossary against vLLM/guidellm/aiperf.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from hgresearch.errors import InputError

STATS = ("mean", "median", "std", "p50", "p90", "p95", "p99", "p100")
PERCENTILES = {"p50": 50, "p90": 90, "p95": 95, "p99": 99, "p100": 100}
#: A request sent more than this many ms after its scheduled time (cap wait excluded) is late.
LATE_SEND_MS = 5.0
#: A run is client-limited when more than this share of its requests were sent late ...
CLIENT_LIMITED_LATE_SHARE = 0.05
#: ... or when its realised arrival rate fell short of the offered rate by more than this share.
CLIENT_LIMITED_RATE_SHORTFALL = 0.05
#: Bootstrap confidence level and which percentiles get intervals.
CI_LEVEL = 0.95
CI_STATS = ("p50", "p90", "p99")


#: The per-request latency metrics (``<metric>_ms`` columns of the requests table) that are
#: summarized and that a goodput SLO can bound, as vLLM's ``--goodput``.
LATENCY_METRICS = ("ttft", "tpot", "e2el")


def describe(values: np.ndarray | list[float]) -> dict[str, float | None]:
    """mean/median/std/p50/p90/p95/p99/p100 of ``values`` as vLLM computes them (None if empty)."""
    arr = np.asarray(values, dtype="float64")
    arr = arr[~np.isnan(arr)]
    if arr.size == 0:
        return dict.fromkeys(STATS)
    out: dict[str, float | None] = {"mean": float(np.mean(arr)),
                                    "median": float(np.median(arr)), "std": float(np.std(arr))}
    for name, q in PERCENTILES.items():
        out[name] = float(np.percentile(arr, q))
    return out


def itl_gaps_ms(requests: pd.DataFrame, per_token: bool = False) -> np.ndarray:
    """All inter-token gaps (ms) of the given requests; ``per_token`` spreads each gap over the
    tokens of the event that ended it (value gap/n, repeated n times)."""
    parts = []
    for times, tokens in zip(requests.event_t_ns, requests.event_tokens, strict=True):
        if not isinstance(times, list) or len(times) < 2:
            continue
        gaps = np.diff(np.asarray(times, dtype="int64")).astype("float64") / 1e6
        if per_token:
            n = np.maximum(np.asarray(tokens[1:], dtype="int64"), 1)
            gaps = np.repeat(gaps / n, n)
        parts.append(gaps)
    return np.concatenate(parts) if parts else np.zeros(0)


def send_timing(requests: pd.DataFrame) -> dict[str, float | None]:
    """How well the client kept the arrival schedule (measured requests only).

    ``late_send_share``: share of requests whose schedule lag exceeds :data:`LATE_SEND_MS`.
    ``realised_rate_ratio``: realised over offered arrival rate, i.e. per segment the span of
    scheduled send times over the span of actual send times (cap waits removed: a concurrency
    cap holds requests back on purpose), summed over segments; below 1 the server saw fewer
    arrivals per second than asked. None where the run has no schedule (no
    ``t_scheduled_ns``) or no span (an infinite rate sends everything at once).
    """
    lag = requests.schedule_lag_ms.to_numpy(dtype="float64") if len(requests) else np.zeros(0)
    known = ~np.isnan(lag)
    out: dict[str, float | None] = {
        "late_send_share": float((lag[known] > LATE_SEND_MS).mean()) if known.any() else None,
        "realised_rate_ratio": None}
    if not known.any():
        return out
    timed = requests[known]
    sent = timed.t_sent_ns.astype("float64") - timed.cap_wait_ns.fillna(0).astype("float64")
    frame = pd.DataFrame({"segment": timed.segment.fillna(0).to_numpy(), "sent": sent.to_numpy(),
                          "scheduled": timed.t_scheduled_ns.astype("float64").to_numpy()})
    spans = frame.groupby("segment").agg(["min", "max"])
    offered_span = float((spans["scheduled"]["max"] - spans["scheduled"]["min"]).sum())
    realised_span = float((spans["sent"]["max"] - spans["sent"]["min"]).sum())
    if offered_span > 0 and realised_span > 0:
        out["realised_rate_ratio"] = offered_span / realised_span
    return out


def is_client_limited(late_send_share: float | None, realised_rate_ratio: float | None) -> bool:
    """The one definition of a client-limited run: more than
    :data:`CLIENT_LIMITED_LATE_SHARE` of its requests were sent late, or its realised arrival
    rate fell more than :data:`CLIENT_LIMITED_RATE_SHORTFALL` short of the offered rate. One
    late send in 40 is not enough: it says the worst moment was bad, not that the load the
    server saw differed from the one asked."""
    late = late_send_share is not None and late_send_share > CLIENT_LIMITED_LATE_SHARE
    slow = (realised_rate_ratio is not None
            and realised_rate_ratio < 1 - CLIENT_LIMITED_RATE_SHORTFALL)
    return bool(late or slow)


def run_duration_s(requests: pd.DataFrame) -> float:
    """Benchmark duration: per segment, segment start to the last finished request; summed."""
    if requests.empty:
        return math.nan
    total = 0.0
    for _, seg in requests.groupby(requests.segment.fillna(0), sort=True):
        start = seg.segment_start_ns.dropna()
        start_ns = float(start.min()) if len(start) else float(seg.t_sent_ns.min())
        total += (float(seg.t_done_ns.max()) - start_ns) / 1e9
    return total


def steady_window_ns(requests: pd.DataFrame, fraction: float = 0.1) -> tuple[int, int] | None:
    """The steady-state window of a fixed-count run: after the first ``fraction`` of sends
    (ramp-up) until the last send (drain excluded). When sends are bunched (infinite rate), the
    window runs from ``fraction`` to ``1 - fraction`` of completions instead. For resumed runs,
    the segment with the most requests is used."""
    if requests.empty:
        return None
    seg_id = requests.segment.fillna(0).value_counts().sort_index().idxmax()
    seg = requests[requests.segment.fillna(0) == seg_id]
    sends = np.sort(seg.t_sent_ns.to_numpy(dtype="int64"))
    dones = np.sort(seg.t_done_ns.to_numpy(dtype="int64"))
    n = len(sends)
    k = min(int(math.ceil(fraction * n)), n - 1)
    start, end = int(sends[k]), int(sends[-1])
    duration = dones[-1] - sends[0]
    if end - start < 0.2 * duration:
        lo = min(int(math.ceil(fraction * n)), n - 1)
        hi = max(int(math.floor((1 - fraction) * n)) - 1, lo)
        start, end = int(dones[lo]), int(dones[hi])
    return (start, end) if end > start else None


def percentile_interval(samples: np.ndarray, confidence: float = CI_LEVEL
                        ) -> list[float] | None:
    """[low, high]: the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of the
    finite ``samples`` (None when none is finite)."""
    samples = np.asarray(samples, dtype="float64")
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return None
    alpha = (1 - confidence) / 2
    return [float(np.quantile(samples, alpha)), float(np.quantile(samples, 1 - alpha))]


def bootstrap_intervals(statistic: Callable[[np.ndarray], np.ndarray], n: int, reps: int,
                        seed: int | np.random.Generator = 0, confidence: float = CI_LEVEL
                        ) -> list[list[float] | None]:
    """Seeded percentile bootstrap over ``n`` resampling units (requests, time blocks, bins).

    Draws ``reps`` resamples of the units with replacement as one ``(reps, n)`` matrix of unit
    indices (so a seed gives the same resamples whatever the statistic) and passes it to
    ``statistic``, which returns one value per resample (shape ``(reps,)``) or several
    statistics at once (``(k, reps)``, e.g. three percentiles). Returns, per statistic, its
    :func:`percentile_interval`. ``seed`` may be a generator to continue a stream of draws.
    """
    rng = np.random.default_rng(seed)
    values = np.asarray(statistic(rng.integers(0, n, size=(reps, n))), dtype="float64")
    return [percentile_interval(row, confidence) for row in values.reshape(-1, reps)]


def bootstrap_cis(ok: pd.DataFrame, window: tuple[int, int] | None, *, reps: int = 1000,
                  seed: int = 0, bins: int = 20) -> dict[str, Any]:
    """Seeded bootstrap 95% intervals (:func:`bootstrap_intervals`): requests resampled (ITL
    gaps stay with their request) for p50/p90/p99 latencies; for steady-state throughputs,
    ``bins`` equal time bins of the window are resampled."""
    out: dict[str, Any] = {}
    rng = np.random.default_rng(seed)
    n = len(ok)
    qs = [PERCENTILES[s] for s in CI_STATS]
    if n >= 2 and reps > 0:
        latencies = {metric: ok[f"{metric}_ms"].to_numpy(dtype="float64")
                     for metric in LATENCY_METRICS}
        latencies = {m: v for m, v in latencies.items() if not np.isnan(v).all()}

        def latency_percentiles(idx: np.ndarray) -> np.ndarray:
            return np.concatenate([np.nanpercentile(v[idx], qs, axis=1)
                                   for v in latencies.values()] or [np.empty((0, reps))])

        cis = iter(bootstrap_intervals(latency_percentiles, n, reps, rng))
        for metric in latencies:
            for stat in CI_STATS:
                out[f"ci95_{stat}_{metric}_ms"] = next(cis)
        per_req = [np.diff(np.asarray(t, dtype="int64")) / 1e6 if isinstance(t, list) and
                   len(t) > 1 else np.zeros(0) for t in ok.event_t_ns]
        total = sum(len(g) for g in per_req)
        if total:
            # Cap the work: about 2e7 resampled gaps in all.
            itl_reps = int(min(reps, max(50, 2e7 // total)))

            def itl_percentiles(idx: np.ndarray) -> np.ndarray:
                boot = np.empty((len(qs), len(idx)))
                for r, pick in enumerate(idx):
                    gaps = np.concatenate([per_req[i] for i in pick])
                    boot[:, r] = np.percentile(gaps, qs) if gaps.size else np.nan
                return boot

            cis = iter(bootstrap_intervals(itl_percentiles, n, itl_reps, rng))
            for stat in CI_STATS:
                out[f"ci95_{stat}_itl_ms"] = next(cis)
    if window is not None and reps > 0:
        start, end = window
        edges = np.linspace(start, end, bins + 1)
        width_s = (end - start) / bins / 1e9
        done = ok.t_done_ns.to_numpy(dtype="float64")
        req_counts = np.histogram(done, bins=edges)[0]
        ev_t = np.concatenate([np.asarray(t, dtype="float64") for t in ok.event_t_ns
                               if isinstance(t, list) and t] or [np.zeros(0)])
        ev_n = np.concatenate([np.asarray(t, dtype="float64") for t in ok.event_tokens
                               if isinstance(t, list) and t] or [np.zeros(0)])
        tok_counts = np.histogram(ev_t, bins=edges, weights=ev_n)[0]
        out["ci95_steady_request_throughput"], out["ci95_steady_output_throughput"] = (
            bootstrap_intervals(lambda pick: np.stack([req_counts[pick].mean(axis=1) / width_s,
                                                       tok_counts[pick].mean(axis=1) / width_s]),
                                bins, reps, rng))
    return out


def summarize(requests: pd.DataFrame, *, goodput_slo_ms: dict[str, float] | None = None,
              steady_fraction: float = 0.1, bootstrap_reps: int = 1000,
              bootstrap_seed: int = 0) -> dict[str, Any]:
    """Run metrics from the requests table (:func:`hgresearch.data.runfolder.requests_table`).

    Warm-up requests are excluded. Keys follow vLLM's result layout (``completed``,
    ``request_throughput``, ``{stat}_{ttft,tpot,itl,e2el}_ms``, ...) plus ours (see module doc).

    Args:
        requests: the requests table.
        goodput_slo_ms: SLOs on ``ttft``/``tpot``/``e2el`` in ms; a request is good when it
            meets all of them (vLLM counts TPOT as 0 for one-token outputs). None: no goodput.
        steady_fraction: ramp-up share excluded at the start of the steady window.
        bootstrap_reps, bootstrap_seed: bootstrap resamples and seed (0 reps: no intervals).
    """
    measured = requests[~requests.warmup] if len(requests) else requests
    ok = measured[measured.success]
    duration = run_duration_s(measured)
    total_in = int(ok.prompt_tokens.sum()) if len(ok) else 0
    total_out = int(ok.output_tokens.sum()) if len(ok) else 0

    def rate(x: float) -> float | None:
        return x / duration if duration and duration > 0 else None

    out: dict[str, Any] = {
        "duration": duration if not math.isnan(duration) else None,
        "sent": int(len(measured)),
        "completed": int(len(ok)),
        "failed": int(len(measured) - len(ok)),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": rate(len(ok)),
        "output_throughput": rate(total_out),
        "total_token_throughput": rate(total_in + total_out),
    }
    if goodput_slo_ms:
        good = np.ones(len(ok), dtype=bool)
        for metric, slo in goodput_slo_ms.items():
            if metric not in LATENCY_METRICS:
                raise InputError(f"goodput SLO metric must be one of {', '.join(LATENCY_METRICS)}"
                                 f", got {metric!r}", field="goodput")
            values = ok[f"{metric}_ms"].to_numpy(dtype="float64")
            if metric == "tpot":
                values = np.nan_to_num(values, nan=0.0)  # vLLM: TPOT 0 for one-token outputs
            good &= values <= slo
        out["request_goodput"] = rate(int(good.sum()))
    else:
        out["request_goodput"] = None
    out["goodput_slo_ms"] = goodput_slo_ms or None
    series = {"ttft": ok.ttft_ms, "tpot": ok.tpot_ms, "itl": itl_gaps_ms(ok),
              "e2el": ok.e2el_ms, "itl_per_tok": itl_gaps_ms(ok, per_token=True)}
    for metric, values in series.items():
        for stat, value in describe(values).items():
            out[f"{stat}_{metric}_ms"] = value
    for metric in ("ttft", "e2el"):
        for stat, value in describe(ok[f"{metric}_from_scheduled_ms"]).items():
            out[f"{stat}_{metric}_from_scheduled_ms"] = value
    lag = describe(measured.schedule_lag_ms) if len(measured) else dict.fromkeys(STATS)
    out["schedule_lag_mean_ms"] = lag["mean"]
    out["schedule_lag_p50_ms"] = lag["p50"]
    out["schedule_lag_p99_ms"] = lag["p99"]
    out["schedule_lag_max_ms"] = lag["p100"]
    out.update(send_timing(measured))
    out["client_limited"] = is_client_limited(out["late_send_share"], out["realised_rate_ratio"])
    errors = measured.error_class.dropna().value_counts().sort_index()
    out["errors"] = {str(k): int(v) for k, v in errors.items()}
    window = steady_window_ns(measured, steady_fraction)
    out["steady_start_ns"], out["steady_end_ns"] = window if window else (None, None)
    if window:
        start, end = window
        span = (end - start) / 1e9
        done_in = ((ok.t_done_ns >= start) & (ok.t_done_ns <= end)).sum()
        tokens_in = sum(int(np.asarray(n)[(np.asarray(t) >= start) & (np.asarray(t) <= end)]
                            .sum()) for t, n in zip(ok.event_t_ns, ok.event_tokens, strict=True)
                        if isinstance(t, list) and t)
        out["steady_duration"] = span
        out["steady_request_throughput"] = float(done_in) / span
        out["steady_output_throughput"] = tokens_in / span
    else:
        out["steady_duration"] = out["steady_request_throughput"] = None
        out["steady_output_throughput"] = None
    out.update(bootstrap_cis(ok, window, reps=bootstrap_reps, seed=bootstrap_seed))
    out["bootstrap_reps"] = bootstrap_reps
    out["bootstrap_seed"] = bootstrap_seed
    return out


#: Keys of :func:`summarize_by`'s per-group summaries (the headline ones; no intervals).
GROUP_SUMMARY_KEYS = (
    "duration", "sent", "completed", "failed", "total_input_tokens", "total_output_tokens",
    "request_throughput", "output_throughput", "total_token_throughput", "request_goodput",
    "mean_ttft_ms", "p50_ttft_ms", "p90_ttft_ms", "p99_ttft_ms", "mean_tpot_ms",
    "p50_tpot_ms", "p99_tpot_ms", "mean_e2el_ms", "p99_e2el_ms",
)


def summarize_by(requests: pd.DataFrame, column: str, **kwargs: Any) -> dict[Any, dict[str, Any]]:
    """:func:`summarize` of each group of measured requests sharing a value of ``column`` (e.g.
    ``endpoint`` in a multi-endpoint run), reduced to :data:`GROUP_SUMMARY_KEYS`; groups with a
    missing value are left out. Each group's duration is its own first send to its last
    completion. ``kwargs`` go to :func:`summarize` (bootstrap intervals are not computed)."""
    measured = requests[~requests.warmup] if len(requests) else requests
    if column not in measured.columns:
        return {}
    kwargs["bootstrap_reps"] = 0
    out = {}
    for value, part in measured.groupby(column, sort=True):
        full = summarize(part, **kwargs)
        out[value] = {key: full[key] for key in GROUP_SUMMARY_KEYS}
    return out
