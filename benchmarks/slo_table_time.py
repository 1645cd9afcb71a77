"""Steady-state SLO table time (issue 18, item 8: all configurations × SLOs in ≤ 60 s on 2
cores with a cold cache) — a benchmark, not a test: run it by hand, from the repository root.

Calibrates every reference configuration first (cached in ``build/``, as notebook 07 does; the
first run takes minutes), then times :func:`hgresearch.sim.slo_rate.slo_rate_table` uncached
— the burst throughput, the steady-state rate search of every SLO, nominal and slow end, and
the paper-protocol rates — and prints its wall time, the CPU time of all its processes, the
load average and whether the compiled simulator ran (:mod:`hgresearch.sim.compiled`;
``HGRESEARCH_PURE_PYTHON=1`` runs the sources).

    PYTHONPATH=$PWD python benchmarks/slo_table_time.py [--jobs 2] [--configs N]
"""

from __future__ import annotations

import argparse
import os
import time

from sim_validation_time import cpu_s, cpu_time_line  # this folder is on sys.path

import hgresearch.sim
from hgresearch.executors import Executor
from hgresearch.sim.intervals import reference_intervals
from hgresearch.sim.run import calibration_runs
from hgresearch.sim.slo_rate import CONFIDENCE, slo_rate_table
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
    args = parser.parse_args()
    runs = calibration_runs()
    # the calibrations and the step-time interval come from the cache (./build): computed
    # here on first use, outside the timed part
    fits = calibrations_from(cached_cross_validation(runs, "build", n_jobs=args.jobs), runs)
    factor = reference_intervals("build").step_time_factor(CONFIDENCE)
    points = dict(configuration_points(runs))
    if args.configs:
        fits = dict(list(fits.items())[:args.configs])
    load = os.getloadavg()[0]
    cpu_start = cpu_s()
    start = time.perf_counter()
    table = slo_rate_table(fits, points, step_time_factor=factor,
                           executor=Executor.for_jobs(args.jobs))
    seconds = time.perf_counter() - start
    cpu_used_s = cpu_s() - cpu_start
    print(f"SLO table: {len(fits)} configurations, {len(table)} rows, {seconds:.1f} s uncached "
          f"with {args.jobs} process(es) (goal <= 60 s), compiled simulator: "
          f"{hgresearch.sim.COMPILED}; load average {load:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after")
    print(cpu_time_line(cpu_used_s, args.jobs))


if __name__ == "__main__":
    main()
