"""Analysis of runs we served ourselves: the server's own accounting beside the client's, and
the peer comparison of our client with vLLM's (``vllm bench serve``).

Both start from the runs table (:func:`hgresearch.data.ingest.read_runs`), like every other
analysis.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from hgresearch.data.runfolder import (
    is_finished,
    read_requests,
    read_server_metrics,
    read_summary,
)
from hgresearch.errors import InputError

#: Columns of :func:`server_crosscheck`.
CROSSCHECK_COLUMNS = [
    "request_rate_qps", "repeat_index", "completed", "server_requests_finished",
    "total_output_tok", "server_generation_tok", "total_input_tok", "server_prompt_tok",
    "token_counts_agree", "p50_ttft_ms", "server_p50_ttft_ms", "p99_ttft_ms",
    "server_p99_ttft_ms", "mean_itl_ms", "server_mean_itl_ms",
]


def server_crosscheck(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run: client figures beside the server's ``/metrics`` deltas
    (``server_metrics.json`` in each run folder, written by :mod:`hgresearch.bench.sweep`).

    Server TTFT/ITL percentiles are bucket interpolations of vLLM's Prometheus histograms,
    so they are coarse (bucket bounds), but independent of the client and of HTTP delivery.
    Runs without ``server_metrics.json`` get NaN.
    """
    rows = []
    for run in runs.itertuples():
        data = read_server_metrics(str(run.run_dir)) or {}
        server = data.get("server") or {}
        ttft = server.get("ttft") or {}
        itl = server.get("itl") or {}

        def num(value: float | str | None) -> float:
            return math.nan if value is None else float(value)

        rows.append({
            "request_rate_qps": run.request_rate_qps, "repeat_index": run.repeat_index,
            "completed": run.completed,
            "server_requests_finished": num(server.get("requests_finished")),
            "total_output_tok": run.total_output_tok,
            "server_generation_tok": num(server.get("generation_tokens")),
            "total_input_tok": run.total_input_tok,
            "server_prompt_tok": num(server.get("prompt_tokens")),
            "token_counts_agree": data.get("token_counts_agree"),
            "p50_ttft_ms": run.p50_ttft_ms, "server_p50_ttft_ms": num(ttft.get("p50_ms")),
            "p99_ttft_ms": run.p99_ttft_ms, "server_p99_ttft_ms": num(ttft.get("p99_ms")),
            "mean_itl_ms": run.mean_itl_ms, "server_mean_itl_ms": num(itl.get("mean_ms")),
        })
    table = pd.DataFrame(rows, columns=CROSSCHECK_COLUMNS)
    return table.sort_values(["request_rate_qps", "repeat_index"]).reset_index(drop=True)


def client_label(runs: pd.DataFrame) -> pd.Series:
    """``hgresearch`` for our run folders, ``vllm bench serve`` for vLLM's result files."""
    return runs.source_format.map({"hgresearch": "hgresearch",
                                   "vllm-bench-serve": "vllm bench serve"}).fillna(
        runs.source_format)


def compare_clients(runs: pd.DataFrame, ours: str = "hgresearch",
                    peer: str = "vllm bench serve") -> pd.DataFrame:
    """Peer comparison: per offered QPS, achieved request rate, output tokens/s and TTFT
    p50/p99 of both clients side by side, with the ratio ours / peer.

    ``runs`` holds the runs of both clients against the same server and workload (e.g.
    ``read_runs([dir_ours, dir_vllm])``); their ``source_format`` tells them apart.
    """
    data = runs.assign(client=client_label(runs))
    metrics = {"request_throughput_rps": "achieved req/s",
               "output_throughput_tok_per_s": "output tok/s",
               "p50_ttft_ms": "TTFT p50 (ms)", "p99_ttft_ms": "TTFT p99 (ms)"}
    missing = {ours, peer} - set(data.client)
    if missing:
        raise KeyError(f"no runs of client(s) {sorted(missing)}; clients present: "
                       f"{sorted(set(data.client))}")
    rows = []
    for qps, group in data.groupby("request_rate_qps", sort=True):
        mine = group[group.client == ours][list(metrics)].mean()
        theirs = group[group.client == peer][list(metrics)].mean()
        for column, label in metrics.items():
            ratio = mine[column] / theirs[column] if theirs[column] else math.nan
            rows.append({"offered QPS": f"{qps:g}", "metric": label, ours: mine[column],
                         peer: theirs[column], "ratio ours/peer": ratio})
    return pd.DataFrame(rows)


