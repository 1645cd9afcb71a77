"""Sweeps: server configurations x QPS values x repeats, one call (``hgresearch sweep FILE``).

A sweep file (YAML, see ``sweeps/*.yaml`` and docs/serving.md)::

    name: cpu-tiny                 # label, recorded with every run
    out_dir: data/raw/cpu-tiny     # run folders go below it (relative to the current folder)
    qps: [1, 2, 4, inf]            # offered request rates (Poisson unless burstiness != 1)
    repeats: 2                     # each repeat runs the whole QPS list once more
    warmup_requests: 4             # short requests after each server start, not recorded
    server: {dtype: float32}       # ServerConfig fields shared by every server entry
    bench:                         # BenchConfig fields shared by every run
      num_prompts: 40
      seed: 42
      workload: {kind: random, input_len: 128, output_len: 64}
    servers:                       # one entry per server configuration
      - synth: tiny-llama-cpu      # build this catalog model offline (config + tokenizer only)
        gpu_name: CPU
        gpu_count: 1
        server: {dtype: float32, max_model_len: 1024, port: 8011}   # ServerConfig fields
        bench: {}                  # per-server BenchConfig overrides

For each server entry: start the server -> warm up -> for each repeat, for each QPS: scrape
``/metrics``, run one benchmark point with the measurement client, scrape again and write the
server's deltas beside the client's figures -> stop the server. Every run gets its own folder
``<out_dir>/<model>/<count>x<gpu>[-tp<N>]/qps<Q>-rep<R>/`` (the run folder of
:mod:`hgresearch.bench.runner` plus ``server_metrics.json`` and ``server.log``, the server's
log during that run; :mod:`hgresearch.runfolder` names and reads them).
``<out_dir>/_sweep/status.jsonl`` records every run's outcome (``_sweep/sweep.yaml`` is the
sweep file used); a failed server start or run is recorded there (and in ``error.json`` in the
run folder) and the sweep goes on.
With ``resume=True`` finished runs (those with a ``summary.json``) are skipped, and a server
whose runs are all finished is not started.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hgresearch.bench.server import (
    ServerConfig,
    ServerError,
    VLLMServer,
    sigterm_as_exit,
    warm_up,
)
from hgresearch.errors import InputError
from hgresearch.keys import hardware_label
from hgresearch.runfolder import (
    ERROR_FILE,
    REQUESTS_FILE,
    SERVER_LOG_FILE,
    is_finished,
    read_records,
    write_error,
    write_server_metrics,
)

#: Where ``synth:`` models are built (relative to the current folder).
DEFAULT_MODEL_DIR = Path("build/models")
#: Sweep records live in a sub-folder: ``read_runs`` takes top-level ``*.jsonl`` for results.
STATUS_FILE = "_sweep/status.jsonl"
SWEEP_COPY = "_sweep/sweep.yaml"


@dataclass
class SweepServer:
    """One server configuration of a sweep."""

    server: ServerConfig
    gpu_name: str = "CPU"
    gpu_count: int = 1
    synth: str | None = None  #: catalog model built offline and served with dummy weights
    bench: dict[str, Any] = field(default_factory=dict)  #: BenchConfig overrides
    label: str | None = None  #: folder name of the model (default: served model name)

    @property
    def model_label(self) -> str:
        return self.label or self.server.name

    @property
    def hardware_label(self) -> str:
        """Folder name of the hardware: :func:`hgresearch.keys.hardware_label` without spaces,
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


