"""Sweeps: server configurations x QPS values x repeats, one call (``hgresearch sweep FILE``).

A sweep file (YAML, see ``sweeps/*.yaml`` and docs/serving.md)::

    name: cpu-tiny                 # label, recorded with every run
    out_dir: data/raw/cpu-tiny     # run folders go below it (relative to the current folder)
    qps: [1, 2, 4, inf]            # offered request rates (Poisson unless burstiness != 1)
    duration_s: 240                # optional: each run sends rate x duration_s requests
                                   # (sustained-load runs; replaces bench.num_prompts)
    repeats: 2                     # each repeat runs the whole QPS list once more
    warmup_requests: 4             # short requests after each server start, not recorded
    server: {dtype: float32}       # VLLMServerConfig fields shared by every server entry
    bench:                         # BenchConfig fields shared by every run
      num_prompts: 40
      seed: 42
      workload: {kind: random, input_len: 128, output_len: 64}
    servers:                       # one entry per server configuration
      - synth: tiny-llama-cpu      # build this catalog model offline (config + tokenizer only)
        gpu_name: CPU
        gpu_count: 1
        server: {dtype: float32, max_model_len: 1024, port: 8011}   # VLLMServerConfig fields
        bench: {}                  # per-server BenchConfig overrides
        resources: {RTX-4090: 2}   # optional: what a Ray task of this server requests
                                   # (default: num_gpus + a resource named by gpu_name)

For each server entry: start the server -> warm up -> for each repeat, for each QPS: scrape
``/metrics``, run one benchmark point with the measurement client, scrape again and write the
server's deltas beside the client's figures -> stop the server. Every run gets its own folder
``<out_dir>/<model>/<count>x<gpu>[-tp<N>]/qps<Q>-rep<R>/`` (the run folder of
:mod:`hgresearch.bench.runner` plus ``server_metrics.json`` and ``server.log``, the server's
log during that run; :mod:`hgresearch.data.runfolder` names and reads them).
``<out_dir>/_sweep/status.jsonl`` records every run's outcome (``_sweep/sweep.yaml`` is the
sweep file used); a failed server start or run is recorded there (and in ``error.json`` in the
run folder) and the sweep goes on.
With ``resume=True`` finished runs (those with a ``summary.json``) are skipped, and a server
whose runs are all finished is not started.

With ``executor=Executor(ExecutorKind.RAY)`` each server configuration is one Ray task on a node
that has its resources (:func:`task_options`); the task runs the same steps in a temporary
folder and returns the run folders, which the driver installs atomically in the same layout
(docs/cluster.md). Server ``engine: mock`` runs the package's test server instead of vLLM
(tests and dry runs).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import shutil
import socket
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hgresearch.bench.server.process import log_tail, sigterm_as_exit
from hgresearch.bench.server.vllm import (
    ServerError,
    VLLMServer,
    VLLMServerConfig,
    warm_up,
)
from hgresearch.data.runfolder import (
    ERROR_FILE,
    REQUESTS_FILE,
    SERVER_LOG_FILE,
    install_run_folder,
    is_finished,
    pack_run_folder,
    read_records,
    write_error,
    write_server_metrics,
)
from hgresearch.errors import InputError
from hgresearch.executors import DEFAULT_RETRIES, Executor, ExecutorKind, connect_ray
from hgresearch.identity import hardware_label

#: Where ``synth:`` models are built (relative to the current folder).
DEFAULT_MODEL_DIR = Path("build/models")
#: Sweep records live in a sub-folder: ``read_runs`` takes top-level ``*.jsonl`` for results.
STATUS_FILE = "_sweep/status.jsonl"
SWEEP_COPY = "_sweep/sweep.yaml"
#: Seconds a cancelled Ray task gets to stop its server before its worker is killed.
CANCEL_GRACE_S = 10.0


@dataclass
class SweepServer:
    """One server configuration of a sweep."""

    server: VLLMServerConfig
    gpu_name: str = "CPU"
    gpu_count: int = 1
    synth: str | None = None  #: catalog model built offline and served with dummy weights
    bench: dict[str, Any] = field(default_factory=dict)  #: BenchConfig overrides
    label: str | None = None  #: folder name of the model (default: served model name)
    #: Ray resources a task of this server requests (None: :func:`task_options`' default)
    resources: dict[str, float] | None = None

    @property
    def model_label(self) -> str:
        return self.label or self.server.name

    @property
    def hardware_label(self) -> str:
        """Folder name of the hardware: :func:`hgresearch.identity.hardware_label` without spaces,
        ``-tp<n>`` added when the tensor-parallel size differs from the GPU count."""
        tp = self.server.tensor_parallel_size
        suffix = f"-tp{tp}" if tp != self.gpu_count else ""
        return hardware_label(self.gpu_name, self.gpu_count).replace(" ", "") + suffix


@dataclass
class Sweep:
    """A parsed sweep file."""

    name: str
    out_dir: Path
    qps: list[float]
    servers: list[SweepServer]
    repeats: int = 1
    warmup_requests: int = 4
    bench: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    source: str | None = None  #: the sweep file it was read from
    #: Sustained-load runs: each run sends ``round(qps * duration_s)`` requests (None: the
    #: bench's ``num_prompts``).
    duration_s: float | None = None


@dataclass(frozen=True)
class RunPoint:
    """One benchmark run of a sweep."""

    server_index: int
    qps: float
    repeat: int
    run_dir: Path


def qps_label(qps: float) -> str:
    """``1.0`` -> ``"1"``, ``0.5`` -> ``"0.5"``, ``inf`` -> ``"inf"`` (folder names)."""
    if math.isinf(qps):
        return "inf"
    return f"{qps:g}"


def _parse_qps(value: Any, file: str) -> float:
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return math.inf
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise InputError(f"expected a positive number or 'inf', got {value!r}", file=file,
                         field="qps")
    return float(value)


def _parse_resources(value: Any, file: str, where: str) -> dict[str, float] | None:
    """A server entry's ``resources``: Ray resource name -> amount (``num_cpus`` and
    ``num_gpus`` are Ray's CPUs and GPUs, any other name a custom resource such as a GPU
    type)."""
    if value is None:
        return None
    if not isinstance(value, dict) or not value:
        raise InputError("expected a mapping of resource name to amount, e.g. "
                         "{num_gpus: 2, RTX-4090: 2}", file=file, field=where)
    out = {}
    for name, amount in value.items():
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0 \
                or not math.isfinite(amount):
            raise InputError(f"expected a non-negative number, got {amount!r}", file=file,
                             field=f"{where}.{name}")
        out[str(name)] = float(amount)
    return out


def parse_sweep(data: Any, *, file: str = "<sweep>", base_dir: Path | None = None) -> Sweep:
    """Validate a sweep mapping (the YAML's content); errors name the file and field."""
    if not isinstance(data, dict):
        raise InputError("expected a mapping at the top level", file=file)
    known = {"name", "description", "out_dir", "qps", "repeats", "warmup_requests", "bench",
             "server", "servers", "duration_s"}
    for key in data:
        if key not in known:
            raise InputError(f"unknown key; expected one of {sorted(known)}", file=file,
                             field=str(key))
    for key in ("name", "out_dir", "qps", "servers"):
        if key not in data:
            raise InputError("required key is missing", file=file, field=key)
    qps_raw = data["qps"] if isinstance(data["qps"], list) else [data["qps"]]
    qps = [_parse_qps(v, file) for v in qps_raw]
    if not qps:
        raise InputError("expected at least one QPS value", file=file, field="qps")
    duration_s = data.get("duration_s")
    if duration_s is not None:
        if (isinstance(duration_s, bool) or not isinstance(duration_s, int | float)
                or not duration_s > 0 or math.isinf(duration_s)):
            raise InputError(f"expected a positive number of seconds, got {duration_s!r}",
                             file=file, field="duration_s")
        if any(math.isinf(q) for q in qps):
            raise InputError("duration_s needs finite rates (inf sends all at once)",
                             file=file, field="qps")
    repeats = data.get("repeats", 1)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise InputError(f"expected a positive integer, got {repeats!r}", file=file,
                         field="repeats")
    warmup = data.get("warmup_requests", 4)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise InputError(f"expected a non-negative integer, got {warmup!r}", file=file,
                         field="warmup_requests")
    bench = data.get("bench") or {}
    if not isinstance(bench, dict):
        raise InputError("expected a mapping of BenchConfig fields", file=file, field="bench")
    server_defaults = data.get("server") or {}
    if not isinstance(server_defaults, dict):
        raise InputError("expected a mapping of VLLMServerConfig fields", file=file, field="server")
    servers_raw = data["servers"]
    if not isinstance(servers_raw, list) or not servers_raw:
        raise InputError("expected a non-empty list", file=file, field="servers")
    servers = []
    server_keys = {"server", "gpu_name", "gpu_count", "synth", "bench", "label", "resources"}
    for i, entry in enumerate(servers_raw):
        where = f"servers[{i}]"
        if not isinstance(entry, dict):
            raise InputError("expected a mapping", file=file, field=where)
        for key in entry:
            if key not in server_keys:
                raise InputError(f"unknown key; expected one of {sorted(server_keys)}",
                                 file=file, field=f"{where}.{key}")
        server_raw = {**server_defaults, **(entry.get("server") or {})}
        synth = entry.get("synth")
        if synth is not None:
            from hgresearch.bench.dummy_model import architecture

            try:
                architecture(str(synth))
            except InputError as err:
                raise InputError(f"synth: {err.reason}", file=file,
                                 field=f"{where}.synth") from None
            server_raw.setdefault("model", str(DEFAULT_MODEL_DIR / str(synth)))
            server_raw.setdefault("served_model_name", str(synth))
            server_raw.setdefault("load_format", "dummy")
        try:
            server = VLLMServerConfig.from_dict(server_raw, where=f"{where}.server")
        except (TypeError, ValueError) as err:
            raise InputError(str(err), file=file, field=f"{where}.server") from None
        gpu_count = entry.get("gpu_count", 1)
        if isinstance(gpu_count, bool) or not isinstance(gpu_count, int) or gpu_count < 1:
            raise InputError(f"expected a positive integer, got {gpu_count!r}", file=file,
                             field=f"{where}.gpu_count")
        gpu_name = str(entry.get("gpu_name", "CPU"))
        from hgresearch.data.catalogs import normalize_gpu_name

        try:
            gpu_name = normalize_gpu_name(gpu_name)
        except KeyError:
            raise InputError(f"unknown GPU {gpu_name!r}; add it to "
                             "hgresearch/data/catalogs/hardware.csv",
                             file=file, field=f"{where}.gpu_name") from None
        overrides = entry.get("bench") or {}
        if not isinstance(overrides, dict):
            raise InputError("expected a mapping", file=file, field=f"{where}.bench")
        servers.append(SweepServer(server=server, gpu_name=gpu_name, gpu_count=gpu_count,
                                   synth=None if synth is None else str(synth),
                                   bench=dict(overrides), label=entry.get("label"),
                                   resources=_parse_resources(entry.get("resources"), file,
                                                              f"{where}.resources")))
    out_dir = Path(str(data["out_dir"]))
    if base_dir is not None and not out_dir.is_absolute():
        out_dir = base_dir / out_dir
    return Sweep(name=str(data["name"]), out_dir=out_dir, qps=qps, servers=servers,
                 repeats=repeats, warmup_requests=warmup, bench=dict(bench),
                 description=str(data.get("description", "")), source=file,
                 duration_s=None if duration_s is None else float(duration_s))


def load_sweep(path: str | Path, *, base_dir: Path | None = None) -> Sweep:
    """Read and validate a sweep file (YAML)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("sweep file not found", file=str(path)) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise InputError(f"malformed YAML: {getattr(err, 'problem', err)}", file=str(path),
                         line=mark.line + 1 if mark else None) from None
    return parse_sweep(data, file=str(path), base_dir=base_dir)


def apply_dummy_weights(sweep: Sweep) -> Sweep:
    """Serve every model of ``sweep`` as its catalog architecture with random weights.

    Each server entry that names a real model (hub id or folder named like a catalog row) gets
    ``synth`` set, so the sweep builds the model folder offline (config + tokenizer) and serves
    it with ``--load-format dummy``: no download, same shapes, same speed. Entries whose model
    is not in ``hgresearch/data/catalogs/model_architectures.csv`` raise :class:`InputError`.
    """
    from hgresearch.bench.dummy_model import architecture

    for index, entry in enumerate(sweep.servers):
        if entry.synth is not None:
            continue
        try:
            arch = architecture(entry.server.model.rstrip("/"))
        except InputError:
            try:
                arch = architecture(Path(entry.server.model.rstrip("/")).name)
            except InputError as err:
                raise InputError(f"--dummy-weights: {err.reason}", file=sweep.source,
                                 field=f"servers[{index}].server.model") from None
        entry.synth = arch.model
        entry.server.served_model_name = entry.server.name
        entry.server.model = str(DEFAULT_MODEL_DIR / arch.model)
        entry.server.load_format = "dummy"
        entry.server.offline = True
    # Keep random-weight runs apart from real-weight ones.
    sweep.out_dir = sweep.out_dir.with_name(sweep.out_dir.name + "-dummy")
    sweep.name += "-dummy"
    return sweep


def run_points(sweep: Sweep) -> list[RunPoint]:
    """Every run of the sweep in execution order (server, then repeat, then QPS)."""
    points = []
    for index, entry in enumerate(sweep.servers):
        for repeat in range(sweep.repeats):
            for qps in sweep.qps:
                run_dir = (sweep.out_dir / entry.model_label / entry.hardware_label
                           / f"qps{qps_label(qps)}-rep{repeat}")
                points.append(RunPoint(index, qps, repeat, run_dir))
    return points


#: Sizing assumptions (s): a server start (model load, compile, CUDA graphs), the warm-up,
#: and the time a run needs beyond its arrivals (drain of the last requests, scrapes, writes).
SERVER_START_S = 300.0
WARMUP_S = 60.0
RUN_TAIL_S = 30.0


def configuration_durations_s(sweep: Sweep, *, server_start_s: float = SERVER_START_S,
                              warmup_s: float = WARMUP_S, run_tail_s: float = RUN_TAIL_S
                              ) -> list[float]:
    """Estimated wall time (s) of each server configuration of ``sweep``: one server start and
    warm-up, then per repeat and rate ``num_prompts / qps`` (the arrivals; 0 for ``inf``) plus
    the run's idle baseline and ``run_tail_s``."""
    durations = []
    for entry in sweep.servers:
        total = server_start_s + (warmup_s if sweep.warmup_requests else 0.0)
        for qps in sweep.qps:
            config = bench_config(sweep, entry, qps, "http://sizing")
            arrivals_s = 0.0 if math.isinf(qps) else config.num_prompts / qps
            total += sweep.repeats * (arrivals_s + config.idle_baseline_s + run_tail_s)
        durations.append(total)
    return durations


def makespan_s(durations_s: list[float], nodes: int) -> float:
    """Wall time (s) of independent jobs on ``nodes`` identical nodes, one job at a time each,
    longest first to the least loaded node (what a Ray cluster with one configuration's GPUs
    per node does; within 4/3 of the optimum)."""
    if nodes < 1:
        raise InputError(f"expected at least one node, got {nodes}", field="nodes")
    loads = [0.0] * nodes
    for duration in sorted(durations_s, reverse=True):
        loads[loads.index(min(loads))] += duration
    return max(loads)


def bench_config(sweep: Sweep, entry: SweepServer, qps: float, base_url: str) -> Any:
    """The :class:`~hgresearch.bench.config.BenchConfig` of one run."""
    from hgresearch.bench.config import BenchConfig

    fields = {f.name for f in dataclasses.fields(BenchConfig)}
    values: dict[str, Any] = {}
    model_dir = Path(entry.server.model)
    if "tokenizer" in fields and (model_dir / "tokenizer.json").is_file():
        values["tokenizer"] = str(model_dir)
    values.update(sweep.bench)
    values.update(entry.bench)
    values.update({"base_url": base_url, "model": entry.server.name, "request_rate_qps": qps,
                   "gpu_name": entry.gpu_name, "gpu_count": entry.gpu_count,
                   "tensor_parallel_size": entry.server.tensor_parallel_size})
    if sweep.duration_s is not None:
        values["num_prompts"] = max(1, round(qps * sweep.duration_s))
    # Warm-up happens once per server start (see run_sweep); runs measure a warm server.
    values.setdefault("warmup_requests", 0)
    unknown = sorted(set(values) - fields)
    if unknown:
        raise InputError(f"unknown BenchConfig field(s) {unknown}; known: {sorted(fields)}",
                         file=sweep.source, field="bench")
    return BenchConfig(**values)


def _record(out_dir: Path, entry: dict[str, Any]) -> None:
    (out_dir / STATUS_FILE).parent.mkdir(parents=True, exist_ok=True)
    with open(out_dir / STATUS_FILE, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, sort_keys=True, default=str) + "\n")


