"""Routing policies (decide layer): which replica of a fleet serves the next request.

One interface, used by the fleet simulator (:mod:`hgresearch.sim.fleet`) and by the live
multi-endpoint benchmark (``hgresearch bench --base-url A --base-url B``): a policy sees a
snapshot of every replica (:class:`ReplicaState`: outstanding requests, outstanding tokens,
capacity weight, price) and the request (:class:`RouteRequest`: prompt tokens, expected output
tokens) and returns a replica index. :class:`Router` keeps the snapshot up to date (dispatch
at send, release at completion) so both callers count outstanding work the same way.

This module imports neither the benchmark client nor the NVML sampler (the layering test
checks it): it is pure bookkeeping, cheap enough for the client's send path.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from hgresearch.errors import InputError


@dataclass(slots=True)
class ReplicaState:
    """What a policy knows about one replica.

    Attributes:
        outstanding_requests: requests dispatched to it and not yet finished.
        outstanding_tokens: prompt + expected output tokens of those requests.
        capacity_weight: relative speed (any positive unit, e.g. decode steps/s or req/s at
            the SLO); larger = faster.
        price_usd_per_h: what the replica costs per hour (every GPU of it).
        max_outstanding: SLO-safe number of outstanding requests (cost-aware spill-over fills a
            replica up to it); None: the policy's default.
    """

    outstanding_requests: int = 0
    outstanding_tokens: int = 0
    capacity_weight: float = 1.0
    price_usd_per_h: float = 0.0
    max_outstanding: int | None = None


@dataclass(frozen=True, slots=True)
class RouteRequest:
    """What a policy knows about the request being routed."""

    prompt_tokens: int
    expected_output_tokens: int
    #: The request's traffic class (e.g. a planner's ``"interactive/short"``); empty when the
    #: sender does not know it (policies then fall back to their class-blind choice).
    request_class: str = ""

    @property
    def tokens(self) -> int:
        """Prompt + expected output tokens (what it adds to a replica's outstanding tokens)."""
        return self.prompt_tokens + self.expected_output_tokens


class RoutingPolicy(Protocol):
    """A routing policy: ``choose`` returns the index of the replica that serves ``request``.

    ``replicas`` is a read-only snapshot; a policy may keep its own state (a round-robin
    counter, a seeded random generator) but never changes the snapshot.
    """

    def choose(self, replicas: Sequence[ReplicaState], request: RouteRequest) -> int:
        """Index into ``replicas`` of the replica that serves ``request``."""
        ...


def _fastest_first(replicas: Sequence[ReplicaState], i: int) -> tuple[float, int]:
    """Tie-break key: the faster replica first, then the lower index (deterministic)."""
    return (-replicas[i].capacity_weight, i)


class RoundRobin:
    """Replicas in turn: 0, 1, ..., n-1, 0, ... (ignores state)."""

    def __init__(self) -> None:
        self._next = 0

    def choose(self, replicas: Sequence[ReplicaState], request: RouteRequest) -> int:
        """The next replica in turn."""
        i = self._next % len(replicas)
        self._next = i + 1
        return i


class CapacityWeightedRandom:
    """A replica drawn at random with probability proportional to its capacity weight
    (seeded: the same seed gives the same choices)."""

    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)

    def choose(self, replicas: Sequence[ReplicaState], request: RouteRequest) -> int:
        """A weighted draw."""
        weights = [r.capacity_weight for r in replicas]
        return self._rng.choices(range(len(replicas)), weights=weights)[0]


class JoinShortestQueue:
    """The replica with the fewest outstanding requests (ties: the faster, then the lower
    index)."""

    def choose(self, replicas: Sequence[ReplicaState], request: RouteRequest) -> int:
        """The shortest queue."""
        return min(range(len(replicas)),
                   key=lambda i: (replicas[i].outstanding_requests, *_fastest_first(replicas, i)))


