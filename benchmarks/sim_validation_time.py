"""Simulator validation time (issue 10, item 8: the whole validation in ≤ 60 s) — a benchmark,
not a test: run it by hand.

Runs the leave-one-QPS-out validation of notebook 07 *uncached* (every configuration of the
reference data and ``data/raw/cpu-tiny``, each rate held out in turn) and prints its wall time
and the CPU time of all its processes, with the load average beside it. On a shared machine
the wall time depends on the other work; the CPU time much less, and CPU time / processes is
the wall time the validation would take on otherwise idle cores.

    PYTHONPATH=$PWD python benchmarks/sim_validation_time.py [--jobs 2] [--configs N]
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from hgresearch.identity import config_label
from hgresearch.sim.run import calibration_runs
from hgresearch.sim.validation import configuration_points, simulated_leave_one_qps_out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--configs", type=int, default=0,
                        help="only the first N configurations (0: all)")
    args = parser.parse_args()
    runs = calibration_runs()
    labels = [label for label, _ in configuration_points(runs)]
    if args.configs:
        labels = labels[:args.configs]
        runs = runs[runs.apply(config_label, axis=1).isin(labels)]
    load = os.getloadavg()[0]
    cpu_start = cpu_s()
    start = time.perf_counter()
    points = simulated_leave_one_qps_out(runs, n_jobs=args.jobs)
    seconds = time.perf_counter() - start
    cpu_used_s = cpu_s() - cpu_start
    folds = points.groupby(["configuration", "held_out_qps"]).ngroups
    print(f"leave-one-QPS-out: {len(labels)} configurations, {folds} calibrations, "
          f"{seconds:.1f} s uncached with {args.jobs} process(es) "
          f"(goal: whole validation <= 60 s); load average {load:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after")
    print(cpu_time_line(cpu_used_s, args.jobs))


def cpu_time_line(cpu_used_s: float, jobs: int) -> str:
    """The CPU time of a timed part and the wall time it would take on ``jobs`` idle cores
    (also used by slo_table_time.py)."""
    return (f"CPU time {cpu_used_s:.1f} s over all processes: {cpu_used_s / jobs:.1f} s of "
            f"wall time with {jobs} otherwise idle core(s)")


def cpu_s() -> float:
    """User + system CPU seconds of this process and its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


if __name__ == "__main__":
    main()