def _copy_log_slice(log_path: Path, start: int, dest: Path) -> None:
    try:
        with open(log_path, "rb") as src:
            src.seek(start)
            dest.write_bytes(src.read())
    except OSError:
        pass


def _write_error(run_dir: Path, stage: str, error: BaseException) -> str:
    text = str(error)
    write_error(run_dir, {
        "stage": stage, "error_type": type(error).__name__, "error": text,
        "traceback": traceback.format_exception_only(type(error), error)})
    return text


#: Summary figures a run's status line carries (:meth:`_SweepLog.note`).
_SUMMARY_STATUS_KEYS = ("completed", "failed", "output_throughput", "p99_ttft_ms")


class _SweepLog:
    """Each run's outcome: kept for the caller, appended to ``_sweep/status.jsonl`` (skipped runs
    are not) and echoed as one progress line."""

    def __init__(self, sweep: Sweep, total: int, echo: Callable[[str], None]) -> None:
        self.sweep = sweep
        self.total = total
        self.echo = echo
        self.statuses: list[dict[str, Any]] = []

    def note(self, point: RunPoint, status: str, wall_s: float, error: str | None = None,
             summary: dict[str, Any] | None = None, node: dict[str, Any] | None = None
             ) -> None:
        """Record one run: ``ok``, ``failed`` (with ``error``) or ``skipped``; ``node``: where
        it ran (default: this machine, :func:`node_identity`)."""
        entry = self.sweep.servers[point.server_index]
        record = {"sweep": self.sweep.name, "model": entry.model_label,
                  "hardware": entry.hardware_label, "qps": qps_label(point.qps),
                  "repeat": point.repeat, "run_dir": str(point.run_dir), "status": status,
                  "wall_s": round(wall_s, 3), "error": error,
                  "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "node": node if node is not None else node_identity()}
        if summary is not None:
            record.update({k: summary.get(k) for k in _SUMMARY_STATUS_KEYS})
        if status != "skipped":
            _record(self.sweep.out_dir, record)
        self.statuses.append(record)
        detail = ""
        if summary is not None:
            detail = (f": {summary.get('completed')} done, "
                      f"{summary.get('output_throughput', math.nan):.1f} output tok/s")
        if error:
            detail = f": {error.splitlines()[0]}"
        self.echo(f"[{len(self.statuses)}/{self.total}] {entry.model_label} "
                  f"{entry.hardware_label} qps={qps_label(point.qps)} rep={point.repeat} "
                  f"{status}{detail}")

    def count(self, status: str) -> int:
        """Runs recorded with ``status``."""
        return sum(s["status"] == status for s in self.statuses)


def run_sweep(sweep: Sweep, *, resume: bool = False, echo: Callable[[str], None] = print,
              progress: bool = False, executor: Executor | None = None,
              retries: int = DEFAULT_RETRIES) -> list[dict[str, Any]]:
    """Run every point of ``sweep`` (see the module docstring); returns one status per run.

    Without ``resume``, a run folder that already holds results is an error (nothing is
    overwritten). A ``KeyboardInterrupt`` (Ctrl-C) or SIGTERM stops the sweep after stopping
    the server (on Ray: after cancelling the outstanding tasks, whose servers stop); finished
    runs stay, and ``resume=True`` continues from there, whichever executor made them.

    ``executor``: ``local`` (default: one server after another here) or ``ray`` (each server
    configuration a Ray task, :func:`_run_on_ray`; a task that raises, whose node dies or whose
    server fails is tried again up to ``retries`` times, then its runs are reported failed).

    Steps: refuse to overwrite (:func:`_refuse_started_runs`), keep a copy of the sweep file
    (:func:`_prepare_out_dir`), then per server entry skip finished runs and serve the rest
    (:func:`_serve_entry`), and print the tally.
    """
    executor = executor or Executor()
    if executor.kind == ExecutorKind.PROCESS:
        raise InputError("a sweep runs on the local or the ray executor (servers need their "
                         "own GPUs and ports, not a process pool)", field="executor")
    if retries < 0:
        raise InputError(f"expected a non-negative number of retries, got {retries}",
                         field="retries")
    points = run_points(sweep)
    if not resume:
        _refuse_started_runs(points)
    _prepare_out_dir(sweep)
    log = _SweepLog(sweep, len(points), echo)

    def pending_of(index: int) -> list[RunPoint]:
        """The entry's runs to do; the finished ones are noted as skipped."""
        mine = [p for p in points if p.server_index == index]
        pending = [p for p in mine if not (resume and is_finished(p.run_dir))]
        for p in mine:
            if p not in pending:
                log.note(p, "skipped", 0.0)
        return pending

    with sigterm_as_exit():
        if executor.kind == ExecutorKind.RAY:
            todo = {index: pending_of(index) for index in range(len(sweep.servers))}
            _run_on_ray(sweep, {i: p for i, p in todo.items() if p}, log, executor, retries)
        else:
            for index, entry in enumerate(sweep.servers):
                pending = pending_of(index)
                if pending:
                    _serve_entry(sweep, entry, pending, log, progress)
    echo(f"sweep {sweep.name}: {log.count('ok')} ok, {log.count('failed')} failed, "
         f"{log.count('skipped')} skipped; runs in {sweep.out_dir}")
    return log.statuses


def _refuse_started_runs(points: list[RunPoint]) -> None:
    """FileExistsError when a run folder of the sweep already holds anything."""
    started = [p.run_dir for p in points if p.run_dir.exists() and any(p.run_dir.iterdir())]
    if started:
        raise FileExistsError(f"{len(started)} run folder(s) already hold results, e.g. "
                              f"{started[0]}; use --resume to continue, or another out_dir")


def _prepare_out_dir(sweep: Sweep) -> None:
    """Create ``out_dir`` and keep the sweep file used beside the runs (``_sweep/sweep.yaml``)."""
    sweep.out_dir.mkdir(parents=True, exist_ok=True)
    if sweep.source and Path(sweep.source).is_file():
        (sweep.out_dir / SWEEP_COPY).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(sweep.source, sweep.out_dir / SWEEP_COPY)


def _serve_entry(sweep: Sweep, entry: SweepServer, pending: list[RunPoint], log: _SweepLog,
                 progress: bool) -> None:
    """Build the model if synthetic, start the entry's server, warm it up and run ``pending``
    on it. A server that fails to start (or a model that cannot be built) fails every pending
    run that has no result or error yet; the sweep goes on with the next entry."""
    server_dir = sweep.out_dir / entry.model_label / entry.hardware_label
    try:
        if entry.synth is not None:
            from hgresearch.bench.dummy_model import synth_model

            synth_model(entry.synth, entry.server.model)
        log.echo(f"starting server for {entry.model_label} on {entry.hardware_label} ...")
        with VLLMServer(entry.server, server_dir) as server:
            log.echo(f"server healthy after {server.ready_after_s:.1f} s at {server.base_url}")
            if sweep.warmup_requests:
                warm_up(server.base_url, entry.server.name, requests=sweep.warmup_requests)
            for point in pending:
                _run_point(sweep, entry, point, server, log, progress)
    except (ServerError, OSError, InputError) as err:
        for point in pending:
            if not is_finished(point.run_dir) and not (point.run_dir / ERROR_FILE).exists():
                log.note(point, "failed", 0.0, _write_error(point.run_dir, "server", err))


def _run_point(sweep: Sweep, entry: SweepServer, point: RunPoint, server: VLLMServer,
               log: _SweepLog, progress: bool) -> None:
    """One run on a started server, recorded ``ok`` or ``failed``; a failed run does not stop
    the sweep (Ctrl-C and SIGTERM do); nor does a run whose requests all failed (its folder is
    kept, its status is ``failed``)."""
    from hgresearch.bench.preflight import every_request_failed, failure_text

    start = time.monotonic()
    if not server.alive():
        log.note(point, "failed", 0.0, _write_error(
            point.run_dir, "server",
            ServerError("server died", server.log_path, log_tail(server.log_path))))
        return
    try:
        summary = _one_run(sweep, entry, point, server, progress)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as err:  # noqa: BLE001 - recorded, sweep goes on
        log.note(point, "failed", time.monotonic() - start,
                 _write_error(point.run_dir, "run", err))
        return
    if every_request_failed(summary):  # kept, but not a result
        log.note(point, "failed", time.monotonic() - start, failure_text(summary),
                 summary=summary)
        return
    log.note(point, "ok", time.monotonic() - start, summary=summary)


def _one_run(sweep: Sweep, entry: SweepServer, point: RunPoint, server: VLLMServer,
             progress: bool) -> dict[str, Any]:
    """One benchmark point with the server-side cross-check around it."""
    from hgresearch.bench.runner import run_benchmark
    from hgresearch.bench.server.prometheus import cross_check, scrape, warmup_totals

    config = bench_config(sweep, entry, point.qps, server.base_url)
    # An unfinished folder (interrupted or failed earlier) is not a result: start it afresh,
    # so the server's counters before/after cover exactly this run.
    if point.run_dir.exists():
        shutil.rmtree(point.run_dir)
    point.run_dir.mkdir(parents=True)
    log_start = server.log_path.stat().st_size if server.log_path.exists() else 0
    before = scrape(server.base_url)
    info = server.info()
    info["sweep"] = {"name": sweep.name, "file": sweep.source, "qps": qps_label(point.qps),
                     "repeat": point.repeat, "repeats": sweep.repeats,
                     "synth_model": entry.synth}
    summary = run_benchmark(config, point.run_dir, resume=False, progress=progress,
                            server_info=info)
    after = scrape(server.base_url)
    excluded = warmup_totals(read_records(point.run_dir / REQUESTS_FILE))
    result = cross_check(summary, before, after, excluded=excluded)
    write_server_metrics(point.run_dir, result)
    _copy_log_slice(server.log_path, log_start, point.run_dir / SERVER_LOG_FILE)
    if result.get("disagreements"):
        raise_text = "; ".join(result["disagreements"])
        # Recorded, not fatal: the run's data stand, the flag says the counts differ.
        summary = {**summary, "server_disagreement": raise_text}
    return summary


# -- Ray ------------------------------------------------------------------------------------

def node_identity() -> dict[str, Any]:
    """Where this code runs: host name, and inside a Ray task the node id and the resources
    the task holds (recorded with each run in ``_sweep/status.jsonl``)."""
    node: dict[str, Any] = {"hostname": socket.gethostname()}
    with contextlib.suppress(Exception):
        import sys

        if "ray" in sys.modules:  # only where Ray is in use: never import it for a local run
            ray = sys.modules["ray"]
            if ray.is_initialized():
                context = ray.get_runtime_context()
                if context.worker.mode == ray.WORKER_MODE:
                    node["node_id"] = context.get_node_id()
                    node["resources"] = context.get_assigned_resources()
    return node


def task_options(entry: SweepServer) -> dict[str, Any]:
    """The resources a Ray task of ``entry`` requests (``ray.remote(...).options``).

    The sweep file's ``resources`` when given (``num_cpus``, ``num_gpus``, others custom);
    else a CPU-only entry (``gpu_name: CPU``) asks for one CPU, and an entry on N GPUs asks for
    ``num_gpus: N`` plus N of the custom resource named like the GPU (``RTX-4090``,
    ``H100-PCIe``), so a 2x RTX 4090 configuration never lands on an H100 node: start each
    node with ``ray start --resources '{"RTX-4090": 8}'`` (docs/cluster.md).
    """
    if entry.resources is not None:
        wanted = dict(entry.resources)
        options: dict[str, Any] = {"num_cpus": wanted.pop("num_cpus", 1.0),
                                   "num_gpus": wanted.pop("num_gpus", 0.0)}
        if wanted:
            options["resources"] = wanted
        return options
    if entry.gpu_name == "CPU":
        return {"num_cpus": 1.0, "num_gpus": 0.0}
    return {"num_cpus": 1.0, "num_gpus": float(entry.gpu_count),
            "resources": {entry.gpu_name: float(entry.gpu_count)}}


def _demand(options: dict[str, Any]) -> dict[str, float]:
    """Ray's names for what a task requests (``CPU``, ``GPU``, custom), zeros dropped."""
    demand = {"CPU": options.get("num_cpus", 0.0), "GPU": options.get("num_gpus", 0.0),
              **options.get("resources", {})}
    return {name: float(amount) for name, amount in demand.items() if amount}


def unplaceable(options: dict[str, Any], nodes: list[dict[str, float]]) -> str | None:
    """Why no node of ``nodes`` (each node's total resources) can run a task with
    ``options``, or None when one can: a task Ray cannot place would wait for ever."""
    demand = _demand(options)
    if any(all(node.get(name, 0.0) >= amount for name, amount in demand.items())
           for node in nodes):
        return None
    offered = sorted({name for node in nodes for name in node
                      if not name.startswith(("node:", "memory", "object_store"))})
    return (f"no node of the Ray cluster has {demand} (the cluster's resources: {offered}); "
            "start nodes with the GPU type as a custom resource, or set the entry's "
            "resources in the sweep file")


def serve_entry_task(sweep: Sweep, index: int, todo: list[tuple[str, int]]) -> dict[str, Any]:
    """A Ray task: serve entry ``index`` of ``sweep`` for the runs ``todo`` (QPS label,
    repeat) exactly as a local sweep does, in a temporary folder, and return the run folders
    (:func:`hgresearch.data.runfolder.pack_run_folder`), each run's status, the server log and the
    node. A cancelled task stops its server on the way out (the ``with VLLMServer`` block);
    a killed one takes it along by the server's parent-death signal."""
    import os

    # Ray runs its workers at nice 15 (below the raylet); the server and the client inherit it.
    # Measure at normal priority where the node allows it; config.json records what held.
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, 0)
    with tempfile.TemporaryDirectory(prefix="hgr-sweep-") as tmp:
        remote = dataclasses.replace(sweep, out_dir=Path(tmp))
        wanted = set(todo)
        points = [p for p in run_points(remote) if p.server_index == index
                  and (qps_label(p.qps), p.repeat) in wanted]
        entry = remote.servers[index]
        log = _SweepLog(remote, len(points), print)
        _serve_entry(remote, entry, points, log, progress=False)
        runs = []
        server_failed = False
        for status in log.statuses:
            run_dir = Path(status["run_dir"])
            if (run_dir / ERROR_FILE).is_file():
                stage = json.loads((run_dir / ERROR_FILE).read_text()).get("stage")
                server_failed |= stage == "server"
            runs.append({**{k: status.get(k) for k in ("qps", "repeat", "status", "wall_s",
                                                       "error")},
                         "summary": ({k: status.get(k) for k in _SUMMARY_STATUS_KEYS}
                                     if "completed" in status else None),
                         "files": pack_run_folder(run_dir) if run_dir.is_dir() else {}})
        server_dir = Path(tmp) / entry.model_label / entry.hardware_label
        log_path = server_dir / SERVER_LOG_FILE
        return {"node": node_identity(), "runs": runs, "server_failed": server_failed,
                "server_log": log_path.read_bytes() if log_path.is_file() else b""}


