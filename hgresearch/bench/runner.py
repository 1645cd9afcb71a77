"""The run loop: one benchmark point (or a QPS sweep) -> a run folder.

``<run_dir>/`` holds ``config.json`` (parameters without secrets, versions, host, server and
GPU inventory), ``requests.jsonl`` (one line per finished request, flushed as it finishes),
``telemetry.csv`` (NVML samples; header only without NVML) and ``summary.json`` (derived from
the other files by :func:`summarize_run_dir`, so it can be re-derived offline at any time).

The arrival schedule is fixed by the seed, and each request keeps its index, so a resumed run
(``resume=True``) sends only the requests without a record, in their original relative order,
as a new *segment*; durations and energy windows are summed over segments.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import math
import os
import platform
import resource
import socket
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from hgresearch import __version__
from hgresearch.bench.client import (
    ClientOptions,
    RecordGate,
    encode_payload,
    get_json,
    make_session,
    send_request,
    send_request_fast,
)
from hgresearch.bench.fasthttp import FastPool
from hgresearch.bench.options import validate_config
from hgresearch.bench.prompts import RequestSpec, build_requests
from hgresearch.bench.schedule import (
    DEFAULT_SPIN_NS,
    PAPER_QPS,
    SendGuard,
    arrival_offsets_ns,
    sleep_until_ns,
)
from hgresearch.data.runfolder import (
    BENCH_FILES,
    CONFIG_FILE,
    REQUESTS_FILE,
    TELEMETRY_FILE,
    RecordWriter,
    is_finished,
    read_config,
    read_records,
    read_requests,
    read_summary,
    read_telemetry,
    repair,
    write_config,
    write_summary,
)
from hgresearch.data.summary import LATE_SEND_MS
from hgresearch.errors import HgResearchError, InputError

#: Config fields a resumed run may change (where the API key is read from); any other change
#: would mix two measurements in one run folder, so a resume refuses it.
RESUME_MAY_DIFFER = ("api_key_env",)

#: Upper bound (s) on the wait for ``/v1/models`` and ``/version`` before a run. These answer
#: from the server's memory, in milliseconds even under full load; a server that cannot answer
#: them in this time cannot be measured, so the preflight does not wait the (long) per-request
#: ``timeout_s`` — a shorter ``timeout_s`` is honoured.
PREFLIGHT_TIMEOUT_S = 30.0
#: How often the preflight says it is still waiting.
PREFLIGHT_TICK_S = 5.0
#: Most characters of a server's answer quoted in an error message.
ANSWER_EXCERPT_CHARS = 200


class ServerUnusable(InputError):
    """The server answered, but cannot serve this configuration (wrong model name, base URL,
    API key, or a failed warm-up): nothing useful can be measured. The message says what the
    server answered and what to change. An :class:`InputError`, so the command line exits with
    code 2 (the user must change an option or the server)."""


class ServerUnreachable(ServerUnusable):
    """No server answers at the base URL (connection refused, or accepted without an answer
    within the preflight timeout)."""


class PointsFailed(HgResearchError, RuntimeError):
    """Every request of one or more measured points failed for a reason that is not the
    configuration (e.g. all timed out): the points are recorded, the sweep went on; the
    command line exits with code 1. ``failed`` holds those points' summaries."""

    exit_code = 1

    def __init__(self, failed: list[dict[str, Any]]) -> None:
        self.failed = failed
        points = "; ".join(f"qps {s.get('request_rate')}: {failure_text(s)}" for s in failed)
        super().__init__(f"{points}; their run folders are kept")


def failure_text(summary: dict[str, Any]) -> str:
    """``"all 200 requests failed (150 timeout, 50 http_error)"`` for a point's summary."""
    return f"all {summary.get('sent')} requests failed ({_error_counts(summary)})"


def _error_counts(summary: dict[str, Any]) -> str:
    errors = summary.get("errors") or {}
    return ", ".join(f"{n} {name}" for name, n in errors.items()) or "no error class"


