"""What a sweep is: the sweep file's format and its parser (errors name the file, the line and
the field), the runs it makes and their folders, the benchmark configuration of each run, and
the dry run's sizing (wall time on one or several nodes).

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

Every run gets its own folder ``<out_dir>/<model>/<count>x<gpu>[-tp<N>]/qps<Q>-rep<R>/``
(:func:`run_points`); the sweep's own records go to ``<out_dir>/_sweep/``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hgresearch.bench.config import BenchConfig
from hgresearch.bench.server.vllm import VLLMServerConfig
from hgresearch.data.files import YamlDocument, read_yaml
from hgresearch.errors import InputError
from hgresearch.identity import hardware_label

if TYPE_CHECKING:
    from hgresearch.bounds import WorkEstimate

#: Where ``synth:`` models are built (relative to the current folder).
DEFAULT_MODEL_DIR = Path("build/models")
#: Sweep records live in a sub-folder: ``read_runs`` takes top-level ``*.jsonl`` for results.
STATUS_FILE = "_sweep/status.jsonl"
#: The sweep file a sweep ran, kept beside its runs.
SWEEP_COPY = "_sweep/sweep.yaml"

#: Keys of a sweep file, and of one entry of its ``servers`` list.
SWEEP_KEYS = ("name", "description", "out_dir", "qps", "duration_s", "repeats",
              "warmup_requests", "bench", "server", "servers")
SERVER_ENTRY_KEYS = ("server", "gpu_name", "gpu_count", "synth", "bench", "label", "resources")


@dataclass
class SweepServer:
    """One server configuration of a sweep."""

    server: VLLMServerConfig
    gpu_name: str = "CPU"
    gpu_count: int = 1
    synth: str | None = None  #: catalog model built offline and served with dummy weights
    bench: dict[str, Any] = field(default_factory=dict)  #: BenchConfig overrides
    label: str | None = None  #: folder name of the model (default: served model name)
    #: Ray resources a task of this server requests (None: the default of
    #: :func:`hgresearch.bench.sweep.ray.task_options`)
    resources: dict[str, float] | None = None

    @property
    def model_label(self) -> str:
        return self.label or self.server.name

    @property
    def hardware_label(self) -> str:
        """Folder name of the hardware: :func:`hgresearch.identity.hardware_label` without
        spaces, ``-tp<n>`` added when the tensor-parallel size differs from the GPU count."""
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


# -- the sweep file -------------------------------------------------------------------------

def load_sweep(path: str | Path, *, base_dir: Path | None = None) -> Sweep:
    """Read and validate a sweep file (YAML); errors name the file, the line and the field."""
    return parse_sweep(read_yaml(path, what="sweep file"), base_dir=base_dir)


def parse_sweep(data: Any, *, file: str = "<sweep>", base_dir: Path | None = None) -> Sweep:
    """Validate a sweep: the YAML's content (a mapping), or the
    :class:`~hgresearch.data.files.YamlDocument` read from a file, whose errors then carry the
    line of the bad key. Errors name the file and the field (``servers[0].gpu_name``)."""
    doc = data if isinstance(data, YamlDocument) else YamlDocument(data=data, file=file)
    top = doc.data
    if not isinstance(top, dict):
        raise doc.error("expected a mapping at the top level")
    _check_keys(doc, top, SWEEP_KEYS)
    for key in ("name", "out_dir", "qps", "servers"):
        if key not in top:
            raise doc.error("required key is missing", key)
    qps = _parse_qps(doc, top["qps"])
    duration_s = top.get("duration_s")
    if duration_s is not None:
        if not _is_number(duration_s) or not 0 < duration_s < math.inf:
            raise doc.error(f"expected a positive number of seconds, got {duration_s!r}",
                            "duration_s")
        if any(math.isinf(q) for q in qps):
            raise doc.error("duration_s needs finite rates (inf sends all at once)", "qps")
    repeats = _integer(doc, top.get("repeats", 1), 1, "repeats")
    warmup = _integer(doc, top.get("warmup_requests", 4), 0, "warmup_requests")
    bench = _bench_overrides(doc, top.get("bench"), "bench")
    server_defaults = top.get("server") or {}
    if not isinstance(server_defaults, dict):
        raise doc.error("expected a mapping of VLLMServerConfig fields", "server")
    servers_raw = top["servers"]
    if not isinstance(servers_raw, list) or not servers_raw:
        raise doc.error("expected a non-empty list", "servers")
    servers = [_parse_server_entry(doc, i, entry, server_defaults)
               for i, entry in enumerate(servers_raw)]
    out_dir = Path(str(top["out_dir"]))
    if base_dir is not None and not out_dir.is_absolute():
        out_dir = base_dir / out_dir
    sweep = Sweep(name=str(top["name"]), out_dir=out_dir, qps=qps, servers=servers,
                  repeats=repeats, warmup_requests=warmup, bench=bench,
                  description=str(top.get("description", "")), source=doc.file,
                  duration_s=None if duration_s is None else float(duration_s))
    _check_bench_values(doc, top, sweep)
    return sweep


def _check_bench_values(doc: YamlDocument, top: dict[str, Any], sweep: Sweep) -> None:
    """Every run's benchmark configuration checked as ``hgresearch bench`` checks its options
    (:func:`hgresearch.bench.options.validate_config`: workload keys and lengths, rates,
    counts), when the file is read: a bad value is an error at the line of the key that set
    it (the entry's ``bench``, else the shared one). Files (a dataset, a tokenizer) are
    checked when the sweep starts (:func:`check_before_start`): a dry run needs none."""
    from hgresearch.bench.options import validate_config

    shared = top.get("bench") or {}
    for i, entry in enumerate(sweep.servers):
        own = top["servers"][i].get("bench") or {}
        for qps in sweep.qps:
            try:
                validate_config(bench_config(sweep, entry, qps, "http://127.0.0.1:8000"),
                                files=False)
            except InputError as err:
                key = str(err.field)
                at = (("servers", i, "bench", key) if key in own
                      else ("bench", key) if key in shared else ("servers", i, "bench"))
                raise doc.error(err.reason, *at) from None


def check_before_start(sweep: Sweep) -> None:
    """What a sweep needs on disk, checked before any server starts, so that a typo does not
    fail every run one by one: each server's model folder (a ``synth:`` entry's is built when
    its server starts; a Hugging Face id is not a folder) and each run's files (its
    workload's dataset, its tokenizer). :class:`InputError` names the sweep file and the
    entry."""
    from hgresearch.bench.options import validate_config
    from hgresearch.bench.server.vllm import missing_model_folder

    for i, entry in enumerate(sweep.servers):
        problem = missing_model_folder(entry.server) if entry.synth is None else None
        if problem:
            raise InputError(problem, file=sweep.source, field=f"servers[{i}].server.model")
        for qps in sweep.qps:
            try:
                validate_config(bench_config(sweep, entry, qps, "http://127.0.0.1:8000"))
            except InputError as err:
                raise InputError(err.reason, file=sweep.source,
                                 field=f"servers[{i}].bench.{err.field}") from None


def _parse_server_entry(doc: YamlDocument, i: int, entry: Any,
                        server_defaults: dict[str, Any]) -> SweepServer:
    """Entry ``i`` of ``servers``: its server (the shared ``server`` fields, then its own),
    hardware, synthetic model, bench overrides and Ray resources."""
    from hgresearch.data.catalogs import normalize_gpu_name

    where = ("servers", i)
    if not isinstance(entry, dict):
        raise doc.error("expected a mapping", *where)
    _check_keys(doc, entry, SERVER_ENTRY_KEYS, *where)
    own_server = entry.get("server") or {}
    if not isinstance(own_server, dict):
        raise doc.error("expected a mapping of VLLMServerConfig fields", *where, "server")
    server_raw = {**server_defaults, **own_server}
    synth = entry.get("synth")
    if synth is not None:
        from hgresearch.bench.dummy_model import architecture

        try:
            architecture(str(synth))
        except InputError as err:
            raise doc.error(f"synth: {err.reason}", *where, "synth") from None
        server_raw.setdefault("model", str(DEFAULT_MODEL_DIR / str(synth)))
        server_raw.setdefault("served_model_name", str(synth))
        server_raw.setdefault("load_format", "dummy")
    try:
        server = VLLMServerConfig.from_dict(server_raw)
    except InputError as err:
        # The key's own line: in the entry's server, else in the shared one.
        key = str(err.field)
        at = ((*where, "server", key) if key in own_server
              else ("server", key) if key in server_defaults else (*where, "server"))
        raise doc.error(err.reason, *at) from None
    gpu_count = _integer(doc, entry.get("gpu_count", 1), 1, *where, "gpu_count")
    gpu_name = str(entry.get("gpu_name", "CPU"))
    try:
        gpu_name = normalize_gpu_name(gpu_name)
    except KeyError:
        raise doc.error(f"unknown GPU {gpu_name!r}; add it to "
                        "hgresearch/data/catalogs/hardware.csv", *where, "gpu_name") from None
    label = entry.get("label")
    return SweepServer(server=server, gpu_name=gpu_name, gpu_count=gpu_count,
                       synth=None if synth is None else str(synth),
                       bench=_bench_overrides(doc, entry.get("bench"), *where, "bench"),
                       label=None if label is None else str(label),
                       resources=_parse_resources(doc, entry.get("resources"),
                                                  *where, "resources"))


def _check_keys(doc: YamlDocument, mapping: dict[Any, Any], known: tuple[str, ...],
                *where: Any) -> None:
    """An unknown key of ``mapping`` is an error at its own line."""
    for key in mapping:
        if key not in known:
            raise doc.error(f"unknown key; expected one of {sorted(known)}", *where, str(key))


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float)


def _integer(doc: YamlDocument, value: Any, low: int, *where: Any) -> int:
    """``value`` as an integer >= ``low``; else an error at ``where``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        kind = {0: "a non-negative integer", 1: "a positive integer"}.get(
            low, f"an integer >= {low}")
        raise doc.error(f"expected {kind}, got {value!r}", *where)
    return value


