"""The studies of notebook 08 (hgresearch.plan.hybrid_study) and their figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
from plan_fixtures import (
    CANDIDATES,
    LENGTHS,
    MODEL,
    SLOS,
    random_rates,
    rate_table,
)

from hgresearch.plan import (
    Demand,
    PlanProblem,
    solve,
)


def test_fleet_figures_have_no_layout_problems() -> None:
    """The notebook's three figures on a small constructed study: readable (no overlapping
    labels, no legend over data, every numeric axis labelled)."""
    from hgresearch.plan.hybrid_study import day_table
    from hgresearch.report.figures import fleet as fleet_figures
    from hgresearch.report.figures.layout import layout_problems

    rows = [{"scenario": s, "rate_rps": r, "plan": p, "cost_usd_per_1m_tok": c * 10 / r,
             "g_co2_per_1m_tok": g * 10 / r}
            for s in ("p99 TTFT ≤ 500 ms + batch", "p99 TTFT ≤ 2000 ms + batch")
            for r in (1.0, 5.0, 20.0, 50.0)
            for p, c, g in (("hybrid", 0.1, 5.0), ("H100-PCIe only", 0.3, 2.0),
                            ("RTX-4090 only", 0.12, 8.0))]
    figures = [fleet_figures.cost_carbon_vs_demand(pd.DataFrame(rows), "cost and carbon")]
    front = pd.DataFrame({"g_co2_per_1m_tok": [5.0, 8.0, 17.0],
                          "cost_usd_per_1m_tok": [0.07, 0.05, 0.02]})
    base = pd.DataFrame({"plan": ["H100-PCIe only", "RTX-4090 only"],
                         "g_co2_per_1m_tok": [5.0, 17.0], "cost_usd_per_1m_tok": [0.07, 0.02]})
    figures.append(fleet_figures.pareto(front, base, "front"))
    problem = PlanProblem(MODEL, Demand(tuple(4.0 + h for h in range(24))), LENGTHS, SLOS,
                          CANDIDATES,
                          gpu_caps=(("RTX-4090", tuple(8 if h < 7 else 0 for h in range(24))),))
    plan = solve(problem, rate_table(problem, random_rates(np.random.default_rng(7), problem)))
    figures.append(fleet_figures.day_plan({"cost-optimal": day_table(plan)}, "a day"))
    for fig in figures:
        assert layout_problems(fig) == []


def test_a_plan_that_failed_its_check_is_a_cross_off_its_line():
    """A failed plan is no result: its cost leaves the line (a gap) and is drawn as a cross
    with its own legend entry."""
    import math

    from hgresearch.report.figures import fleet as fleet_figures

    rows = [{"scenario": "p99 TTFT ≤ 500 ms + batch", "rate_rps": r, "plan": "hybrid",
             "cost_usd_per_1m_tok": 1.0 / r, "g_co2_per_1m_tok": 10.0 / r, "passed": r != 5.0}
            for r in (1.0, 5.0, 20.0)]
    figure = fleet_figures.cost_carbon_vs_demand(pd.DataFrame(rows), "cost and carbon")
    cost_axis = figure.axes[0]
    line = next(ln for ln in cost_axis.get_lines() if ln.get_label() == "hybrid")
    assert math.isnan(line.get_ydata()[1]) and not math.isnan(line.get_ydata()[0])
    crosses = [ln for ln in cost_axis.get_lines() if ln.get_label() == fleet_figures.FAILED_LABEL]
    assert len(crosses) == 1 and list(crosses[0].get_xdata()) == [5.0]
    legend = [text.get_text() for text in figure.legends[0].get_texts()]
    assert legend == ["hybrid", fleet_figures.FAILED_LABEL]
