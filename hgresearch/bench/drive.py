"""Sending a run's requests: what to send (:func:`plan_requests`), then the warm-up and every
request at its scheduled time, each record written as it finishes (:func:`measure`).

This is the loop whose timing the measurements rest on: every request is encoded before the
clock starts, the garbage collector is off while sending, and a finished request builds its
record only when no send is due within milliseconds (:class:`~hgresearch.bench.schedule.
SendGuard`). With several endpoints each request is routed when it is sent
(:class:`hgresearch.traffic.routing.Router`); one endpoint takes the same path without a
router.
"""

from __future__ import annotations

import asyncio
import gc
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hgresearch.bench.client import (
    ClientOptions,
    RecordGate,
    encode_payload,
    make_session,
    run_coroutine,
    send_request,
    send_request_fast,
)
from hgresearch.bench.config import BenchConfig, fleet_endpoints, request_headers
from hgresearch.bench.fasthttp import FastPool
from hgresearch.bench.preflight import Echo, check_warmup
from hgresearch.bench.prompts import RequestSpec, build_requests
from hgresearch.bench.schedule import SendGuard, arrival_offsets_ns, sleep_until_ns
from hgresearch.data.runfolder import RecordWriter

if TYPE_CHECKING:
    import aiohttp
    from tqdm import tqdm

    from hgresearch.bench.telemetry import Sampler
    from hgresearch.traffic.routing import Router


@dataclass
class Plan:
    """The requests this run sends: ``todo`` (spec, offset from the segment start in ns), and
    the warm-up requests sent before them."""

    todo: list[tuple[RequestSpec, int]]
    warmup: list[RequestSpec]


def plan_requests(config: BenchConfig, done: set[int]) -> Plan:
    """The workload and its arrival schedule, both fixed by the seed; requests with a record
    (``done``) are left out (their relative order and spacing are kept). A resumed run does
    not warm up again."""
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
    return Plan(todo=todo, warmup=warm)


def measure(config: BenchConfig, plan: Plan, jsonl: Path, segment: int,
            server_info: dict[str, Any], sampler: Sampler, available: bool, progress: bool,
            echo: Echo) -> float:
    """Idle baseline, warm-up, then the measured requests (records appended to
    ``requests.jsonl`` as they finish); stops the sampler. Returns the client's CPU seconds
    while sending (a self-check of the client's overhead)."""
    if available and config.idle_baseline_s > 0:
        time.sleep(config.idle_baseline_s)  # idle baseline, phase "idle"
    bar = _Progress(len(plan.todo), progress)
    writer = RecordWriter(jsonl)
    cpu_start = _process_cpu_s()
    try:
        run_coroutine(_drive(config, plan, writer, segment, server_info, sampler.set_phase,
                             bar, echo))
    finally:
        writer.close()
        bar.close()
        if available:
            sampler.stop()
    return _process_cpu_s() - cpu_start


