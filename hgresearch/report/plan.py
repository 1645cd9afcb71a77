"""Tables of a plan, its simulated check and its baselines (for the command line and the
notebook; written with :func:`hgresearch.report.writers.write_table`)."""

from __future__ import annotations

import math

import pandas as pd

from hgresearch.errors import InputError
from hgresearch.plan.check import CheckResult
from hgresearch.plan.fleet_plan import Plan


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


def comparison_table(plan: Plan, baselines: dict[str, Plan | InputError]) -> pd.DataFrame:
    """The plan against its baselines; ``cost_vs_plan``/``carbon_vs_plan``: the baseline over
    the plan (1.25 = the baseline costs 25% more)."""
    rows = [summary_row("plan", plan)]
    rows += [summary_row(name, other) for name, other in baselines.items()]
    table = pd.DataFrame(rows)
    table["cost_vs_plan"] = table.cost_usd_per_1m_tok / rows[0]["cost_usd_per_1m_tok"]
    table["carbon_vs_plan"] = table.g_co2_per_1m_tok / rows[0]["g_co2_per_1m_tok"]
    return table


def check_table(check: CheckResult) -> pd.DataFrame:
    """Achieved percentiles per SLO class (mean over seeds, with their range) and the verdict."""
    columns = ["slo_class", "slo", "requests"]
    columns += [c for c in check.by_class.columns if c.startswith("p") and c.endswith(
        ("_ms", "_low", "_high"))]
    return check.by_class[[*columns, "passed"]]
