"""The calibration file: a configuration calibrated on a user's runs, as a YAML file that
``hgresearch sim run``, ``sim fleet`` and ``plan`` take as a candidate beside the paper's
configurations (docs/simulator.md, "Calibration files").

It holds everything a simulation of the configuration needs, so that it does not depend on the
catalogs knowing the GPU or the model: the step-time coefficients with their intervals, the
KV cache (blocks, block size, and where the number came from: the server's ``/metrics``, its
log, a number given, or the catalogs' memory bound), the scheduler limits, the roofline floor
(where the catalogs know the GPU), the model's architecture (or its catalog name), the GPU name
and count, the hgresearch version, and the runs it was fitted on with their files' SHA-256
hashes and token totals (the length mix a simulated run reuses). :func:`write_calibration_file`
writes it; :func:`read_calibration_file` reads and checks it: a bad field is one
:class:`~hgresearch.errors.InputError` naming the file, line and field (through
:func:`hgresearch.data.files.read_yaml`), a run file whose hash changed (or that is gone) a
:class:`CalibrationFileWarning` naming it.

:meth:`CalibrationFile.calibration` turns it into the simulator's
:class:`~hgresearch.sim.calibrate.Calibration` (public API:
:class:`~hgresearch.sim.calibrate.Replica`, :class:`~hgresearch.sim.calibrate.StepCoefficients`),
the object the fleet simulator and the planner take for a calibrated configuration.

Why one module of this length: the file format's content, writer and checking reader are one
contract — a field added to one and not the others is the bug to avoid — so they change together.
"""

from __future__ import annotations

import hashlib
import math
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from hgresearch.data.catalogs import kv_cache_dtype_bytes
from hgresearch.data.files import YamlDocument, read_yaml
from hgresearch.errors import InputError
from hgresearch.identity import config_label, hardware_label
from hgresearch.sim.calibrate import Calibration, Replica, StepCoefficients
from hgresearch.sim.entities import ReplicaConfig
from hgresearch.sim.replica_limits import KV_SOURCES, KvCache
from hgresearch.sim.step_time import RooflineFloor

#: The first line's key and value: what the file is, and the layout version.
FORMAT = "hgresearch-calibration/1"
#: Suffix the command line suggests for a calibration file.
SUFFIX = ".calibration.yaml"
#: The fitted numbers, in file order (units in the names).
COEFFICIENTS = ("c0_s", "c_prefill_s_per_token", "c_decode_s_per_seq", "ttft_offset_s")
#: Calibration methods: fitted by simulating the runs' summaries, or to the engine steps
#: reconstructed from per-token timestamps (:mod:`hgresearch.sim.steps`).
METHODS = ("summaries", "steps")
#: Architecture fields (as ``hgresearch/data/catalogs/model_architectures.csv`` names them)
#: the simulator needs: KV bytes per token and weight bytes.
ARCHITECTURE_FIELDS = ("num_layers", "num_kv_heads", "head_dim", "params_b",
                       "weight_bytes_per_param")
#: Summary columns kept per run (the length mix and the best throughput a simulation reuses).
RUN_FIELDS = ("request_rate_qps", "completed", "total_input_tok", "total_output_tok",
              "request_throughput_rps")


class CalibrationFileWarning(UserWarning):
    """A calibration file's run file changed since the calibration (hash) or is gone."""


@dataclass(frozen=True)
class Architecture:
    """What the simulator needs of a model: layers, KV heads, head size, parameters (10⁹) and
    bytes per parameter; ``source`` says where they came from (``catalog`` or a file)."""

    name: str
    num_layers: int
    num_kv_heads: int
    head_dim: int
    params_b: float
    weight_bytes_per_param: float
    source: str = "catalog"

    @property
    def kv_bytes_per_token(self) -> float:
        """``2 × layers × kv_heads × head_dim × bytes`` (K and V of every layer), bytes as
        vLLM's default KV dtype (:func:`~hgresearch.data.catalogs.kv_cache_dtype_bytes`)."""
        return (2.0 * self.num_layers * self.num_kv_heads * self.head_dim
                * kv_cache_dtype_bytes(self.weight_bytes_per_param))

    @property
    def weights_bytes(self) -> float:
        """Parameters × bytes per parameter."""
        return self.params_b * 1e9 * self.weight_bytes_per_param

    def as_dict(self) -> dict[str, Any]:
        """The fields as the file writes them."""
        return {"name": self.name, "source": self.source,
                **{k: getattr(self, k) for k in ARCHITECTURE_FIELDS}}


