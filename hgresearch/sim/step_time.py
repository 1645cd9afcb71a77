"""Step-time models: how long one engine step takes, from what the step does.

A step is described by three numbers (see :meth:`VllmV1Scheduler.schedule
<hgresearch.sim.scheduler.VllmV1Scheduler.schedule>`): prefill tokens, decode sequences and KV
tokens read by attention. :class:`LinearStepTimeModel` is linear in them, with an optional
roofline floor (:class:`RooflineFloor`): a step can never beat reading the weights and the KV
it attends to at the memory bandwidth, nor its FLOPs at the peak rate. Coefficients are given;
fitting them to measured runs (calibration) is a later step (docs/simulator.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from hgresearch.sim.compiled import reduce_by_fields


class StepTimeModel(Protocol):
    """Duration (s) of one engine step."""

    def step_time_s(self, prefill_tokens: int, decode_seqs: int, kv_tokens_read: int) -> float:
        """Seconds one step takes that prefills ``prefill_tokens`` tokens, decodes
        ``decode_seqs`` sequences (one token each) and reads ``kv_tokens_read`` KV tokens."""
        ...


@dataclass(frozen=True)
class ConstantStepTimeModel:
    """Every step takes ``step_s`` (for closed-form checks against queueing theory)."""

    step_s: float

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return reduce_by_fields(self)  # the compiled class's own pickling fails (frozen)

    def step_time_s(self, prefill_tokens: int, decode_seqs: int, kv_tokens_read: int) -> float:
        """``step_s``, whatever the step does."""
        return self.step_s


@dataclass(frozen=True)
class RooflineFloor:
    """Physical lower bound of a step: ``max(bytes moved / bandwidth, FLOPs / peak)``.

    Bytes = the weights (read once per step) + ``kv_bytes_per_token`` × KV tokens read; FLOPs =
    ``flops_per_token`` × tokens processed (≈ 2 × parameters; attention FLOPs are left out).
    """

    weights_bytes: float
    kv_bytes_per_token: float
    bandwidth_bytes_per_s: float
    flops_per_token: float
    peak_flops_per_s: float

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return reduce_by_fields(self)  # the compiled class's own pickling fails (frozen)

    def floor_s(self, prefill_tokens: int, decode_seqs: int, kv_tokens_read: int) -> float:
        """The bound (s) for one step."""
        memory_s = ((self.weights_bytes + self.kv_bytes_per_token * kv_tokens_read)
                    / self.bandwidth_bytes_per_s)
        compute_s = self.flops_per_token * (prefill_tokens + decode_seqs) / self.peak_flops_per_s
        return max(memory_s, compute_s)


@dataclass(frozen=True)
class LinearStepTimeModel:
    """``t = c0 + c_prefill·prefill_tokens + c_decode·decode_seqs + c_kv·kv_tokens_read``,
    raised to ``floor`` (a :class:`RooflineFloor`) when one is given."""

    c0_s: float
    c_prefill_s_per_token: float = 0.0
    c_decode_s_per_seq: float = 0.0
    c_kv_s_per_token: float = 0.0
    floor: RooflineFloor | None = None

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return reduce_by_fields(self)  # the compiled class's own pickling fails (frozen)

    def step_time_s(self, prefill_tokens: int, decode_seqs: int, kv_tokens_read: int) -> float:
        """The linear time, at least the roofline floor."""
        t = (self.c0_s + self.c_prefill_s_per_token * prefill_tokens
             + self.c_decode_s_per_seq * decode_seqs + self.c_kv_s_per_token * kv_tokens_read)
        if self.floor is not None:
            return max(t, self.floor.floor_s(prefill_tokens, decode_seqs, kv_tokens_read))
        return t

    def decode_only_terms(self, decode_seqs: int) -> DecodeOnlyTerms:
        """:meth:`step_time_s` of a step without prefill, as numbers the simulator's quiet-step
        loop evaluates inline (a function call per step is most of that loop's cost)."""
        floor = self.floor
        return DecodeOnlyTerms(
            # Same operations in the same order as step_time_s: bit-identical times.
            intercept_s=self.c0_s + self.c_prefill_s_per_token * 0
            + self.c_decode_s_per_seq * decode_seqs,
            s_per_kv_token=self.c_kv_s_per_token,
            floor_bytes=floor.weights_bytes if floor is not None else None,
            floor_bytes_per_kv_token=floor.kv_bytes_per_token if floor is not None else 0.0,
            floor_bandwidth_bytes_per_s=(floor.bandwidth_bytes_per_s if floor is not None
                                         else 1.0),
            floor_compute_s=(floor.flops_per_token * (0 + decode_seqs) / floor.peak_flops_per_s
                             if floor is not None else 0.0))


# not frozen, init=False and a written __init__: mypyc compiles it, whereas a generated one
# stays interpreted (a run builds one per distinct decode count, thousands per calibration)
@dataclass(slots=True, init=False)
class DecodeOnlyTerms:
    """A decode-only step's time for a fixed number of decodes, as a function of the KV tokens
    read ``kv``: ``t = intercept_s + s_per_kv_token·kv``, raised (when ``floor_bytes`` is not
    None) to ``max((floor_bytes + floor_bytes_per_kv_token·kv) / floor_bandwidth_bytes_per_s,
    floor_compute_s)`` — :meth:`LinearStepTimeModel.step_time_s` with ``prefill_tokens = 0``,
    evaluated with the same float operations."""

    intercept_s: float
    s_per_kv_token: float
    floor_bytes: float | None
    floor_bytes_per_kv_token: float
    floor_bandwidth_bytes_per_s: float
    floor_compute_s: float

    def __init__(self, intercept_s: float, s_per_kv_token: float, floor_bytes: float | None,
                 floor_bytes_per_kv_token: float, floor_bandwidth_bytes_per_s: float,
                 floor_compute_s: float) -> None:
        self.intercept_s = intercept_s
        self.s_per_kv_token = s_per_kv_token
        self.floor_bytes = floor_bytes
        self.floor_bytes_per_kv_token = floor_bytes_per_kv_token
        self.floor_bandwidth_bytes_per_s = floor_bandwidth_bytes_per_s
        self.floor_compute_s = floor_compute_s

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return reduce_by_fields(self)  # readable by the compiled and the source class