@dataclass
class BenchConfig:
    """Parameters of one benchmark point (everything but secrets; saved in config.json)."""

    base_url: str = "http://127.0.0.1:8000"
    model: str = "model"                  # served model name sent in each request
    endpoint: str = "completions"         # "completions" or "chat"
    request_rate_qps: float = math.inf    # mean arrival rate; inf sends all at once
    num_prompts: int = 100                # measured requests (warm-up not counted)
    burstiness: float = 1.0               # gamma shape; 1 = Poisson
    arrival: str = "gamma"                # "gamma" (Poisson at burstiness 1) or "constant"
    max_concurrency: int | None = None    # cap on requests in flight (None: no cap)
    warmup_requests: int = 1              # sent before the run, excluded from metrics
    workload: dict[str, Any] = field(default_factory=lambda: {
        "kind": "random", "input_len": 1024, "output_len": 128, "range_ratio": 1.0})
    dataset: str | None = None            # label in the summary (default: workload kind)
    seed: int = 0                         # workload and schedule seed
    tokenizer: str | None = None          # local tokenizer path (None: word approximation)
    timeout_s: float = 600.0              # per-request timeout
    api_key_env: str | None = "OPENAI_API_KEY"  # env var holding the API key (never saved)
    ignore_eos: bool = True               # fixed output lengths (vLLM's ignore_eos)
    continuous_usage: bool = True         # ask vLLM for usage on every streamed event
    extra_body: dict[str, Any] = field(default_factory=dict)  # more request fields
    gpu_name: str | None = None           # hardware label override (else NVML, else CPU)
    gpu_count: int | None = None          # GPU count override (else NVML count, else 1)
    tensor_parallel_size: int | None = None
    replicas: int = 1
    price_usd_per_gpu_h: float | None = None
    telemetry: bool = True                # sample NVML while running (if available)
    telemetry_hz: float = 10.0
    idle_baseline_s: float = 5.0          # idle power measured this long before the run
    goodput_slo_ms: dict[str, float] | None = None  # e.g. {"ttft": 500, "tpot": 50}
    steady_fraction: float = 0.1          # ramp-up share left out of the steady window
    bootstrap_reps: int = 1000
    spin_ns: int = DEFAULT_SPIN_NS        # see schedule.sleep_until_ns
    http_client: str = "fast"             # "fast" (hgresearch.bench.fasthttp) or "aiohttp"
    backend: str | None = None            # label; default "vllm" / "openai-chat"
    # Several endpoints behind a router (None: the one server at base_url). Each endpoint:
    # {"base_url", "model" (served name), "name", "capacity_weight", "price_usd_per_h",
    # "max_outstanding"}; see endpoint_fleet(). base_url is then the first endpoint's.
    fleet: list[dict[str, Any]] | None = None
    policy: str = "jsq"                   # routing policy (hgresearch.traffic.routing.Policy)
    policy_threshold_tokens: int = 1024   # length-aware: long prompts to the fastest
    policy_max_outstanding: int = 16      # cost-spillover: default SLO-safe limit

    def to_json(self) -> dict[str, Any]:
        """JSON-safe dict (``inf`` as the string "inf")."""
        out = dataclasses.asdict(self)
        out["request_rate_qps"] = _rate_json(self.request_rate_qps)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BenchConfig:
        """Inverse of :meth:`to_json` (unknown keys are ignored)."""
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if "request_rate_qps" in values:
            values["request_rate_qps"] = float(values["request_rate_qps"])
        return cls(**values)


def _rate_json(rate: float) -> float | str:
    return "inf" if math.isinf(rate) else float(rate)


def _git_commit() -> str | None:
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
    names = ("aiohttp", "numpy", "pandas", "nvidia-ml-py", "tokenizers", "vllm")
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


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


