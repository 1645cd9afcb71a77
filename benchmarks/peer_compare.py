"""Compare load generators on the same box against the same local test server (a benchmark).

Each client runs at a *constant* request rate (so the intended send times are known to all)
against ``hgresearch.bench.server.mock`` in its own process. The server logs when each request
arrived and when it sent each event, so every client is judged by the same outside clock:

* send jitter: with ``lag_k = (arrival_k - arrival_0) - k / rate``, ``p99(lag) - p50(lag)``;
* achieved send rate: ``(n - 1) / (arrival_last - arrival_0)``;
* TTFT bias: the client's reported median TTFT minus the server's realized median TTFT;
* the client's CPU time (its process tree, start-up included).

A rate counts as sustained when send jitter < 1 ms and the achieved rate is within 2% of target.

    PYTHONPATH=$PWD python benchmarks/peer_compare.py --aiperf /tmp/aiperf-venv/bin/aiperf \\
        --tokenizer /tmp/peer-tok --out build/bench/peer_compare.json

aiperf needs a Hugging Face tokenizer folder; any local one works (lengths are fixed by the
server, which streams ``max_tokens`` tokens).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hgresearch.bench.server.mock import MockServerConfig, serve_in_subprocess

TTFT_MS, ITL_MS, OUT_TOK = 20.0, 5.0, 16
REPO = Path(__file__).resolve().parents[1]


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _server_view(log: Path, n: int, rate: float) -> dict:
    realized = json.loads(log.read_text())
    realized.sort(key=lambda r: r[0])
    arrivals = np.array([t0 for t0, _ in realized[-n:]], dtype="float64")
    k = np.arange(len(arrivals))
    lag_ms = (arrivals - arrivals[0]) / 1e6 - k * 1000.0 / rate
    ttft = [(ev[0] - t0) / 1e6 for t0, ev in realized[-n:] if ev]
    return {
        "server_requests": len(realized),
        "send_jitter_p99_minus_p50_ms": float(np.percentile(lag_ms, 99) - np.median(lag_ms)),
        "send_lag_max_minus_p50_ms": float(lag_ms.max() - np.median(lag_ms)),
        "achieved_send_rate_qps": (len(arrivals) - 1) / ((arrivals[-1] - arrivals[0]) / 1e9),
        "server_realized_ttft_median_ms": float(np.median(ttft)),
    }


def run_hgresearch(url: str, rate: float, n: int, work: Path) -> dict:
    out = work / f"hg_{rate:g}"
    cmd = [sys.executable, "-m", "hgresearch", "bench", "--base-url", url, "--model",
           "test-model", "--qps", f"{rate:g}", "--num-prompts", str(n), "--arrival",
           "constant", "--workload", f"random:input_len=16,output_len={OUT_TOK}",
           "--no-telemetry", "--no-progress", "--idle-baseline-s", "0", "-o", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run(cmd, check=True, env=env, capture_output=True, timeout=600)
    s = json.loads((out / f"qps{rate:g}" / "summary.json").read_text())
    return {"completed": s["completed"], "ttft_median_ms": s["median_ttft_ms"],
            "itl_p99_ms": s["p99_itl_ms"], "client_reported_lag_p99_ms": s["schedule_lag_p99_ms"],
            "client_cpu_s_sending": s["client_cpu_s"]}


def run_aiperf(exe: str, tokenizer: str, url: str, rate: float, n: int, work: Path) -> dict:
    out = work / f"aiperf_{rate:g}"
    cmd = [exe, "profile", "-m", "test-model", "--url", url, "--endpoint-type", "completions",
           "--streaming", "--request-rate", f"{rate:g}", "--arrival-pattern", "constant",
           "--request-count", str(n), "--tokenizer", tokenizer,
           "--prompt-input-tokens-mean", "16", "--prompt-output-tokens-mean", str(OUT_TOK),
           "--extra-inputs", "ignore_eos:true", "--use-server-token-count",
           "--output-artifact-dir", str(out), "--no-server-metrics", "--no-gpu-telemetry"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=600)
    d = json.loads((out / "profile_export_aiperf.json").read_text())
    return {"completed": int(d["request_count"]["avg"]),
            "ttft_median_ms": d["time_to_first_token"]["p50"],
            "itl_p99_ms": d["inter_chunk_latency"]["p99"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="50,100,200,400,800")
    parser.add_argument("--duration-s", type=float, default=4.0)
    parser.add_argument("--aiperf", help="aiperf executable (its own venv)")
    parser.add_argument("--tokenizer", help="local HF tokenizer folder for aiperf")
    parser.add_argument("--out", type=Path, default=Path("build/bench/peer_compare.json"))
    args = parser.parse_args()
    clients = ["hgresearch"] + (["aiperf"] if args.aiperf else [])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for client in clients:
            for rate in [float(r) for r in args.rates.split(",")]:
                n = max(20, int(rate * args.duration_s))
                log = work / f"log_{client}_{rate:g}.json"
                load = os.getloadavg()[0]
                cpu0 = _children_cpu_s()
                with serve_in_subprocess(MockServerConfig(ttft_ms=TTFT_MS, itl_ms=ITL_MS,
                                                          event_log=str(log))) as url:
                    cpu0 = _children_cpu_s()
                    t0 = time.monotonic()
                    if client == "hgresearch":
                        row = run_hgresearch(url, rate, n, work)
                    else:
                        row = run_aiperf(args.aiperf, args.tokenizer, url, rate, n, work)
                    wall = time.monotonic() - t0
                    cpu = _children_cpu_s() - cpu0
                time.sleep(0.3)
                row.update(client=client, rate_qps=rate, requests=n, load_avg_1min=load,
                           client_cpu_s_total=cpu, wall_s=wall, **_server_view(log, n, rate))
                row["ttft_bias_vs_realized_ms"] = (row["ttft_median_ms"]
                                                   - row["server_realized_ttft_median_ms"])
                row["sustained"] = bool(row["send_jitter_p99_minus_p50_ms"] < 1.0
                                        and row["achieved_send_rate_qps"] >= 0.98 * rate
                                        and row["completed"] == n)
                rows.append(row)
                jitter = row["send_jitter_p99_minus_p50_ms"]
                achieved = row["achieved_send_rate_qps"]
                verdict = "ok" if row["sustained"] else "NOT sustained"
                print(f"{client:>10} {rate:>6g} req/s: jitter {jitter:.3f} ms, achieved "
                      f"{achieved:.1f}, TTFT bias {row['ttft_bias_vs_realized_ms']:.3f} ms, "
                      f"cpu {cpu:.2f} s, load {load:.2f} {verdict}", flush=True)
    best = {c: max([r["rate_qps"] for r in rows if r["client"] == c and r["sustained"]],
                   default=None) for c in clients}
    result = {"rows": rows, "max_sustained_rate_qps": best}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print("max sustained rate (jitter < 1 ms, achieved >= 98%):", best)


if __name__ == "__main__":
    main()
