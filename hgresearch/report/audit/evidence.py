"""Evidence from the package's models for the claims the measured runs cannot test (C9:
embodied carbon of reused consumer GPUs; C10: hybrid routing), read from the tables notebooks
05 (the carbon break-even) and 08 (the planner's hybrid advantage) wrote. Assumptions and
simulation, not measurements: shown beside a claim's verdict, never part of it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from hgresearch.plan.hybrid_study import summarize_hybrid_advantage
from hgresearch.report.energy import BREAK_EVEN_TABLE
from hgresearch.report.fleet import HYBRID_ADVANTAGE_TABLE


def _break_even_evidence(tables_dir: Path) -> str:
    path = tables_dir / f"{BREAK_EVEN_TABLE}.csv"
    if not path.is_file():
        return f"not computed: {path.name} is missing (notebook 05_energy_carbon writes it)"
    table = pd.read_csv(path)
    idle = table[table.scenario == "idle_consumer"].dropna(subset=["break_even_g_per_kwh"])
    new = table[table.scenario == "new"]
    if idle.empty:
        return "carbon model: reused consumer cards never have lower total carbon than the H100"
    paper = idle[(idle.energy_estimate == "TDP model") & (idle.embodied_bound == "central")]
    central = (f"{paper.break_even_g_per_kwh.iloc[0]:.0f} g CO2/kWh (paper's TDP model, "
               "central embodied estimate); " if len(paper) else "")
    new_verdict = ("bought new, the consumer cards are never lower"
                   if new.break_even_g_per_kwh.isna().all() and
                   (new.lower_below == new.a).all() else
                   "bought new, the ranking depends on the grid")
    return (f"carbon model (assumed embodied carbon and lifetimes, not measured): reusing idle "
            f"{idle.b.iloc[0]} instead of a new {idle.a.iloc[0]} gives lower total carbon only "
            f"on grids below {central}{idle.break_even_g_per_kwh.min():.0f}–"
            f"{idle.break_even_g_per_kwh.max():.0f} g CO2/kWh over every energy estimate and "
            f"embodied bound; {new_verdict} ({path.name})")


def _hybrid_evidence(tables_dir: Path) -> str:
    path = tables_dir / f"{HYBRID_ADVANTAGE_TABLE}.csv"
    if not path.is_file():
        return f"not computed: {path.name} is missing (notebook 08_fleet writes it)"
    advantage = pd.read_csv(path)
    gain = summarize_hybrid_advantage(advantage)
    how = ("planner with simulated capacities (calibrated on the reference runs; simulated, not "
           "measured), every fleet sized at the slow end of the simulator's step-time interval "
           "with headroom and checked for ten minutes of traffic, nominal and stressed")
    scenarios = "; ".join(dict.fromkeys(advantage.scenario))
    if gain.cheaper_than_both == 0:
        return (f"{how}: the cheapest hybrid fleet that holds its SLOs is cheaper than both "
                f"single-hardware fleets at none of the {gain.points} demand points "
                f"({scenarios}; {path.name})")
    versus_h100 = (f", and {gain.saving_vs_h100_min:.0%}–{gain.saving_vs_h100_max:.0%} cheaper "
                   f"than the H100-only fleet" if pd.notna(gain.saving_vs_h100_min) else "")
    return (f"{how}: the cheapest hybrid fleet that holds its SLOs is cheaper than both "
            f"single-hardware fleets at {gain.cheaper_than_both} of {gain.points} demand points"
            f", by up to {gain.max_saving:.1%}{versus_h100} ({scenarios}; {path.name})")


#: Evidence from the package's models (not a verdict: the runs cannot test these claims),
#: read from the tables other notebooks wrote.
MODEL_EVIDENCE: dict[str, Callable[[Path], str]] = {
    "C9": _break_even_evidence,
    "C10": _hybrid_evidence,
}


def model_evidence(tables_dir: str | Path) -> dict[str, str]:
    """For the claims the measured runs cannot test (:data:`MODEL_EVIDENCE`), what the
    package's models say, read from ``tables_dir`` (the carbon break-even table of notebook 05
    and the hybrid-advantage table of notebook 08); a missing table is named in the text."""
    return {claim: evidence(Path(tables_dir)) for claim, evidence in MODEL_EVIDENCE.items()}

