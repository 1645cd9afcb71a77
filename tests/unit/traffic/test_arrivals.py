"""The shared arrival schedules (hgresearch.traffic.arrivals), incl. vLLM 0.8.5's gap sequence."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hgresearch.bench import schedule
from hgresearch.traffic import arrivals


def test_bench_schedule_reexports_the_one_definition():
    assert schedule.arrival_offsets_ns is arrivals.arrival_offsets_ns
    assert schedule.PAPER_QPS is arrivals.PAPER_QPS


def test_vllm085_gaps_seed42_sum_at_1qps():
    """The issue's number: with seed 42 the 199 gaps between 200 sends at 1 QPS sum to 187.58 s.

    vLLM draws one gap after *every* request (200 draws); the send times use the first 199.
    """
    gaps = arrivals.vllm085_arrival_gaps_s(1.0, 200, seed=42)
    assert len(gaps) == 200
    assert gaps[:199].sum() == pytest.approx(187.58, abs=0.005)
    assert gaps.sum() == pytest.approx(189.10, abs=0.005)  # incl. the sleep after the last send
    offsets = arrivals.vllm085_send_offsets_s(1.0, 200, seed=42)
    assert offsets[0] == 0.0 and offsets[-1] == pytest.approx(187.58, abs=0.005)


def test_vllm085_gaps_match_the_legacy_global_rng_and_scale_with_rate():
    state = np.random.get_state()
    try:
        np.random.seed(42)
        legacy = [np.random.gamma(shape=1.0, scale=1.0 / 8.0) for _ in range(50)]
    finally:
        np.random.set_state(state)
    assert np.allclose(arrivals.vllm085_arrival_gaps_s(8.0, 50, seed=42), legacy)
    # Every rate replays one sequence of exponential gaps, scaled (burstiness 1).
    assert np.allclose(arrivals.vllm085_arrival_gaps_s(4.0, 50) * 4.0,
                       arrivals.vllm085_arrival_gaps_s(1.0, 50))


def test_vllm085_gaps_edge_cases():
    assert arrivals.vllm085_arrival_gaps_s(math.inf, 3).tolist() == [0.0, 0.0, 0.0]
    assert len(arrivals.vllm085_send_offsets_s(2.0, 0)) == 0
    with pytest.raises(ValueError):
        arrivals.vllm085_arrival_gaps_s(0.0, 3)
    with pytest.raises(ValueError):
        arrivals.vllm085_arrival_gaps_s(1.0, 3, burstiness=0.0)


def test_reference_runs_last_at_least_the_regenerated_schedule(reference_runs):
    """vLLM's measured duration includes all 200 sleeps (the last one after the last send),
    so no paper run can be shorter than the sum of the regenerated gaps at its rate; at 1 QPS
    the shortest run exceeds it by less than a request's latency."""
    gaps = arrivals.vllm085_arrival_gaps_s(1.0, 200, seed=42)
    runs = reference_runs[reference_runs.num_prompts == 200]
    assert len(runs) > 100
    all_gaps_s = gaps.sum() / runs.request_rate_qps
    assert (runs.duration_s >= all_gaps_s).all()
    one_qps = runs[runs.request_rate_qps == 1.0]
    assert 0 < (one_qps.duration_s - all_gaps_s[one_qps.index]).min() < 1.0
