"""Sweeps: server configurations x QPS values x repeats, one call (``hgresearch sweep FILE``).

For each server configuration: start the server -> warm up -> for each repeat, for each QPS:
scrape ``/metrics``, run one benchmark point with the measurement client, scrape again and
write the server's deltas beside the client's figures -> stop the server. Every run gets its
own folder ``<out_dir>/<model>/<count>x<gpu>[-tp<N>]/qps<Q>-rep<R>/``;
``<out_dir>/_sweep/status.jsonl`` records every run's outcome (``_sweep/sweep.yaml`` is the
sweep file used); a failed server start or run is recorded there (and in ``error.json`` in the
run folder) and the sweep goes on. With ``resume=True`` finished runs (those with a
``summary.json``) are skipped, and a server whose runs are all finished is not started.
Server ``engine: mock`` runs the package's test server instead of vLLM (tests, dry runs).

* :mod:`~hgresearch.bench.sweep.spec` — the sweep file (format, parser with line-numbered
  errors), its runs and their folders, each run's benchmark configuration, dry-run sizing;
* :mod:`~hgresearch.bench.sweep.local` — one configuration's runs on this machine;
* :mod:`~hgresearch.bench.sweep.ray` — each configuration as a Ray task (docs/cluster.md);
* :mod:`~hgresearch.bench.sweep.run` — :func:`run_sweep` on either executor.
"""

from hgresearch.bench.sweep.local import SweepLog, node_identity
from hgresearch.bench.sweep.ray import serve_entry_task, task_options, unplaceable
from hgresearch.bench.sweep.run import run_sweep
from hgresearch.bench.sweep.spec import (
    DEFAULT_MODEL_DIR,
    STATUS_FILE,
    SWEEP_COPY,
    RunPoint,
    Sweep,
    SweepServer,
    apply_dummy_weights,
    bench_config,
    configuration_durations_s,
    load_sweep,
    makespan_s,
    parse_sweep,
    qps_label,
    run_points,
    sweep_estimate,
)

__all__ = [
    "DEFAULT_MODEL_DIR",
    "STATUS_FILE",
    "SWEEP_COPY",
    "RunPoint",
    "Sweep",
    "SweepLog",
    "SweepServer",
    "apply_dummy_weights",
    "bench_config",
    "configuration_durations_s",
    "load_sweep",
    "makespan_s",
    "node_identity",
    "parse_sweep",
    "qps_label",
    "run_points",
    "run_sweep",
    "serve_entry_task",
    "sweep_estimate",
    "task_options",
    "unplaceable",
]