def schedule_lag(runs: pd.DataFrame) -> pd.DataFrame:
    """Per run: the client's schedule lag p99 (ms between a request's due time and its send),
    the share of requests sent late, the realised/offered arrival-rate ratio and the
    ``client_limited`` flag they define (:func:`hgresearch.data.summary.is_client_limited`), from
    each run folder's ``summary.json`` (hgresearch runs only; others get NaN)."""
    rows = []
    for run in runs.itertuples():
        run_dir = str(run.run_dir)
        summary = read_summary(run_dir) if is_finished(run_dir) else {}
        lag = summary.get("schedule_lag_p99_ms")
        rows.append({"request_rate_qps": run.request_rate_qps, "repeat_index": run.repeat_index,
                     "schedule_lag_p99_ms": math.nan if lag is None else float(lag),
                     "late_send_share": _nan_if_none(summary.get("late_send_share")),
                     "realised_rate_ratio": _nan_if_none(summary.get("realised_rate_ratio")),
                     "client_limited": summary.get("client_limited")})
    return pd.DataFrame(rows).sort_values(["request_rate_qps", "repeat_index"]).reset_index(
        drop=True)


def _nan_if_none(value: float | None) -> float:
    return math.nan if value is None else float(value)


#: Run columns copied onto every request row by :func:`requests_of_runs`.
REQUEST_RUN_COLUMNS = ["run_id", "hardware", "request_rate_qps", "repeat_index"]


def requests_of_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The successful, measured (not warm-up) requests of every run of ``runs`` that has a
    run folder (column ``run_dir``), one row each: the requests table
    (:func:`hgresearch.data.runfolder.read_requests`) with the run's id, hardware, offered rate and
    repeat in front. Raises :class:`~hgresearch.errors.InputError` when no run has requests."""
    frames = []
    for run in runs[runs.run_dir.notna()].itertuples():
        requests = read_requests(run.run_dir)
        requests = requests[requests.success & ~requests.warmup].copy()
        for position, column in enumerate(REQUEST_RUN_COLUMNS):
            requests.insert(position, column, getattr(run, column))
        frames.append(requests)
    if not frames or all(frame.empty for frame in frames):
        raise InputError("no run of the table has per-request records (run folders with "
                         "requests.jsonl)")
    return pd.concat([f for f in frames if not f.empty], ignore_index=True)


def ecdf_band(values: np.ndarray | pd.Series, confidence: float = 0.95
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Empirical CDF of ``values`` (NaN dropped) with its simultaneous confidence band from the
    Dvoretzky-Kiefer-Wolfowitz inequality: ``(x, F(x), low, high)``, x sorted, F stepping up
    by 1/n at each x. The band holds the true CDF everywhere with probability ``confidence``
    for independent draws; half-width sqrt(ln(2/(1 - confidence)) / (2 n))."""
    x = np.sort(np.asarray(values, float))
    x = x[~np.isnan(x)]
    if len(x) == 0:
        raise InputError("no values for an empirical CDF")
    level = np.arange(1, len(x) + 1) / len(x)
    half_width = math.sqrt(math.log(2.0 / (1.0 - confidence)) / (2.0 * len(x)))
    return x, level, np.clip(level - half_width, 0.0, 1.0), np.clip(level + half_width, 0.0, 1.0)
