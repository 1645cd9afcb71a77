"""Energy and carbon per token for the paper (notebook ``05_energy_carbon``): the paper's
Table 3 and its 3.1x ratio under every energy estimate, the estimates for every reference run,
measured energy of run folders with telemetry, operational + embodied carbon per grid region and
the break-even grid intensity.

:func:`analyse_energy` computes everything (:class:`EnergyReport`); :func:`energy_tables` with
:data:`ENERGY_TABLES` is what :func:`hgresearch.report.writers.write_tables` writes (captions
filled from :func:`energy_context`); :func:`energy_headline` returns the numbers ``hgresearch
reproduce`` prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hgresearch.accounting import carbon
from hgresearch.accounting.energy import PAPER_GRID_G_PER_KWH, energy_per_run, run_summaries
from hgresearch.data.catalogs import grid_catalog
from hgresearch.data.ingest import read_runs, select_repeats
from hgresearch.identity import hardware_label
from hgresearch.report.paper_tables import (
    pick_configurations,
    ratio_estimates,
    table3,
    table3_repeat_note,
)
from hgresearch.report.writers import TableSpec

#: The break-even robustness table's file stem (the audit reads it: claim C9's evidence).
BREAK_EVEN_TABLE = "carbon_break_even"
#: Energy per token behind the break-even's robustness table: label -> J-per-token column.
BREAK_EVEN_ESTIMATES = {"TDP model": "tdp_energy_per_tok_j",
                        "power model low": "model_energy_per_tok_low_j",
                        "power model central": "model_energy_per_tok_central_j",
                        "power model high": "model_energy_per_tok_high_j"}
#: Grid intensities of the break-even figure (g CO2 per kWh).
BREAK_EVEN_INTENSITIES = np.linspace(0, 800, 161)
#: Columns of the measured-energy table.
MEASURED_TABLE_COLUMNS = (
    "run_id", "hardware", "request_rate_qps", "measured_energy_source", "measured_window_s",
    "measured_window_tok", "measured_mean_power_w", "measured_idle_power_w",
    "measured_energy_per_tok_j", "measured_energy_per_tok_ci_low_j",
    "measured_energy_per_tok_ci_high_j", "measured_dynamic_energy_per_tok_j",
    "measured_to_tdp_ratio", "tdp_energy_per_tok_j", "model_energy_per_tok_low_j",
    "model_energy_per_tok_high_j")


@dataclass
class EnergyReport:
    """Everything notebook 05 shows. ``per_run``: every run with all three estimates;
    ``per_point``: one run per point (the repeat policy); ``chosen``: the compared
    configurations' rows of ``per_point`` (``configurations``: GPU, GPU count, QPS);
    ``measured``: run folders with telemetry (None without any); ``settings``: the other
    parameters, for the captions and the headline."""

    per_run: pd.DataFrame
    per_point: pd.DataFrame
    table3: pd.DataFrame
    table3_note: str
    table3_datasheet: pd.DataFrame
    estimates: pd.DataFrame
    measured: pd.DataFrame | None
    chosen: pd.DataFrame
    carbon: pd.DataFrame
    lowest: pd.DataFrame
    crossings: pd.DataFrame
    robustness: pd.DataFrame
    totals: pd.DataFrame
    grid: pd.DataFrame
    configurations: list[tuple[str, int, float]] = field(default_factory=list)
    settings: dict[str, object] = field(default_factory=dict)


def analyse_energy(all_runs: pd.DataFrame, *, model: str,
                   configurations: Iterable[Sequence[Any]], tdp: str = "paper",
                   grid_g_per_kwh: float = PAPER_GRID_G_PER_KWH,
                   grid_regions: Iterable[str] = ("EU-27",),
                   lifetime_years: float = 4.0, utilisation: float = 0.5,
                   carbon_energy_column: str = "tdp_energy_per_tok_j",
                   repeat_policy: str = "first", run_folders: Iterable[str | Path] = (),
                   seed: int = 0) -> EnergyReport:
    """Table 3 (``configurations``: [GPU, GPU count, QPS], first over second) under the ``tdp``
    assumption and the datasheet TDP, the ratio under every estimate, every run's estimates,
    measured energy of ``run_folders`` (hgresearch run folders with telemetry), and carbon per
    region of ``grid_regions`` with its break-even grid intensity. ``all_runs``: every run of the
    runs table (repeats included); ``seed``: the bootstrap intervals' seed."""
    configs = [(str(g), int(n), float(q)) for g, n, q in configurations]
    regions = list(grid_regions)
    runs = select_repeats(all_runs, repeat_policy)
    per_run = energy_per_run(all_runs, tdp=tdp, grid_g_per_kwh=grid_g_per_kwh, seed=seed)
    per_point = energy_per_run(runs, tdp=tdp, grid_g_per_kwh=grid_g_per_kwh, seed=seed)
    folders = list(run_folders)
    measured = None
    if folders:
        measured = energy_per_run(read_runs(run_summaries(folders)), tdp=tdp,
                                  grid_g_per_kwh=grid_g_per_kwh, seed=seed)
    chosen = pick_configurations(per_point, model, configs)
    carbon_table = carbon.configuration_carbon(chosen, regions, lifetime_years=lifetime_years,
                                               utilisation=utilisation,
                                               energy_column=carbon_energy_column)
    return EnergyReport(
        per_run=per_run, per_point=per_point,
        table3=table3(runs, model, configs, tdp=tdp, grid_g_per_kwh=grid_g_per_kwh),
        table3_note=table3_repeat_note(all_runs, model, configs, tdp, repeat_policy),
        table3_datasheet=table3(runs, model, configs, tdp="datasheet",
                                grid_g_per_kwh=grid_g_per_kwh),
        estimates=ratio_estimates(per_point, model, configs), measured=measured,
        chosen=chosen, carbon=carbon_table, lowest=carbon.lowest_carbon(carbon_table),
        crossings=carbon.break_even_table(carbon_table),
        robustness=carbon.break_even_summary(chosen, BREAK_EVEN_ESTIMATES,
                                             lifetime_years=lifetime_years,
                                             utilisation=utilisation),
        totals=carbon.totals_vs_intensity(carbon_table, BREAK_EVEN_INTENSITIES),
        grid=grid_catalog().set_index("region").loc[regions].reset_index(),
        configurations=configs,
        settings={"model": model, "tdp": tdp,
                  "grid_g_per_kwh": grid_g_per_kwh, "lifetime_years": lifetime_years,
                  "utilisation": utilisation, "energy_column": carbon_energy_column,
                  "repeat_policy": repeat_policy})


