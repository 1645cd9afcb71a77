"""Memory and time per simulated request — the numbers behind ``sim run``'s work bound
(:data:`hgresearch.sim.run.SIM_BYTES_PER_REQUEST`, :data:`~hgresearch.sim.run.SIM_REQUESTS_PER_S`,
:data:`~hgresearch.sim.run.SIM_BYTES_PER_REPLICA`). A benchmark, not a test: run it by hand.

Simulates the paper's protocol with :func:`hgresearch.sim.run.simulate_run` (DeepSeek-R1-Distill-
Qwen-14B on 1x H100-PCIe, catalog KV cache and roofline floor, plausible step coefficients: the
memory does not depend on their values) at ``--qps`` for two sizes, and records for each the peak
resident memory (``ru_maxrss``, a fresh process each), the peak of :mod:`tracemalloc` and the wall
time. The slope between the two sizes is the memory per request; requests per second is the
slower size's. Then the same for
a fleet of 1 and of ``--replicas`` identical replicas (200 requests), for the memory per replica.

    PYTHONPATH=$PWD python benchmarks/sim_bounds.py [--sizes 20000 100000] [--qps 8]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tracemalloc

import numpy as np
import pandas as pd

from hgresearch.sim.calibrate import Calibration, StepCoefficients, replica_for
from hgresearch.sim.run import simulate_run
from hgresearch.sim.simulator import make_requests, run_replicas
from hgresearch.sim.step_time import LinearStepTimeModel
from hgresearch.traffic.routing import ReplicaState, RoundRobin, Router

MODEL, GPU = "DeepSeek-R1-Distill-Qwen-14B", "H100-PCIe"


def calibration() -> tuple[Calibration, pd.DataFrame]:
    """A calibration with plausible coefficients and the measured means it replays."""
    replica = replica_for(MODEL, GPU, 1)
    coefficients = StepCoefficients(c0_s=0.02, c_prefill_s_per_token=2e-5,
                                    c_decode_s_per_seq=2e-4, ttft_offset_s=0.01)
    fit = Calibration(replica=replica, coefficients=coefficients, rel_se=(0.0, 0.0, 0.0),
                      rates_qps=(8.0,), rms_log_error=0.0, num_simulations=0)
    points = pd.DataFrame({"total_input_tok": [200 * 230], "total_output_tok": [200 * 200],
                           "completed": [200]})
    return fit, points


def measure_run(n: int, qps: float) -> dict[str, float]:
    """In a fresh process: the peak resident memory (``ru_maxrss``: what the machine has to
    give, allocator overhead included) and the wall time of one simulated run of ``n``
    requests; then, in this process, the peak of :mod:`tracemalloc` (Python's own count)."""
    code = ("import json, resource, time, sys; sys.path.insert(0, 'benchmarks');"
            "from sim_bounds import calibration; from hgresearch.sim.run import simulate_run;"
            "fit, points = calibration(); before = resource.getrusage(resource.RUSAGE_SELF)"
            ".ru_maxrss; t0 = time.perf_counter();"
            f"simulate_run(fit, points, {qps}, {n}); wall = time.perf_counter() - t0;"
            "print(json.dumps({'rss_before': before * 1024, 'rss_peak': resource.getrusage("
            "resource.RUSAGE_SELF).ru_maxrss * 1024, 'wall_s': wall}))")
    measured = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                         text=True, check=True).stdout)
    fit, points = calibration()
    tracemalloc.start()
    simulate_run(fit, points, qps, n)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"requests": n, "traced_peak_bytes": peak, **measured}


def measure_fleet(replicas: int) -> dict[str, float]:
    fit, _ = calibration()
    model = LinearStepTimeModel(c0_s=0.02, c_prefill_s_per_token=2e-5, c_decode_s_per_seq=2e-4)
    rng = np.random.default_rng(0)
    arrivals = np.sort(rng.uniform(0, 25, 200))
    tracemalloc.start()
    requests = make_requests(fit.replica.config, arrivals, [200] * 200, [100] * 200)
    router = Router(RoundRobin(), [ReplicaState() for _ in range(replicas)])
    run_replicas([fit.replica.config] * replicas, [model] * replicas, requests, router)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"replicas": replicas, "peak_bytes": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs=2, default=[20_000, 100_000])
    parser.add_argument("--qps", type=float, default=8.0)
    parser.add_argument("--replicas", type=int, default=1000)
    args = parser.parse_args()
    small, large = (measure_run(n, args.qps) for n in args.sizes)
    span = large["requests"] - small["requests"]
    result: dict[str, object] = {
        "runs": [small, large],
        "rss_bytes_per_request": (large["rss_peak"] - small["rss_peak"]) / span,
        "traced_bytes_per_request": (large["traced_peak_bytes"]
                                     - small["traced_peak_bytes"]) / span,
        "base_rss_bytes": small["rss_before"],
        "requests_per_s": min(r["requests"] / r["wall_s"] for r in (small, large))}
    one, many = measure_fleet(1), measure_fleet(args.replicas)
    result["bytes_per_replica"] = (many["peak_bytes"] - one["peak_bytes"]) / (args.replicas - 1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
