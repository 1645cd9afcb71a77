"""vLLM V1 scheduler, iteration level: which tokens of which requests one engine step runs.

Modelled on ``vllm/v1/core/sched/scheduler.py`` (``Scheduler.schedule``), FCFS policy:

1. **Running requests first**, in admission order, each getting the tokens it still needs
   (1 for a decode; the rest of its prompt, capped by the remaining token budget, for a
   request still prefilling). Each needs KV blocks for its computed tokens plus the new ones;
   when none is free, the **most recently admitted running request is preempted**
   (``self.running.pop()``): its blocks are freed, its computed tokens discarded (recompute),
   and it goes back to the *front* of the waiting queue, keeping the tokens it generated —
   on resumption it prefills prompt + generated tokens again. If the request being scheduled
   is itself the last one, it preempts itself and the running loop stops.
2. **Then waiting requests**, in order, but only if nothing was preempted in this step: each
   is admitted while the token budget is not spent, fewer than ``max_num_seqs`` run and its
   (possibly chunked) prefill gets the KV blocks it needs; the first that does not fit stops
   admission (no preemption for new requests).
3. After the step, a request whose computed tokens reach its token count samples one token:
   its first token when it just finished its prompt; it finishes when it has generated the
   output tokens it was asked for, and its blocks are freed.

Because every running decode needs exactly one token and vLLM requires
``max_num_batched_tokens >= max_num_seqs``, all running decodes are scheduled every step, and
only the request(s) admitted last can still be prefilling. This lets decodes advance on a
shared step counter (:attr:`VllmV1Scheduler.clock`) instead of being touched every step: a
decoding request's computed tokens are ``clock + decode_base``, it needs a new KV block in the
steps where that is a multiple of ``block_size`` (so decodes are grouped by that phase and a
step allocates ``len(group)`` blocks at once), and its blocks are counted from its tokens
when it stops decoding. Requests are touched individually only when they are admitted, finish
their prompt, finish, or are preempted.

Not modelled: prefix caching, speculative decoding, async scheduling, ``long_prefill_token_
threshold``, priorities, LoRA/multimodal budgets, ``max_model_len`` truncation, and the one
null block vLLM's block pool reserves (pass ``num_kv_blocks`` as vLLM reports it, i.e. the
usable count).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from hgresearch.sim.entities import ReplicaConfig, SimRequest
from hgresearch.sim.step_time import DecodeOnlyTerms


class VllmV1Scheduler:
    """State of one replica's scheduler: waiting queue, running set, free KV blocks.

    Use: :meth:`add_request` on arrival; :meth:`schedule` at a step start (returns the step's
    prefill tokens, decode sequences and KV tokens read, for the step-time model);
    :meth:`complete_step` at its end (returns the requests that finished).
    """

    def __init__(self, config: ReplicaConfig) -> None:
        self.config = config
        self.block_size = config.block_size
        self.free_blocks = config.num_kv_blocks
        self.waiting: deque[SimRequest] = deque()
        #: Running requests by index, in admission order (dicts keep insertion order).
        self.running: dict[int, SimRequest] = {}
        #: Running requests that are still prefilling, in admission order.
        self.prefilling: dict[int, SimRequest] = {}
        #: Steps completed. A decoding request's computed tokens are ``clock + decode_base``.
        self.clock = 0
        self.num_decoding = 0
        self._sum_decode_base = 0
        #: Decoding requests by the phase (``clock % block_size``) of the steps in which they
        #: need a new KV block: those with ``(clock + decode_base) % block_size == 0``.
        self._by_phase: list[dict[int, SimRequest]] = [{} for _ in range(config.block_size)]
        #: ``len`` of each ``_by_phase`` group, kept up to date (the quiet-step loop reads it).
        self._phase_counts = [0] * config.block_size
        #: clock value -> decoding requests that generate their last token in that step.
        self._finish_due: dict[int, list[tuple[SimRequest, int]]] = {}
        self._admissions = 0
        #: (request, tokens) prefill chunks of the step in flight.
        self._chunks: list[tuple[SimRequest, int]] = []
        self.num_preemptions = 0

    # -- queries ------------------------------------------------------------------------------
    def has_work(self) -> bool:
        """Whether any request is waiting or running."""
        return bool(self.running) or bool(self.waiting)

    def blocks_in_use(self) -> int:
        """KV blocks held by running requests, counted from their tokens (between steps; for
        checks: ``blocks_in_use() + free_blocks == num_kv_blocks``)."""
        held = 0
        for r in self.running.values():
            if r.decoding:
                held += -(-(self.clock + r.decode_base) // self.block_size)
            else:
                held += r.num_blocks
        return held

    # -- arrivals -----------------------------------------------------------------------------
    def add_request(self, request: SimRequest) -> None:
        """Queue a new request at the back of the waiting queue."""
        self.waiting.append(request)

    # -- one step -----------------------------------------------------------------------------
    def schedule(self) -> tuple[int, int, int]:
        """Plan one engine step; returns ``(prefill_tokens, decode_seqs, kv_tokens_read)``.

        ``kv_tokens_read`` is the context each scheduled request attends to after the step
        (computed + new tokens), summed: the KV the step's attention reads.
        """
        block_size = self.block_size
        clock = self.clock
        preempted = False

        # 1a. Decodes that cross into a new KV block in this step.
        group = self._by_phase[clock % block_size]
        if group:
            if len(group) <= self.free_blocks:
                self.free_blocks -= len(group)
            else:
                # Not enough: in running (admission) order, preempting from the tail.
                for r in sorted(group.values(), key=_rank):
                    if not r.decoding:
                        break  # preempted as a victim: so is every later one (they trail it)
                    preempted_itself = False
                    while self.free_blocks < 1:
                        victim = self._preempt_last(allocated=False)
                        preempted = True
                        if victim is r:
                            preempted_itself = True
                            break
                    if preempted_itself:  # r is the last running: the running loop stops here
                        break
                    self.free_blocks -= 1

        n_decode = self.num_decoding
        budget = self.config.max_num_batched_tokens - n_decode
        kv_read = n_decode * (clock + 1) + self._sum_decode_base
        prefill_tokens = 0
        chunks = self._chunks
        chunks.clear()

        # 1b. Running requests still prefilling (the last admitted), while budget remains.
        if self.prefilling and budget > 0:
            for r in list(self.prefilling.values()):
                if budget <= 0 or r.index not in self.prefilling:
                    break
                new = min(r.prompt_tokens + r.num_generated - r.num_computed, budget)
                need = -(-(r.num_computed + new) // block_size) - r.num_blocks
                while need > self.free_blocks:
                    victim = self._preempt_last(allocated=True)
                    preempted = True
                    if victim is r:
                        break
                if r.index not in self.prefilling:
                    break
                self.free_blocks -= need
                r.num_blocks += need
                chunks.append((r, new))
                budget -= new
                prefill_tokens += new
                kv_read += r.num_computed + new

        # 2. Waiting requests, only when this step preempted nothing.
        if not preempted and self.waiting:
            waiting = self.waiting
            max_seqs = self.config.max_num_seqs
            while waiting and budget > 0 and len(self.running) < max_seqs:
                r = waiting[0]
                new = min(r.prompt_tokens + r.num_generated, budget)
                need = -(-new // block_size)
                if need > self.free_blocks:
                    break
                waiting.popleft()
                self.free_blocks -= need
                r.num_blocks = need
                r.num_computed = 0
                self._admissions += 1
                r.rank = self._admissions
                self.running[r.index] = r
                self.prefilling[r.index] = r
                chunks.append((r, new))
                budget -= new
                prefill_tokens += new
                kv_read += new
        return prefill_tokens, self.num_decoding, kv_read

    def complete_step(self, t_end_s: float) -> list[SimRequest]:
        """Finish the planned step at ``t_end_s``: advance tokens, sample, free finished ones."""
        clock = self.clock
        self.clock = clock + 1  # every running decode has computed one more token
        finished: list[SimRequest] = []
        # Decodes that generated their last token in this step.
        due = self._finish_due.pop(clock, None)
        if due:
            for r, gen in due:
                if r.generation != gen:
                    continue  # preempted since: its entry is stale
                self._stop_decoding(r, allocated=False)
                self._finish(r, t_end_s)
                finished.append(r)
        block_size = self.block_size
        for r, new in self._chunks:
            r.num_computed += new
            if r.num_computed < r.prompt_tokens + r.num_generated:
                continue  # prompt not done yet: more chunks next step
            del self.prefilling[r.index]
            r.num_generated += 1
            if r.num_generated == 1:
                r.first_token_s = t_end_s
            if r.num_generated >= r.output_tokens:
                self._finish(r, t_end_s)
                finished.append(r)
                continue
            # Decode from the next step (clock + 1) on: computed grows by one per step.
            base = r.num_computed - (clock + 1)
            r.decoding = True
            r.decode_base = base
            self.num_decoding += 1
            self._sum_decode_base += base
            self._by_phase[(-base) % block_size][r.index] = r
            self._phase_counts[(-base) % block_size] += 1
            # Its last token comes in the step c with c + 1 + base == prompt + output - 1.
            last = r.prompt_tokens + r.output_tokens - 2 - base
            self._finish_due.setdefault(last, []).append((r, r.generation))
        self._chunks.clear()
        return finished

    def skip_quiet_steps(self, now_s: float, horizon_s: float,
                         step_time_s: Callable[[int, int, int], float],
                         decode_only_terms: Callable[[int], DecodeOnlyTerms] | None = None,
                         ) -> tuple[float, int]:
        """Run, back to back from ``now_s``, the steps in which only decodes run, nothing
        waits, no request finishes and the KV blocks they need are free — and that end before
        ``horizon_s`` (the next arrival). Returns the time the last one ended and how many
        ran. Each is exactly what :meth:`schedule` + :meth:`complete_step` would do (same
        durations, same float sums); the event loop just does not pass them through the heap.

        ``decode_only_terms`` (the step model's, e.g.
        :meth:`LinearStepTimeModel.decode_only_terms
        <hgresearch.sim.step_time.LinearStepTimeModel.decode_only_terms>`), when given, lets
        the loop compute each step's time inline, with the same float operations as
        ``step_time_s``: the same times, without a call per step.
        """
        if self.waiting or self.prefilling or not self.num_decoding:
            return now_s, 0
        clock = start = self.clock
        n = self.num_decoding
        free = self.free_blocks
        block_size = self.block_size
        finish_due = self._finish_due
        needs = self._phase_counts  # blocks each phase needs; unchanged by quiet steps
        kv = n * (clock + 1) + self._sum_decode_base
        if decode_only_terms is None:
            while clock not in finish_due:
                need = needs[clock % block_size]
                if need > free:
                    break
                t_end = now_s + step_time_s(0, n, kv)
                if t_end >= horizon_s:
                    break
                free -= need
                now_s = t_end
                clock += 1
                kv += n
        else:
            # The loop above with the step time inlined: kept apart on purpose, as a call per
            # step is what this fast path saves (the simulator's hot loop, sim_speed.py).
            terms = decode_only_terms(n)
            a, b = terms.intercept_s, terms.s_per_kv_token
            w, w_kv = terms.floor_bytes, terms.floor_bytes_per_kv_token
            bw, compute_s = terms.floor_bandwidth_bytes_per_s, terms.floor_compute_s
            while clock not in finish_due:
                need = needs[clock % block_size]
                if need > free:
                    break
                t = a + b * kv
                if w is not None:
                    # max(t, max(memory_s, compute_s)) as step_time_s: the first argument
                    # unless a later one is strictly larger.
                    floor_s = (w + w_kv * kv) / bw
                    if compute_s > floor_s:
                        floor_s = compute_s
                    if floor_s > t:
                        t = floor_s
                t_end = now_s + t
                if t_end >= horizon_s:
                    break
                free -= need
                now_s = t_end
                clock += 1
                kv += n
        self.clock = clock
        self.free_blocks = free
        return now_s, clock - start

    # -- internals ----------------------------------------------------------------------------
    def _stop_decoding(self, r: SimRequest, *, allocated: bool) -> None:
        """Turn the clock-based state of a decoding request into its own fields.

        ``allocated``: whether the current step already gave it its block (its tokens then
        include the one being decoded)."""
        computed = self.clock + r.decode_base
        r.num_computed = computed
        r.num_generated = computed - r.prompt_tokens + 1
        r.num_blocks = -(-(computed + allocated) // self.block_size)
        r.decoding = False
        self.num_decoding -= 1
        self._sum_decode_base -= r.decode_base
        phase = (-r.decode_base) % self.block_size
        del self._by_phase[phase][r.index]
        self._phase_counts[phase] -= 1

    def _finish(self, r: SimRequest, t_end_s: float) -> None:
        r.done_s = t_end_s
        r.generation += 1
        self.free_blocks += r.num_blocks
        r.num_blocks = 0
        del self.running[r.index]

    def _preempt_last(self, *, allocated: bool) -> SimRequest:
        """Preempt the most recently admitted running request (vLLM: ``running.pop()``)."""
        index = next(reversed(self.running))
        r = self.running.pop(index)
        if r.decoding:
            self._stop_decoding(r, allocated=allocated)
        else:
            del self.prefilling[index]
        r.generation += 1
        self.free_blocks += r.num_blocks
        r.num_blocks = 0
        r.num_computed = 0
        r.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(r)
        return r


def _rank(r: SimRequest) -> int:
    return r.rank
