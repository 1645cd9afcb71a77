"""The scheduler against a naive oracle: a direct, per-request transcription of vLLM V1's
``Scheduler.schedule`` (every request touched every step, blocks counted per request). The
real scheduler's shortcuts (shared decode clock, block phases, lazy block counts) must give
the same plan in every step, including through preemptions. The oracle is a test double of
the scheduler logic only; it is deliberately simple and slow."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from hgresearch.sim import ReplicaConfig, SimRequest, VllmV1Scheduler


class _Naive:
    def __init__(self, config: ReplicaConfig) -> None:
        self.c = config
        self.free = config.num_kv_blocks
        self.running: list[dict] = []
        self.waiting: deque[dict] = deque()
        self.scheduled: list[tuple[dict, int]] = []

    def add(self, index: int, prompt: int, output: int) -> None:
        self.waiting.append({"i": index, "P": prompt, "O": output, "computed": 0, "g": 0,
                             "blocks": 0, "preemptions": 0, "decoding": False})

    def _blocks(self, tokens: int) -> int:
        return -(-tokens // self.c.block_size)

    def _preempt(self) -> dict:
        victim = self.running.pop()
        self.free += victim["blocks"]
        victim.update(blocks=0, computed=0, preemptions=victim["preemptions"] + 1,
                      decoding=False)
        self.waiting.appendleft(victim)
        return victim

    def schedule(self) -> tuple[int, int, int]:
        budget = self.c.max_num_batched_tokens
        self.scheduled = []
        preempted = False
        i = 0
        while i < len(self.running) and budget > 0:
            r = self.running[i]
            new = min(r["P"] + r["g"] - r["computed"], budget)
            need = self._blocks(r["computed"] + new) - r["blocks"]
            gone = False
            while need > self.free:
                preempted = True
                if self._preempt() is r:
                    gone = True
                    break
            if gone:
                break
            self.free -= need
            r["blocks"] += need
            self.scheduled.append((r, new))
            budget -= new
            i += 1
        if not preempted:
            while self.waiting and budget > 0 and len(self.running) < self.c.max_num_seqs:
                r = self.waiting[0]
                new = min(r["P"] + r["g"], budget)
                need = self._blocks(new)
                if need > self.free:
                    break
                self.waiting.popleft()
                self.free -= need
                r.update(blocks=need, computed=0)
                self.running.append(r)
                self.scheduled.append((r, new))
                budget -= new
        # A decode: a request past its (re)prefill; a resumed request's last prefill token
        # is still prefill.
        decodes = sum(1 for r, _ in self.scheduled if r["decoding"])
        prefill = sum(new for r, new in self.scheduled) - decodes
        kv_read = sum(r["computed"] + new for r, new in self.scheduled)
        return prefill, decodes, kv_read

    def complete(self) -> list[int]:
        finished = []
        for r, new in self.scheduled:
            r["computed"] += new
            if r["computed"] == r["P"] + r["g"]:
                r["g"] += 1
                r["decoding"] = True
                if r["g"] == r["O"]:
                    self.free += r["blocks"]
                    self.running.remove(r)
                    finished.append(r["i"])
        return sorted(finished)


@pytest.mark.parametrize(("seed", "num_kv_blocks", "max_num_seqs", "budget", "block_size"), [
    (0, 40, 16, 64, 4), (1, 25, 8, 32, 8), (2, 200, 32, 128, 16), (3, 12, 4, 16, 4),
    (4, 60, 64, 96, 16),
])
def test_scheduler_matches_the_naive_oracle_step_by_step(seed, num_kv_blocks, max_num_seqs,
                                                         budget, block_size):
    rng = np.random.default_rng(seed)
    config = ReplicaConfig(num_kv_blocks=num_kv_blocks, block_size=block_size,
                           max_num_seqs=max_num_seqs, max_num_batched_tokens=budget)
    capacity = config.kv_cache_tokens
    n = 120
    prompts = rng.integers(1, capacity // 2, n)
    outputs = np.minimum(rng.integers(1, 60, n), capacity - prompts + 1)
    arrival_step = np.sort(rng.integers(0, 400, n))  # arrivals counted in steps
    fast, naive = VllmV1Scheduler(config), _Naive(config)
    requests = [SimRequest(index=i, arrival_s=float(arrival_step[i]),
                           prompt_tokens=int(prompts[i]), output_tokens=int(outputs[i]))
                for i in range(n)]
    added = done = step = 0
    while done < n:
        while added < n and arrival_step[added] <= step:
            fast.add_request(requests[added])
            naive.add(added, int(prompts[added]), int(outputs[added]))
            added += 1
        plan = fast.schedule()
        assert plan == naive.schedule(), f"step {step}"
        finished = sorted(r.index for r in fast.complete_step(float(step)))
        assert finished == naive.complete(), f"step {step}"
        assert fast.free_blocks == naive.free
        done += len(finished)
        step += 1
    assert fast.num_preemptions > 0 or num_kv_blocks >= 200  # the tight cases preempt
    assert [r.num_generated for r in requests] == outputs.tolist()
    assert fast.free_blocks == num_kv_blocks
