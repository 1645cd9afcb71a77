"""Peer comparison: vLLM's own client (`vllm bench serve`) and ours against the same server.

One vLLM-for-CPU server (tiny-llama-cpu, dummy weights, pinned to core 0 like
sweeps/cpu.yaml); for each QPS point, our client and
vLLM's run the same workload (random prompts of 128 tokens, 64 output tokens with ignore_eos,
Poisson arrivals, seed 42, 100 prompts) twice each in the order ours, vLLM, vLLM, ours (ABBA),
so that drift of the shared machine hits both alike. Raw results go to
data/raw/peer-cpu/{hgresearch,vllm-bench}/; notebooks/06_cpu_sweep.ipynb reads both with the
same ingest and tabulates them (hgresearch.accounting.crosscheck.compare_clients).

    PYTHONPATH=$PWD .venv/bin/python scripts/peer_vllm_bench.py [--qps 4 16 32] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from hgresearch.bench.config import BenchConfig
from hgresearch.bench.dummy_model import synth_model
from hgresearch.bench.runner import run_benchmark
from hgresearch.bench.server.process import free_port
from hgresearch.bench.server.vllm import VLLMServer, VLLMServerConfig, warm_up
from hgresearch.bench.sweep import qps_label

REPO_ROOT = Path(__file__).resolve().parent.parent
INPUT_LEN, OUTPUT_LEN, SEED, NUM_PROMPTS = 128, 64, 42, 100


def vllm_bench(server: VLLMServer, model_dir: Path, qps: float, out_dir: Path,
               tag: str) -> Path:
    """Run `vllm bench serve` for one QPS point; returns the result file."""
    name = f"vllm-bench_{NUM_PROMPTS}prompts_qps{qps_label(qps)}-{tag}.json"
    cmd = [server.python, str(REPO_ROOT / "scripts" / "vllm_bench_serve.py"),
           "--backend", "vllm", "--base-url", server.base_url, "--endpoint", "/v1/completions",
           "--model", server.config.name, "--tokenizer", str(model_dir),
           "--dataset-name", "random", "--random-input-len", str(INPUT_LEN),
           "--random-output-len", str(OUTPUT_LEN), "--random-range-ratio", "0",
           "--num-prompts", str(NUM_PROMPTS), "--request-rate", str(qps), "--burstiness", "1.0",
           "--seed", str(SEED), "--ignore-eos", "--percentile-metrics", "ttft,tpot,itl,e2el",
           "--metric-percentiles", "50,90,95,99,100", "--save-result",
           "--result-dir", str(out_dir), "--result-filename", name, "--disable-tqdm",
           "--num-warmups", "0",
           "--metadata", "gpu_name=CPU", "gpu_count=1", "dataset=random-128-64",
           "tensor_parallel_size=1", "client=vllm-bench-serve"]
    out_dir.mkdir(parents=True, exist_ok=True)
    env = {**server.env}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    (out_dir / name.replace(".json", ".log")).write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"vllm bench serve failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return out_dir / name


def ours_config(base_url: str, config: VLLMServerConfig, qps: float) -> BenchConfig:
    """Our client's configuration for one point (the same workload as vLLM's client)."""
    return BenchConfig(
        base_url=base_url, model=config.name, request_rate_qps=qps, num_prompts=NUM_PROMPTS,
        burstiness=1.0, warmup_requests=0, seed=SEED,
        workload={"kind": "random", "input_len": INPUT_LEN, "output_len": OUTPUT_LEN,
                  "range_ratio": 1.0},
        dataset="random-128-64", tokenizer=config.model, gpu_name="CPU", gpu_count=1,
        tensor_parallel_size=1, telemetry=False, bootstrap_reps=200)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--qps", type=float, nargs="+", default=[4.0, 16.0, 32.0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "data" / "raw" / "peer-cpu")
    args = parser.parse_args()
    model_dir = synth_model("tiny-llama-cpu", REPO_ROOT / "build" / "models" / "tiny-llama-cpu")
    # As sweeps/cpu.yaml: the server keeps to core 0 so that either client keeps the other.
    config = VLLMServerConfig(model=str(model_dir.relative_to(REPO_ROOT)),
                              served_model_name="tiny-llama-cpu", dtype="float32",
                              max_model_len=1024, load_format="dummy", port=free_port(),
                              cpu_affinity="0", nice=5, env={"OMP_WAIT_POLICY": "PASSIVE"})
    with VLLMServer(config, args.out / "server") as server:
        print(f"server healthy after {server.ready_after_s:.1f} s", flush=True)
        warm_up(server.base_url, config.name, requests=8)
        for qps in args.qps:
            for client, tag in (("ours", "a"), ("vllm", "a"), ("vllm", "b"), ("ours", "b")):
                if client == "ours":
                    summary = run_benchmark(
                        ours_config(server.base_url, config, qps),
                        args.out / "hgresearch" / f"qps{qps_label(qps)}-{tag}",
                        progress=False, server_info=server.info())
                else:
                    summary = json.loads(vllm_bench(server, model_dir, qps,
                                                    args.out / "vllm-bench", tag).read_text())
                print(f"qps={qps_label(qps)} {client}-{tag}: "
                      f"{summary['request_throughput']:.2f} req/s "
                      f"{summary['output_throughput']:.0f} tok/s ttft p50 "
                      f"{summary['p50_ttft_ms']:.1f} ms p99 {summary['p99_ttft_ms']:.1f} ms"
                      + (f", client-limited {summary['client_limited']}" if client == "ours"
                         else ""), flush=True)
    return None


if __name__ == "__main__":
    sys.exit(main())
