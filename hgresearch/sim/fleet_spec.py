"""The fleet file: several vLLM replicas of different configurations behind one router.

A fleet file (YAML, docs/simulator.md "Fleets") lists replicas by configuration label
(``DeepSeek-R1-Distill-Qwen-14B on 1x H100-PCIe``) and count, with optional price, live
endpoint (``base_url``, for ``hgresearch bench --fleet``), step-time coefficients and scheduler
limits. :func:`load_fleet` reads it (:func:`hgresearch.data.files.read_yaml`) and checks it:
errors name the file, line and field. The simulator turns the specs into replicas
(:func:`hgresearch.sim.fleet.sim_replicas`); the live benchmark into endpoints
(:func:`bench_endpoints`); the planner writes them (:mod:`hgresearch.plan.fleetfile`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hgresearch.data.files import YamlDocument, read_yaml
from hgresearch.errors import InputError
from hgresearch.identity import config_label, parse_config_label

#: Keys of a replica entry in a fleet file.
REPLICA_KEYS = ("config", "calibration", "count", "price_usd_per_gpu_h", "base_url",
                "served_model", "capacity_weight", "max_outstanding", "step_time",
                "num_kv_blocks", "max_num_seqs", "max_num_batched_tokens")
#: Coefficients of ``step_time`` (:class:`~hgresearch.sim.step_time.LinearStepTimeModel`).
STEP_TIME_KEYS = ("c0_s", "c_prefill_s_per_token", "c_decode_s_per_seq", "c_kv_s_per_token")
#: Price scenario (hgresearch/data/catalogs/prices.csv) used when a replica gives no price.
DEFAULT_PRICE_SCENARIO = "alternative"


@dataclass
class FleetReplicaSpec:
    """One replica as a fleet file describes it (a ``count: 3`` entry gives three)."""

    name: str
    model: str
    gpu_name: str
    num_gpus: int
    price_usd_per_gpu_h: float | None = None
    base_url: str | None = None
    served_model: str | None = None
    capacity_weight: float | None = None
    max_outstanding: int | None = None
    step_time: dict[str, float] | None = None
    scheduler: dict[str, int] = field(default_factory=dict)
    #: A calibration file (``hgresearch sim calibrate``; path resolved against the fleet
    #: file's folder) whose calibration the replica runs.
    calibration: str | None = None
    #: Where the entry is (for errors found later, e.g. an unknown GPU when simulating).
    file: str | None = None
    line: int | None = None


@dataclass
class Fleet:
    """A fleet: its replicas, in file order (copies of one entry consecutively)."""

    replicas: list[FleetReplicaSpec]
    source: str | None = None
    price_scenario: str = DEFAULT_PRICE_SCENARIO


def load_fleet(path: str | Path) -> Fleet:
    """Read and check a fleet file (YAML); errors name the file, line and field."""
    document = read_yaml(path, what="fleet file")
    return parse_fleet(document.data, file=document.file, lines=document.lines)


def parse_fleet(data: Any, *, file: str | None = None,
                lines: dict[tuple[Any, ...], int] | None = None) -> Fleet:
    """Check a fleet file's content (``lines``: line of each key path, from
    :func:`load_fleet`); returns the :class:`Fleet` with one spec per replica copy."""
    document = YamlDocument(data=data, file=file, lines=lines or {})
    fail = document.error

    if not isinstance(data, dict) or "replicas" not in data:
        raise fail("expected a mapping with a 'replicas' list")
    unknown = sorted(set(data) - {"replicas", "name", "description", "price_scenario"})
    if unknown:
        raise fail("unknown key (expected replicas, name, description, price_scenario)",
                   unknown[0])
    entries = data["replicas"]
    if not isinstance(entries, list) or not entries:
        raise fail("expected a non-empty list of replicas", "replicas")
    specs: list[FleetReplicaSpec] = []
    for i, entry in enumerate(entries):
        specs.extend(_parse_replica(entry, i, document))
    # Weights are relative: a given one next to a default one (another unit) would mislead.
    weighted = [spec.capacity_weight is not None for spec in specs]
    if any(weighted) and not all(weighted):
        i = next(i for i, entry in enumerate(entries) if entry.get("capacity_weight") is None)
        raise fail("capacity_weight is given for some replicas only: give it for every "
                   "replica or for none", "replicas", i)
    scenario = data.get("price_scenario", DEFAULT_PRICE_SCENARIO)
    if not isinstance(scenario, str):
        raise fail(f"expected a price scenario name, got {scenario!r}", "price_scenario")
    return Fleet(replicas=specs, source=file, price_scenario=scenario)


def _number(value: Any, *, low: float, strict: bool = True) -> bool:
    return (not isinstance(value, bool) and isinstance(value, (int, float))
            and math.isfinite(value) and (value > low if strict else value >= low))


def _integer(value: Any, low: int = 1) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and value >= low


def _parse_replica(entry: Any, i: int, document: YamlDocument) -> list[FleetReplicaSpec]:
    """The specs of one ``replicas`` entry (``count`` copies)."""
    fail = document.error
    where = ("replicas", i)
    if not isinstance(entry, dict):
        raise fail("expected a mapping with at least 'config'", *where)
    unknown = sorted(set(entry) - set(REPLICA_KEYS))
    if unknown:
        raise fail(f"unknown key (expected {', '.join(REPLICA_KEYS)})", *where, unknown[0])
    calibration = entry.get("calibration")
    if calibration is not None:
        if not isinstance(calibration, str) or not calibration.strip():
            raise fail(f"expected the path of a calibration file, got {calibration!r}", *where,
                       "calibration")
        calibration = _calibration_label(calibration, entry, where, document)
    label = entry.get("config")
    parsed = parse_config_label(label) if isinstance(label, str) else None
    if parsed is None:
        raise fail(f"expected a configuration label 'MODEL on Nx GPU' (e.g. "
                   f"'DeepSeek-R1-Distill-Qwen-14B on 1x H100-PCIe'), got {label!r}",
                   *where, "config")
    count = entry.get("count", 1)
    if not _integer(count):
        raise fail(f"expected an integer >= 1, got {count!r}", *where, "count")
    for key, low, strict in (("price_usd_per_gpu_h", 0, False), ("capacity_weight", 0, True)):
        if entry.get(key) is not None and not _number(entry[key], low=low, strict=strict):
            raise fail(f"expected a number {'>' if strict else '>='} {low}, got "
                       f"{entry[key]!r}", *where, key)
    for key in ("max_outstanding", "num_kv_blocks", "max_num_seqs", "max_num_batched_tokens"):
        if entry.get(key) is not None and not _integer(entry[key]):
            raise fail(f"expected an integer >= 1, got {entry[key]!r}", *where, key)
    urls = entry.get("base_url")
    if urls is not None:
        urls = [urls] if isinstance(urls, str) else urls
        if not isinstance(urls, list) or len(urls) != count:
            raise fail(f"expected one URL per replica ({count}): a string for count 1, else a "
                       f"list of {count}", *where, "base_url")
        for url in urls:
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise fail(f"must start with http:// or https://, got {url!r}",
                           *where, "base_url")
    if entry.get("served_model") is not None and not isinstance(entry["served_model"], str):
        raise fail(f"expected the served model name, got {entry['served_model']!r}",
                   *where, "served_model")
    step = entry.get("step_time")
    if step is not None:
        if not isinstance(step, dict) or not step:
            raise fail(f"expected a mapping of {', '.join(STEP_TIME_KEYS)}", *where,
                       "step_time")
        for key, value in step.items():
            if key not in STEP_TIME_KEYS:
                raise fail(f"unknown coefficient (expected {', '.join(STEP_TIME_KEYS)})",
                           *where, "step_time", key)
            if not _number(value, low=0, strict=False):
                raise fail(f"expected a number >= 0 (seconds), got {value!r}",
                           *where, "step_time", key)
        step = {k: float(v) for k, v in step.items()}
    scheduler = {k: int(entry[k]) for k in ("num_kv_blocks", "max_num_seqs",
                                             "max_num_batched_tokens") if entry.get(k)}
    model, gpu, num_gpus = parsed
    label = config_label({"model": model, "gpu_name": gpu, "gpu_count": num_gpus})
    return [FleetReplicaSpec(
        name=label if count == 1 else f"{label} #{k + 1}", model=model,
        gpu_name=gpu, num_gpus=num_gpus,
        price_usd_per_gpu_h=entry.get("price_usd_per_gpu_h"),
        base_url=urls[k] if urls else None, served_model=entry.get("served_model"),
        capacity_weight=entry.get("capacity_weight"),
        max_outstanding=entry.get("max_outstanding"), step_time=step, scheduler=scheduler,
        calibration=calibration, file=document.file, line=document.lines.get(where))
        for k in range(count)]


def _calibration_label(path: str, entry: dict[str, Any], where: tuple[Any, ...],
                       document: YamlDocument) -> str:
    """Resolve a replica's ``calibration`` file against the fleet file's folder, read it, and
    set the entry's ``config`` from it (a ``config`` given too must be the same label)."""
    from hgresearch.sim.calibration_file import read_calibration_file

    folder = Path(document.file).parent if document.file else Path(".")
    resolved = (folder / path).as_posix() if not Path(path).is_absolute() else path
    try:
        label = read_calibration_file(resolved).config_label
    except InputError as err:
        raise document.error(f"{err}", *where, "calibration") from None
    given = entry.get("config")
    if given is not None and given != label:
        raise document.error(f"the calibration file calibrates {label!r}, not {given!r}",
                             *where, "config")
    entry["config"] = label
    return resolved


def bench_endpoints(fleet: Fleet, default_model: str) -> list[dict[str, Any]]:
    """The fleet as the live benchmark's endpoints (``BenchConfig.fleet``): every replica needs
    a ``base_url``; ``served_model`` defaults to ``default_model``; the capacity weight to 1
    (the live router knows no step-time model); the price to the file's, else 0."""
    out = []
    for spec in fleet.replicas:
        if spec.base_url is None:
            raise InputError(f"{spec.name}: a live fleet needs every replica's base_url",
                             file=spec.file, line=spec.line, field="base_url")
        price = spec.price_usd_per_gpu_h
        out.append({"base_url": spec.base_url, "model": spec.served_model or default_model,
                    "name": spec.name, "capacity_weight": spec.capacity_weight or 1.0,
                    "price_usd_per_h": 0.0 if price is None else price * spec.num_gpus,
                    "max_outstanding": spec.max_outstanding})
    return out
