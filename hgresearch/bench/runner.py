"""The run loop: one benchmark point (or a QPS sweep) -> a run folder.

``<run_dir>/`` holds ``config.json`` (parameters without secrets, versions, host, server and
GPU inventory), ``requests.jsonl`` (one line per finished request, flushed as it finishes),
``telemetry.csv`` (NVML samples; header only without NVML) and ``summary.json`` (derived from
the other files by :func:`~hgresearch.bench.run_summary.summarize_run_dir`, so it can be
re-derived offline at any time).

The arrival schedule is fixed by the seed, and each request keeps its index, so a resumed run
(``resume=True``) sends only the requests without a record, in their original relative order,
as a new *segment*; durations and energy windows are summed over segments.

:func:`run_benchmark` runs the steps in order; each lives where its job is:
:mod:`~hgresearch.bench.config` (the parameters, the resume rule),
:mod:`~hgresearch.bench.preflight` (asking the server, saying why it failed),
:mod:`~hgresearch.bench.drive` (what to send, then sending it),
:mod:`~hgresearch.bench.run_summary` (``summary.json``).
"""

from __future__ import annotations

import dataclasses
import math
import platform
import socket
import subprocess
import sys
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hgresearch import __version__
from hgresearch.bench.config import BenchConfig, check_resume
from hgresearch.bench.drive import Plan, measure, plan_requests
from hgresearch.bench.options import validate_config
from hgresearch.bench.preflight import Echo, check_outcome, preflight_all
from hgresearch.bench.run_summary import summarize_run_dir
from hgresearch.bench.schedule import PAPER_QPS
from hgresearch.data.runfolder import (
    BENCH_FILES,
    CONFIG_FILE,
    REQUESTS_FILE,
    TELEMETRY_FILE,
    is_finished,
    read_config,
    read_records,
    read_summary,
    repair,
    write_config,
)

if TYPE_CHECKING:
    from hgresearch.bench.telemetry import Sampler


def run_benchmark(config: BenchConfig, run_dir: Path, *, resume: bool = False,
                  progress: bool = True, server_info: dict[str, Any] | None = None
                  ) -> dict[str, Any]:
    """Run one benchmark point and write the run folder; returns the summary dict.

    The steps, in order: check every parameter (:func:`~hgresearch.bench.options.
    validate_config`); read what the folder holds (resume rules); plan the requests and their
    schedule (:func:`~hgresearch.bench.drive.plan_requests`); ask the server
    (:func:`~hgresearch.bench.preflight.preflight`) — nothing is written before this point, so
    a bad value or an absent server leaves no folder; prepare the folder; start telemetry;
    write config.json; measure (:func:`~hgresearch.bench.drive.measure`: idle baseline,
    warm-up checked by :func:`~hgresearch.bench.preflight.check_warmup`, requests); summarize
    (:func:`~hgresearch.bench.run_summary.summarize_run_dir`); check the outcome
    (:func:`~hgresearch.bench.preflight.check_outcome`).

    Args:
        config: the point's parameters.
        run_dir: the run folder (created). It must not hold records unless ``resume``.
        resume: continue a killed run: requests with a record are not sent again.
        progress: show the live progress bar and status lines on stderr.
        server_info: the server's ``/v1/models`` and ``/version`` answers when the caller has
            them (else :func:`~hgresearch.bench.preflight.preflight` asks).

    Raises:
        OptionError: a bad parameter (nothing written).
        ServerUnreachable, ServerUnusable: the server cannot serve this configuration (see
            :mod:`~hgresearch.bench.preflight`); measured records stay.
        FileExistsError, InputError: records exist without ``resume``, or a resume changes
            parameters.
    """
    validate_config(config)
    run_dir = Path(run_dir)
    earlier = _read_earlier(config, run_dir, resume)
    plan = plan_requests(config, earlier.done)
    echo = _echo_for(progress)
    if server_info is None and plan.todo:
        server_info = preflight_all(config, echo=echo)

    run_dir.mkdir(parents=True, exist_ok=True)
    jsonl = run_dir / REQUESTS_FILE
    if earlier.fresh:
        for name in BENCH_FILES:
            (run_dir / name).unlink(missing_ok=True)
    else:
        repair(jsonl)  # cut a line truncated by a kill before appending
    sampler, available = _start_telemetry(config, run_dir)
    meta = _write_config(config, run_dir, earlier, sampler, available, server_info, plan)

    if plan.todo:
        meta["segments"][-1]["client_cpu_s"] = measure(
            config, plan, jsonl, earlier.segment, server_info or {}, sampler, available,
            progress, echo)
        if meta.get("server_info") is None:
            meta["server_info"] = server_info
        write_config(run_dir, meta)
    elif available:
        sampler.stop()
    summary = summarize_run_dir(run_dir)
    check_outcome(config, run_dir, summary, server_info)
    return summary


