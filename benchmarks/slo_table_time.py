"""Steady-state SLO table time (issue 18, item 8: all configurations × SLOs in ≤ 60 s on 2
cores with a cold cache) — a benchmark, not a test: run it by hand.

Calibrates every reference configuration first (cached in ``--build-dir``, as notebook 07
does; the first run takes minutes), then times :func:`hgresearch.sim.slo_rate.slo_rate_table`
uncached — the burst throughput, the steady-state rate search of every SLO, nominal and slow
end, and the paper-protocol rates — and prints its wall time, the CPU time of all its
processes, the load average and whether the compiled simulator ran
(:mod:`hgresearch.sim.compiled`; ``HGRESEARCH_PURE_PYTHON=1`` runs the sources).

    PYTHONPATH=$PWD python benchmarks/slo_table_time.py [--jobs 2] [--configs N]
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import hgresearch.sim
from hgresearch.executors import Executor
from hgresearch.sim.run import calibration_runs
from hgresearch.sim.slo_rate import slo_rate_table
from hgresearch.sim.validation import (
    cached_cross_validation,
    calibrations_from,
    configuration_points,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--configs", type=int, default=0,
                        help="only the first N configurations (0: all)")
    parser.add_argument("--build-dir", default="build",
                        help="where the calibrations are cached (default build)")
    args = parser.parse_args()
    runs = calibration_runs()
    fits = calibrations_from(cached_cross_validation(runs, args.build_dir, n_jobs=args.jobs),
                             runs)
    points = dict(configuration_points(runs))
    if args.configs:
        fits = dict(list(fits.items())[:args.configs])
    load = os.getloadavg()[0]
    cpu_start = _cpu_s()
    start = time.perf_counter()
    table = slo_rate_table(fits, points, executor=Executor.for_jobs(args.jobs))
    seconds = time.perf_counter() - start
    cpu_s = _cpu_s() - cpu_start
    print(f"SLO table: {len(fits)} configurations, {len(table)} rows, {seconds:.1f} s uncached "
          f"with {args.jobs} process(es) (goal <= 60 s), compiled simulator: "
          f"{hgresearch.sim.COMPILED}; load average {load:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after")
    print(f"CPU time {cpu_s:.1f} s over all processes: {cpu_s / args.jobs:.1f} s of wall time "
          f"with {args.jobs} otherwise idle core(s)")


def _cpu_s() -> float:
    """User + system CPU seconds of this process and its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


if __name__ == "__main__":
    main()
