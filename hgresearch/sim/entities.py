"""Entities of the replica simulator: the replica's configuration and a simulated request."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hgresearch.errors import InputError
from hgresearch.sim.compiled import reduce_by_fields


@dataclass(frozen=True)
class ReplicaConfig:
    """One vLLM replica's scheduling limits (vLLM's ``SchedulerConfig``/``CacheConfig`` names).

    Attributes:
        num_kv_blocks: KV-cache blocks of the replica (vLLM's ``num_gpu_blocks``); see
            :func:`hgresearch.sim.replica_limits.num_kv_blocks_from_memory` to derive it.
        block_size: tokens per KV block (vLLM's default on GPU: 16).
        max_num_seqs: most requests running at once.
        max_num_batched_tokens: token budget of one engine step (decodes + prefill chunks).
    """

    num_kv_blocks: int
    block_size: int = 16
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 2048

    def __post_init__(self) -> None:
        for name in ("num_kv_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise InputError(f"expected a positive integer, got {value!r}", field=name)
        # vLLM refuses the same configuration: every running sequence must fit one decode token.
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise InputError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be >= "
                f"max_num_seqs ({self.max_num_seqs})", field="max_num_batched_tokens")

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return reduce_by_fields(self)  # the compiled class's own pickling fails (frozen)

    @property
    def kv_cache_tokens(self) -> int:
        """Tokens the KV cache holds (blocks × block size)."""
        return self.num_kv_blocks * self.block_size


# init=False and the __init__ below: mypyc compiles a written __init__, whereas the one
# dataclasses generates stays interpreted and made every compiled construction slower
@dataclass(slots=True, eq=False, init=False)
class SimRequest:
    """A request inside the simulator (mutable; identity-hashed).

    While a request decodes, its computed-token count is not stored per step: it is
    ``scheduler.clock + decode_base`` (every running decode advances by one token per step), so
    a decode step costs O(1) per request only when something happens to it (a new KV block,
    its last token, a preemption).
    """

    index: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    #: Tokens whose KV is computed (valid while waiting or prefilling).
    num_computed: int = 0
    #: Output tokens generated so far (valid while waiting or prefilling).
    num_generated: int = 0
    #: KV blocks held (valid while prefilling; a decode's are counted from its tokens).
    num_blocks: int = 0
    #: Admission order (larger = admitted later); running order is admission order.
    rank: int = 0
    decoding: bool = False
    decode_base: int = 0
    #: Bumped on preemption/finish so stale entries in the scheduler's due-lists are skipped.
    generation: int = 0
    num_preemptions: int = 0
    first_token_s: float = math.nan
    done_s: float = math.nan
    #: Traffic class the router sees
    #: (:attr:`hgresearch.traffic.routing.RouteRequest.request_class`).
    request_class: str = ""

    def __init__(self, index: int, arrival_s: float, prompt_tokens: int, output_tokens: int,
                 num_computed: int = 0, num_generated: int = 0, num_blocks: int = 0,
                 rank: int = 0, decoding: bool = False, decode_base: int = 0,
                 generation: int = 0, num_preemptions: int = 0, first_token_s: float = math.nan,
                 done_s: float = math.nan, request_class: str = "") -> None:
        """The fields in declaration order (what :func:`reduce_by_fields` passes back)."""
        self.index = index
        self.arrival_s = arrival_s
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.num_computed = num_computed
        self.num_generated = num_generated
        self.num_blocks = num_blocks
        self.rank = rank
        self.decoding = decoding
        self.decode_base = decode_base
        self.generation = generation
        self.num_preemptions = num_preemptions
        self.first_token_s = first_token_s
        self.done_s = done_s
        self.request_class = request_class

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return reduce_by_fields(self)  # readable by the compiled and the source class