class _Progress:
    """Live progress line on stderr: sent / done / failed, request and token throughput."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.enabled = enabled
        self.total = total
        self.sent = self.done = self.failed = self.tokens = 0
        self.start = time.monotonic()
        self._last = 0.0
        self._bar = None

    def begin(self) -> None:
        """Show the bar (after the warm-up, whose status lines would break it)."""
        self.start = time.monotonic()
        if self.enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, file=sys.stderr, unit="req", mininterval=0.5,
                             dynamic_ncols=True)

    def on_sent(self) -> None:
        self.sent += 1

    def on_done(self, record: dict[str, Any]) -> None:
        self.done += 1
        self.failed += 0 if record["success"] else 1
        self.tokens += record.get("output_tokens") or 0
        if self._bar is None:
            return
        self._bar.update(1)
        now = time.monotonic()
        if now - self._last > 0.5:  # keep the hot path light
            self._last = now
            self._postfix(now)

    def _postfix(self, now: float) -> None:
        elapsed = max(now - self.start, 1e-9)
        self._bar.set_postfix_str(
            f"sent={self.sent} done={self.done} failed={self.failed} "
            f"{self.done / elapsed:.1f} req/s {self.tokens / elapsed:.0f} tok/s", refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._postfix(time.monotonic())
            self._bar.close()


def _api_key(config: BenchConfig) -> str:
    """The API key from the environment variable the config names ("" when none)."""
    return os.environ.get(config.api_key_env, "") if config.api_key_env else ""


def _request_headers(config: BenchConfig) -> tuple[dict[str, str], tuple[str, ...]]:
    """Headers of every request, and the secrets to scrub from anything written."""
    key = _api_key(config)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers, ((key,) if key else ())


@dataclass
class _Sender:
    """How requests reach one endpoint: ``prepare`` builds a request's bytes before the run,
    ``send`` sends them and returns the record, ``close`` releases the connections."""

    url: str
    prepare: Any
    send: Any
    close: Any


def _sender(config: BenchConfig, base_url: str, model: str, headers: dict[str, str],
            secrets: tuple[str, ...]) -> _Sender:
    """The :class:`_Sender` of one endpoint (fast HTTP engine or aiohttp, per the config)."""
    opts = ClientOptions(base_url=base_url, model=model,
                         endpoint=config.endpoint, timeout_s=config.timeout_s,
                         ignore_eos=config.ignore_eos,
                         continuous_usage=config.continuous_usage, extra_body=config.extra_body)
    fast = config.http_client == "fast"
    path = "/v1/chat/completions" if config.endpoint == "chat" else "/v1/completions"
    fast_pool = FastPool(base_url) if fast else None

    def prepare(spec: RequestSpec) -> bytes:
        body = encode_payload(spec, opts)
        return fast_pool.build_request(path, body, headers) if fast_pool else body

    async def send(session: Any, spec: RequestSpec, prepared: bytes,
                   gate: RecordGate = None) -> dict[str, Any]:
        if fast_pool is not None:
            return await send_request_fast(fast_pool, opts, spec, prepared, secrets, gate)
        return await send_request(session, opts, spec, prepared, headers, secrets, gate)

    def close() -> None:
        if fast_pool is not None:
            fast_pool.close()

    return _Sender(url=opts.url, prepare=prepare, send=send, close=close)


def fleet_endpoints(config: BenchConfig) -> list[dict[str, Any]]:
    """The endpoints of a multi-endpoint run, defaults filled in (``model``: the config's,
    ``name``: the base URL, ``capacity_weight`` 1, ``price_usd_per_h`` 0); empty for a
    single-endpoint run."""
    return [{"model": config.model, "name": e["base_url"], "capacity_weight": 1.0,
             "price_usd_per_h": 0.0, "max_outstanding": None, **e}
            for e in (config.fleet or [])]


def _make_router(config: BenchConfig, endpoints: list[dict[str, Any]]) -> Any:
    """A :class:`hgresearch.traffic.routing.Router` over the endpoints, with the config's policy."""
    from hgresearch.traffic.routing import ReplicaState, Router, make_policy

    policy = make_policy(config.policy, seed=config.seed,
                         threshold_tokens=config.policy_threshold_tokens,
                         max_outstanding=config.policy_max_outstanding)
    return Router(policy, [ReplicaState(capacity_weight=float(e["capacity_weight"]),
                                        price_usd_per_h=float(e["price_usd_per_h"]),
                                        max_outstanding=e["max_outstanding"])
                           for e in endpoints])