def catalog_architecture(model: str) -> Architecture:
    """The architecture of a catalog model (:class:`~hgresearch.data.catalogs.CatalogKeyError`
    naming the catalog for any other)."""
    from hgresearch.data.catalogs import model_row

    row = model_row(model)
    return Architecture(name=str(row.model), num_layers=int(row.num_layers),
                        num_kv_heads=int(row.num_kv_heads), head_dim=int(row.head_dim),
                        params_b=float(row.params_b),
                        weight_bytes_per_param=float(row.weight_bytes_per_param))


#: Bytes per parameter of a Hugging Face ``torch_dtype``.
_DTYPE_BYTES = {"float32": 4.0, "float16": 2.0, "bfloat16": 2.0, "float8_e4m3fn": 1.0,
                "int8": 1.0}


def read_architecture(path: str | Path, name: str) -> Architecture:
    """A model architecture from a file: a mapping with the catalog's fields
    (:data:`ARCHITECTURE_FIELDS`, YAML or JSON), or a Hugging Face ``config.json`` of a dense
    decoder (Llama, Qwen2, Mistral, ...; parameters counted from its sizes: embeddings, per
    layer attention and a gated MLP, untied output head unless ``tie_word_embeddings``).
    Errors name the file, line and field."""
    document = read_yaml(path, what="architecture file")
    data = document.data
    if not isinstance(data, dict):
        raise document.error("expected a mapping (the catalog's fields or a Hugging Face "
                             "config.json)")
    if "num_hidden_layers" in data:
        return _hf_architecture(document, name)
    for key in ARCHITECTURE_FIELDS:
        if not _positive(data.get(key)):
            raise document.error(f"expected a number > 0 (or give a Hugging Face config.json), "
                                 f"got {data.get(key)!r}", key)
    return Architecture(name=str(data.get("name") or name), num_layers=int(data["num_layers"]),
                        num_kv_heads=int(data["num_kv_heads"]), head_dim=int(data["head_dim"]),
                        params_b=float(data["params_b"]),
                        weight_bytes_per_param=float(data["weight_bytes_per_param"]),
                        source=Path(path).name)