def _parse_qps(doc: YamlDocument, value: Any) -> list[float]:
    """``qps``: one rate or a list; each a positive number or ``inf``."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise doc.error("expected at least one QPS value", "qps")
    rates = []
    for i, item in enumerate(items):
        where = ("qps", i) if isinstance(value, list) else ("qps",)
        if isinstance(item, str) and item.strip().lower() in ("inf", "infinity"):
            rates.append(math.inf)
        elif _is_number(item) and item > 0:
            rates.append(float(item))
        else:
            raise doc.error(f"expected a positive number or 'inf', got {item!r}", *where)
    return rates


def _bench_overrides(doc: YamlDocument, value: Any, *where: Any) -> dict[str, Any]:
    """A ``bench`` mapping: BenchConfig fields (checked against its names) and their values."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise doc.error("expected a mapping of BenchConfig fields", *where)
    fields = {f.name for f in dataclasses.fields(BenchConfig)}
    for key in value:
        if key not in fields:
            raise doc.error(f"unknown BenchConfig field; known: {sorted(fields)}",
                            *where, str(key))
    return dict(value)


def _parse_resources(doc: YamlDocument, value: Any, *where: Any) -> dict[str, float] | None:
    """A server entry's ``resources``: Ray resource name -> amount (``num_cpus`` and
    ``num_gpus`` are Ray's CPUs and GPUs, any other name a custom resource such as a GPU
    type)."""
    if value is None:
        return None
    if not isinstance(value, dict) or not value:
        raise doc.error("expected a mapping of resource name to amount, e.g. "
                        "{num_gpus: 2, RTX-4090: 2}", *where)
    out = {}
    for name, amount in value.items():
        if not _is_number(amount) or not 0 <= amount < math.inf:
            raise doc.error(f"expected a non-negative number, got {amount!r}", *where,
                            str(name))
        out[str(name)] = float(amount)
    return out


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