def _process_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _Progress:
    """Live progress line on stderr: sent / done / failed, request and token throughput."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.enabled = enabled
        self.total = total
        self.sent = self.done = self.failed = self.tokens = 0
        self.start = time.monotonic()
        self._last = 0.0
        self._bar: tqdm[Any] | None = None

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
            self._postfix(self._bar, now)

    def _postfix(self, bar: tqdm[Any], now: float) -> None:
        elapsed = max(now - self.start, 1e-9)
        bar.set_postfix_str(
            f"sent={self.sent} done={self.done} failed={self.failed} "
            f"{self.done / elapsed:.1f} req/s {self.tokens / elapsed:.0f} tok/s", refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._postfix(self._bar, time.monotonic())
            self._bar.close()


@dataclass
class _Sender:
    """How requests reach one endpoint (``url``; ``base_url`` and served ``model``):
    ``prepare`` builds a request's bytes before the run, ``send`` sends them and returns the
    record, ``close`` releases the connections."""

    url: str
    base_url: str
    model: str
    prepare: Callable[[RequestSpec], bytes]
    send: Callable[[aiohttp.ClientSession, RequestSpec, bytes, RecordGate],
                   Awaitable[dict[str, Any]]]
    close: Callable[[], None]


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

    async def send(session: aiohttp.ClientSession, spec: RequestSpec, prepared: bytes,
                   gate: RecordGate = None) -> dict[str, Any]:
        if fast_pool is not None:
            return await send_request_fast(fast_pool, opts, spec, prepared, secrets, gate)
        return await send_request(session, opts, spec, prepared, headers, secrets, gate)

    def close() -> None:
        if fast_pool is not None:
            fast_pool.close()

    return _Sender(url=opts.url, base_url=base_url, model=model, prepare=prepare, send=send,
                   close=close)


def _make_router(config: BenchConfig, endpoints: list[dict[str, Any]]) -> Router:
    """A :class:`hgresearch.traffic.routing.Router` over the endpoints, with the config's
    policy."""
    from hgresearch.traffic.routing import ReplicaState, Router, make_policy

    policy = make_policy(config.policy, seed=config.seed,
                         threshold_tokens=config.policy_threshold_tokens,
                         max_outstanding=config.policy_max_outstanding)
    return Router(policy, [ReplicaState(capacity_weight=float(e["capacity_weight"]),
                                        price_usd_per_h=float(e["price_usd_per_h"]),
                                        max_outstanding=e["max_outstanding"])
                           for e in endpoints])


async def _warm_up(config: BenchConfig, senders: list[_Sender], routed: bool,
                   warmup: list[RequestSpec], session: aiohttp.ClientSession,
                   writer: RecordWriter, segment: int, server_info: dict[str, Any],
                   echo: Echo) -> None:
    """Send the warm-up requests to every endpoint, one after another, and stop when one
    endpoint cannot serve (:func:`~hgresearch.bench.preflight.check_warmup`). Routed runs'
    records name their endpoint."""
    for k, sender in enumerate(senders):
        warm_records = []
        if warmup:
            echo(f"warm-up: {len(warmup)} request(s) to {sender.url} (timeout "
                 f"{config.timeout_s:g} s each) ...")
        for spec in warmup:
            if k:  # records are keyed by (warm-up, index): keep each endpoint's apart
                spec = replace(spec, index=spec.index + k * len(warmup))
            rec = await sender.send(session, spec, sender.prepare(spec), None)
            rec.update(warmup=True, segment=segment)
            if routed:
                rec["endpoint"] = sender.base_url
            writer.write(rec)
            warm_records.append(rec)
        if routed:
            check_warmup(config.for_endpoint({"base_url": sender.base_url,
                                              "model": sender.model}),
                         (server_info.get("endpoints") or {}).get(sender.base_url),
                         warm_records)
        else:
            check_warmup(config, server_info, warm_records)


async def _drive(config: BenchConfig, plan: Plan, writer: RecordWriter, segment: int,
                 server_info: dict[str, Any], set_phase: Callable[[str], None],
                 progress: _Progress, echo: Echo) -> None:
    """Warm up (and stop if the server cannot serve), then send ``plan.todo`` on its schedule,
    writing each record as it finishes.

    With several endpoints (``config.fleet``) every endpoint is warmed up and checked, each
    request is routed when it is sent (released when its record is complete) and its record
    names its endpoint (``endpoint``: the base URL). A single-endpoint run has no router and
    no ``endpoint`` field."""
    headers, secrets = request_headers(config)
    endpoints = fleet_endpoints(config)
    targets = [(e["base_url"], e["model"]) for e in endpoints] or [(config.base_url,
                                                                    config.model)]
    senders = [_sender(config, url, model, headers, secrets) for url, model in targets]
    # Encode every request before the clock starts: nothing to serialize while sending.
    payloads = [{spec.index: sender.prepare(spec) for spec, _ in plan.todo}
                for sender in senders]
    pool = config.max_concurrency or max(len(plan.todo), 1)
    try:
        async with make_session(pool) as session:
            set_phase("warmup")  # keeps warm-up load out of the idle baseline
            await _warm_up(config, senders, bool(endpoints), plan.warmup, session, writer,
                           segment, server_info, echo)
            set_phase("run")
            progress.begin()
            await _send_all(config, plan, senders, payloads, endpoints, session, writer,
                            segment, progress)
    finally:
        for sender in senders:
            sender.close()


async def _send_all(config: BenchConfig, plan: Plan, senders: list[_Sender],
                    payloads: list[dict[int, bytes]], endpoints: list[dict[str, Any]],
                    session: aiohttp.ClientSession, writer: RecordWriter, segment: int,
                    progress: _Progress) -> None:
    """Send every request of ``plan.todo`` at its scheduled time; each takes a concurrency
    slot (with ``max_concurrency``) and an endpoint (with several), and gives both back the
    moment its response is complete."""
    from hgresearch.traffic.routing import RouteRequest

    sem = asyncio.Semaphore(config.max_concurrency) if config.max_concurrency else None
    router = _make_router(config, endpoints) if endpoints else None
    routes = {spec.index: RouteRequest(spec.prompt_len, spec.output_len)
              for spec, _ in plan.todo} if router is not None else {}
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
        # Routed when it is sent, on the state at that moment.
        k = router.dispatch(routes[spec.index]) if router is not None else 0
        progress.on_sent()
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                if router is not None:
                    router.release(k, routes[spec.index])
                if sem is not None:
                    sem.release()

        async def gate() -> None:
            release()  # the slot and the router see the request finished when it did
            await guard.clear()

        try:
            rec = await senders[k].send(session, spec, payloads[k][spec.index], gate)
        finally:
            release()
        rec.update(warmup=False, segment=segment, segment_start_ns=start_ns,
                   t_scheduled_ns=scheduled_ns, cap_wait_ns=cap_wait)
        if router is not None:
            rec["endpoint"] = senders[k].base_url
        writer.write(rec)
        progress.on_done(rec)

    tasks = []
    try:
        for spec, offset in plan.todo:
            scheduled = start_ns + offset
            guard.next_send(scheduled)
            await sleep_until_ns(scheduled, config.spin_ns)
            tasks.append(asyncio.create_task(one(spec, scheduled)))
            guard.sent()
        await asyncio.gather(*tasks)
    finally:
        guard.sent()
        gc.enable()
        gc.unfreeze()