class LeastOutstandingTokens:
    """The replica with the fewest outstanding tokens (prompt + expected output of the requests
    it holds; ties: the faster, then the lower index)."""

    def choose(self, replicas: Sequence[ReplicaState], request: RouteRequest) -> int:
        """The least loaded in tokens."""
        return min(range(len(replicas)),
                   key=lambda i: (replicas[i].outstanding_tokens, *_fastest_first(replicas, i)))


class LengthAwareSplit:
    """Long prompts (``prompt_tokens >= threshold_tokens``) to the fastest replica(s), short
    ones to the others; within a group, the shortest queue. With one replica, or all equally
    fast, it is join-shortest-queue."""

    def __init__(self, threshold_tokens: int = 1024) -> None:
        if isinstance(threshold_tokens, bool) or not isinstance(threshold_tokens, int) \
                or threshold_tokens < 1:
            raise InputError(f"expected an integer >= 1, got {threshold_tokens!r}",
                             field="threshold_tokens")
        self.threshold_tokens = threshold_tokens

    def choose(self, replicas: Sequence[ReplicaState], request: RouteRequest) -> int:
        """Fast group for long prompts, the rest for short ones; shortest queue within."""
        fastest = max(r.capacity_weight for r in replicas)
        fast = [i for i, r in enumerate(replicas) if r.capacity_weight == fastest]
        slow = [i for i, r in enumerate(replicas) if r.capacity_weight != fastest]
        group = fast if request.prompt_tokens >= self.threshold_tokens or not slow else slow
        return min(group, key=lambda i: (replicas[i].outstanding_requests,
                                         *_fastest_first(replicas, i)))


class CostAwareSpillover:
    """Fill the cheapest replicas first, each up to its SLO-safe load, overflow to the next.

    Replicas are ordered by price per unit of capacity (``price_usd_per_h / capacity_weight``;
    ties: the faster, then the lower index). A request goes to the first replica whose
    outstanding requests are below its limit (``max_outstanding`` of its state, else
    ``default_max_outstanding``). When every replica is at its limit, it goes to the replica
    with the lowest outstanding/limit ratio (the least over its safe load).
    """

    def __init__(self, default_max_outstanding: int = 16) -> None:
        if isinstance(default_max_outstanding, bool) \
                or not isinstance(default_max_outstanding, int) or default_max_outstanding < 1:
            raise InputError(f"expected an integer >= 1, got {default_max_outstanding!r}",
                             field="max_outstanding")
        self.default_max_outstanding = default_max_outstanding

    def _limit(self, replica: ReplicaState) -> int:
        return replica.max_outstanding or self.default_max_outstanding

    def choose(self, replicas: Sequence[ReplicaState], request: RouteRequest) -> int:
        """The cheapest replica with room; else the least over its limit."""
        order = sorted(range(len(replicas)), key=lambda i: (
            replicas[i].price_usd_per_h / replicas[i].capacity_weight,
            *_fastest_first(replicas, i)))
        for i in order:
            if replicas[i].outstanding_requests < self._limit(replicas[i]):
                return i
        return min(order, key=lambda i: replicas[i].outstanding_requests
                   / self._limit(replicas[i]))