async def _drive(config: BenchConfig, todo: list[tuple[RequestSpec, int]],
                 warmup: list[RequestSpec], writer: RecordWriter, segment: int,
                 server_info: dict[str, Any], set_phase: Any,
                 progress: _Progress, echo: Any) -> None:
    """Warm up (and stop if the server cannot serve: :func:`check_warmup`), then send ``todo``
    on its schedule, writing each record as it finishes.

    With several endpoints (``config.fleet``) every endpoint is warmed up and checked, each
    request is routed when it is sent (:class:`hgresearch.traffic.routing.Router`, released when its
    record is complete) and its record names its endpoint (``endpoint``: the base URL). A
    single-endpoint run takes the same path as before: no router, no ``endpoint`` field."""
    headers, secrets = _request_headers(config)
    endpoints = fleet_endpoints(config)
    targets = [(e["base_url"], e["model"]) for e in endpoints] or [(config.base_url,
                                                                    config.model)]
    senders = [_sender(config, url, model, headers, secrets) for url, model in targets]

    def close_all() -> None:
        for sender in senders:
            sender.close()

    # Encode every request before the clock starts: nothing to serialize while sending.
    all_payloads = [{spec.index: sender.prepare(spec) for spec, _ in todo}
                    for sender in senders]
    send, payloads = senders[0].send, all_payloads[0]
    pool = config.max_concurrency or max(len(todo), 1)
    async with make_session(pool) as session:
        set_phase("warmup")  # keeps warm-up load out of the idle baseline
        for k, sender in enumerate(senders):
            warm_records = []
            if warmup:
                echo(f"warm-up: {len(warmup)} request(s) to {sender.url} (timeout "
                     f"{config.timeout_s:g} s each) ...")
            for spec in warmup:
                if k:  # records are keyed by (warm-up, index): keep each endpoint's apart
                    spec = dataclasses.replace(spec, index=spec.index + k * len(warmup))
                rec = await sender.send(session, spec, sender.prepare(spec))
                rec.update(warmup=True, segment=segment)
                if endpoints:
                    rec["endpoint"] = targets[k][0]
                writer.write(rec)
                warm_records.append(rec)
            try:
                if endpoints:
                    url, model = targets[k]
                    check_warmup(dataclasses.replace(config, base_url=url, model=model,
                                                     fleet=None),
                                 (server_info.get("endpoints") or {}).get(url), warm_records)
                else:
                    check_warmup(config, server_info, warm_records)
            except ServerUnusable:
                close_all()
                raise
        set_phase("run")
        progress.begin()
        sem = asyncio.Semaphore(config.max_concurrency) if config.max_concurrency else None
        router = _make_router(config, endpoints) if endpoints else None
        # No garbage-collector pauses while sending: a full collection can stall the loop for
        # milliseconds (schedule lag, late timestamps); collect now and once after the run.
        gc.collect()
        gc.freeze()
        gc.disable()
        # A finished request builds and writes its record only when no send is due within
        # milliseconds: that work would otherwise delay the send (schedule lag).
        guard = SendGuard()
        start_ns = time.monotonic_ns()

        async def one(spec: RequestSpec, scheduled_ns: int) -> None:
            t_wait = time.monotonic_ns()
            if sem is not None:
                await sem.acquire()
            cap_wait = time.monotonic_ns() - t_wait if sem is not None else 0
            held = sem is not None

            async def gate() -> None:
                nonlocal held
                if held:  # the concurrency slot frees when the request finished
                    held = False
                    sem.release()
                await guard.clear()

            progress.on_sent()
            try:
                rec = await send(session, spec, payloads[spec.index], gate)
            finally:
                if held:
                    sem.release()
            rec.update(warmup=False, segment=segment, segment_start_ns=start_ns,
                       t_scheduled_ns=scheduled_ns, cap_wait_ns=cap_wait)
            writer.write(rec)
            progress.on_done(rec)

        async def one_routed(spec: RequestSpec, scheduled_ns: int) -> None:
            from hgresearch.traffic.routing import RouteRequest

            route = RouteRequest(spec.prompt_len, spec.output_len)
            t_wait = time.monotonic_ns()
            if sem is not None:
                await sem.acquire()
            cap_wait = time.monotonic_ns() - t_wait if sem is not None else 0
            k = router.dispatch(route)  # routed when it is sent, on the state at that moment
            progress.on_sent()
            released = False

            def release() -> None:
                nonlocal released
                if not released:
                    released = True
                    router.release(k, route)
                    if sem is not None:
                        sem.release()

            async def gate() -> None:
                release()  # the router sees the request finished when it did, not later
                await guard.clear()

            try:
                rec = await senders[k].send(session, spec, all_payloads[k][spec.index], gate)
            finally:
                release()
            rec.update(warmup=False, segment=segment, segment_start_ns=start_ns,
                       t_scheduled_ns=scheduled_ns, cap_wait_ns=cap_wait,
                       endpoint=targets[k][0])
            writer.write(rec)
            progress.on_done(rec)

        worker = one_routed if router is not None else one
        tasks = []
        try:
            for spec, offset in todo:
                scheduled = start_ns + offset
                guard.next_send(scheduled)
                await sleep_until_ns(scheduled, config.spin_ns)
                tasks.append(asyncio.create_task(worker(spec, scheduled)))
                guard.sent()
            await asyncio.gather(*tasks)
        finally:
            guard.sent()
            gc.enable()
            gc.unfreeze()
            close_all()


def _run_coroutine(coro: Any) -> Any:
    """``asyncio.run`` — in a fresh thread when this one already runs a loop (Jupyter)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench") as pool:
        return pool.submit(asyncio.run, coro).result()


def _process_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


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


def config_differences(stored: dict[str, Any], config: BenchConfig) -> list[str]:
    """Fields of ``config`` that differ from a saved run's config (``config.json``'s
    ``config``), as ``"seed (run has 0, asked 9)"``; :data:`RESUME_MAY_DIFFER` is ignored."""
    saved = BenchConfig.from_json(stored).to_json()
    new = config.to_json()
    return [f"{name} (run has {saved.get(name)!r}, asked {new.get(name)!r})"
            for name in new if name not in RESUME_MAY_DIFFER and saved.get(name) != new.get(name)]


def check_resume(config: BenchConfig, run_dir: Path) -> None:
    """Refuse to resume (or to skip as finished) a run folder saved with another config,
    listing every differing field."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        return
    stored = read_config(run_dir)
    differences = config_differences(stored["config"], config)
    if differences:
        raise InputError("cannot resume a run with different parameters: "
                         + "; ".join(differences)
                         + "; pass the saved values or choose a new folder", file=str(path))


