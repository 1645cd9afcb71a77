"""How much the shared step-time model's validation depends on where its fits start — a
benchmark, not a test: run it by hand, from the repository root (~4 minutes on 2 cores).

Runs the in-sample and leave-one-configuration-out folds of :func:`hgresearch.sim.validation.
cross_validate` twice on the reference runs: from :data:`hgresearch.sim.step_model.INITIAL`
and from another plausible start (:data:`OTHER_START`), and prints the MAPE of each scheme and
headline metric side by side, and each GPU type's fitted parameters. A fit that found the cost's
minimum would give the same numbers from both starts; docs/simulator.md ("What the fit can and
cannot say") quotes this output.

    PYTHONPATH=$PWD python benchmarks/fit_start_sensitivity.py [--jobs 2]
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from hgresearch.executors import Executor
from hgresearch.sim import step_model
from hgresearch.sim.run import calibration_runs
from hgresearch.sim.validation import cross_validate, goals_table

#: The other start: every efficiency moved to another typical value.
OTHER_START = {"weights_factor": 1.05, "step_overhead_s": 1e-3, "kv_factor": 1.2,
               "prefill_factor": 2.0, "decode_factor": 0.05, "allreduce_latency_s": 1e-5}


def validate_from(start: dict[str, float], jobs: int) -> tuple[pd.DataFrame, dict[str, dict]]:
    """The goals table and fitted parameters (in-sample, by GPU type) with the fits starting
    at ``start`` (over :data:`~hgresearch.sim.step_model.INITIAL`; the worker processes are
    forked after the change, so they start there too)."""
    saved = dict(step_model.INITIAL)
    step_model.INITIAL.update(start)
    try:
        cv = cross_validate(calibration_runs(None), executor=Executor.for_jobs(jobs),
                            schemes=("LOCO", "in-sample"))
    finally:
        step_model.INITIAL.clear()
        step_model.INITIAL.update(saved)
    return goals_table(cv.points), {gpu: fit.values for gpu, fit in cv.fits.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    args = parser.parse_args()
    tables = {}
    for name, start in (("INITIAL", {}), ("other start", OTHER_START)):
        began = time.perf_counter()
        goals, values = validate_from(start, args.jobs)
        print(f"{name}: {time.perf_counter() - began:.0f} s", flush=True)
        for gpu, fitted in sorted(values.items()):
            print(f"  {gpu}: " + ", ".join(f"{k}={v:.4g}" for k, v in fitted.items()))
        tables[name] = goals.set_index(["scheme", "metric"]).mape_pct
    print(pd.DataFrame(tables).round(1).to_string())


if __name__ == "__main__":
    main()