def parse_sweep(data: Any, *, file: str = "<sweep>", base_dir: Path | None = None) -> Sweep:
    """Validate a sweep mapping (the YAML's content); errors name the file and field."""
    if not isinstance(data, dict):
        raise InputError("expected a mapping at the top level", file=file)
    known = {"name", "description", "out_dir", "qps", "repeats", "warmup_requests", "bench",
             "server", "servers"}
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
        raise InputError("expected a mapping of ServerConfig fields", file=file, field="server")
    servers_raw = data["servers"]
    if not isinstance(servers_raw, list) or not servers_raw:
        raise InputError("expected a non-empty list", file=file, field="servers")
    servers = []
    server_keys = {"server", "gpu_name", "gpu_count", "synth", "bench", "label"}
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
            from hgresearch.modelsynth import architecture

            try:
                architecture(str(synth))
            except InputError as err:
                raise InputError(f"synth: {err.reason}", file=file,
                                 field=f"{where}.synth") from None
            server_raw.setdefault("model", str(DEFAULT_MODEL_DIR / str(synth)))
            server_raw.setdefault("served_model_name", str(synth))
            server_raw.setdefault("load_format", "dummy")
        try:
            server = ServerConfig.from_dict(server_raw, where=f"{where}.server")
        except (TypeError, ValueError) as err:
            raise InputError(str(err), file=file, field=f"{where}.server") from None
        gpu_count = entry.get("gpu_count", 1)
        if isinstance(gpu_count, bool) or not isinstance(gpu_count, int) or gpu_count < 1:
            raise InputError(f"expected a positive integer, got {gpu_count!r}", file=file,
                             field=f"{where}.gpu_count")
        gpu_name = str(entry.get("gpu_name", "CPU"))
        from hgresearch.catalogs import normalize_gpu_name

        try:
            gpu_name = normalize_gpu_name(gpu_name)
        except KeyError:
            raise InputError(f"unknown GPU {gpu_name!r}; add it to "
                             "hgresearch/catalogs/hardware.csv",
                             file=file, field=f"{where}.gpu_name") from None
        overrides = entry.get("bench") or {}
        if not isinstance(overrides, dict):
            raise InputError("expected a mapping", file=file, field=f"{where}.bench")
        servers.append(SweepServer(server=server, gpu_name=gpu_name, gpu_count=gpu_count,
                                   synth=None if synth is None else str(synth),
                                   bench=dict(overrides), label=entry.get("label")))
    out_dir = Path(str(data["out_dir"]))
    if base_dir is not None and not out_dir.is_absolute():
        out_dir = base_dir / out_dir
    return Sweep(name=str(data["name"]), out_dir=out_dir, qps=qps, servers=servers,
                 repeats=repeats, warmup_requests=warmup, bench=dict(bench),
                 description=str(data.get("description", "")), source=file)


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
    is not in ``hgresearch/catalogs/model_architectures.csv`` raise :class:`InputError`.
    """
    from hgresearch.modelsynth import architecture

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


def bench_config(sweep: Sweep, entry: SweepServer, qps: float, base_url: str) -> Any:
    """The :class:`~hgresearch.bench.runner.BenchConfig` of one run."""
    from hgresearch.bench.runner import BenchConfig

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


class _SweepLog:
    """Each run's outcome: kept for the caller, appended to ``_sweep/status.jsonl`` (skipped runs
    are not) and echoed as one progress line."""

    def __init__(self, sweep: Sweep, total: int, echo: Callable[[str], None]) -> None:
        self.sweep = sweep
        self.total = total
        self.echo = echo
        self.statuses: list[dict[str, Any]] = []

    def note(self, point: RunPoint, status: str, wall_s: float, error: str | None = None,
             summary: dict[str, Any] | None = None) -> None:
        """Record one run: ``ok``, ``failed`` (with ``error``) or ``skipped``."""
        entry = self.sweep.servers[point.server_index]
        record = {"sweep": self.sweep.name, "model": entry.model_label,
                  "hardware": entry.hardware_label, "qps": qps_label(point.qps),
                  "repeat": point.repeat, "run_dir": str(point.run_dir), "status": status,
                  "wall_s": round(wall_s, 3), "error": error,
                  "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        if summary is not None:
            record.update({k: summary.get(k) for k in ("completed", "failed",
                                                        "output_throughput", "p99_ttft_ms")})
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
              progress: bool = False) -> list[dict[str, Any]]:
    """Run every point of ``sweep`` (see the module docstring); returns one status per run.

    Without ``resume``, a run folder that already holds results is an error (nothing is
    overwritten). A ``KeyboardInterrupt`` (Ctrl-C) or SIGTERM stops the sweep after stopping
    the server; finished runs stay, and ``resume=True`` continues from there.

    Steps: refuse to overwrite (:func:`_refuse_started_runs`), keep a copy of the sweep file
    (:func:`_prepare_out_dir`), then per server entry skip finished runs and serve the rest
    (:func:`_serve_entry`), and print the tally.
    """
    points = run_points(sweep)
    if not resume:
        _refuse_started_runs(points)
    _prepare_out_dir(sweep)
    log = _SweepLog(sweep, len(points), echo)
    with sigterm_as_exit():
        for index, entry in enumerate(sweep.servers):
            mine = [p for p in points if p.server_index == index]
            pending = [p for p in mine if not (resume and is_finished(p.run_dir))]
            for p in mine:
                if p not in pending:
                    log.note(p, "skipped", 0.0)
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
            from hgresearch.modelsynth import synth_model

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
    from hgresearch.bench.runner import every_request_failed, failure_text

    start = time.monotonic()
    if not server.alive():
        log.note(point, "failed", 0.0, _write_error(
            point.run_dir, "server",
            ServerError("server died", server.log_path, _tail(server.log_path))))
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


def _tail(path: Path) -> str:
    from hgresearch.bench.server import log_tail

    return log_tail(path)


def _one_run(sweep: Sweep, entry: SweepServer, point: RunPoint, server: VLLMServer,
             progress: bool) -> dict[str, Any]:
    """One benchmark point with the server-side cross-check around it."""
    from hgresearch.bench.runner import run_benchmark
    from hgresearch.bench.server_metrics import cross_check, scrape, warmup_totals

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