def _run_on_ray(sweep: Sweep, todo: dict[int, list[RunPoint]], log: _SweepLog,
                executor: Executor, retries: int) -> None:
    """Each server configuration of ``todo`` as one Ray task (:func:`serve_entry_task`) with
    its resources (:func:`task_options`); results installed as they come back. A task that
    raises, whose worker or node dies, or whose server fails is submitted again for its
    unfinished runs, up to ``retries`` times; then those runs are recorded failed. Any exit
    before the end (Ctrl-C, SIGTERM) cancels the outstanding tasks (:func:`_cancel`)."""
    ray = connect_ray(executor.address)
    remote = ray.remote(serve_entry_task)
    nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]
    outstanding: dict[Any, tuple[int, list[RunPoint], int]] = {}

    def submit(index: int, pending: list[RunPoint], attempt: int) -> None:
        entry = sweep.servers[index]
        options = task_options(entry)
        # Ray's own retries are off: the driver retries, so it can report each attempt.
        ref = remote.options(**options, max_retries=0, retry_exceptions=False,
                             name=f"sweep:{entry.model_label}:{entry.hardware_label}").remote(
            sweep, index, [(qps_label(p.qps), p.repeat) for p in pending])
        outstanding[ref] = (index, pending, attempt)
        log.echo(f"submitted {entry.model_label} on {entry.hardware_label} "
                 f"({len(pending)} run(s), attempt {attempt + 1}/{retries + 1}, "
                 f"resources {_demand(options)})")

    for index, pending in todo.items():
        reason = unplaceable(task_options(sweep.servers[index]), nodes)
        if reason is None:
            submit(index, pending, 0)
            continue
        for point in pending:
            log.note(point, "failed", 0.0,
                     _write_error(point.run_dir, "placement", InputError(reason)))
    try:
        while outstanding:
            ready, _ = ray.wait(list(outstanding), num_returns=1)
            index, pending, attempt = outstanding.pop(ready[0])
            entry = sweep.servers[index]
            try:
                result = ray.get(ready[0])
            except Exception as err:  # noqa: BLE001 - the task raised, or its node died
                cause = getattr(err, "cause", None) or err
                remaining = [p for p in pending if not is_finished(p.run_dir)]
                if attempt < retries:
                    log.echo(f"{entry.model_label} on {entry.hardware_label}: attempt "
                             f"{attempt + 1} failed ({type(cause).__name__}: "
                             f"{str(cause).splitlines()[0] if str(cause) else ''}); trying "
                             "again")
                    submit(index, remaining, attempt + 1)
                    continue
                for point in remaining:
                    log.note(point, "failed", 0.0, _write_error(point.run_dir, "task", cause))
                continue
            again = result["server_failed"] and attempt < retries
            _install(sweep, entry, pending, result, log, keep_failed=not again)
            if again:
                remaining = [p for p in pending if not is_finished(p.run_dir)]
                log.echo(f"{entry.model_label} on {entry.hardware_label}: the server failed "
                         f"on {result['node'].get('hostname')}; trying again")
                submit(index, remaining, attempt + 1)
    finally:
        if outstanding:
            _cancel(ray, list(outstanding), log.echo)


