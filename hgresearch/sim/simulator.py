"""The event loop: one vLLM replica fed by arrivals, stepping until every request is done."""

from __future__ import annotations

import contextlib
import functools
import gc
import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from math import inf

import numpy as np
import pandas as pd

from hgresearch.data.runfolder import requests_table
from hgresearch.errors import InputError
from hgresearch.sim import events
from hgresearch.sim.compiled import reduce_by_fields
from hgresearch.sim.entities import ReplicaConfig, SimRequest
from hgresearch.sim.scheduler import VllmV1Scheduler
from hgresearch.sim.step_time import StepTimeModel
from hgresearch.traffic.routing import Router, RouteRequest

#: ``source`` of every row of a simulated requests table.
SIMULATED = "simulated"


@dataclass
class ReplicaRun:
    """What one simulated run did (besides the per-request times kept in ``requests``).

    ``num_events`` counts arrivals + engine steps + completions (the issue's definition of an
    event; completions are handled inside the step-end event that produces them).
    """

    requests: list[SimRequest]
    num_arrivals: int
    num_steps: int
    num_completions: int
    num_preemptions: int
    end_s: float

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return reduce_by_fields(self)  # readable by the compiled and the source class

    @property
    def num_events(self) -> int:
        """Arrivals + steps + completions."""
        return self.num_arrivals + self.num_steps + self.num_completions


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block (restored after; nested blocks
    are fine). A simulation allocates a request object per request and tuples per step, none
    in a reference cycle: the collector finds nothing, but its scans of every live object as
    they age cost 10-40 % of a steady-state search. Memory is still freed as
    references drop. :func:`run_replica` and :func:`run_replicas` run inside one."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def make_requests(
    config: ReplicaConfig, arrivals_s: np.ndarray | list[float],
    prompt_tokens: np.ndarray | list[int], output_tokens: np.ndarray | list[int],
) -> list[SimRequest]:
    """Validated :class:`SimRequest` objects, in input order (index = position).

    Raises :class:`InputError` naming the request (``line`` = its 1-based position) for a
    length mismatch, a negative or non-finite arrival, a prompt or output that is not an
    integer >= 1, or a request whose KV (prompt + output - 1 tokens: the last token is never
    fed back) exceeds the replica's whole KV cache (vLLM refuses a ``max_model_len`` that
    large; here the request would never finish).
    """
    arrivals = np.asarray(arrivals_s, dtype="float64")
    prompts = np.asarray(prompt_tokens, dtype="float64")
    outputs = np.asarray(output_tokens, dtype="float64")
    if not len(arrivals) == len(prompts) == len(outputs):
        raise InputError(f"arrivals ({len(arrivals)}), prompt_tokens ({len(prompts)}) and "
                         f"output_tokens ({len(outputs)}) differ in length")
    capacity = config.kv_cache_tokens
    checks = (
        ("arrivals_s", ~np.isfinite(arrivals) | (arrivals < 0), "a finite time >= 0"),
        ("prompt_tokens", ~(prompts >= 1) | (prompts != np.round(prompts)), "an integer >= 1"),
        ("output_tokens", ~(outputs >= 1) | (outputs != np.round(outputs)), "an integer >= 1"),
        ("output_tokens", prompts + outputs - 1 > capacity,
         f"prompt + output - 1 <= the KV capacity ({capacity} tokens)"),
    )
    for field, bad, expected in checks:
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(f"request {i}: expected {expected}", line=i + 1, field=field)
    # .tolist(): Python numbers in one call instead of a numpy scalar per value (same values);
    # the collector paused: it would scan the whole heap several times while the list grows
    with cyclic_gc_paused():
        return [SimRequest(i, a, int(p), int(o))  # index, arrival_s, prompt_tokens, output_tokens
                for i, (a, p, o) in enumerate(zip(arrivals.tolist(), prompts.tolist(),
                                                  outputs.tolist(), strict=True))]