def _read_earlier(config: BenchConfig, run_dir: Path, resume: bool) -> _Earlier:
    """Step 2: what the folder already holds. Records need ``resume``, and a resume must keep
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


@dataclass
class _Plan:
    """The requests this run sends: ``todo`` (spec, offset from the segment start in ns)."""

    todo: list[tuple[RequestSpec, int]]
    warmup: list[RequestSpec]


def _plan_requests(config: BenchConfig, done: set[int]) -> _Plan:
    """Step 3: the workload and its arrival schedule, both fixed by the seed; requests with a
    record are left out (their relative order and spacing are kept). A resumed run does not
    warm up again."""
    specs = build_requests(config.workload, config.num_prompts, seed=config.seed,
                           tokenizer=config.tokenizer)
    offsets = arrival_offsets_ns(config.num_prompts, config.request_rate_qps,
                                 burstiness=config.burstiness, seed=config.seed,
                                 kind=config.arrival)
    todo_idx = [i for i in range(config.num_prompts) if i not in done]
    base = int(offsets[todo_idx[0]]) if todo_idx else 0
    todo = [(specs[i], int(offsets[i]) - base) for i in todo_idx]
    warm = [] if done else build_requests(config.workload, config.warmup_requests,
                                          seed=config.seed + 1, tokenizer=config.tokenizer)
    return _Plan(todo=todo, warmup=warm)


def _answered(answer: Any) -> bool:
    """Whether a preflight answer came from the server (any HTTP status)."""
    return not (isinstance(answer, dict) and answer.get("no_answer"))


def preflight(config: BenchConfig, *, echo: Any = None,
              tick_s: float = PREFLIGHT_TICK_S) -> dict[str, Any]:
    """Step 4: ask the server for ``/v1/models`` and ``/version`` (recorded in config.json).

    Each waits at most ``min(timeout_s, PREFLIGHT_TIMEOUT_S)`` and says every ``tick_s`` that
    it is still waiting. Raises :class:`ServerUnreachable` when ``/v1/models`` gets no answer
    at all (connection refused, or accepted but silent) — before anything is written. Any HTTP
    answer, an error status included, is kept for :func:`diagnose` after the warm-up.
    """
    echo = echo or (lambda message: None)
    bound_s = min(config.timeout_s, PREFLIGHT_TIMEOUT_S)
    headers, secrets = _request_headers(config)
    base = config.base_url.rstrip("/")

    async def ask() -> dict[str, Any]:
        answers: dict[str, Any] = {}
        async with make_session(2) as session:
            for key, path in (("models", "/v1/models"), ("version", "/version")):
                started = time.monotonic()
                task = asyncio.ensure_future(get_json(session, base + path, headers, bound_s,
                                                      secrets))
                while not (await asyncio.wait({task}, timeout=tick_s))[0]:
                    echo(f"waiting for the server's answer to GET {path} ... "
                         f"({time.monotonic() - started:.0f} s of at most {bound_s:g} s)")
                answers[key] = task.result()
                if key == "models" and not _answered(answers[key]):
                    break  # /version would wait just as long for nothing
        return answers

    answers = _run_coroutine(ask())
    models = answers["models"]
    if not _answered(models):
        hint = "start the server or fix --base-url"
        if models.get("timed_out"):
            hint = ("the connection was accepted but nothing came back: is the server still "
                    "starting, or stuck?")
            if bound_s < PREFLIGHT_TIMEOUT_S:
                hint += " (raise --timeout-s to wait longer)"
        raise ServerUnreachable(f"no server answers at {config.base_url}: GET /v1/models: "
                                f"{models['error']}; {hint}")
    return answers


def preflight_all(config: BenchConfig, *, echo: Any = None) -> dict[str, Any]:
    """:func:`preflight` of the one server, or of every endpoint of a multi-endpoint run (then
    ``{"endpoints": {base_url: answers}}``); an endpoint without a server stops the run before
    anything is written."""
    if not config.fleet:
        return preflight(config, echo=echo)
    return {"endpoints": {
        e["base_url"]: preflight(dataclasses.replace(config, base_url=e["base_url"],
                                                     model=e["model"], fleet=None), echo=echo)
        for e in fleet_endpoints(config)}}


def served_models(server_info: dict[str, Any] | None) -> list[str]:
    """Model ids in the server's ``/v1/models`` answer (empty when unknown)."""
    info = server_info or {}
    answer = info.get("models") or info.get("models_endpoint")
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        return []
    return [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]


def diagnose(config: BenchConfig, server_info: dict[str, Any] | None,
             failed: list[dict[str, Any]]) -> tuple[str, bool]:
    """Why requests that all failed did: ``(message, is_configuration)``.

    The message quotes what the server answered (status and body excerpt) and says what to
    change. ``is_configuration`` is True when no request of this configuration can succeed
    (no server, HTTP 401/403, 404, an unknown model name), False for failures that may be the
    load's (timeouts, cut streams, server errors).
    """
    first = failed[0]
    answer = str(first.get("error") or first.get("error_class"))[:ANSWER_EXCERPT_CHARS]
    status = first.get("http_status")
    models = served_models(server_info)
    path = "/v1/chat/completions" if config.endpoint == "chat" else "/v1/completions"
    if all(r.get("error_class") == "connection_dropped" and r.get("http_status") is None
           for r in failed):
        return f"no server answers at {config.base_url}: {answer}", True
    if status in (401, 403):
        if not _api_key(config):
            advice = (f"the server wants an API key: put it in the environment variable "
                      f"{config.api_key_env or 'OPENAI_API_KEY'} (see --api-key-env)")
        else:
            advice = (f"the server refused the API key in ${config.api_key_env}: check it "
                      "(--api-key-env names the variable)")
        return f"the server answered {answer}; {advice}", True
    if config.base_url.rstrip("/").endswith("/v1") and status in (404, 405):
        return (f"the server answered {answer}; drop the trailing /v1 from --base-url "
                f"(requests go to {config.base_url.rstrip('/')}{path})"), True
    if models and config.model not in models and status in (400, 404):
        return (f"the server answered {answer}; it serves models {models}: pass "
                f"--model {models[0]}"), True
    if status == 404:
        return (f"the server answered {answer}; no {path} at {config.base_url}: check "
                "--base-url and --endpoint"), True
    if first.get("error_class") == "timeout":
        return (f"{answer}; is the model still loading, or --timeout-s "
                f"({config.timeout_s:g} s) too short?"), False
    return f"the server answered {answer}; see the server's log", False


