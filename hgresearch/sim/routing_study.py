"""Studies built on the fleet simulator: the routing comparison for the paper's hybrid question.

*If I put one H100 next to N boxes of two RTX 4090s behind a router, which routing policy keeps
the tail latency under my SLO, at what load, and what does a token cost?* —
:func:`routing_comparison` simulates DeepSeek-R1-Distill-Qwen-14B on 1× H100-PCIe plus
N × (2× RTX-4090) with each replica's calibration (:func:`hgresearch.sim.fleet.sim_replicas`),
under every routing policy (:mod:`hgresearch.traffic.routing`), at a grid of offered rates and over
a
few seeds (arrivals and lengths); :func:`slo_verdicts` reads off, per fleet, policy and p99 TTFT
limit, the highest rate of the grid up to which the limit holds in every seed, and the cost
per 1M tokens there (:mod:`hgresearch.accounting.costs`, the ``alternative`` price scenario).

The workload is the paper's protocol (:func:`hgresearch.sim.replay.reference_workload`):
``num_prompts`` requests with vLLM 0.8.5's seeded Poisson arrivals and ShareGPT-like lengths
whose means are the 14B runs' measured means; seed ``k`` uses arrival seed 42 + k (seed 0 is
the paper's sequence) and length seed ``k``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hgresearch.cache import source_digest
from hgresearch.errors import InputError
from hgresearch.sim.calibrate import Calibration
from hgresearch.sim.fleet import CALIBRATED, fleet_summary, sim_replicas, simulate_fleet
from hgresearch.sim.fleet_spec import DEFAULT_PRICE_SCENARIO, Fleet, parse_fleet
from hgresearch.sim.replay import reference_workload
from hgresearch.sim.run import measured_mean_lengths
from hgresearch.sim.slo_rate import burst_throughput_rps
from hgresearch.traffic.arrivals import PAPER_SEED
from hgresearch.traffic.routing import Policy, make_policy

#: The paper's hybrid question: one H100 plus N pairs of RTX 4090s, serving the 14B model.
HYBRID_MODEL = "DeepSeek-R1-Distill-Qwen-14B"
FAST_CONFIG = f"{HYBRID_MODEL} on 1x H100-PCIe"
SLOW_CONFIG = f"{HYBRID_MODEL} on 2x RTX-4090"
#: Default grid: pairs of RTX 4090s beside the H100, offered rates (req/s), seeds.
SLOW_COUNTS = (1, 2, 3, 4)
RATES_QPS = (4.0, 8.0, 12.0, 16.0, 24.0, 32.0, 40.0)
SEEDS = (0, 1, 2)
#: p99 TTFT limits (ms) the comparison reads off.
P99_TTFT_LIMITS_MS = (500.0, 2000.0)
#: Requests per simulated run: the paper's protocol (the calibration's conditions).
NUM_PROMPTS = 200
#: length-aware: prompts of at least this many tokens go to the H100 (the ShareGPT-like mix's
#: prompts average ~200 tokens; ~1 in 8 is this long).
THRESHOLD_TOKENS = 512
#: cost-spillover: outstanding requests per replica before it overflows to the next.
MAX_OUTSTANDING = 16
#: ``policy`` of the baseline rows: the H100 alone (one replica: no routing decision).
ALONE = "H100 alone"
#: Sources whose change changes the comparison beyond the calibration (which its cache key
#: already covers through the coefficients): the fleet loop, routing, costs, metrics.
_STUDY_SOURCES = ("sim/fleet.py", "sim/fleet_spec.py", "sim/routing_study.py", "sim/run.py",
                  "sim/simulator.py", "sim/scheduler.py", "sim/step_time.py", "traffic/routing.py",
                  "accounting/costs.py", "data/summary.py", "accounting/energy",
                  "traffic/lengths.py", "traffic/arrivals.py")


def fleet_label(num_slow: int) -> str:
    """``1x H100 + Nx (2x RTX-4090)``, or ``1x H100 alone`` for N = 0."""
    return "1x H100 alone" if num_slow == 0 else f"1x H100 + {num_slow}x (2x RTX-4090)"


def hybrid_fleet(num_slow: int, price_scenario: str = DEFAULT_PRICE_SCENARIO) -> Fleet:
    """1× H100-PCIe plus ``num_slow`` × (2× RTX-4090), prices from ``price_scenario``."""
    if isinstance(num_slow, bool) or not isinstance(num_slow, int) or num_slow < 0:
        raise InputError(f"expected a number of RTX-4090 pairs >= 0, got {num_slow!r}",
                         field="slow_counts")
    replicas: list[dict[str, Any]] = [{"config": FAST_CONFIG}]
    if num_slow:
        replicas.append({"config": SLOW_CONFIG, "count": num_slow})
    return parse_fleet({"name": fleet_label(num_slow),
                        "price_scenario": price_scenario, "replicas": replicas})


def routing_comparison(fits: Mapping[str, Calibration], points: pd.DataFrame, *,
                       slow_counts: Sequence[int] = SLOW_COUNTS,
                       rates_qps: Sequence[float] = RATES_QPS,
                       policies: Sequence[str | Policy] = tuple(Policy),
                       seeds: Sequence[int] = SEEDS, num_prompts: int = NUM_PROMPTS,
                       threshold_tokens: int = THRESHOLD_TOKENS,
                       max_outstanding: int = MAX_OUTSTANDING,
                       price_scenario: str = DEFAULT_PRICE_SCENARIO,
                       baseline: bool = True) -> pd.DataFrame:
    """Simulate every fleet × rate × policy × seed; one row each (tidy). With ``baseline``,
    also the H100 alone (``num_slow = 0``, ``policy =`` :data:`ALONE`), the fleet the pairs
    are added to.

    Args:
        fits: calibrations by configuration label; must hold :data:`FAST_CONFIG` and
            :data:`SLOW_CONFIG` (:func:`hgresearch.sim.run.calibrations`).
        points: measured runs of the model (runs-table rows); their mean prompt and output
            lengths set the workload's.

    Columns: ``num_slow`` (pairs of RTX 4090s), ``fleet``, ``gpus``, ``price_usd_per_h`` (the
    fleet's), ``rate_qps``, ``policy``, ``seed``; of the whole fleet ``request_throughput_rps``,
    ``p50/p90/p99_ttft_ms``, ``mean_tpot_ms``, ``cost_usd_per_1m_tok`` (every replica billed
    for the whole run, :func:`~hgresearch.sim.fleet.fleet_summary`); ``h100_share`` (requests
    the H100 served); ``max_load``: the most loaded replica's offered requests per second
    (rate × its share) over its sustained throughput alone
    (:func:`hgresearch.sim.slo_rate.burst_throughput_rps`; above 1 the replica is overloaded: its
    queue grows for as long as the load lasts, which a 200-request run does not show).
    """
    missing = [label for label in (FAST_CONFIG, SLOW_CONFIG) if label not in fits]
    if missing:
        raise InputError(f"no calibration for {', '.join(missing)}", field="fits")
    if num_prompts < 1:
        raise InputError(f"expected at least one request, got {num_prompts}",
                         field="num_prompts")
    mean_prompt_tokens, mean_output_tokens = measured_mean_lengths(points)
    # Each configuration's sustained throughput alone (the SLO table's definition): a replica
    # sent more than that per second is overloaded, whatever a 200-request run shows.
    throughputs = {label: burst_throughput_rps(fits[label], mean_prompt_tokens,
                                             mean_output_tokens)
                   for label in (FAST_CONFIG, SLOW_CONFIG)}
    rows = []
    # The baseline first: with one replica every policy routes alike, so it runs once.
    fleets = [(0, [ALONE])] if baseline else []
    fleets += [(n, list(policies)) for n in slow_counts if n > 0]
    for num_slow, fleet_policies in fleets:
        fleet = hybrid_fleet(num_slow, price_scenario)
        replicas = sim_replicas(fleet, fits=fits)
        if any(r.step_time_source != CALIBRATED for r in replicas):
            raise InputError(f"{fleet.replicas[0].name}: every replica must be calibrated",
                             field="fits")
        price_usd_per_h = sum(r.price_usd_per_h for r in replicas)
        alone_rps = np.array([throughputs[FAST_CONFIG]] + [throughputs[SLOW_CONFIG]] * num_slow)
        for rate in rates_qps:
            for seed in seeds:
                workload = reference_workload(float(rate), num_prompts, mean_prompt_tokens,
                                              mean_output_tokens, seed=PAPER_SEED + seed,
                                              length_seed=seed)
                for policy in fleet_policies:
                    router_policy = make_policy(Policy.JSQ if policy == ALONE else policy,
                                                seed=seed,
                                                threshold_tokens=threshold_tokens,
                                                max_outstanding=max_outstanding)
                    frame = simulate_fleet(replicas, router_policy, workload.arrivals_s,
                                           workload.prompt_tokens, workload.output_tokens)
                    overall = fleet_summary(frame, replicas).iloc[-1]
                    rows.append({
                        "num_slow": num_slow, "fleet": fleet_label(num_slow),
                        "gpus": int(overall.gpus), "price_usd_per_h": price_usd_per_h,
                        "rate_qps": float(rate), "seed": seed,
                        "policy": policy if policy == ALONE else Policy(policy).value,
                        "request_throughput_rps": float(overall.request_throughput),
                        "p50_ttft_ms": float(overall.p50_ttft_ms),
                        "p90_ttft_ms": float(overall.p90_ttft_ms),
                        "p99_ttft_ms": float(overall.p99_ttft_ms),
                        "mean_tpot_ms": float(overall.mean_tpot_ms),
                        "cost_usd_per_1m_tok": float(overall.cost_usd_per_1m_tok),
                        "h100_share": float((frame.replica == 0).mean()),
                        "max_load": float(np.max(
                            float(rate) * np.bincount(frame.replica, minlength=len(replicas))
                            / len(frame) / alone_rps)),
                    })
    return pd.DataFrame(rows)


def seed_interval(table: pd.DataFrame) -> pd.DataFrame:
    """Per fleet × rate × policy: the median over seeds of each metric, the lowest and
    highest p99 TTFT over seeds (``p99_ttft_low_ms``, ``p99_ttft_high_ms``) and the highest
    ``max_load`` (``max_load_high``)."""
    keys = ["num_slow", "fleet", "gpus", "price_usd_per_h", "rate_qps", "policy"]
    metrics = ["request_throughput_rps", "p50_ttft_ms", "p90_ttft_ms", "p99_ttft_ms",
               "mean_tpot_ms", "cost_usd_per_1m_tok", "h100_share", "max_load"]
    grouped = table.groupby(keys, sort=False)
    out = grouped[metrics].median().reset_index()
    out.insert(out.columns.get_loc("p99_ttft_ms") + 1, "p99_ttft_low_ms",
               grouped.p99_ttft_ms.min().to_numpy())
    out.insert(out.columns.get_loc("p99_ttft_low_ms") + 1, "p99_ttft_high_ms",
               grouped.p99_ttft_ms.max().to_numpy())
    out["max_load_high"] = grouped.max_load.max().to_numpy()
    out.insert(len(keys), "seeds", grouped.size().to_numpy())
    return out


def slo_verdicts(table: pd.DataFrame,
                 limits_ms: Sequence[float] = P99_TTFT_LIMITS_MS) -> pd.DataFrame:
    """Per fleet × policy × p99 TTFT limit: ``max_rate_qps``, the highest rate of the grid up
    to which (at it and at every lower rate) the median p99 TTFT over seeds stays within the
    limit and no replica is sent more than its sustained throughput in any seed
    (``max_load_high`` ≤ 1); 0 when the lowest rate fails. At that rate: the median p99 TTFT
    and its range over seeds, the achieved throughput and the cost per 1M tokens (NaN when 0).
    ``table``: :func:`routing_comparison`'s rows (or :func:`seed_interval`'s)."""
    interval = table if "p99_ttft_high_ms" in table else seed_interval(table)
    columns = ["p99_ttft_ms", "p99_ttft_low_ms", "p99_ttft_high_ms", "max_load_high",
               "request_throughput_rps", "cost_usd_per_1m_tok"]
    rows = []
    for (num_slow, fleet, policy), group in interval.groupby(["num_slow", "fleet", "policy"],
                                                             sort=False):
        group = group.sort_values("rate_qps")
        for limit in limits_ms:
            held = ((group.p99_ttft_ms <= limit) & (group.max_load_high <= 1.0)).to_numpy()
            # Up to the first rate that fails: a fleet that passes again at a higher rate
            # (seed noise near the limit) does not hold the SLO up to there.
            n_ok = len(held) if held.all() else int(np.argmin(held))
            best = group.iloc[n_ok - 1] if n_ok else None
            rows.append({
                "num_slow": num_slow, "fleet": fleet, "policy": policy,
                "p99_ttft_limit_ms": float(limit),
                "max_rate_qps": float(best.rate_qps) if best is not None else 0.0,
                **{c: float(best[c]) if best is not None else math.nan for c in columns},
            })
    return pd.DataFrame(rows)


def best_policies(verdicts: pd.DataFrame) -> pd.DataFrame:
    """Per fleet × limit: the policy (policies, joined by ``/``) with the highest
    ``max_rate_qps``, that rate and the lowest cost per 1M tokens among them."""
    rows = []
    for (num_slow, fleet, limit), group in verdicts.groupby(
            ["num_slow", "fleet", "p99_ttft_limit_ms"], sort=False):
        top = group[group.max_rate_qps == group.max_rate_qps.max()]
        rows.append({"num_slow": num_slow, "fleet": fleet, "p99_ttft_limit_ms": limit,
                     "max_rate_qps": float(top.max_rate_qps.iloc[0]),
                     "policies": "/".join(top.policy),
                     "cost_usd_per_1m_tok": float(top.cost_usd_per_1m_tok.min())})
    return pd.DataFrame(rows)


def study_digest() -> str:
    """SHA-256 of :data:`_STUDY_SOURCES` (part of the comparison's cache key)."""
    return source_digest(*_STUDY_SOURCES)


def cached_routing_comparison(fits: Mapping[str, Calibration], points: pd.DataFrame,
                              build_dir: str | Path | None = None,
                              **params: Any) -> pd.DataFrame:
    """:func:`routing_comparison`, cached under ``<build_dir>/cache/models`` by the two
    calibrations (coefficients, KV blocks), the measured points, ``params`` and the code."""
    from hgresearch.cache import cached
    from hgresearch.sim.validation import code_digest, coefficient_table

    missing = [label for label in (FAST_CONFIG, SLOW_CONFIG) if label not in fits]
    if missing:
        raise InputError(f"no calibration for {', '.join(missing)}", field="fits")
    used = coefficient_table({label: fits[label] for label in (FAST_CONFIG, SLOW_CONFIG)})
    key = {"sim_code": code_digest(), "study_code": study_digest(),
           **{k: list(v) if isinstance(v, (tuple, list)) else v for k, v in params.items()}}
    return cached(build_dir, "sim_routing", [used, points], key,
                  lambda: routing_comparison(fits, points, **params))


@dataclass
class RoutingComparison:
    """The routing comparison: every simulated run (:func:`routing_comparison`), the median
    and range over seeds (:func:`seed_interval`), the verdicts per limit
    (:func:`slo_verdicts`) and the best policies per fleet (:func:`best_policies`)."""

    runs: pd.DataFrame
    interval: pd.DataFrame
    verdicts: pd.DataFrame
    best: pd.DataFrame


def routing_report(runs: pd.DataFrame, fits: Mapping[str, Calibration],
                   build_dir: str | Path | None = None,
                   limits_ms: Sequence[float] = P99_TTFT_LIMITS_MS,
                   **params: Any) -> RoutingComparison:
    """The comparison for notebook 07: the 14B model's measured runs of ``runs`` (the H100
    configuration's points) set the length mix; :func:`cached_routing_comparison` with
    ``params`` (:func:`routing_comparison`'s keywords)."""
    from hgresearch.sim.validation import configuration_points

    points = dict(configuration_points(runs)).get(FAST_CONFIG)
    if points is None:
        raise InputError(f"no measured runs of {FAST_CONFIG}", field="runs")
    table = cached_routing_comparison(fits, points, build_dir, **params)
    interval = seed_interval(table)
    verdicts = slo_verdicts(interval, limits_ms)
    return RoutingComparison(runs=table, interval=interval, verdicts=verdicts,
                             best=best_policies(verdicts))
