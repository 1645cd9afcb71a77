"""Build hgresearch run folders (the run-folder layout of docs/measurement.md) with synthetic telemetry for the energy
tests. A test double: this machine has no GPU/NVML, so the NVML samples are generated here
with known power so the expected energy can be computed by hand."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

S = 1_000_000_000  # ns per second


def make_run_folder(
    run_dir: Path, *, gpu_name: str = "RTX-4090", gpu_count: int = 2,
    run_power_w: Callable[[np.ndarray, int], np.ndarray] | float = 300.0,
    idle_power_w: float = 50.0, counter: bool = True, telemetry: bool = True,
    duration_s: float = 60.0, steady: tuple[float, float] = (10.0, 50.0),
    hz: float = 10.0, n_requests: int = 60, prompt_tok: int = 100, output_tok: int = 200,
    request_s: float = 4.0, t0_ns: int = 5_000 * S,
) -> Path:
    """Write summary.json, telemetry.csv and requests.jsonl for a run starting at ``t0_ns``.

    Requests start every ``duration_s / n_requests`` seconds; each has its first token at
    start + 0.1 s and completes ``request_s`` later. Power during the run is ``run_power_w``
    (a constant or a function of (t seconds since start, gpu index)); 5 s of idle samples at
    ``idle_power_w`` precede it. The energy counter is the exact running integral.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    starts = np.arange(n_requests) * (duration_s - request_s - 0.2) / n_requests
    with open(run_dir / "requests.jsonl", "w") as handle:
        for i, start in enumerate(starts):
            first = t0_ns + int((start + 0.1) * S)
            handle.write(json.dumps({
                "index": i, "warmup": False, "success": True,
                "t_scheduled_ns": t0_ns + int(start * S),
                "t_sent_ns": t0_ns + int(start * S), "t_first_token_ns": first,
                "t_last_token_ns": first + int(request_s * S),
                "t_done_ns": first + int(request_s * S), "prompt_tokens": prompt_tok,
                "output_tokens": output_tok}) + "\n")
    lines = ["t_ns,phase,gpu_index,power_w,energy_counter_j,gpu_util_pct,mem_util_pct,"
             "mem_used_mib,sm_clock_mhz,temperature_c,power_limit_w"]
    if telemetry:
        step = 1.0 / hz
        idle_t = np.arange(-5.0, 0.0, step)
        run_t = np.arange(0.0, duration_s + step / 2, step)
        for gpu in range(gpu_count):
            energy = 1000.0 * (gpu + 1)  # the counter starts anywhere
            for t in idle_t:
                lines.append(f"{t0_ns + int(round(t * S))},idle,{gpu},{idle_power_w},"
                             f"{energy if counter else ''},0,0,1000,210,35,450")
                energy += idle_power_w * step
            powers = (np.full_like(run_t, float(run_power_w)) if not callable(run_power_w)
                      else run_power_w(run_t, gpu))
            previous = None
            for t, p in zip(run_t, powers, strict=True):
                if previous is not None:
                    energy += (previous + p) / 2 * step  # trapezoid = exact for linear power
                lines.append(f"{t0_ns + int(round(t * S))},run,{gpu},{p},"
                             f"{energy if counter else ''},95,60,20000,2500,60,450")
                previous = p
    (run_dir / "telemetry.csv").write_text("\n".join(lines) + "\n")
    total_in, total_out = n_requests * prompt_tok, n_requests * output_tok
    stats = {f"{s}_{m}_ms": 10.0 for m in ("ttft", "tpot", "itl", "e2el")
             for s in ("mean", "median", "std", "p50", "p90", "p95", "p99", "p100")}
    summary = {
        "date": "20261130-050000", "backend": "vllm", "model_id": "org/tiny-model",
        "tokenizer_id": "org/tiny-model", "num_prompts": n_requests, "gpu_name": gpu_name,
        "gpu_count": gpu_count, "request_rate": 1.0, "burstiness": 1.0,
        "max_concurrency": None, "duration": duration_s, "completed": n_requests,
        "failed": 0, "total_input_tokens": total_in, "total_output_tokens": total_out,
        "request_throughput": n_requests / duration_s, "request_goodput": None,
        "output_throughput": total_out / duration_s,
        "total_token_throughput": (total_in + total_out) / duration_s, **stats,
        "hgresearch_version": "0.1.0", "dataset": "synthetic", "tensor_parallel_size":
        gpu_count, "replicas": 1, "client_limited": False,
        "telemetry_available": telemetry, "energy_source": None, "energy_j": None,
        "energy_steady_j": None, "idle_power_w": idle_power_w * gpu_count if telemetry else None,
        "run_start_ns": t0_ns, "run_end_ns": t0_ns + int(duration_s * S),
        "steady_start_ns": t0_ns + int(steady[0] * S),
        "steady_end_ns": t0_ns + int(steady[1] * S),
        "energy_per_tok_j": None, "energy_per_output_tok_j": None,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    return run_dir