def request_times(requests: list[SimRequest]) -> tuple[list[float], list[float], list[float]]:
    """Arrival, first-token and finish times (s) of ``requests``, in their order: read in
    compiled code, three lists at once (a generator per column cost a tenth of a calibration)."""
    return ([r.arrival_s for r in requests], [r.first_token_s for r in requests],
            [r.done_s for r in requests])


def run_replica(config: ReplicaConfig, step_model: StepTimeModel, requests: list[SimRequest],
                *, skip_quiet_steps: bool = True,
                on_completions: Callable[[int], object] | None = None) -> ReplicaRun:
    """Simulate ``requests`` (from :func:`make_requests`) on one replica; fills their times.

    ``skip_quiet_steps`` runs stretches of decode-only steps in which nothing happens but
    time (see :meth:`VllmV1Scheduler.skip_quiet_steps`) without the heap; the result is the
    same either way (a test checks it), only faster. The event loop is :func:`run_replicas`'s
    (the fleet simulator's) with a single replica, specialised (:func:`_run_one`: no heap;
    bit-identical, tested).
    """
    if on_completions is not None:  # a progress bar: the fleet loop reports completions
        runs, _ = run_replicas([config], [step_model], requests,
                               skip_quiet_steps=skip_quiet_steps, on_completions=on_completions)
        runs[0].requests = requests
        return runs[0]
    with cyclic_gc_paused():
        run = _run_one(config, step_model, requests, skip_quiet_steps)
    run.requests = requests
    return run


def _run_one(config: ReplicaConfig, step_model: StepTimeModel, requests: list[SimRequest],
             skip_quiet_steps: bool) -> ReplicaRun:
    """:func:`run_replicas` for one replica without a router, without the heap: its only
    events are the sorted arrivals and the one step in flight, so the next event is the earlier
    of the two — an arrival first at a tie, and every arrival of an instant before an idle
    engine starts its step, as :mod:`hgresearch.sim.events` orders them. The same float
    operations in the same order: bit-identical to the fleet loop (a test checks it), faster
    (no heap, no event tuples; the steady-state searches run millions of such steps)."""
    scheduler = VllmV1Scheduler(config)
    step_time = step_model.step_time_s
    terms = getattr(step_model, "decode_only_terms", None)
    quiet = functools.cache(terms) if terms else None
    pending = sorted(requests, key=lambda r: (r.arrival_s, r.index))
    n, k = len(pending), 0
    num_steps = num_completions = 0
    end_s, step_end, busy = 0.0, inf, False
    add, schedule = scheduler.add_request, scheduler.schedule
    while k < n or busy:
        if k < n and (not busy or pending[k].arrival_s <= step_end):
            now = pending[k].arrival_s
            add(pending[k])
            k += 1
            if busy:
                continue
            while k < n and pending[k].arrival_s == now:  # same instant: all join first
                add(pending[k])
                k += 1
        else:
            now = step_end
            num_steps += 1
            num_completions += len(scheduler.complete_step(now))
            if skip_quiet_steps:
                horizon = pending[k].arrival_s if k < n else inf
                now, skipped = scheduler.skip_quiet_steps(now, horizon, step_time, quiet)
                num_steps += skipped
            end_s = now
            busy = False
            if not scheduler.has_work():
                continue
        prefill, decode, kv_read = schedule()
        if prefill or decode:  # else nothing fits now: a finish or an arrival retriggers
            busy = True
            step_end = now + step_time(prefill, decode, kv_read)
    return ReplicaRun(requests=pending, num_arrivals=n, num_steps=num_steps,
                      num_completions=num_completions,
                      num_preemptions=scheduler.num_preemptions, end_s=end_s)


