"""Fleet planner speed — a benchmark, not a test: run it by hand.

One solve of the planner's mixed-integer program (:func:`hgresearch.plan.solve.solve`) for 10
candidate configurations × 64 length buckets × 3 SLO classes (192 traffic classes, 1,920
routing variables, 10 integer replica counts), with availability caps on both GPU types, at
several demands; goal ≤ 2 s per solve. The replica-rate table is constructed (rate ∝ the
configuration's memory bandwidth and GPU count, ÷ the bucket's tokens, × an SLO factor): the
benchmark times the program, not the simulator that fills the table in real use
(:func:`hgresearch.plan.replica_rates.replica_rate_table`). Also one
24-hour solve (hourly demand and caps: 240 integers, 46,080 routing variables).

    PYTHONPATH=$PWD python benchmarks/planner_speed.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pandas as pd

from hgresearch.plan import (
    Candidate,
    Demand,
    LengthClass,
    PlanProblem,
    SLOClass,
    class_name,
    solve,
)

MODEL = "DeepSeek-R1-Distill-Qwen-14B"
CANDIDATES = tuple([Candidate("H100-PCIe", n) for n in (1, 2, 4, 8)]
                   + [Candidate("RTX-4090", n) for n in (2, 3, 4, 5, 6, 8)])
BANDWIDTH_GB_S = {"H100-PCIe": 2000.0, "RTX-4090": 1008.0}


def problem(rate_rps: float | tuple[float, ...]) -> PlanProblem:
    """10 configurations × 64 length buckets × 3 SLO classes, GPU caps on both types."""
    prompts = np.geomspace(32, 8192, 8).round().astype(int)
    outputs = np.geomspace(16, 2048, 8).round().astype(int)
    lengths = tuple(LengthClass(f"p{p}-o{o}", int(p), int(o), 1.0 / (1 + i + j))
                    for i, p in enumerate(prompts) for j, o in enumerate(outputs))
    slos = (SLOClass("tight", 0.3, ttft_ms=500), SLOClass("loose", 0.4, ttft_ms=2000),
            SLOClass("batch", 0.3))
    demand = Demand(rate_rps) if isinstance(rate_rps, tuple) else Demand.steady(rate_rps)
    hours = demand.hours
    night = tuple(64 if h < 7 or h >= 22 else 16 for h in range(hours))
    caps = night if hours > 1 else 48
    return PlanProblem(MODEL, demand, lengths, slos, CANDIDATES,
                       gpu_caps=(("H100-PCIe", 16), ("RTX-4090", caps)))


def replica_rates(p: PlanProblem) -> pd.DataFrame:
    """Constructed per-replica class rates (see the module docstring)."""
    factor = {"tight": 0.5, "loose": 0.8, "batch": 0.95}
    rows = []
    for c in p.candidates:
        for s, length in p.class_keys():
            rate = (BANDWIDTH_GB_S[c.gpu_name] * c.num_gpus ** 0.85 * factor[s.name]
                    / (length.prompt_tokens * 0.02 + length.output_tokens))
            rows.append({"class": class_name(s, length), "config": c.label(p.model),
                         "rate_rps": rate, "low_rps": rate, "high_rps": rate})
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} (a shared machine: only indicative)")
    for rate in (5.0, 20.0, 50.0, 120.0):
        p = problem(rate)
        table = replica_rates(p)
        times = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            plan = solve(p, table)
            times.append(time.perf_counter() - started)
        print(f"{len(p.candidates)} configs × {len(p.length_classes)} buckets × "
              f"{len(p.slo_classes)} SLO classes at {rate:g} req/s: best {min(times):.3f} s per "
              f"solve (goal ≤ 2 s); {plan.describe()}, ${plan.totals()['cost_usd_per_h']:.2f}/h")
    day = tuple(float(20 + 15 * np.sin(2 * np.pi * (h - 9) / 24)) for h in range(24))
    p = problem(day)
    started = time.perf_counter()
    plan = solve(p, replica_rates(p))
    print(f"24 hours, same classes: {time.perf_counter() - started:.3f} s per solve; "
          f"${plan.cost_usd_per_h.sum():.2f} per day")


if __name__ == "__main__":
    main()