def check_warmup(config: BenchConfig, server_info: dict[str, Any] | None,
                 warm_records: list[dict[str, Any]]) -> None:
    """Stop after the warm-up when every warm-up request failed: the server cannot serve this
    configuration (raises :class:`ServerUnusable`, or :class:`ServerUnreachable`)."""
    failed = [r for r in warm_records if not r["success"]]
    if not warm_records or len(failed) < len(warm_records):
        return
    message, _ = diagnose(config, server_info, failed)
    error = (ServerUnreachable if message.startswith("no server answers")
             else ServerUnusable)
    raise error(f"all {len(failed)} warm-up request(s) failed, nothing was measured: "
                f"{message}")


def _start_telemetry(config: BenchConfig, run_dir: Path) -> tuple[Any, bool]:
    """Step 6: the NVML sampler (its inventory names the GPUs); whether it samples."""
    from hgresearch.bench.telemetry import Sampler

    sampler = Sampler(run_dir / TELEMETRY_FILE, hz=config.telemetry_hz)
    available = config.telemetry and sampler.start()
    if config.telemetry and not available:
        warnings.warn(f"telemetry unavailable ({sampler.reason}); energy fields will be "
                      "missing", stacklevel=3)
    return sampler, bool(available)


def _write_config(config: BenchConfig, run_dir: Path, earlier: _Earlier, sampler: Any,
                  available: bool, server_info: dict[str, Any] | None,
                  plan: _Plan) -> dict[str, Any]:
    """Step 7: config.json — parameters, versions, host, hardware, server answers — with this
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


def _measure(config: BenchConfig, plan: _Plan, jsonl: Path, segment: int,
             server_info: dict[str, Any], sampler: Any, available: bool, progress: bool,
             echo: Any) -> float:
    """Step 8: idle baseline, warm-up, then the measured requests (records appended to
    requests.jsonl as they finish); stops the sampler. Returns the client's CPU seconds."""
    if available and config.idle_baseline_s > 0:
        time.sleep(config.idle_baseline_s)  # idle baseline, phase "idle"
    bar = _Progress(len(plan.todo), progress)
    writer = RecordWriter(jsonl)
    cpu_start = _process_cpu_s()
    try:
        _run_coroutine(_drive(config, plan.todo, plan.warmup, writer, segment, server_info,
                              sampler.set_phase, bar, echo))
    finally:
        writer.close()
        bar.close()
        if available:
            sampler.stop()
    # The client's own CPU time while sending (a self-check of client overhead).
    return _process_cpu_s() - cpu_start


def _check_outcome(config: BenchConfig, run_dir: Path, summary: dict[str, Any],
                   server_info: dict[str, Any] | None) -> None:
    """Step 10: say what a finished point means. A client that fell behind is warned about;
    a point where every request failed for a configuration reason raises
    :class:`ServerUnusable` (its files stay); one that failed otherwise is warned about and
    left to the caller (:func:`raise_for_failed_points`)."""
    if summary.get("client_limited"):
        ratio = summary.get("realised_rate_ratio")
        warnings.warn(f"{run_dir}: the client could not keep the schedule: "
                      f"{summary['late_send_share']:.0%} of requests sent more than "
                      f"{LATE_SEND_MS:g} ms late, realised arrival rate "
                      f"{'n/a' if ratio is None else f'{ratio:.1%}'} of the offered one; the "
                      "run is marked client-limited", stacklevel=3)
    if not every_request_failed(summary):
        return
    failed = [r for r in read_records(run_dir / REQUESTS_FILE) if not r.get("warmup")]
    message, configuration = diagnose(config, server_info, failed)
    text = (f"{run_dir}: all {summary['sent']} measured requests failed "
            f"({_error_counts(summary)}): {message}")
    if configuration:
        error = ServerUnreachable if message.startswith("no server answers") else ServerUnusable
        raise error(text + "; the run folder is kept")
    warnings.warn(text, stacklevel=3)


def every_request_failed(summary: dict[str, Any]) -> bool:
    """Whether a point sent requests and none succeeded."""
    return bool(summary.get("sent")) and not summary.get("completed")