def run_dir_name(rate_qps: float) -> str:
    """Folder name of a sweep point: ``qps32``, ``qps0.5``, ``qpsinf``."""
    return "qpsinf" if math.isinf(rate_qps) else f"qps{rate_qps:g}"


def run_qps_sweep(config: BenchConfig, qps_values: list[float] | tuple[float, ...] = PAPER_QPS,
                  out_dir: Path = Path("runs"), *, resume: bool = False,
                  progress: bool = True, server_info: dict[str, Any] | None = None
                  ) -> list[dict[str, Any]]:
    """Run ``config`` at each request rate into ``out_dir/qps<rate>/``; returns the summaries.

    Every point's parameters are checked before the first one starts, and the server is asked
    (:func:`~hgresearch.bench.preflight.preflight`) once, before the first point that sends.
    With ``resume``, finished points (summary.json present and every request recorded) are
    read back — after checking that they were run with the same parameters — a partial point
    continues where it stopped, the rest run normally.

    A point whose requests all failed is kept and the sweep goes on (check the result with
    :func:`~hgresearch.bench.preflight.raise_for_failed_points`), unless the failure is the
    configuration's: then :class:`~hgresearch.bench.preflight.ServerUnusable` stops the sweep
    (finished points stay).
    """
    out_dir = Path(out_dir)
    points = [(dataclasses.replace(config, request_rate_qps=float(rate)),
               out_dir / run_dir_name(float(rate))) for rate in qps_values]
    for point, _ in points:
        validate_config(point)
    summaries = []
    for point, run_dir in points:
        if resume and is_finished(run_dir):
            old = read_summary(run_dir)
            if old.get("sent") == point.num_prompts:
                check_resume(point, run_dir)
                summaries.append(old)
                continue
        if server_info is None:
            server_info = preflight_all(point, echo=_echo_for(progress))
        summaries.append(run_benchmark(point, run_dir, resume=resume, progress=progress,
                                       server_info=server_info))
    return summaries


# --- the steps of run_benchmark, in order --------------------------------------------------


@dataclass
class _Earlier:
    """What an existing run folder already holds (read without writing anything)."""

    done: set[int]                       # indices of measured requests with a record
    segment: int                         # number of the segment this run adds
    stored: dict[str, Any] | None        # its config.json, when it holds measured records

    @property
    def fresh(self) -> bool:
        """Nothing measured yet: the folder is begun afresh."""
        return not self.done


def _read_earlier(config: BenchConfig, run_dir: Path, resume: bool) -> _Earlier:
    """What the folder already holds. Records need ``resume``, and a resume must keep
    the saved parameters. A folder without measured records (e.g. a start that found no
    server) is begun afresh."""
    records = read_records(run_dir / REQUESTS_FILE)  # drops a truncated last line
    measured = [r for r in records if not r.get("warmup")]
    if measured and not resume:
        raise FileExistsError(f"{run_dir} already holds request records; resume it "
                              "(--resume) or choose a new folder")
    if not measured:
        return _Earlier(done=set(), segment=0, stored=None)
    check_resume(config, run_dir)
    stored = read_config(run_dir) if (run_dir / CONFIG_FILE).exists() else None
    return _Earlier(done={r["index"] for r in measured},
                    segment=1 + max((int(r.get("segment") or 0) for r in records), default=-1),
                    stored=stored)