def run_replicas(configs: list[ReplicaConfig], step_models: list[StepTimeModel],
                 requests: list[SimRequest], router: Router | None = None, *,
                 skip_quiet_steps: bool = True,
                 on_completions: Callable[[int], object] | None = None
                 ) -> tuple[list[ReplicaRun], list[int]]:
    """Simulate ``requests`` (indices 0..n-1) on several replicas with ONE clock and heap.

    At each arrival ``router`` (a :class:`hgresearch.traffic.routing.Router`; None: every request to
    replica 0) picks the replica from the replicas' outstanding work at that instant; each
    completion releases it at the instant it happens. At the same instant arrivals come
    before step ends (:mod:`hgresearch.sim.events`). A replica's stretch of quiet decode steps
    (:meth:`VllmV1Scheduler.skip_quiet_steps`) is cut at the next arrival to the fleet: no
    request finishes in it, so no router state changes.

    ``on_completions`` (a progress bar) is called with the number of requests that finished
    in an engine step, after each step that finished any.

    Returns each replica's :class:`ReplicaRun` (its requests in arrival order) and the
    replica index of every request (by request index).
    """
    with cyclic_gc_paused():
        return _run_fleet_loop(configs, step_models, requests, router, skip_quiet_steps,
                               on_completions)


def _run_fleet_loop(configs: list[ReplicaConfig], step_models: list[StepTimeModel],
                    requests: list[SimRequest], router: Router | None, skip_quiet_steps: bool,
                    on_completions: Callable[[int], object] | None
                    ) -> tuple[list[ReplicaRun], list[int]]:
    """:func:`run_replicas`' loop."""
    n = len(configs)
    schedulers = [VllmV1Scheduler(c) for c in configs]
    step_times = [m.step_time_s for m in step_models]
    # cached by number of decodes: a run asks for the same few hundred counts hundreds of times
    quiet_terms = [functools.cache(terms) if (terms := getattr(m, "decode_only_terms", None))
                   else None for m in step_models]
    routes = ({r.index: RouteRequest(r.prompt_tokens, r.output_tokens, r.request_class)
               for r in requests}
              if router is not None else {})
    replica_of = [0] * len(requests)
    served: list[list[SimRequest]] = [[] for _ in range(n)]
    num_steps = [0] * n
    num_completions = [0] * n
    end_s = [0.0] * n
    queue = events.EventQueue()
    heap = queue.heap
    push = queue.push
    pending = sorted(requests, key=lambda r: (r.arrival_s, r.index))
    n_pending = len(pending)
    next_arrival = 0
    if pending:
        push(pending[0].arrival_s, events.ARRIVAL, pending[0])
    arrival_kind, step_end_kind = events.ARRIVAL, events.STEP_END
    step_start_kind = events.STEP_START
    busy = [False] * n

    def start_step(i: int, t: float) -> bool:
        prefill, decode, kv_read = schedulers[i].schedule()
        if prefill == 0 and decode == 0:
            return False  # nothing fits now; a finishing request or an arrival retriggers
        push(t + step_times[i](prefill, decode, kv_read), step_end_kind, i)
        return True

    while heap:
        now, kind, _, payload = heapq.heappop(heap)
        if kind == step_end_kind:
            i = payload
            scheduler = schedulers[i]
            num_steps[i] += 1
            finished = scheduler.complete_step(now)
            num_completions[i] += len(finished)
            if on_completions is not None and finished:
                on_completions(len(finished))
            if router is not None:
                for r in finished:
                    router.release(i, routes[r.index])
            if skip_quiet_steps:
                horizon = pending[next_arrival].arrival_s if next_arrival < n_pending else inf
                now, skipped = scheduler.skip_quiet_steps(now, horizon, step_times[i],
                                                           quiet_terms[i])
                num_steps[i] += skipped
            end_s[i] = now
            busy[i] = scheduler.has_work() and start_step(i, now)
        elif kind == arrival_kind:
            i = router.dispatch(routes[payload.index]) if router is not None else 0
            replica_of[payload.index] = i
            served[i].append(payload)
            schedulers[i].add_request(payload)
            next_arrival += 1
            if next_arrival < n_pending:
                r = pending[next_arrival]
                push(r.arrival_s, arrival_kind, r)
            if not busy[i]:
                busy[i] = True  # a STEP_START at `now` is pending (after same-instant arrivals)
                push(now, step_start_kind, i)
        else:  # STEP_START of an idle engine
            busy[payload] = start_step(payload, now)
    runs = [ReplicaRun(requests=served[i], num_arrivals=len(served[i]),
                       num_steps=num_steps[i], num_completions=num_completions[i],
                       num_preemptions=schedulers[i].num_preemptions, end_s=end_s[i])
            for i in range(n)]
    return runs, replica_of