def raise_for_failed_points(summaries: list[dict[str, Any]]) -> None:
    """Raise :class:`PointsFailed` when any point's requests all failed (after a sweep went
    on to its other points)."""
    failed = [s for s in summaries if every_request_failed(s)]
    if failed:
        raise PointsFailed(failed)


def _echo_for(progress: bool) -> Any:
    """Where status lines go: stderr with the progress display, nowhere without."""
    if not progress:
        return lambda message: None
    return lambda message: print(message, file=sys.stderr, flush=True)


def run_benchmark(config: BenchConfig, run_dir: Path, *, resume: bool = False,
                  progress: bool = True, server_info: dict[str, Any] | None = None
                  ) -> dict[str, Any]:
    """Run one benchmark point and write the run folder; returns the summary dict.

    The steps, in order: check every parameter (:func:`~hgresearch.bench.options.
    validate_config`); read what the folder holds (resume rules); plan the requests and their
    schedule; ask the server (:func:`preflight`) — nothing is written before this point, so a
    bad value or an absent server leaves no folder; prepare the folder; start telemetry; write
    config.json; measure (idle baseline, warm-up checked by :func:`check_warmup`, requests);
    summarize; check the outcome (:func:`_check_outcome`).

    Args:
        config: the point's parameters.
        run_dir: the run folder (created). It must not hold records unless ``resume``.
        resume: continue a killed run: requests with a record are not sent again.
        progress: show the live progress bar and status lines on stderr.
        server_info: the server's ``/v1/models`` and ``/version`` answers when the caller has
            them (else :func:`preflight` asks).

    Raises:
        OptionError: a bad parameter (nothing written).
        ServerUnreachable, ServerUnusable: the server cannot serve this configuration (see
            :func:`check_warmup`, :func:`_check_outcome`); measured records stay.
        FileExistsError, InputError: records exist without ``resume``, or a resume changes
            parameters.
    """
    validate_config(config)
    run_dir = Path(run_dir)
    earlier = _read_earlier(config, run_dir, resume)
    plan = _plan_requests(config, earlier.done)
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
        meta["segments"][-1]["client_cpu_s"] = _measure(
            config, plan, jsonl, earlier.segment, server_info or {}, sampler, available,
            progress, echo)
        if meta.get("server_info") is None:
            meta["server_info"] = server_info
        write_config(run_dir, meta)
    elif available:
        sampler.stop()
    summary = summarize_run_dir(run_dir)
    _check_outcome(config, run_dir, summary, server_info)
    return summary


def summarize_run_dir(run_dir: Path, *, write: bool = True) -> dict[str, Any]:
    """The run's summary, derived from ``config.json``, ``requests.jsonl`` and
    ``telemetry.csv`` only (so it can be recomputed offline); written to summary.json.

    Steps: read the point's configuration, compute the request metrics
    (:func:`hgresearch.data.summary.summarize`), find each segment's measured window, integrate
    telemetry over them (:func:`_energy_fields`), then lay the keys out as vLLM's result files
    do, followed by ours (docs/measurement.md, ``summary.json``).
    """
    from hgresearch.data.summary import summarize

    run_dir = Path(run_dir)
    meta = read_config(run_dir)
    cfg = BenchConfig.from_json(meta["config"])
    table = read_requests(run_dir)
    metrics = summarize(table, goodput_slo_ms=cfg.goodput_slo_ms,
                        steady_fraction=cfg.steady_fraction,
                        bootstrap_reps=cfg.bootstrap_reps, bootstrap_seed=cfg.seed)
    windows = _segment_windows_ns(table)
    energy = _energy_fields(read_telemetry(run_dir), windows, metrics)
    summary: dict[str, Any] = {
        **_point_fields(cfg, meta),
        **metrics,
        **_provenance_fields(cfg, meta),
        "telemetry_available": (bool(meta.get("telemetry_available"))
                                and energy["energy_j"] is not None),
        **energy,
        "run_start_ns": windows[0][0] if windows else None,
        "run_end_ns": windows[-1][1] if windows else None,
        "segments": len(windows),
        "client_cpu_s": _sum_or_none([seg.get("client_cpu_s")
                                      for seg in meta.get("segments", [])]),
        **_energy_per_token(energy["energy_j"], metrics),
    }
    if cfg.fleet:
        summary["policy"] = cfg.policy
        summary["endpoints"] = _endpoint_summaries(cfg, table)
    if write:
        write_summary(run_dir, summary)
    return summary