def _install(sweep: Sweep, entry: SweepServer, pending: list[RunPoint],
             result: dict[str, Any], log: _SweepLog, *, keep_failed: bool) -> None:
    """Install a task's run folders under ``sweep.out_dir`` and record each run with the node
    that ran it; failed runs only when ``keep_failed`` (else they are tried again)."""
    by_key = {(qps_label(p.qps), p.repeat): p for p in pending}
    server_dir = sweep.out_dir / entry.model_label / entry.hardware_label
    if result["server_log"]:
        server_dir.mkdir(parents=True, exist_ok=True)
        with open(server_dir / SERVER_LOG_FILE, "ab") as handle:
            handle.write(result["server_log"])
    for run in result["runs"]:
        point = by_key[(run["qps"], run["repeat"])]
        if run["status"] == "failed" and not keep_failed:
            continue
        if run["files"]:
            install_run_folder(point.run_dir, run["files"])
        log.note(point, run["status"], run["wall_s"] or 0.0, run["error"],
                 summary=run["summary"], node=result["node"])


def _cancel(ray: Any, refs: list[Any], echo: Callable[[str], None]) -> None:
    """Cancel outstanding tasks: first gently (the task gets ``KeyboardInterrupt`` and stops
    its server), then, after :data:`CANCEL_GRACE_S`, by killing the worker (its server gets
    SIGTERM from the kernel: the parent-death signal :class:`VLLMServer` sets)."""
    echo(f"cancelling {len(refs)} outstanding task(s); their servers stop")
    for ref in refs:
        with contextlib.suppress(Exception):
            ray.cancel(ref, force=False)
    with contextlib.suppress(Exception):
        ray.wait(refs, num_returns=len(refs), timeout=CANCEL_GRACE_S)
    for ref in refs:
        with contextlib.suppress(Exception):
            ray.cancel(ref, force=True)