class ClassWeightedSplit:
    """Route each traffic class over the replicas in fixed shares (a planner's routing,
    :mod:`hgresearch.plan`): class ``c`` goes to replica ``i`` with share
    ``shares[c][i]``.

    Deterministic smooth weighted round-robin per class (nginx's: each replica's credit grows by
    its share, the replica with the most credit is chosen and pays the total), so over any
    window the counts follow the shares within one request, with no random draws. A request
    whose class is unknown (empty or not in ``shares``) uses ``default_shares`` (e.g. the
    plan's overall split; the live benchmark does not know classes), or, when none is given,
    the shares summed over every class.
    """

    def __init__(self, shares: Mapping[str, Sequence[float]],
                 default_shares: Sequence[float] | None = None) -> None:
        if not shares:
            raise InputError("expected the shares of at least one class", field="shares")
        sizes = {len(v) for v in shares.values()}
        if default_shares is not None:
            sizes.add(len(default_shares))
        if len(sizes) != 1:
            raise InputError("every class needs one share per replica", field="shares")
        for name, values in [*shares.items(), ("default", default_shares or [1.0])]:
            if any(not v >= 0 for v in values) or not sum(values) > 0:
                raise InputError(f"class {name!r}: shares must be >= 0 and not all 0",
                                 field="shares")
        self.shares = {name: [float(v) for v in values] for name, values in shares.items()}
        n = sizes.pop()
        self.default_shares = ([float(v) for v in default_shares] if default_shares is not None
                               else [sum(v[i] for v in self.shares.values()) for i in range(n)])
        self._credit: dict[str, list[float]] = {}

    def choose(self, replicas: Sequence[ReplicaState], request: RouteRequest) -> int:
        """The replica with the most accumulated credit in the request's class."""
        key = request.request_class if request.request_class in self.shares else ""
        weights = self.shares[key] if key else self.default_shares
        if len(weights) != len(replicas):
            raise InputError(f"the routing shares name {len(weights)} replicas, the fleet has "
                             f"{len(replicas)}", field="shares")
        credit = self._credit.setdefault(key, [0.0] * len(weights))
        for i, w in enumerate(weights):
            credit[i] += w
        best = max(range(len(weights)), key=lambda i: (credit[i], -i))
        credit[best] -= sum(weights)
        return best


class Policy(StrEnum):
    """Routing policies by name (``--policy``)."""

    ROUND_ROBIN = "round-robin"
    WEIGHTED_RANDOM = "weighted-random"
    JSQ = "jsq"
    LEAST_TOKENS = "least-tokens"
    LENGTH_AWARE = "length-aware"
    COST_SPILLOVER = "cost-spillover"


def make_policy(name: str | Policy, *, seed: int = 0, threshold_tokens: int = 1024,
                max_outstanding: int = 16) -> RoutingPolicy:
    """A fresh policy object by name (each run needs its own: policies keep state).

    ``seed`` is used by ``weighted-random``, ``threshold_tokens`` by ``length-aware``,
    ``max_outstanding`` (the default SLO-safe limit) by ``cost-spillover``.
    """
    try:
        policy = Policy(name)
    except ValueError:
        raise InputError(f"unknown routing policy {name!r}; expected one of "
                         f"{', '.join(p.value for p in Policy)}", field="policy") from None
    builders: dict[Policy, Callable[[], RoutingPolicy]] = {
        Policy.ROUND_ROBIN: RoundRobin,
        Policy.WEIGHTED_RANDOM: lambda: CapacityWeightedRandom(seed),
        Policy.JSQ: JoinShortestQueue,
        Policy.LEAST_TOKENS: LeastOutstandingTokens,
        Policy.LENGTH_AWARE: lambda: LengthAwareSplit(threshold_tokens),
        Policy.COST_SPILLOVER: lambda: CostAwareSpillover(max_outstanding),
    }
    return builders[policy]()


class Router:
    """A policy plus the replicas' live state: :meth:`dispatch` when a request is sent (the
    chosen replica's outstanding requests and tokens go up), :meth:`release` when it finishes
    (they go down, whether it succeeded or not)."""

    def __init__(self, policy: RoutingPolicy, replicas: Sequence[ReplicaState]) -> None:
        if not replicas:
            raise InputError("a fleet needs at least one replica", field="replicas")
        for i, r in enumerate(replicas):
            if not r.capacity_weight > 0:
                raise InputError(f"replica {i}: capacity weight must be > 0, got "
                                 f"{r.capacity_weight!r}", field="capacity_weight")
        self.policy = policy
        self.replicas = list(replicas)

    def dispatch(self, request: RouteRequest) -> int:
        """Choose the replica of ``request`` and count it there; returns its index."""
        i = self.policy.choose(self.replicas, request)
        state = self.replicas[i]
        state.outstanding_requests += 1
        state.outstanding_tokens += request.tokens
        return i

    def release(self, index: int, request: RouteRequest) -> None:
        """``request``, dispatched to replica ``index``, has finished."""
        state = self.replicas[index]
        state.outstanding_requests -= 1
        state.outstanding_tokens -= request.tokens
