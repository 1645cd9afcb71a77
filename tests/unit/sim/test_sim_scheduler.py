"""The replica scheduler step by step: chunked prefill, decode-first, admission, preemption."""

from __future__ import annotations

import pytest

from hgresearch.errors import InputError
from hgresearch.sim import ReplicaConfig, SimRequest, VllmV1Scheduler


def _request(index: int, prompt: int, output: int) -> SimRequest:
    return SimRequest(index=index, arrival_s=0.0, prompt_tokens=prompt, output_tokens=output)


def _step(scheduler: VllmV1Scheduler, t: float = 0.0) -> tuple[tuple[int, int, int], list[int]]:
    plan = scheduler.schedule()
    finished = [r.index for r in scheduler.complete_step(t)]
    # KV accounting holds after every step: held + free = all blocks.
    assert scheduler.blocks_in_use() + scheduler.free_blocks == scheduler.config.num_kv_blocks
    return plan, finished


def test_chunked_prefill_splits_a_long_prompt_by_the_token_budget():
    scheduler = VllmV1Scheduler(ReplicaConfig(num_kv_blocks=1000, max_num_seqs=4,
                                              max_num_batched_tokens=256))
    r = _request(0, prompt=1000, output=3)
    scheduler.add_request(r)
    prefills = []
    for step in range(4):
        (prefill, decode, _), _ = _step(scheduler, t=float(step + 1))
        prefills.append(prefill)
        assert decode == 0
    assert prefills == [256, 256, 256, 232]
    assert r.first_token_s == 4.0  # the first token comes with the step that ends the prompt
    assert _step(scheduler, 5.0)[0][:2] == (0, 1)
    assert _step(scheduler, 6.0) == ((0, 1, 1002), [0])  # 3rd token: context 1000 + 2
    assert r.done_s == 6.0 and r.num_generated == 3


def test_decodes_are_scheduled_before_a_prefill_and_take_budget_first():
    scheduler = VllmV1Scheduler(ReplicaConfig(num_kv_blocks=1000, max_num_seqs=8,
                                              max_num_batched_tokens=256))
    for i in range(3):
        scheduler.add_request(_request(i, prompt=10, output=50))
    assert _step(scheduler)[0][:2] == (30, 0)  # three short prompts admitted in one step
    scheduler.add_request(_request(3, prompt=1000, output=5))
    (prefill, decode, _), _ = _step(scheduler)
    # The three running decodes first (one token each), the new prompt gets what is left.
    assert (decode, prefill) == (3, 256 - 3)
    (prefill, decode, _), _ = _step(scheduler)
    assert (decode, prefill) == (3, 253)


def test_admission_stops_at_max_num_seqs_and_at_missing_kv_blocks():
    scheduler = VllmV1Scheduler(ReplicaConfig(num_kv_blocks=1000, max_num_seqs=2,
                                              max_num_batched_tokens=256))
    for i in range(3):
        scheduler.add_request(_request(i, prompt=10, output=5))
    assert _step(scheduler)[0][0] == 20 and len(scheduler.waiting) == 1

    tight = VllmV1Scheduler(ReplicaConfig(num_kv_blocks=3, block_size=16, max_num_seqs=8,
                                          max_num_batched_tokens=256))
    tight.add_request(_request(0, prompt=20, output=5))  # 2 blocks
    tight.add_request(_request(1, prompt=20, output=5))  # 2 more: only 1 left, waits
    assert _step(tight)[0][0] == 20 and [r.index for r in tight.waiting] == [1]


def test_kv_exhaustion_preempts_the_last_admitted_and_it_resumes_by_recompute():
    scheduler = VllmV1Scheduler(ReplicaConfig(num_kv_blocks=4, block_size=4, max_num_seqs=8,
                                              max_num_batched_tokens=64))
    first, second = _request(0, prompt=4, output=8), _request(1, prompt=4, output=8)
    scheduler.add_request(first)
    scheduler.add_request(second)
    t = 0.0
    finished: list[int] = []
    while scheduler.has_work():
        t += 1.0
        finished += _step(scheduler, t)[1]
    # 4 blocks of 4 tokens cannot hold two 4 + 8 token sequences: the later one gives way.
    assert second.num_preemptions >= 1 and first.num_preemptions == 0
    assert sorted(finished) == [0, 1]
    assert first.num_generated == 8 and second.num_generated == 8
    assert first.done_s < second.done_s
    assert scheduler.free_blocks == 4


def test_preempted_request_goes_to_the_front_of_the_waiting_queue():
    scheduler = VllmV1Scheduler(ReplicaConfig(num_kv_blocks=2, block_size=4, max_num_seqs=8,
                                              max_num_batched_tokens=64))
    a, b = _request(0, prompt=4, output=6), _request(1, prompt=4, output=6)
    scheduler.add_request(a)
    scheduler.add_request(b)
    _step(scheduler)  # both prefilled: one block each, first tokens out
    scheduler.add_request(_request(2, prompt=4, output=2))
    _step(scheduler)  # both need a 2nd block, only none free: b (admitted last) preempted
    assert b.num_preemptions == 1 and a.num_preemptions == 0
    assert [r.index for r in scheduler.waiting] == [1, 2]
    assert b.num_generated == 1  # kept: it re-prefills prompt + generated tokens later


def test_replica_config_rejects_what_vllm_rejects():
    with pytest.raises(InputError, match="max_num_batched_tokens"):
        ReplicaConfig(num_kv_blocks=10, max_num_seqs=512, max_num_batched_tokens=256)
    with pytest.raises(InputError, match="num_kv_blocks"):
        ReplicaConfig(num_kv_blocks=0)