def _start_telemetry(config: BenchConfig, run_dir: Path) -> tuple[Sampler, bool]:
    """The NVML sampler (its inventory names the GPUs); whether it samples."""
    from hgresearch.bench.telemetry import Sampler

    sampler = Sampler(run_dir / TELEMETRY_FILE, hz=config.telemetry_hz)
    available = config.telemetry and sampler.start()
    if config.telemetry and not available:
        warnings.warn(f"telemetry unavailable ({sampler.reason}); energy fields will be "
                      "missing", stacklevel=3)
    return sampler, bool(available)


def _write_config(config: BenchConfig, run_dir: Path, earlier: _Earlier, sampler: Sampler,
                  available: bool, server_info: dict[str, Any] | None,
                  plan: Plan) -> dict[str, Any]:
    """config.json — parameters, versions, host, hardware, server answers — with this
    segment appended (a resumed run keeps what it saved first)."""
    gpu_name, gpu_count = _resolve_hardware(config, sampler.inventory)
    meta = earlier.stored or {
        "config": config.to_json(),
        "date": datetime.now(UTC).strftime("%Y%m%d-%H%M%S"),
        "hgresearch_version": __version__,
        "git_commit": _git_commit(),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "packages": _package_versions(),
        "gpu_name": gpu_name,
        "gpu_count": gpu_count,
        "gpu_inventory": sampler.inventory,
        "telemetry_available": available,
        "telemetry_reason": sampler.reason,
        "server_info": server_info,
        "segments": [],
    }
    meta["segments"].append({"segment": earlier.segment, "started_utc":
                             datetime.now(UTC).strftime("%Y%m%d-%H%M%S"),
                             "requests_to_send": len(plan.todo)})
    write_config(run_dir, meta)
    return meta


def _resolve_hardware(config: BenchConfig, inventory: list[dict[str, Any]]) -> tuple[str, int]:
    """GPU name (normalized, in the hardware catalog) and count: override, else NVML, else CPU."""
    from hgresearch.data.catalogs import normalize_gpu_name

    if config.gpu_name:
        name = normalize_gpu_name(config.gpu_name)
    elif inventory:
        try:
            name = normalize_gpu_name(str(inventory[0]["name"]))
        except KeyError:
            warnings.warn(f"GPU {inventory[0]['name']!r} is not in "
                          "hgresearch/data/catalogs/hardware.csv; pass gpu_name", stacklevel=3)
            name = str(inventory[0]["name"])
    else:
        name = "CPU"
    count = config.gpu_count or (len(inventory) if inventory and config.gpu_name is None
                                 else 1)
    return name, int(count)


def _git_commit() -> str | None:
    """The checkout's commit, ``-dirty`` when tracked files changed (None outside git)."""
    from hgresearch.paths import REPO_ROOT

    try:
        head = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=5, check=True)
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=5).stdout.strip()
        return head.stdout.strip() + ("-dirty" if dirty else "")
    except Exception:  # noqa: BLE001 - not a git checkout
        return None


def _package_versions() -> dict[str, str | None]:
    """Versions of the packages a measurement depends on (None: not installed)."""
    names = ("aiohttp", "numpy", "pandas", "nvidia-ml-py", "tokenizers", "vllm")
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _echo_for(progress: bool) -> Echo:
    """Where status lines go: stderr with the progress display, nowhere without."""
    if not progress:
        return lambda message: None
    return lambda message: print(message, file=sys.stderr, flush=True)