def requests_frame(run: ReplicaRun) -> pd.DataFrame:
    """The requests table of a simulated run: the measured table's columns
    (:func:`~hgresearch.data.runfolder.requests_table` derives TTFT/E2EL/TPOT the same way),
    plus ``source`` (``"simulated"``) and ``num_preemptions``.

    Times are ns from the first send (t = 0); the simulated client sends exactly on time
    (scheduled = sent, no lag), every request succeeds with the tokens it asked for, and
    per-token event times are not kept (``event_t_ns`` is empty, so ITL statistics are
    missing, never zero).
    """
    records = []
    for r in run.requests:
        sent_ns = round(r.arrival_s * 1e9)
        done_ns = round(r.done_s * 1e9)
        records.append({
            "index": r.index, "warmup": False, "segment": 0, "segment_start_ns": 0,
            "t_scheduled_ns": sent_ns, "t_sent_ns": sent_ns, "cap_wait_ns": 0,
            "t_first_token_ns": round(r.first_token_s * 1e9), "t_last_token_ns": done_ns,
            "t_done_ns": done_ns, "prompt_tokens": r.prompt_tokens,
            "output_tokens": r.num_generated, "expected_output_tokens": r.output_tokens,
            "usage_source": SIMULATED, "http_status": 200, "success": True,
        })
    frame = requests_table(records)
    frame["source"] = SIMULATED
    frame["num_preemptions"] = [r.num_preemptions for r in
                                sorted(run.requests, key=lambda r: r.index)]
    return frame


def simulate_replica(
    config: ReplicaConfig, step_model: StepTimeModel, arrivals_s: np.ndarray | list[float],
    prompt_tokens: np.ndarray | list[int], output_tokens: np.ndarray | list[int],
) -> pd.DataFrame:
    """Simulate one vLLM replica serving the given requests; returns their requests table.

    The replica runs vLLM V1's scheduler (:mod:`hgresearch.sim.scheduler`) step by step: each
    step decodes every running request, prefills waiting ones in chunks up to the token
    budget, admits while KV blocks and ``max_num_seqs`` allow, and preempts (recompute) when
    KV runs out; each step lasts ``step_model.step_time_s(prefill_tokens, decode_seqs,
    kv_tokens_read)``. A request's first token is due at the end of the step that completes
    its prompt, its last at the end of the step that generates its last output token (no
    network, tokeniser or detokeniser time is added).

    Args:
        config: the replica's KV blocks and scheduler limits.
        step_model: step durations (e.g. :class:`~hgresearch.sim.step_time.LinearStepTimeModel`).
        arrivals_s: send time of each request, s from the run start (any order; e.g.
            :func:`hgresearch.traffic.arrivals.vllm085_send_offsets_s` for the paper's schedule or
            :func:`hgresearch.traffic.arrivals.arrival_offsets_ns` / 1e9 for ours).
        prompt_tokens, output_tokens: each request's prompt length and the output tokens it
            generates (as with ``ignore_eos``: exactly this many).

    Returns:
        The requests table (the measured one's columns, one row per request, in input order)
        with ``source = "simulated"`` and ``num_preemptions``;
        :func:`hgresearch.data.summary.summarize` computes the same summary from it as from a
        measured run.

    Raises:
        InputError: for inconsistent or impossible input (see :func:`make_requests`).
    """
    requests = make_requests(config, arrivals_s, prompt_tokens, output_tokens)
    return requests_frame(run_replica(config, step_model, requests))