#: The energy and carbon tables (``paper/tables``), in the order they are written.
ENERGY_TABLES = (
    TableSpec("table3_energy",
              "Energy efficiency of {model} under the TDP model ({tdp} TDP, "
              "{grid_g_per_kwh:g} g CO2/kWh)", "tab:energy",
              decimals={"QPS": 0, "TDP per GPU (W)": 0, "Tokens/s": 1, "Efficiency ratio": 2},
              notes=("{table3_note}",)),
    TableSpec("table3_energy_ratio_estimates",
              "Efficiency ratio {first} over {second} under each power estimate",
              "tab:energy-ratio", decimals={"ratio": 2, "low": 2, "high": 2},
              notes=("Power model: P = P_idle + (P_max - P_idle) f(u), u = throughput / peak "
                     "throughput of the configuration; low = low parameters with linear f, high "
                     "= high parameters with f = sqrt(u); parameters in "
                     "hgresearch/data/catalogs/power_model.csv.",)),
    TableSpec("energy_per_run",
              "Energy per token of every reference run: TDP model ({tdp}) and power-model "
              "bracket", "tab:energy-per-run", default_decimals=3,
              decimals={"request_rate_qps": 0, "total_token_throughput_tok_per_s": 1,
                        "tdp_power_w": 0, "tdp_tok_per_kwh": 0, "model_tok_per_kwh_low": 0,
                        "model_tok_per_kwh_high": 0, "tdp_g_co2_per_1m_tok": 2},
              notes=("measured_energy_per_tok_j is empty: the reference runs carry no "
                     "telemetry.",),
              columns=("run_id", "model", "hardware", "request_rate_qps", "repeat_index",
                       "total_token_throughput_tok_per_s", "tdp_power_w", "tdp_tok_per_kwh",
                       "tdp_energy_per_tok_j", "tdp_g_co2_per_1m_tok", "load_frac",
                       "model_energy_per_tok_low_j", "model_energy_per_tok_central_j",
                       "model_energy_per_tok_high_j", "model_tok_per_kwh_low",
                       "model_tok_per_kwh_high", "measured_energy_per_tok_j")),
    TableSpec("energy_measured",
              "Measured energy per token (steady-state window) with 95% block-bootstrap "
              "interval", "tab:energy-measured", default_decimals=3,
              notes=("{measured_note}",), columns=MEASURED_TABLE_COLUMNS),
    TableSpec("carbon_per_region",
              "g CO2e per 1M tokens, operational ({energy_column}) + embodied "
              "({lifetime_years:g} years, {utilisation:.0%} utilisation)", "tab:carbon",
              default_decimals=2,
              decimals={"request_rate_qps": 0, "gpu_count": 0, "g_co2_per_kwh": 0,
                        "kwh_per_1m_tok": 4, "embodied_kg": 0}),
    TableSpec(BREAK_EVEN_TABLE,
              "Grid intensity (g CO2/kWh) at which the lower-carbon configuration changes, per "
              "energy estimate and embodied-carbon bound", "tab:break-even",
              decimals={"break_even_g_per_kwh": 1},
              notes=("Empty: one configuration is lower at every grid intensity.",)),
)


