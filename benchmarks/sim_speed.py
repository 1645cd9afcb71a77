"""Replica simulator speed (issue 10, item 8) — a benchmark, not a test: run it by hand.

Replays the paper's protocol on one replica (DeepSeek-R1-Distill-Qwen-14B on 1× H100-PCIe, KV
blocks from the catalogs): 200 requests at each of the paper's rates, arrivals from vLLM
0.8.5's seeded schedule, lengths drawn from a fixed lognormal (ShareGPT-like; a stand-in until
the workload step lands), and a linear step-time model with the roofline floor whose
coefficients are plausible, not calibrated. It prints, per rate and overall:

* events/s of the event loop (event = arrival, engine step or completion; goal ≥ 200,000);
* ms per 200-request run, loop only and with the requests table (goal ≤ 50 ms);
* the same with quiet-step skipping off (every step through the heap) and with a KV cache
  small enough to preempt, the slow paths.

Each figure is the best of ``--repeats`` runs (the machine is shared; the load average is
printed beside them).

    PYTHONPATH=$PWD python benchmarks/sim_speed.py [--repeats 5] [--out build/bench/sim_speed.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from hgresearch.sim import (
    LinearStepTimeModel,
    ReplicaConfig,
    make_requests,
    replica_config_from_catalogs,
    requests_frame,
    roofline_floor_from_catalogs,
    run_replica,
)
from hgresearch.traffic.arrivals import PAPER_QPS, vllm085_send_offsets_s

MODEL, GPU = "DeepSeek-R1-Distill-Qwen-14B", "H100-PCIe"
NUM_PROMPTS = 200


def lengths(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Prompt and output lengths: lognormal, medians ~170 and ~200 tokens, capped at 2048."""
    rng = np.random.default_rng(seed)
    prompts = np.clip(rng.lognormal(np.log(170), 0.9, n), 4, 2048).astype(int)
    outputs = np.clip(rng.lognormal(np.log(200), 0.8, n), 1, 2048).astype(int)
    return prompts, outputs


def measure(config: ReplicaConfig, model: LinearStepTimeModel, rate: float, *, repeats: int,
            skip_quiet_steps: bool = True) -> dict:
    """Best-of-``repeats`` timings of one 200-request run at ``rate``."""
    arrivals = vllm085_send_offsets_s(rate, NUM_PROMPTS)
    prompts, outputs = lengths(NUM_PROMPTS)
    loop_s = total_s = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        requests = make_requests(config, arrivals, prompts, outputs)
        t1 = time.perf_counter()
        run = run_replica(config, model, requests, skip_quiet_steps=skip_quiet_steps)
        t2 = time.perf_counter()
        requests_frame(run)
        t3 = time.perf_counter()
        loop_s = min(loop_s, t2 - t1)
        total_s = min(total_s, t3 - t0)
    return {"rate_qps": rate, "events": run.num_events, "steps": run.num_steps,
            "preemptions": run.num_preemptions, "loop_ms": loop_s * 1e3,
            "with_table_ms": total_s * 1e3, "events_per_s": run.num_events / loop_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    config = replica_config_from_catalogs(MODEL, GPU)
    model = LinearStepTimeModel(c0_s=0.004, c_prefill_s_per_token=4e-5, c_decode_s_per_seq=1e-4,
                                c_kv_s_per_token=1e-7,
                                floor=roofline_floor_from_catalogs(MODEL, GPU))
    tight = ReplicaConfig(num_kv_blocks=400, block_size=config.block_size)
    cases = {"paper protocol": (config, True), "no quiet-step skipping": (config, False),
             "tight KV (400 blocks, preempting)": (tight, True)}
    print(f"{MODEL} on 1x {GPU}: {config}; load average {os.getloadavg()}")
    results: dict[str, list[dict]] = {}
    for name, (cfg, skip) in cases.items():
        rows = [measure(cfg, model, rate, repeats=args.repeats, skip_quiet_steps=skip)
                for rate in PAPER_QPS]
        results[name] = rows
        events = sum(r["events"] for r in rows)
        loop_s = sum(r["loop_ms"] for r in rows) / 1e3
        print(f"\n{name}: {events / loop_s:,.0f} events/s over the {len(rows)} rates "
              f"(goal >= 200,000); worst 200-request run "
              f"{max(r['with_table_ms'] for r in rows):.1f} ms with the table (goal <= 50)")
        print(f"{'qps':>6} {'events':>7} {'steps':>7} {'preempt':>7} {'loop ms':>8} "
              f"{'+table ms':>9} {'events/s':>10}")
        for r in rows:
            print(f"{r['rate_qps']:>6g} {r['events']:>7} {r['steps']:>7} {r['preemptions']:>7} "
                  f"{r['loop_ms']:>8.1f} {r['with_table_ms']:>9.1f} {r['events_per_s']:>10,.0f}")
    print(f"\nload average after: {os.getloadavg()}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"load_average": os.getloadavg(), "cases": results},
                                       indent=1))


if __name__ == "__main__":
    main()
