"""The replica simulator end to end: closed forms, conservation, determinism, output table."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from hgresearch.data.runfolder import REQUEST_COLUMNS
from hgresearch.data.summary import summarize
from hgresearch.errors import InputError
from hgresearch.sim import (
    ConstantStepTimeModel,
    LinearStepTimeModel,
    ReplicaConfig,
    make_requests,
    run_replica,
    simulate_replica,
)
from hgresearch.sim.step_time import RooflineFloor
from hgresearch.traffic.arrivals import arrival_offsets_ns, vllm085_send_offsets_s


def _workload(n: int, seed: int, rate: float = 8.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    arrivals = arrival_offsets_ns(n, rate, seed=seed) / 1e9
    return arrivals, rng.integers(5, 600, n), rng.integers(1, 300, n)


def test_md1_mean_wait_matches_pollaczek_khinchine():
    """One sequence at a time, one-token outputs, constant step D: an M/D/1 queue, whose mean
    wait is rho / (2 mu (1 - rho)) (Pollaczek-Khinchine with zero service variance)."""
    step_s, rate = 0.1, 5.0  # mu = 10/s, rho = 0.5 -> mean wait 50 ms
    n = 40_000
    arrivals = arrival_offsets_ns(n, rate, seed=7) / 1e9
    frame = simulate_replica(ReplicaConfig(num_kv_blocks=100, max_num_seqs=1),
                             ConstantStepTimeModel(step_s), arrivals, np.full(n, 8),
                             np.ones(n, dtype=int))
    wait_s = (frame.ttft_ms.to_numpy() / 1e3) - step_s  # TTFT = wait + one step
    rho, mu = rate * step_s, 1.0 / step_s
    expected = rho / (2 * mu * (1 - rho))
    assert wait_s.min() == pytest.approx(0.0, abs=1e-9)
    assert wait_s.mean() == pytest.approx(expected, rel=0.04)


def test_single_request_latency_closed_form():
    """Alone on the replica: TTFT = ceil(prompt / budget) steps, then one step per token."""
    step_s = 0.02
    frame = simulate_replica(ReplicaConfig(num_kv_blocks=500, max_num_batched_tokens=512),
                             ConstantStepTimeModel(step_s), [1.0], [1500], [40])
    row = frame.iloc[0]
    assert row.ttft_ms == pytest.approx(3 * step_s * 1e3)
    assert row.e2el_ms == pytest.approx((3 + 39) * step_s * 1e3)
    assert row.tpot_ms == pytest.approx(step_s * 1e3)


def test_linear_step_time_reads_the_growing_kv_of_a_decode():
    """Decode step k of a lone request reads prompt + k tokens of KV (c_kv prices them)."""
    model = LinearStepTimeModel(c0_s=0.01, c_kv_s_per_token=1e-5)
    frame = simulate_replica(ReplicaConfig(num_kv_blocks=100), model, [0.0], [100], [3])
    # Steps: prefill (reads 100), decodes reading 101 and 102.
    expected_s = 3 * 0.01 + 1e-5 * (100 + 101 + 102)
    assert frame.e2el_ms.iloc[0] == pytest.approx(expected_s * 1e3)


@pytest.mark.parametrize("num_kv_blocks", [5000, 60])
def test_conservation_every_request_finishes_once_with_the_tokens_it_asked(num_kv_blocks):
    arrivals, prompts, outputs = _workload(300, seed=3, rate=40.0)
    config = ReplicaConfig(num_kv_blocks=num_kv_blocks, max_num_seqs=64,
                           max_num_batched_tokens=512)
    requests = make_requests(config, arrivals, prompts, outputs)
    run = run_replica(config, LinearStepTimeModel(0.01, 2e-5, 1e-4, 1e-7), requests)
    assert run.num_arrivals == run.num_completions == 300
    assert sorted(r.index for r in requests) == list(range(300))
    assert [r.num_generated for r in requests] == outputs.tolist()
    assert all(r.arrival_s < r.first_token_s <= r.done_s <= run.end_s for r in requests)
    if num_kv_blocks == 60:  # tight KV: preemptions happened and everyone still finished
        assert run.num_preemptions > 0
    else:
        assert run.num_preemptions == 0


def test_kv_exhaustion_slows_the_run_but_loses_nothing():
    arrivals, prompts, outputs = _workload(200, seed=11, rate=50.0)
    model = LinearStepTimeModel(0.01, 2e-5, 1e-4)
    roomy = simulate_replica(ReplicaConfig(num_kv_blocks=10_000), model, arrivals, prompts,
                             outputs)
    tight = simulate_replica(ReplicaConfig(num_kv_blocks=60), model, arrivals, prompts, outputs)
    assert tight.num_preemptions.sum() > 0 and roomy.num_preemptions.sum() == 0
    assert tight.output_tokens.tolist() == roomy.output_tokens.tolist() == outputs.tolist()
    assert tight.t_done_ns.max() > roomy.t_done_ns.max()


def test_deterministic_by_seed_and_identical_with_or_without_skipping_quiet_steps():
    config = ReplicaConfig(num_kv_blocks=80, max_num_seqs=32, max_num_batched_tokens=256)
    model = LinearStepTimeModel(0.01, 2e-5, 1e-4, 1e-7)
    first = simulate_replica(config, model, *_workload(150, seed=5))
    again = simulate_replica(config, model, *_workload(150, seed=5))
    other = simulate_replica(config, model, *_workload(150, seed=6))
    assert first.equals(again)
    assert not first.equals(other)
    times = []
    for skip in (True, False):
        requests = make_requests(config, *_workload(150, seed=5))
        run = run_replica(config, model, requests, skip_quiet_steps=skip)
        times.append([(r.first_token_s, r.done_s, r.num_preemptions) for r in requests])
        assert run.num_preemptions > 0  # the comparison covers the preemption path too
    assert times[0] == times[1]


@dataclass(frozen=True)
class _CallPerStep:
    """The wrapped model without ``decode_only_terms``: the quiet-step loop calls it per step."""

    inner: LinearStepTimeModel

    def step_time_s(self, prefill_tokens: int, decode_seqs: int, kv_tokens_read: int) -> float:
        return self.inner.step_time_s(prefill_tokens, decode_seqs, kv_tokens_read)


def test_inline_quiet_steps_are_bit_identical_with_a_binding_roofline_floor():
    """The quiet-step loop evaluates a linear model's time inline (decode_only_terms); with a
    roofline floor that binds in some steps (memory) and not others, every time equals the
    per-step calls' and the heap-only run's, to the last bit."""
    config = ReplicaConfig(num_kv_blocks=400, max_num_seqs=64, max_num_batched_tokens=512)
    floor = RooflineFloor(weights_bytes=1e9, kv_bytes_per_token=4e5,
                          bandwidth_bytes_per_s=2e11, flops_per_token=2e9,
                          peak_flops_per_s=1e13)
    model = LinearStepTimeModel(0.008, 2e-5, 1e-4, 1e-7, floor=floor)
    unfloored = LinearStepTimeModel(0.008, 2e-5, 1e-4, 1e-7)
    binds = [model.step_time_s(0, 8, kv) > unfloored.step_time_s(0, 8, kv)
             for kv in (100, 20_000)]
    assert binds == [False, True]  # the floor binds only with a long context
    times = []
    for step_model, skip in ((model, True), (_CallPerStep(model), True), (model, False)):
        requests = make_requests(config, *_workload(120, seed=3, rate=6.0))
        run_replica(config, step_model, requests, skip_quiet_steps=skip)
        times.append([(r.first_token_s, r.done_s) for r in requests])
    assert times[0] == times[1] == times[2]


def test_output_is_the_measured_requests_table_and_summarizes_the_same_way():
    arrivals = vllm085_send_offsets_s(4.0, 50)
    rng = np.random.default_rng(0)
    prompts, outputs = rng.integers(10, 400, 50), rng.integers(2, 200, 50)
    frame = simulate_replica(ReplicaConfig(num_kv_blocks=2000), LinearStepTimeModel(0.015, 1e-5),
                             arrivals, prompts, outputs)
    assert list(frame.columns) == REQUEST_COLUMNS + ["source", "num_preemptions"]
    assert (frame.source == "simulated").all() and frame.success.all()
    assert frame["index"].tolist() == list(range(50))
    assert (frame.t_sent_ns == np.round(arrivals * 1e9).astype(np.int64)).all()
    summary = summarize(frame, bootstrap_reps=0)
    assert summary["completed"] == 50 and summary["failed"] == 0
    assert summary["total_output_tokens"] == int(outputs.sum())
    assert summary["duration"] == pytest.approx(frame.t_done_ns.max() / 1e9)
    assert summary["mean_ttft_ms"] == pytest.approx(frame.ttft_ms.mean())
    assert summary["mean_itl_ms"] is None  # per-token times are not simulated
    assert summary["client_limited"] is False


def test_bad_input_names_the_request_and_field():
    config = ReplicaConfig(num_kv_blocks=10, block_size=16)
    model = ConstantStepTimeModel(0.01)
    with pytest.raises(InputError, match="differ in length"):
        simulate_replica(config, model, [0.0, 1.0], [5], [5])
    with pytest.raises(InputError, match="request 1") as err:
        simulate_replica(config, model, [0.0, 1.0], [5, 150], [5, 12])  # 161 > 160 tokens
    assert err.value.field == "output_tokens" and err.value.line == 2
    # Exactly the whole cache fits (the last token's KV is never needed) and finishes.
    assert simulate_replica(config, model, [0.0], [150], [11]).output_tokens.tolist() == [11]
    with pytest.raises(InputError) as err:
        simulate_replica(config, model, [0.0, -1.0], [5, 5], [5, 5])
    assert err.value.field == "arrivals_s"
    with pytest.raises(InputError) as err:
        simulate_replica(config, model, [0.0], [0], [5])
    assert err.value.field == "prompt_tokens"
    with pytest.raises(InputError) as err:
        simulate_replica(config, model, [0.0], [5], [2.5])
    assert err.value.field == "output_tokens"


@pytest.mark.parametrize("num_kv_blocks", [60, 4000])
@pytest.mark.parametrize("skip", [True, False])
def test_single_replica_loop_is_bit_identical_to_the_fleet_loop(num_kv_blocks, skip):
    """run_replica's heap-free loop against run_replicas (the heap) with one replica: the same
    first-token and completion times to the bit, steps and preemptions, through same-instant
    arrivals (a burst at 0, duplicated times), idle gaps and KV preemption."""
    from hgresearch.sim.simulator import make_requests, run_replica, run_replicas
    from hgresearch.sim.step_time import LinearStepTimeModel, RooflineFloor

    rng = np.random.default_rng(7)
    n = 600
    arrivals = np.sort(np.concatenate([np.zeros(50), rng.uniform(0, 60, n - 100),
                                       np.repeat(rng.uniform(0, 60, 25), 2)]))
    prompts = rng.integers(1, 400, n)
    outputs = rng.integers(1, 200, n)
    config = ReplicaConfig(num_kv_blocks=num_kv_blocks, block_size=16, max_num_seqs=64,
                           max_num_batched_tokens=512)
    model = LinearStepTimeModel(0.004, 2e-5, 1e-4, 1e-8, floor=RooflineFloor(
        1e10, 1e5, 2e12, 2e10, 1e15))
    one = make_requests(config, arrivals, prompts, outputs)
    fleet = make_requests(config, arrivals, prompts, outputs)
    run = run_replica(config, model, one, skip_quiet_steps=skip)
    (ref,), _ = run_replicas([config], [model], fleet, skip_quiet_steps=skip)
    assert [(r.first_token_s, r.done_s, r.num_preemptions) for r in one] == \
        [(r.first_token_s, r.done_s, r.num_preemptions) for r in fleet]
    assert (run.num_steps, run.num_completions, run.num_preemptions, run.end_s) == \
        (ref.num_steps, ref.num_completions, ref.num_preemptions, ref.end_s)
    if num_kv_blocks == 60:
        assert run.num_preemptions > 0