def energy_tables(report: EnergyReport) -> dict[str, pd.DataFrame | None]:
    """The frames of :data:`ENERGY_TABLES`, by file stem (no measured table without run
    folders)."""
    return {"table3_energy": report.table3,
            "table3_energy_ratio_estimates": report.estimates,
            "energy_per_run": report.per_run, "energy_measured": report.measured,
            "carbon_per_region": report.carbon, BREAK_EVEN_TABLE: report.robustness}


def energy_context(report: EnergyReport) -> dict[str, object]:
    """What the captions and notes of :data:`ENERGY_TABLES` name: the settings, the compared
    configurations, Table 3's note and the measured intervals' method."""
    first, second = [f"{hardware_label(g, n)} @ {q:g} QPS" for g, n, q in report.configurations]
    method = "no interval"
    if report.measured is not None and report.measured.measured_ci_method.notna().any():
        method = str(report.measured.measured_ci_method.dropna().iloc[0])
    return {**report.settings, "first": first, "second": second,
            "table3_note": report.table3_note, "measured_note": method}


def break_even_reading(report: EnergyReport) -> str:
    """The break-even in words: how often the ranking of new hardware flips over the estimate
    combinations, and the range of break-even intensities for idle consumer GPUs with the
    catalog regions below its upper end."""
    robustness = report.robustness
    idle_crossings = robustness[robustness.scenario == "idle_consumer"].break_even_g_per_kwh
    idle_crossings = idle_crossings.dropna()
    new = robustness[robustness.scenario == "new"]
    lines = [f"new hardware: ranking flips in {len(new.break_even_g_per_kwh.dropna())} of "
             f"{len(new)} estimate combinations"]
    if len(idle_crossings):
        below = report.grid[report.grid.g_co2_per_kwh < idle_crossings.max()].region.tolist()
        lines.append(f"idle consumer GPUs: break-even between {idle_crossings.min():.1f} and "
                     f"{idle_crossings.max():.1f} g CO2/kWh (median "
                     f"{idle_crossings.median():.1f}); catalog regions below the upper end: "
                     f"{below}")
    return "\n".join(lines)


def energy_headline(report: EnergyReport) -> dict[str, object]:
    """Numbers ``hgresearch reproduce`` prints for notebook 05: Table 3's tokens per kWh and
    ratio, the ratio under the datasheet TDP and the power model, the break-even intensities."""
    t3, estimates, robustness = report.table3, report.estimates, report.robustness
    idle = report.crossings[report.crossings.scenario == "idle_consumer"].break_even_g_per_kwh
    model_row = estimates[estimates.estimate.str.startswith("Power model, central")].iloc[0]
    return {
        "table3_tok_per_kwh_m": dict(zip(t3.Hardware, t3["Tokens per kWh (M)"].round(2),
                                         strict=True)),
        "table3_efficiency_ratio": round(float(t3["Efficiency ratio"].max()), 2),
        "efficiency_ratio_datasheet_tdp": round(
            float(report.table3_datasheet["Efficiency ratio"].max()), 2),
        "efficiency_ratio_power_model":
            f"{model_row.ratio:.2f} [{model_row.low:.2f}, {model_row.high:.2f}]",
        "break_even_idle_consumer_g_per_kwh": round(float(idle.iloc[0]), 1) if len(idle)
        else None,
        "break_even_range_g_per_kwh": [round(float(robustness.break_even_g_per_kwh.min()), 1),
                                       round(float(robustness.break_even_g_per_kwh.max()), 1)],
        "repeat_policy": report.settings["repeat_policy"],
    }
