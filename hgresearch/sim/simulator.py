"""The event loop: one vLLM replica fed by arrivals, stepping until every request is done."""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from math import inf

import numpy as np
import pandas as pd

from hgresearch.errors import InputError
from hgresearch.runfolder import requests_table
from hgresearch.sim import events
from hgresearch.sim.entities import ReplicaConfig, SimRequest
from hgresearch.sim.scheduler import VllmV1Scheduler
from hgresearch.sim.step_time import StepTimeModel

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

    @property
    def num_events(self) -> int:
        """Arrivals + steps + completions."""
        return self.num_arrivals + self.num_steps + self.num_completions


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
    capacity = config.kv_capacity_tokens
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
    return [SimRequest(index=i, arrival_s=float(a), prompt_tokens=int(p), output_tokens=int(o))
            for i, (a, p, o) in enumerate(zip(arrivals, prompts, outputs, strict=True))]


def run_replica(config: ReplicaConfig, step_model: StepTimeModel, requests: list[SimRequest],
                *, skip_quiet_steps: bool = True) -> ReplicaRun:
    """Simulate ``requests`` (from :func:`make_requests`) on one replica; fills their times.

    ``skip_quiet_steps`` runs stretches of decode-only steps in which nothing happens but
    time (see :meth:`VllmV1Scheduler.skip_quiet_steps`) without the heap; the result is the
    same either way (a test checks it), only faster.
    """
    scheduler = VllmV1Scheduler(config)
    queue = events.EventQueue()
    heap = queue.heap
    push = queue.push
    pending = sorted(requests, key=lambda r: (r.arrival_s, r.index))
    n_pending = len(pending)
    next_arrival = 0
    if pending:
        push(pending[0].arrival_s, events.ARRIVAL, pending[0])
    step_time = step_model.step_time_s
    arrival_kind, step_end_kind = events.ARRIVAL, events.STEP_END
    step_start_kind = events.STEP_START
    busy = False
    num_steps = num_completions = 0
    now = 0.0

    def start_step(t: float) -> bool:
        prefill, decode, kv_read = scheduler.schedule()
        if prefill == 0 and decode == 0:
            return False  # nothing fits now; a finishing request or an arrival retriggers
        push(t + step_time(prefill, decode, kv_read), step_end_kind)
        return True

    while heap:
        now, kind, _, payload = heapq.heappop(heap)
        if kind == step_end_kind:
            num_steps += 1
            num_completions += len(scheduler.complete_step(now))
            if skip_quiet_steps:
                horizon = pending[next_arrival].arrival_s if next_arrival < n_pending else inf
                now, skipped = scheduler.skip_quiet_steps(now, horizon, step_time)
                num_steps += skipped
            busy = scheduler.has_work() and start_step(now)
        elif kind == arrival_kind:
            scheduler.add_request(payload)
            next_arrival += 1
            if next_arrival < n_pending:
                r = pending[next_arrival]
                push(r.arrival_s, arrival_kind, r)
            if not busy:
                busy = True  # a STEP_START at `now` is pending (after same-instant arrivals)
                push(now, step_start_kind)
        else:  # STEP_START of an idle engine
            busy = start_step(now)
    return ReplicaRun(requests=requests, num_arrivals=next_arrival, num_steps=num_steps,
                      num_completions=num_completions,
                      num_preemptions=scheduler.num_preemptions, end_s=now)


def requests_frame(run: ReplicaRun) -> pd.DataFrame:
    """The requests table of a simulated run: the measured table's columns
    (:func:`~hgresearch.runfolder.requests_table` derives TTFT/E2EL/TPOT the same way),
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
            :func:`hgresearch.arrivals.vllm085_send_offsets_s` for the paper's schedule or
            :func:`hgresearch.arrivals.arrival_offsets_ns` / 1e9 for ours).
        prompt_tokens, output_tokens: each request's prompt length and the output tokens it
            generates (as with ``ignore_eos``: exactly this many).

    Returns:
        The requests table (the measured one's columns, one row per request, in input order)
        with ``source = "simulated"`` and ``num_preemptions``;
        :func:`hgresearch.metrics.summarize` computes the same summary from it as from a
        measured run.

    Raises:
        InputError: for inconsistent or impossible input (see :func:`make_requests`).
    """
    requests = make_requests(config, arrivals_s, prompt_tokens, output_tokens)
    return requests_frame(run_replica(config, step_model, requests))