# -- the runs -------------------------------------------------------------------------------

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


def bench_config(sweep: Sweep, entry: SweepServer, qps: float, base_url: str) -> BenchConfig:
    """The :class:`~hgresearch.bench.config.BenchConfig` of one run."""
    values: dict[str, Any] = {}
    model_dir = Path(entry.server.model)
    if (model_dir / "tokenizer.json").is_file():
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
    fields = {f.name for f in dataclasses.fields(BenchConfig)}
    unknown = sorted(set(values) - fields)
    if unknown:  # a Sweep built in code rather than read by parse_sweep
        raise InputError(f"unknown BenchConfig field(s) {unknown}; known: {sorted(fields)}",
                         file=sweep.source, field="bench")
    return BenchConfig(**values)


# -- sizing (the dry run) -------------------------------------------------------------------

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


def sweep_estimate(sweep: Sweep, nodes: int = 1) -> WorkEstimate:
    """What running ``sweep`` on ``nodes`` nodes costs, for :func:`hgresearch.bounds.check_work`:
    the dry run's wall time (:func:`configuration_durations_s`, :func:`makespan_s`); its memory
    is the servers' (on their GPUs), so none is counted here."""
    from hgresearch.bounds import WorkEstimate

    durations = configuration_durations_s(sweep)
    return WorkEstimate(what=f"sweep {sweep.name} ({len(durations)} server configurations)",
                        memory_bytes=0.0, time_s=makespan_s(durations, nodes))
