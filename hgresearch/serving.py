"""Analysis of runs we served ourselves: the server's own accounting beside the client's, and
the peer comparison of our client with vLLM's (``vllm bench serve``).

Both start from the runs table (:func:`hgresearch.ingest.read_runs`), like every other analysis.
"""

from __future__ import annotations

import math

import pandas as pd

from hgresearch.runfolder import is_finished, read_server_metrics, read_summary

#: Columns of :func:`server_crosscheck`.
CROSSCHECK_COLUMNS = [
    "request_rate_qps", "repeat_index", "completed", "server_requests_finished",
    "total_output_tok", "server_generation_tok", "total_input_tok", "server_prompt_tok",
    "token_counts_agree", "p50_ttft_ms", "server_p50_ttft_ms", "p99_ttft_ms",
    "server_p99_ttft_ms", "mean_itl_ms", "server_mean_itl_ms",
]


def server_crosscheck(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run: client figures beside the server's ``/metrics`` deltas
    (``server_metrics.json`` in each run folder, written by :mod:`hgresearch.sweep`).

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

        def num(value: object) -> float:
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
    """Per run: the client's schedule lag p99 (ms between a request's due time and its send)
    and the ``client_limited`` flag, from each run folder's ``summary.json`` (hgresearch runs
    only; others get NaN)."""
    rows = []
    for run in runs.itertuples():
        run_dir = str(run.run_dir)
        summary = read_summary(run_dir) if is_finished(run_dir) else {}
        lag = summary.get("schedule_lag_p99_ms")
        rows.append({"request_rate_qps": run.request_rate_qps, "repeat_index": run.repeat_index,
                     "schedule_lag_p99_ms": math.nan if lag is None else float(lag),
                     "client_limited": summary.get("client_limited")})
    return pd.DataFrame(rows).sort_values(["request_rate_qps", "repeat_index"]).reset_index(
        drop=True)
