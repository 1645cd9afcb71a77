"""Tables of a plan, its simulated check and its baselines (for the command line and the
notebook; written with :func:`hgresearch.report.writers.write_table`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from hgresearch.errors import InputError
from hgresearch.plan.check import CheckResult
from hgresearch.plan.fleet_plan import Plan

if TYPE_CHECKING:
    from hgresearch.sim.intervals import PredictionIntervals

#: A baseline needing this many replicas, and this many times the plan's, is flagged absurd.
ABSURD_REPLICAS, ABSURD_RATIO = 50, 5.0


def fleet_table(plan: Plan, hour: int = 0) -> pd.DataFrame:
    """The plan's fleet in ``hour`` with each configuration's share of every class."""
    fleet = plan.fleet(hour)
    shares = plan.shares(hour)
    for name in shares.index:
        fleet[f"share {name}"] = [float(shares.loc[name, config]) for config in fleet.config]
    return fleet.drop(columns=["gpu_name", "num_gpus"])


def summary_row(name: str, plan: Plan | InputError | None) -> dict[str, object]:
    """One row: the fleet and what it costs and emits (per hour and per 1M tokens); an
    infeasible plan's row carries its reason."""
    if not isinstance(plan, Plan):
        # the reason's first clause: the full message lists every candidate
        reason = plan.reason.split(" (")[0] if plan else ""
        return {"plan": name, "fleet": f"infeasible: {reason}" if plan else "—",
                "gpus": math.nan, "cost_usd_per_h": math.nan, "cost_usd_per_1m_tok": math.nan,
                "g_co2_per_1m_tok": math.nan}
    totals = plan.totals()
    return {"plan": name, "fleet": plan.describe() if plan.hours == 1 else "hourly",
            "gpus": totals["gpus"], "cost_usd_per_h": totals["cost_usd_per_h"],
            "cost_usd_per_1m_tok": totals["cost_usd_per_1m_tok"],
            "g_co2_per_1m_tok": totals["g_co2_per_1m_tok"]}


def absurd_reason(baseline: Plan, plan: Plan) -> str:
    """Why a baseline is absurd (empty when it is not): it needs at least
    :data:`ABSURD_REPLICAS` replicas and :data:`ABSURD_RATIO` × the plan's, because one replica
    serves little of some class — named with its per-replica capacity."""
    replicas, own = int(baseline.replicas.sum()), int(plan.replicas.sum())
    if replicas < ABSURD_REPLICAS or replicas < ABSURD_RATIO * max(own, 1):
        return ""
    used = baseline.traffic_rps.sum(axis=2) > 0  # (K, J) class k routed to configuration j
    caps = np.where(used, baseline.cap_rps, np.inf)
    k, j = np.unravel_index(int(np.argmin(caps)), caps.shape)
    return (f"absurd: {replicas:,} replicas ({replicas / max(own, 1):.0f}x the plan's); one "
            f"{baseline.problem.candidates[j].hardware} serves {baseline.cap_rps[k, j]:.3g} "
            f"req/s of {baseline.classes[k]}")


def comparison_table(plan: Plan, baselines: dict[str, Plan | InputError]) -> pd.DataFrame:
    """The plan against its baselines; ``cost_vs_plan``/``carbon_vs_plan``: the baseline over
    the plan (1.25 = the baseline costs 25% more); ``note``: why a baseline is absurd
    (:func:`absurd_reason`)."""
    rows = [summary_row("plan", plan)]
    rows += [summary_row(name, other) for name, other in baselines.items()]
    notes = [""] + [absurd_reason(other, plan) if isinstance(other, Plan) else ""
                    for other in baselines.values()]
    table = pd.DataFrame(rows)
    table["cost_vs_plan"] = table.cost_usd_per_1m_tok / rows[0]["cost_usd_per_1m_tok"]
    table["carbon_vs_plan"] = table.g_co2_per_1m_tok / rows[0]["g_co2_per_1m_tok"]
    table["note"] = notes
    return table


def check_table(check: CheckResult) -> pd.DataFrame:
    """Achieved percentiles per SLO class (mean over seeds, with their range) and the verdict."""
    columns = ["slo_class", "slo", "requests"]
    columns += [c for c in check.by_class.columns if c.startswith("p") and c.endswith(
        ("_ms", "_low", "_high"))]
    return check.by_class[[*columns, "passed"]]


def robust_check_table(check: CheckResult, intervals: PredictionIntervals | None = None,
                       confidence: float = 0.9) -> pd.DataFrame:
    """Per SLO class: the SLO, the **nominal** check's achieved TTFT percentile (worst seed) and
    verdict, its **interval** (the simulator's TTFT prediction interval at ``confidence``
    around it: :meth:`~hgresearch.sim.intervals.PredictionIntervals.interval` of
    ``p90_ttft_ms``, the validated percentile, applied to the class's percentile), and the
    **stress** check's achieved percentile and verdict (every step slower by the slow end);
    ``passed``: both checks held."""
    rows = []
    stress = check.stress.by_class.set_index("slo_class") if check.stress is not None else None
    for row in check.by_class.itertuples():
        ttft = next((c for c in check.by_class.columns
                     if c.endswith("_ttft_ms_high")), None)
        tpot = next((c for c in check.by_class.columns
                     if c.endswith("_tpot_ms_high")), None)
        out: dict[str, object] = {"slo_class": row.slo_class, "slo": row.slo,
                                  "requests": row.requests}
        value = float(getattr(row, ttft)) if ttft else math.nan
        if ttft and not math.isnan(float(row.ttft_limit_ms or math.nan)):
            out[f"nominal_{ttft.removesuffix('_high')}"] = value
            if intervals is not None:
                low, high = intervals.interval("p90_ttft_ms", value, confidence)
                out["interval_ms"] = f"{low:.4g}-{high:.4g}"
            if stress is not None:
                out[f"stress_{ttft.removesuffix('_high')}"] = float(
                    stress.loc[row.slo_class, ttft])
        if tpot and not math.isnan(float(row.tpot_limit_ms or math.nan)):
            out[f"nominal_{tpot.removesuffix('_high')}"] = float(getattr(row, tpot))
            if stress is not None:
                out[f"stress_{tpot.removesuffix('_high')}"] = float(
                    stress.loc[row.slo_class, tpot])
        out["nominal_passed"] = bool(row.passed)
        if stress is not None:
            out["stress_passed"] = bool(stress.loc[row.slo_class, "passed"])
        out["passed"] = bool(row.passed) and (stress is None
                                              or bool(stress.loc[row.slo_class, "passed"]))
        rows.append(out)
    return pd.DataFrame(rows)
