"""Routing policies: each policy's choice on a constructed fleet state, and the router's
bookkeeping (hgresearch.traffic.routing, shared by the fleet simulator and the live bench)."""

from __future__ import annotations

import numpy as np
import pytest

from hgresearch.errors import InputError
from hgresearch.traffic.routing import (
    CapacityWeightedRandom,
    ClassWeightedSplit,
    CostAwareSpillover,
    JoinShortestQueue,
    LeastOutstandingTokens,
    LengthAwareSplit,
    Policy,
    ReplicaState,
    RoundRobin,
    Router,
    RouteRequest,
    make_policy,
)

SHORT = RouteRequest(prompt_tokens=100, expected_output_tokens=50)
LONG = RouteRequest(prompt_tokens=4000, expected_output_tokens=50)


def fleet() -> list[ReplicaState]:
    """One fast, expensive replica (0) and two slow, cheap ones (1, 2)."""
    return [
        ReplicaState(outstanding_requests=3, outstanding_tokens=600, capacity_weight=4.0,
                     price_usd_per_h=2.0),
        ReplicaState(outstanding_requests=2, outstanding_tokens=9000, capacity_weight=1.0,
                     price_usd_per_h=0.3),
        ReplicaState(outstanding_requests=5, outstanding_tokens=500, capacity_weight=1.0,
                     price_usd_per_h=0.3),
    ]


def test_round_robin_cycles_ignoring_state() -> None:
    policy = RoundRobin()
    assert [policy.choose(fleet(), SHORT) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_jsq_picks_fewest_outstanding_requests_ties_to_faster() -> None:
    assert JoinShortestQueue().choose(fleet(), SHORT) == 1
    idle = [ReplicaState(capacity_weight=1.0), ReplicaState(capacity_weight=3.0),
            ReplicaState(capacity_weight=3.0)]
    assert JoinShortestQueue().choose(idle, SHORT) == 1  # faster, then lower index


def test_least_tokens_picks_fewest_outstanding_tokens() -> None:
    # Replica 1 has the shortest queue but by far the most tokens.
    assert LeastOutstandingTokens().choose(fleet(), SHORT) == 2


def test_length_aware_sends_long_prompts_to_the_fast_replica() -> None:
    policy = LengthAwareSplit(threshold_tokens=1024)
    assert policy.choose(fleet(), LONG) == 0
    assert policy.choose(fleet(), SHORT) == 1  # shortest queue among the slow ones
    at_threshold = RouteRequest(prompt_tokens=1024, expected_output_tokens=1)
    assert policy.choose(fleet(), at_threshold) == 0
    same_speed = [ReplicaState(outstanding_requests=4), ReplicaState(outstanding_requests=1)]
    assert policy.choose(same_speed, SHORT) == 1  # no slow group: JSQ over all


def test_cost_spillover_fills_cheapest_then_overflows() -> None:
    policy = CostAwareSpillover(default_max_outstanding=4)
    # Per unit of capacity: replicas 1, 2 cost 0.3, replica 0 costs 0.5. Replica 1 has room.
    assert policy.choose(fleet(), SHORT) == 1
    state = fleet()
    state[1].outstanding_requests = 4  # full: the next cheapest is 2, also full (5 >= 4)
    assert policy.choose(state, SHORT) == 0
    state[0].max_outstanding = 3  # now every replica is at its limit: least over its limit
    # 3/3 = 4/4 = 1.0 (replicas 0 and 1) < 5/4: the tie goes to the cheaper one.
    assert policy.choose(state, SHORT) == 1
    state[1].outstanding_requests = 6  # 1.0 (replica 0) vs 1.5 vs 1.25
    assert policy.choose(state, SHORT) == 0


def test_weighted_random_follows_weights_and_seed() -> None:
    state = [ReplicaState(capacity_weight=3.0), ReplicaState(capacity_weight=1.0)]
    policy = CapacityWeightedRandom(seed=7)
    many = [policy.choose(state, SHORT) for _ in range(4000)]
    assert 0.72 < many.count(0) / len(many) < 0.78
    again = CapacityWeightedRandom(seed=7)
    assert [again.choose(state, SHORT) for _ in range(4000)] == many
    other = CapacityWeightedRandom(seed=8)
    assert [other.choose(state, SHORT) for _ in range(50)] != many[:50]


def test_router_counts_outstanding_work() -> None:
    router = Router(JoinShortestQueue(), [ReplicaState(), ReplicaState()])
    first, second = router.dispatch(SHORT), router.dispatch(LONG)
    assert (first, second) == (0, 1)
    assert router.replicas[1].outstanding_tokens == LONG.tokens
    router.release(0, SHORT)
    assert router.dispatch(SHORT) == 0
    assert [r.outstanding_requests for r in router.replicas] == [1, 1]


def test_make_policy_by_name_and_errors() -> None:
    assert isinstance(make_policy("jsq"), JoinShortestQueue)
    assert {type(make_policy(p)).__name__ for p in Policy} == {
        "RoundRobin", "CapacityWeightedRandom", "JoinShortestQueue", "LeastOutstandingTokens",
        "LengthAwareSplit", "CostAwareSpillover"}
    with pytest.raises(InputError, match="unknown routing policy 'fastest'"):
        make_policy("fastest")
    with pytest.raises(InputError, match="threshold_tokens"):
        LengthAwareSplit(threshold_tokens=0)
    with pytest.raises(InputError, match="capacity weight"):
        Router(RoundRobin(), [ReplicaState(capacity_weight=0.0)])


def test_class_weighted_split_follows_the_shares() -> None:
    policy = ClassWeightedSplit({"a": [3.0, 1.0, 0.0], "b": [0.0, 0.0, 1.0]})
    states = [ReplicaState() for _ in range(3)]
    picks = [policy.choose(states, RouteRequest(10, 10, "a")) for _ in range(400)]
    assert np.bincount(picks, minlength=3).tolist() == [300, 100, 0]
    assert {policy.choose(states, RouteRequest(10, 10, "b")) for _ in range(10)} == {2}
    # unknown class: the summed shares (3:1:1)
    picks = [policy.choose(states, RouteRequest(10, 10)) for _ in range(500)]
    assert np.bincount(picks, minlength=3).tolist() == [300, 100, 100]
    with pytest.raises(InputError, match="one share per replica"):
        ClassWeightedSplit({"a": [1.0], "b": [1.0, 2.0]})
