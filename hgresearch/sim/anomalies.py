"""Measured points the replica model cannot represent, kept out of the fit with a reason.

A work-conserving FCFS server's queueing delay grows with the offered load, so its TTFT
percentiles do too. Several reference points do the opposite: 14B on 8x RTX-4090 has p50 TTFT
7.3 s at 1 req/s but p99 269 ms at 8 req/s; the tensor-parallel RTX-4090 configurations at
1 and 4 req/s and two 70B points on 2x H100-PCIe show the same. Whatever causes it (the
client and server share the host; at low load vLLM's multi-process engine idles between
requests), it is not what an engine step costs, and fitting it would push a constant delay
onto every request of the configuration — the slow-every-request offset the issue names. So
the TTFT metrics of such a point are kept out of the fit and of the error averages, listed in
the ``sim_excluded_runs`` table; its throughput and TPOT stay in.

A second kind: the request throughput *falls* as the offered rate rises — on every
tensor-parallel RTX-4090 configuration from 16 to 32 req/s (e.g. 14B on 8x: 4.9 → 3.7 req/s,
while mean TPOT quadruples) and for 70B on 2x H100-PCIe at 8 req/s. A fixed-count run's total
work does not grow with the rate and the KV cache of those configurations is far from full,
so the engine did more work per token at the higher rate, or waited on something else (client,
tokeniser and tensor-parallel workers share the host's CPUs); the replica model has no term
for it. Such a point is kept out of the fit whole (every metric), and listed.

Rules:

* :func:`falling_ttft`: a point's TTFT metrics are excluded when any of its p50/p90/p99 TTFT
  exceeds :data:`FALL_FACTOR` × the same percentile at some higher offered rate of the same
  configuration;
* :func:`falling_throughput`: every metric of a point is excluded when its request throughput
  is below (1 − :data:`THROUGHPUT_DROP`) × that of some lower offered rate of the same
  configuration.

The validation tables report the errors with and without the excluded points.
"""

from __future__ import annotations

import pandas as pd

#: A TTFT percentile this many times the one at a higher rate is "falling with load".
FALL_FACTOR = 1.5
#: The TTFT metrics the rule looks at and excludes together.
TTFT_METRICS = ("p50_ttft_ms", "p90_ttft_ms", "p99_ttft_ms")
#: A throughput this fraction below that at a lower rate is "falling with load".
THROUGHPUT_DROP = 0.05
#: Every metric the fit and the validation use (excluded together by
#: :func:`falling_throughput`).
ALL_METRICS = ("request_throughput_rps", "output_throughput_tok_per_s", "mean_tpot_ms",
               "p50_ttft_ms", "p90_ttft_ms", "p99_ttft_ms")
FALLING_THROUGHPUT = ("request throughput falls as the offered load rises ({measured:.2f} req/s "
                      "against {lower:.2f} at {rate:g} req/s)")
#: Reason written for an excluded point.
FALLING_TTFT = "TTFT falls as the offered load rises (x{ratio:.1f} the {metric} at {rate:g} req/s)"


def falling_ttft(points: pd.DataFrame) -> pd.DataFrame:
    """The points (one configuration's rows, one per offered rate) whose TTFT falls with load.

    Returns one row per excluded point: ``request_rate_qps``, ``metrics`` (the TTFT metrics
    excluded, ``|``-separated), ``reason`` (the largest fall: ratio, metric and the higher
    rate), ``measured_ms`` and ``higher_rate_ms`` of that metric.
    """
    ordered = points.sort_values("request_rate_qps").reset_index(drop=True)
    rows = []
    for _, row in ordered.iterrows():
        worst: tuple[float, str, float, float, float] | None = None
        for metric in TTFT_METRICS:
            higher = ordered.loc[ordered.request_rate_qps > row.request_rate_qps, metric]
            if higher.empty:
                continue
            ratio = float(row[metric]) / float(higher.min())
            if ratio > FALL_FACTOR and (worst is None or ratio > worst[0]):
                j = int(higher.idxmin())
                worst = (ratio, metric, float(ordered.loc[j, "request_rate_qps"]),
                         float(row[metric]), float(higher.min()))
        if worst is not None:
            ratio, metric, rate, measured, lower = worst
            rows.append({"request_rate_qps": float(row.request_rate_qps),
                         "metrics": "|".join(TTFT_METRICS),
                         "reason": FALLING_TTFT.format(ratio=ratio, metric=metric, rate=rate),
                         "measured_ms": measured, "higher_rate_ms": lower})
    return pd.DataFrame(rows, columns=["request_rate_qps", "metrics", "reason", "measured_ms",
                                       "higher_rate_ms"])


def falling_throughput(points: pd.DataFrame) -> pd.DataFrame:
    """The points (one configuration's rows) whose request throughput falls with load; rows as
    :func:`falling_ttft`'s (``measured_ms``/``higher_rate_ms`` hold the throughputs, req/s)."""
    ordered = points.sort_values("request_rate_qps").reset_index(drop=True)
    rows = []
    for _, row in ordered.iterrows():
        lower = ordered[ordered.request_rate_qps < row.request_rate_qps]
        if lower.empty:
            continue
        best = lower.loc[lower.request_throughput_rps.idxmax()]
        if float(row.request_throughput_rps) < (1 - THROUGHPUT_DROP) * float(
                best.request_throughput_rps):
            rows.append({"request_rate_qps": float(row.request_rate_qps),
                         "metrics": "|".join(ALL_METRICS),
                         "reason": FALLING_THROUGHPUT.format(
                             measured=float(row.request_throughput_rps),
                             lower=float(best.request_throughput_rps),
                             rate=float(best.request_rate_qps)),
                         "measured_ms": float(row.request_throughput_rps),
                         "higher_rate_ms": float(best.request_throughput_rps)})
    return pd.DataFrame(rows, columns=["request_rate_qps", "metrics", "reason", "measured_ms",
                                       "higher_rate_ms"])


def anomalies(points: pd.DataFrame) -> pd.DataFrame:
    """Both rules' rows for one configuration's points, by rate (a point both rules catch is
    listed once, with every metric and the throughput reason)."""
    throughput = falling_throughput(points)
    ttft = falling_ttft(points)
    ttft = ttft[~ttft.request_rate_qps.isin(throughput.request_rate_qps)]
    parts = [t for t in (throughput, ttft) if len(t)]
    if not parts:
        return ttft
    return pd.concat(parts, ignore_index=True).sort_values("request_rate_qps",
                                                           ignore_index=True)


def excluded_metrics(points: pd.DataFrame) -> dict[float, set[str]]:
    """``rate -> metrics kept out of the fit`` for one configuration's points."""
    return {float(r.request_rate_qps): set(str(r.metrics).split("|"))
            for r in anomalies(points).itertuples()}