def _hf_architecture(document: YamlDocument, name: str) -> Architecture:
    data = document.data
    for key in ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size",
                "vocab_size"):
        if not _positive(data.get(key)):
            raise document.error(f"expected a number > 0, got {data.get(key)!r}", key)
    if data.get("num_local_experts") or data.get("num_experts"):
        raise document.error("mixture-of-experts models are not supported (their parameters "
                             "read per token differ from their size)", "num_experts")
    layers, hidden = int(data["num_hidden_layers"]), int(data["hidden_size"])
    heads = int(data["num_attention_heads"])
    kv_heads = int(data.get("num_key_value_heads") or heads)
    head_dim = int(data.get("head_dim") or hidden // heads)
    dtype = str(data.get("torch_dtype") or data.get("dtype") or "bfloat16")
    if dtype not in _DTYPE_BYTES:
        raise document.error(f"unknown dtype (expected one of {', '.join(_DTYPE_BYTES)})",
                             "torch_dtype")
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    mlp = 3 * hidden * int(data["intermediate_size"])
    embeddings = int(data["vocab_size"]) * hidden * (1 if data.get("tie_word_embeddings")
                                                     else 2)
    params = embeddings + layers * (attention + mlp + 2 * hidden) + hidden
    return Architecture(name=name, num_layers=layers, num_kv_heads=kv_heads, head_dim=head_dim,
                        params_b=params / 1e9, weight_bytes_per_param=_DTYPE_BYTES[dtype],
                        source=Path(str(document.file)).name)


def _positive(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


@dataclass(frozen=True)
class RunRecord:
    """One run a calibration was fitted on: its files (absolute path, SHA-256; the file stores
    them relative to itself) and the summary numbers a simulation reuses (:data:`RUN_FIELDS`)."""

    files: tuple[tuple[str, str], ...]
    values: Mapping[str, float]
    source_format: str = ""


@dataclass(frozen=True)
class CalibrationFile:
    """The content of a calibration file (see the module docstring).

    ``intervals`` maps a coefficient of :data:`COEFFICIENTS` to its (low, high) at
    ``interval_level`` (absent: none computed); ``validation`` the leave-one-rate-out MAPE (%)
    per metric; ``path`` is the file it was read from (None before it is written).
    """

    label: str
    model: str
    gpu_name: str
    gpu_count: int
    architecture: Architecture
    method: str
    coefficients: StepCoefficients
    kv_cache: KvCache
    intervals: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    interval_level: float = 0.95
    interval_method: str = ""
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 2048
    floor: RooflineFloor | None = None
    runs: tuple[RunRecord, ...] = ()
    targets: tuple[str, ...] = ()
    rms_log_error: float = math.nan
    validation: Mapping[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    hgresearch_version: str = ""
    path: str | None = None

    @property
    def config_label(self) -> str:
        """``MODEL on Nx GPU``: the configuration label the fleet files and the planner use."""
        return config_label({"model": self.model, "gpu_name": self.gpu_name,
                             "gpu_count": self.gpu_count})

    def replica(self) -> Replica:
        """The simulator's :class:`~hgresearch.sim.calibrate.Replica` of this configuration."""
        config = ReplicaConfig(num_kv_blocks=self.kv_cache.num_blocks,
                               block_size=self.kv_cache.block_size,
                               max_num_seqs=self.max_num_seqs,
                               max_num_batched_tokens=self.max_num_batched_tokens)
        return Replica(label=self.config_label, model=self.model, gpu_name=self.gpu_name,
                       num_gpus=self.gpu_count, config=config, floor=self.floor,
                       kv_per_weight_byte=(self.architecture.kv_bytes_per_token
                                           / self.architecture.weights_bytes))

    def calibration(self) -> Calibration:
        """The simulator's :class:`~hgresearch.sim.calibrate.Calibration`: the replica, the
        coefficients and, from the intervals, the relative standard errors of the three step
        coefficients (log-normal: half the log-width of the interval over its z value)."""
        from scipy.stats import norm

        z = float(norm.ppf(0.5 + self.interval_level / 2))
        rel_se: list[float] = []
        for key in COEFFICIENTS[:3]:
            low, high = self.intervals.get(key, (math.nan, math.nan))
            rel_se.append(math.expm1(math.log(high / low) / (2 * z))
                          if low > 0 and high > 0 else math.nan)
        return Calibration(
            replica=self.replica(), coefficients=self.coefficients,
            rel_se=(rel_se[0], rel_se[1], rel_se[2]),
            rates_qps=tuple(float(r.values.get("request_rate_qps", math.nan))
                            for r in self.runs),
            rms_log_error=self.rms_log_error, num_simulations=0,
            extra={"calibration_file": self.path, "method": self.method,
                   "kv_source": self.kv_cache.source})

    def points(self) -> pd.DataFrame:
        """The runs' summary numbers (:data:`RUN_FIELDS`), one row per run: what
        :func:`hgresearch.sim.run.simulate_run` and the SLO-rate table take as the
        configuration's measured points (its length mix and best throughput)."""
        return pd.DataFrame([dict(r.values) for r in self.runs], columns=list(RUN_FIELDS))


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------

def sha256_of(path: str | Path) -> str:
    """SHA-256 (hex) of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def run_record(files: Sequence[str | Path], values: Mapping[str, Any],
               source_format: str = "") -> RunRecord:
    """A :class:`RunRecord` of a run's files (hashed now) and its summary values."""
    listed = tuple((Path(f).resolve().as_posix(), sha256_of(f)) for f in files)
    return RunRecord(files=listed, values={k: float(values[k]) for k in RUN_FIELDS
                                           if k in values and values[k] is not None},
                     source_format=source_format)


def _number(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def calibration_document(calibration: CalibrationFile, folder: str | Path = ".") -> dict[str, Any]:
    """The file's content as a mapping (what :func:`write_calibration_file` dumps); run files
    relative to ``folder``, the calibration file's (so the two move together)."""
    c = calibration
    base = Path(folder).resolve()
    coefficients = {}
    for key in COEFFICIENTS:
        low, high = c.intervals.get(key, (math.nan, math.nan))
        coefficients[key] = {"value": float(getattr(c.coefficients, key)),
                             "low": _number(low), "high": _number(high)}
    floor = None
    if c.floor is not None:
        floor = {k: float(getattr(c.floor, k)) for k in
                 ("weights_bytes", "kv_bytes_per_token", "bandwidth_bytes_per_s",
                  "flops_per_token", "peak_flops_per_s")}
    return {
        "format": FORMAT,
        "label": c.label,
        "model": c.model,
        "gpu_name": c.gpu_name,
        "gpu_count": c.gpu_count,
        "hgresearch_version": c.hgresearch_version,
        "architecture": c.architecture.as_dict(),
        "method": c.method,
        "step_time": {"coefficients": coefficients,
                      "interval": {"level": c.interval_level, "method": c.interval_method}},
        "kv_cache": {"num_blocks": c.kv_cache.num_blocks, "block_size": c.kv_cache.block_size,
                     "tokens": c.kv_cache.tokens, "source": c.kv_cache.source,
                     "detail": c.kv_cache.detail},
        "scheduler": {"max_num_seqs": c.max_num_seqs,
                      "max_num_batched_tokens": c.max_num_batched_tokens},
        "roofline_floor": floor,
        "fit": {"targets": list(c.targets), "rms_log_error": _number(c.rms_log_error)},
        "validation": {"method": "leave-one-rate-out",
                       "mape_pct": {k: _number(v) for k, v in c.validation.items()}},
        "notes": list(c.notes),
        "runs": [{"files": [{"path": Path(os.path.relpath(p, base)).as_posix(), "sha256": h}
                            for p, h in r.files],
                  "source_format": r.source_format, **dict(r.values)} for r in c.runs],
    }


def write_calibration_file(calibration: CalibrationFile, path: str | Path) -> Path:
    """Write ``calibration`` as YAML to ``path`` (key order fixed; a header comment names the
    command and the docs); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = ("# hgresearch calibration file: a configuration calibrated on measured runs, for\n"
              "# `hgresearch sim run/fleet --candidate-file` and `hgresearch plan "
              "--candidate-file`.\n# Written by `hgresearch sim calibrate`; docs/simulator.md, "
              "\"Calibration files\".\n")
    body = yaml.safe_dump(calibration_document(calibration, path.parent), sort_keys=False,
                          allow_unicode=True, width=100)
    path.write_text(header + body, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------

class _Checker:
    """Typed reads of a parsed calibration file; every failure names file, line and field."""

    def __init__(self, document: YamlDocument) -> None:
        self.document = document

    def get(self, *where: Any) -> Any:
        node: Any = self.document.data
        for i, key in enumerate(where):
            if isinstance(key, int):
                ok = isinstance(node, list) and key < len(node)
            else:
                ok = isinstance(node, dict) and key in node
            if not ok:
                if isinstance(node, (dict, list)) or i == 0:
                    raise self.document.error("missing (required)", *where)
                raise self.document.error(f"expected a mapping, got {node!r}", *where[:i])
            node = node[key]
        return node

    def mapping(self, *where: Any) -> dict[str, Any]:
        value = self.get(*where)
        if not isinstance(value, dict):
            raise self.document.error(f"expected a mapping, got {value!r}", *where)
        return value

    def text(self, *where: Any, choices: Sequence[str] | None = None) -> str:
        value = self.get(*where)
        if not isinstance(value, str) or not value.strip():
            raise self.document.error(f"expected text, got {value!r}", *where)
        if choices is not None and value not in choices:
            raise self.document.error(f"expected one of {', '.join(choices)}, got {value!r}",
                                      *where)
        return value

    def number(self, *where: Any, positive: bool = False, optional: bool = False) -> float:
        value = self.get(*where)
        if value is None and optional:
            return math.nan
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not math.isfinite(value) or value < 0 or (positive and value == 0)):
            raise self.document.error(f"expected a number {'> 0' if positive else '>= 0'}, "
                                      f"got {value!r}", *where)
        return float(value)

    def integer(self, *where: Any) -> int:
        value = self.get(*where)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.document.error(f"expected an integer >= 1, got {value!r}", *where)
        return value


def parse_calibration(document: YamlDocument, *, check_hashes: bool = True) -> CalibrationFile:
    """Check a parsed calibration file (see :func:`read_calibration_file`)."""
    check = _Checker(document)
    if not isinstance(document.data, dict):
        raise document.error("expected a calibration file (a mapping starting with 'format: "
                             f"{FORMAT}')")
    fmt = check.text("format")
    if fmt != FORMAT:
        raise document.error(f"expected {FORMAT!r} (a calibration file written by `hgresearch "
                             f"sim calibrate`), got {fmt!r}", "format")
    arch = check.mapping("architecture")
    architecture = Architecture(
        name=check.text("architecture", "name"), source=str(arch.get("source") or ""),
        num_layers=int(check.number("architecture", "num_layers", positive=True)),
        num_kv_heads=int(check.number("architecture", "num_kv_heads", positive=True)),
        head_dim=int(check.number("architecture", "head_dim", positive=True)),
        params_b=check.number("architecture", "params_b", positive=True),
        weight_bytes_per_param=check.number("architecture", "weight_bytes_per_param",
                                            positive=True))
    values: dict[str, float] = {}
    intervals: dict[str, tuple[float, float]] = {}
    for key in COEFFICIENTS:
        where = ("step_time", "coefficients", key)
        check.mapping(*where)
        values[key] = check.number(*where, "value", positive=key != "ttft_offset_s")
        entry = check.mapping(*where)
        low = check.number(*where, "low", optional=True) if "low" in entry else math.nan
        high = check.number(*where, "high", optional=True) if "high" in entry else math.nan
        if math.isfinite(low) and math.isfinite(high):
            if not low <= values[key] <= high:
                raise document.error(f"expected low <= value <= high, got {low:g} <= "
                                     f"{values[key]:g} <= {high:g}", *where)
            intervals[key] = (low, high)
    interval = document.data.get("step_time", {}).get("interval") or {}
    level = interval.get("level", 0.95) if isinstance(interval, dict) else 0.95
    if not (isinstance(level, (int, float)) and 0 < level < 1):
        raise document.error(f"expected a level in (0, 1), got {level!r}",
                             "step_time", "interval", "level")
    kv = KvCache(num_blocks=check.integer("kv_cache", "num_blocks"),
                 block_size=check.integer("kv_cache", "block_size"),
                 source=check.text("kv_cache", "source", choices=KV_SOURCES),
                 detail=str(check.mapping("kv_cache").get("detail") or ""))
    scheduler = document.data.get("scheduler") or {}
    max_seqs = check.integer("scheduler", "max_num_seqs") if "max_num_seqs" in scheduler else 256
    max_tokens = (check.integer("scheduler", "max_num_batched_tokens")
                  if "max_num_batched_tokens" in scheduler else 2048)
    floor = None
    if document.data.get("roofline_floor") is not None:
        check.mapping("roofline_floor")
        floor = RooflineFloor(**{k: check.number("roofline_floor", k, positive=True) for k in
                                 ("weights_bytes", "kv_bytes_per_token",
                                  "bandwidth_bytes_per_s", "flops_per_token",
                                  "peak_flops_per_s")})
    runs = _parse_runs(check, document, Path(document.file or ".").parent)
    fit = document.data.get("fit") or {}
    validation = (document.data.get("validation") or {}).get("mape_pct") or {}
    calibration = CalibrationFile(
        label=check.text("label"), model=check.text("model"), gpu_name=check.text("gpu_name"),
        gpu_count=check.integer("gpu_count"), architecture=architecture,
        method=check.text("method", choices=METHODS),
        coefficients=StepCoefficients(values["c0_s"], values["c_prefill_s_per_token"],
                                      values["c_decode_s_per_seq"], values["ttft_offset_s"]),
        kv_cache=kv, intervals=intervals, interval_level=float(level),
        interval_method=str(interval.get("method") or "") if isinstance(interval, dict)
        else "", max_num_seqs=max_seqs, max_num_batched_tokens=max_tokens, floor=floor,
        runs=runs, targets=tuple(str(t) for t in fit.get("targets") or ()),
        rms_log_error=float(fit.get("rms_log_error") or math.nan),
        validation={str(k): float(v) for k, v in validation.items() if v is not None},
        notes=tuple(str(n) for n in document.data.get("notes") or ()),
        hgresearch_version=str(document.data.get("hgresearch_version") or ""),
        path=document.file)
    expected_label = hardware_label(calibration.gpu_name, calibration.gpu_count)
    if calibration.label != expected_label:
        raise document.error(f"expected the label of gpu_count x gpu_name, "
                             f"{expected_label!r}, got {calibration.label!r}", "label")
    if check_hashes and document.file is not None:
        check_run_hashes(calibration)
    return calibration


def _parse_runs(check: _Checker, document: YamlDocument, folder: Path
                ) -> tuple[RunRecord, ...]:
    entries = check.get("runs")
    if not isinstance(entries, list) or not entries:
        raise document.error("expected a non-empty list of runs", "runs")
    runs = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise document.error("expected a mapping", "runs", i)
        files = check.get("runs", i, "files")
        if not isinstance(files, list) or not files:
            raise document.error("expected a non-empty list of files", "runs", i, "files")
        listed = []
        for j in range(len(files)):
            where = ("runs", i, "files", j)
            digest = check.text(*where, "sha256")
            if len(digest) != 64 or any(ch not in "0123456789abcdef" for ch in digest):
                raise document.error(f"expected 64 hex digits, got {digest!r}", *where,
                                     "sha256")
            listed.append(((folder / check.text(*where, "path")).resolve().as_posix(), digest))
        values = {k: check.number("runs", i, k, optional=True) for k in RUN_FIELDS
                  if k in entry}
        for key in ("completed", "total_input_tok", "total_output_tok"):
            if not values.get(key, 0) > 0:
                raise document.error("expected a number > 0", "runs", i, key)
        runs.append(RunRecord(files=tuple(listed), values=values,
                              source_format=str(entry.get("source_format") or "")))
    return tuple(runs)


def check_run_hashes(calibration: CalibrationFile) -> list[str]:
    """Warn (:class:`CalibrationFileWarning`) for every run file of ``calibration`` whose
    SHA-256 differs from the recorded one, or that is not found; returns the warnings'
    messages."""
    messages = []
    for run in calibration.runs:
        for file, digest in run.files:
            target = Path(file)
            if not target.is_file():
                messages.append(f"{target}: run file of calibration {calibration.path} not found "
                                "(moved?): its hash cannot be checked")
            elif sha256_of(target) != digest:
                messages.append(f"{target}: SHA-256 differs from the one recorded in "
                                f"{calibration.path}: the run changed after the calibration")
    for message in messages:
        warnings.warn(message, CalibrationFileWarning, stacklevel=3)
    return messages


def read_calibration_file(path: str | Path, *, check_hashes: bool = True) -> CalibrationFile:
    """Read and check a calibration file; a bad field is one :class:`InputError` naming the
    file, line and field; a run file whose SHA-256 differs (or that is gone) is a
    :class:`CalibrationFileWarning` naming it (``check_hashes=False``: not checked)."""
    return parse_calibration(read_yaml(path, what="calibration file"), check_hashes=check_hashes)


def read_candidate_files(paths: Sequence[str | Path]) -> dict[str, CalibrationFile]:
    """Calibration files by configuration label (``MODEL on Nx GPU``); two files of one
    configuration are an :class:`InputError` naming both."""
    out: dict[str, CalibrationFile] = {}
    for path in paths:
        calibration = read_calibration_file(path)
        label = calibration.config_label
        if label in out:
            raise InputError(f"calibrates {label!r}, as {out[label].path} does: give one "
                             "calibration per configuration", file=str(path), field="label")
        out[label] = calibration
    return out


def gpu_key(name: str) -> str:
    """A GPU's name as the catalogs spell it where ``hardware.csv`` knows it (aliases too),
    else as given (a GPU outside the catalogs)."""
    from hgresearch.data.catalogs import CatalogKeyError, normalize_gpu_name

    try:
        return normalize_gpu_name(name)
    except CatalogKeyError:
        return name.strip()


def parse_gpu_values(texts: Sequence[str] | None, option: str, unit: str) -> dict[str, float]:
    """``GPU=VALUE`` options (``--price H200=3.5``, ``--tdp H200=700``) by GPU name
    (:func:`gpu_key`); a value that is not a number >= 0 is an :class:`InputError` naming the
    option."""
    out: dict[str, float] = {}
    for text in texts or ():
        gpu, sep, value = text.rpartition("=")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not sep or not gpu.strip() or not (math.isfinite(number) and number >= 0):
            raise InputError(f"expected GPU={unit} with a number >= 0 (e.g. H200=3.5), got "
                             f"{text!r}", field=option)
        out[gpu_key(gpu)] = number
    return out
