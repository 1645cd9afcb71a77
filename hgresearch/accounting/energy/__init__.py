"""Energy per token of benchmark runs, three ways, one module each.

1. :mod:`~hgresearch.accounting.energy.tdp` — **the TDP model, exactly as the paper** (its
   Table 3): every GPU at its full TDP for the whole run (the paper's 700 W for the H100 PCIe,
   or the datasheet's 350 W), and the unit formulas every energy and carbon figure uses.
2. :mod:`~hgresearch.accounting.energy.measured` — **measured energy** from hgresearch run
   folders with NVML telemetry: counter delta (or power integral) over the steady-state window,
   the idle baseline, a block-bootstrap confidence interval.
3. :mod:`~hgresearch.accounting.energy.power_model` — a **utilisation-based power model** for
   runs without telemetry: ``P = P_idle + (P_max - P_idle) * f(u)``, a low/high bracket.

Token counts are input + output tokens, as in the paper's cost and energy figures. Missing
measurements stay NaN, never zero. The paper's Table 3 and the efficiency-ratio table built from
these estimates are in :mod:`hgresearch.report.paper_tables`.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from hgresearch.accounting.energy.measured import (
    MEASURED_COLUMNS,
    add_measured_energy,
    energy_over_windows,
    idle_power_w,
    measure_run,
    read_request_tokens,
    run_summaries,
    tokens_in_window,
)
from hgresearch.accounting.energy.power_model import (
    LOAD_CURVES,
    PowerModel,
    add_power_model,
    load_fraction,
    modelled_power_w,
    ratio_bracket,
)
from hgresearch.accounting.energy.tdp import (
    PAPER_GRID_G_PER_KWH,
    PAPER_TDP_W,
    TdpAssumption,
    add_tdp_energy,
    configuration_power_w,
    efficiency_ratio,
    energy_per_tok_j,
    g_co2_per_1m_tok,
    kwh_per_1m_tok,
    kwh_per_h,
    tdp_per_gpu_w,
    tokens_per_kwh,
    tokens_per_kwh_of_energy,
)

__all__ = [
    "LOAD_CURVES", "MEASURED_COLUMNS", "PAPER_GRID_G_PER_KWH", "PAPER_TDP_W", "PowerModel",
    "TdpAssumption", "add_measured_energy", "add_power_model", "add_tdp_energy",
    "configuration_power_w", "efficiency_ratio", "energy_over_windows", "energy_per_run",
    "energy_per_tok_j", "g_co2_per_1m_tok", "idle_power_w", "kwh_per_1m_tok", "kwh_per_h",
    "load_fraction", "measure_run", "modelled_power_w", "ratio_bracket", "read_request_tokens",
    "run_summaries", "tdp_per_gpu_w", "tokens_in_window", "tokens_per_kwh",
    "tokens_per_kwh_of_energy",
]


def energy_per_run(runs: pd.DataFrame, tdp: str = "paper",
                   tdp_overrides: dict[str, float] | None = None,
                   grid_g_per_kwh: float = PAPER_GRID_G_PER_KWH,
                   power_model: PowerModel | None = None, **measure_kwargs: Any) -> pd.DataFrame:
    """All three energy estimates for every run: TDP model, power-model bracket, measured."""
    out = add_tdp_energy(runs, tdp, tdp_overrides, grid_g_per_kwh)
    out = add_power_model(out, power_model)
    return add_measured_energy(out, **measure_kwargs)