def _endpoint_summaries(cfg: BenchConfig, table: Any) -> dict[str, dict[str, Any]]:
    """Per endpoint of a multi-endpoint run (by base URL): its label, model, capacity weight
    and the metrics of the requests it served (:func:`hgresearch.data.summary.summarize_by`)."""
    from hgresearch.data.summary import summarize_by

    by_url = summarize_by(table, "endpoint", goodput_slo_ms=cfg.goodput_slo_ms,
                          steady_fraction=cfg.steady_fraction)
    out = {}
    for e in fleet_endpoints(cfg):
        metrics = by_url.get(e["base_url"])
        out[e["base_url"]] = {"name": e["name"], "model": e["model"],
                              "capacity_weight": e["capacity_weight"],
                              "price_usd_per_h": e["price_usd_per_h"],
                              **(metrics or {"sent": 0, "completed": 0})}
    return out


def _segment_windows_ns(table: Any) -> list[tuple[int, int]]:
    """Per segment (start or resume) of the measured requests: its clock start to its last
    request's end (``time.monotonic_ns()``), in segment order."""
    measured = table[~table.warmup] if len(table) else table
    return [(int(seg.segment_start_ns.min()), int(seg.t_done_ns.max()))
            for _, seg in measured.groupby("segment", sort=True)]


def _point_fields(cfg: BenchConfig, meta: dict[str, Any]) -> dict[str, Any]:
    """The keys vLLM's result files start with: what was run, where, at which rate."""
    return {
        "date": meta["date"],
        "backend": cfg.backend or ("openai-chat" if cfg.endpoint == "chat" else "vllm"),
        "model_id": cfg.model,
        "tokenizer_id": cfg.tokenizer or cfg.model,
        "num_prompts": cfg.num_prompts,
        "gpu_name": meta["gpu_name"],
        "gpu_count": meta["gpu_count"],
        "request_rate": _rate_json(cfg.request_rate_qps),
        "burstiness": cfg.burstiness,
        "max_concurrency": cfg.max_concurrency,
    }


def _provenance_fields(cfg: BenchConfig, meta: dict[str, Any]) -> dict[str, Any]:
    """Our keys after the metrics: code version, dataset label, parallelism, price."""
    return {
        "hgresearch_version": meta["hgresearch_version"],
        "git_commit": meta.get("git_commit"),
        "dataset": cfg.dataset or str(cfg.workload.get("kind")),
        "tensor_parallel_size": cfg.tensor_parallel_size or meta["gpu_count"],
        "replicas": cfg.replicas,
        "price_usd_per_gpu_h": cfg.price_usd_per_gpu_h,
    }


def _energy_fields(telemetry: Any, windows: list[tuple[int, int]],
                   metrics: dict[str, Any]) -> dict[str, Any]:
    """Energy over the measured windows and over the steady window, and the idle baseline
    (None where telemetry cannot give them, never 0)."""
    from hgresearch.accounting.energy import energy_over_windows, idle_power_w

    energy, source = energy_over_windows(telemetry, windows)
    steady = (metrics["steady_start_ns"], metrics["steady_end_ns"])
    energy_steady, _ = energy_over_windows(telemetry, [steady]) if steady[0] else (None, None)
    return {
        "energy_source": source,
        "energy_j": energy,
        "energy_steady_j": energy_steady,
        "idle_power_w": idle_power_w(telemetry) if not telemetry.empty else None,
    }


def _energy_per_token(energy_j: float | None, metrics: dict[str, Any]) -> dict[str, Any]:
    """Energy per input+output token and per output token (None without energy or tokens)."""
    total_tok = metrics["total_input_tokens"] + metrics["total_output_tokens"]
    output_tok = metrics["total_output_tokens"]
    return {
        "energy_per_tok_j": energy_j / total_tok if energy_j is not None and total_tok else None,
        "energy_per_output_tok_j": (energy_j / output_tok
                                    if energy_j is not None and output_tok else None),
    }


def _sum_or_none(values: list[float | None]) -> float | None:
    """Sum of the values, or None when any is missing (a killed segment has none)."""
    return None if not values or any(v is None for v in values) else float(sum(values))


def run_dir_name(rate_qps: float) -> str:
    """Folder name of a sweep point: ``qps32``, ``qps0.5``, ``qpsinf``."""
    return "qpsinf" if math.isinf(rate_qps) else f"qps{rate_qps:g}"


def run_qps_sweep(config: BenchConfig, qps_values: list[float] | tuple[float, ...] = PAPER_QPS,
                  out_dir: Path = Path("runs"), *, resume: bool = False,
                  progress: bool = True, server_info: dict[str, Any] | None = None
                  ) -> list[dict[str, Any]]:
    """Run ``config`` at each request rate into ``out_dir/qps<rate>/``; returns the summaries.

    Every point's parameters are checked before the first one starts, and the server is asked
    (:func:`preflight`) once, before the first point that sends. With ``resume``, finished
    points (summary.json present and every request recorded) are read back — after checking
    that they were run with the same parameters — a partial point continues where it stopped,
    the rest run normally.

    A point whose requests all failed is kept and the sweep goes on (check the result with
    :func:`raise_for_failed_points`), unless the failure is the configuration's: then
    :class:`ServerUnusable` stops the sweep (finished points stay).
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
