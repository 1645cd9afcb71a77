"""Builders of the paper's tables (Table 1, Table 2, Table 3 and its efficiency ratio under
every energy estimate) and of the data behind its figures.

Each function takes the runs table (plus catalogs) and returns a data frame; writing is done
by :func:`hgresearch.report.writers.write_tables` with the specs of :data:`PAPER_TABLES` (and,
for Table 3, :data:`hgresearch.report.energy.ENERGY_TABLES`). No number here is typed in by
hand.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from hgresearch.accounting.costs import add_costs
from hgresearch.accounting.energy import (
    PAPER_GRID_G_PER_KWH,
    TdpAssumption,
    add_tdp_energy,
    efficiency_ratio,
    ratio_bracket,
)
from hgresearch.data.catalogs import price_catalog
from hgresearch.data.ingest import select_repeats
from hgresearch.identity import hardware_label, replicated_label
from hgresearch.report.writers import TableSpec
from hgresearch.units import TOKENS_PER_MILLION

#: The paper's running example.
PAPER_MODEL = "DeepSeek-R1-Distill-Qwen-14B"
#: Table 2 configurations, in the order the table lists them.
TABLE2_HARDWARE = ["1x H100-PCIe", "2x RTX-4090", "4x RTX-4090", "8x RTX-4090"]
#: Table 3 configurations, (GPU, GPU count, offered load in QPS): the printed table names the
#: configurations but no load; these are the loads whose runs give its numbers.
TABLE3_CONFIGURATIONS: tuple[tuple[str, int, float], ...] = (("H100-PCIe", 1, 16.0),
                                                            ("RTX-4090", 2, 4.0))

TABLE2_COLUMNS = {
    "qps": "QPS",
    "hardware": "Hardware",
    "duration_s": "Duration (s)",
    "cost_usd": "Cost per run ($)",
    "cost_usd_per_1m_tok": "Cost per 1M tokens ($)",
    "total_token_throughput_tok_per_s": "Throughput (tokens/s)",
    "request_throughput_rps": "Requests/s",
    "mean_ttft_ms": "TTFT mean (ms)",
    "median_ttft_ms": "TTFT median (ms)",
    "p90_ttft_ms": "TTFT p90 (ms)",
    "p99_ttft_ms": "TTFT p99 (ms)",
}
TABLE2_DECIMALS = {"Cost per run ($)": 3, "Cost per 1M tokens ($)": 3}

#: Notebook 03's tables (``paper/tables``): captions name ``{model}`` and ``{scenario}``; Table
#: 2's note is :func:`repeat_note` (``{repeat_note}``, left out when empty).
PAPER_TABLES = (
    TableSpec("table1_gpu_prices", "GPU rental prices per GPU-hour", "tab:prices"),
    TableSpec("table2_cost_performance", "Cost-performance of {model} ({scenario} prices)",
              "tab:cost-performance", decimals=TABLE2_DECIMALS, notes=("{repeat_note}",)),
    TableSpec("throughput_ratio_rtx4090_vs_h100",
              "RTX-4090 configurations / 1x H100-PCIe output throughput at matched QPS",
              "tab:throughput-ratio", decimals={"request_rate_qps": 0},
              columns=("model", "hardware", "request_rate_qps", "throughput_ratio")),
)


def table1_prices() -> pd.DataFrame:
    """Table 1: GPU rental prices per GPU-hour, alternative providers vs hyperscalers."""
    prices = price_catalog()
    rows = []
    for gpu in dict.fromkeys(prices.gpu_name):
        row = {"GPU": gpu}
        for scenario, title in (("alternative", "Alternative provider ($/GPU-h)"),
                                ("hyperscaler", "Hyperscaler ($/GPU-h)")):
            match = prices[(prices.gpu_name == gpu) & (prices.scenario == scenario)]
            if match.empty or pd.isna(match.price_usd_per_gpu_h.iloc[0]):
                row[title] = "—"
                continue
            low = match.price_low_usd_per_gpu_h.iloc[0]
            high = match.price_high_usd_per_gpu_h.iloc[0]
            row[title] = (f"{low:.2f}–{high:.2f}" if low != high
                          else f"{match.price_usd_per_gpu_h.iloc[0]:.2f}")
        rows_of_gpu = prices[prices.gpu_name == gpu]
        row["Source"] = "; ".join(dict.fromkeys(rows_of_gpu.source))
        row["Date"] = "; ".join(dict.fromkeys(rows_of_gpu.date.astype(str)))
        rows.append(row)
    return pd.DataFrame(rows)


def configuration_runs(runs: pd.DataFrame, model: str, hardware: list[str] | None = None,
                       scenario: str = "alternative", repeat_policy: str = "first",
                       prices_usd_per_gpu_h: dict[str, float] | None = None) -> pd.DataFrame:
    """Runs of one model (optionally some configurations) with costs, one row per point
    (``prices_usd_per_gpu_h``: prices by GPU over the scenario's, e.g. hardware it lacks)."""
    selected = runs[runs.model == model]
    if selected.empty:
        known = sorted(runs.model.unique())
        raise KeyError(f"no runs for model {model!r}; models in the data: {known}")
    if hardware is not None:
        missing = sorted(set(hardware) - set(selected.hardware))
        if missing:
            raise KeyError(f"model {model!r} has no runs on {missing}; it has "
                           f"{sorted(selected.hardware.unique())}")
        selected = selected[selected.hardware.isin(hardware)]
    return add_costs(select_repeats(selected, repeat_policy), scenario, prices_usd_per_gpu_h)


def table2_cost_performance(runs: pd.DataFrame, model: str = PAPER_MODEL,
                            hardware: list[str] | None = None, scenario: str = "alternative",
                            repeat_policy: str = "first",
                            prices_usd_per_gpu_h: dict[str, float] | None = None
                            ) -> pd.DataFrame:
    """Table 2: one row per (QPS, hardware), ordered by QPS then hardware, numbered from 1."""
    hardware = hardware or TABLE2_HARDWARE
    data = configuration_runs(runs, model, hardware, scenario, repeat_policy,
                              prices_usd_per_gpu_h)
    data = data.assign(qps=data.request_rate_qps,
                       hw_order=data.hardware.map({h: i for i, h in enumerate(hardware)}))
    data = data.sort_values(["qps", "hw_order"], kind="stable").reset_index(drop=True)
    table = data[list(TABLE2_COLUMNS)].rename(columns=TABLE2_COLUMNS)
    table["QPS"] = table["QPS"].map(lambda q: f"{q:g}")
    table.insert(0, "#", [f"#{i}" for i in range(1, len(table) + 1)])
    return table


def repeat_note(runs: pd.DataFrame, model: str, hardware: list[str], policy: str) -> str | None:
    """A table note saying which points had repeated runs and which one is shown."""
    selected = runs[(runs.model == model) & runs.hardware.isin(hardware)]
    repeated = selected[selected.repeat_count > 1]
    if repeated.empty:
        return None
    points = sorted({f"{h} @ {q:g} QPS" for h, q in
                     zip(repeated.hardware, repeated.request_rate_qps, strict=True)})
    shown = {"first": "the first run as listed in its file is shown",
             "mean": "the mean over repeats is shown"}.get(policy, policy)
    return (f"{len(points)} points were measured more than once ({', '.join(points)}); "
            f"{shown}.")


def scaling_points(runs: pd.DataFrame, model: str = PAPER_MODEL,
                   hardware: list[str] | None = None, scenario: str = "alternative",
                   repeat_policy: str = "first",
                   prices_usd_per_gpu_h: dict[str, float] | None = None) -> pd.DataFrame:
    """Target vs achieved request rate with cost per 1M tokens, per configuration and QPS."""
    data = configuration_runs(runs, model, hardware, scenario, repeat_policy,
                              prices_usd_per_gpu_h)
    return data[["hardware", "gpu_name", "gpu_count", "request_rate_qps",
                 "request_throughput_rps", "cost_usd_per_1m_tok"]].sort_values(
        ["gpu_name", "gpu_count", "request_rate_qps"], kind="stable").reset_index(drop=True)


def project_replicas(points: pd.DataFrame, hardware: str, replicas: int,
                     target_qps: float) -> dict[str, float | str]:
    """Project ``replicas`` copies of ``hardware`` behind an ideal load balancer at
    ``target_qps``: each replica receives ``target_qps / replicas`` and achieves what the single
    configuration achieved at that rate; cost per 1M tokens is unchanged (same GPU-hours per
    token). Raises if that per-replica rate was not measured."""
    per_replica_qps = target_qps / replicas
    base = points[(points.hardware == hardware) &
                  np.isclose(points.request_rate_qps, per_replica_qps)]
    if base.empty:
        raise KeyError(f"{hardware} was not measured at {per_replica_qps:g} QPS, needed to "
                       f"project {replicas} replicas at {target_qps:g} QPS")
    row = base.iloc[0]
    return {
        "hardware": replicated_label(hardware, replicas),
        "request_rate_qps": target_qps,
        "request_throughput_rps": replicas * float(row.request_throughput_rps),
        "cost_usd_per_1m_tok": float(row.cost_usd_per_1m_tok),
        "rule": (f"{replicas} × achieved of one {hardware} at {per_replica_qps:g} QPS "
                 f"(ideal load balancer; same cost per token)"),
    }


def throughput_ratio_table(runs: pd.DataFrame, reference: str = "1x H100-PCIe",
                           challenger_gpu: str = "RTX-4090",
                           metric: str = "output_throughput_tok_per_s",
                           repeat_policy: str = "first") -> pd.DataFrame:
    """Ratio of ``challenger_gpu`` configurations' throughput to ``reference`` at the same
    model and offered QPS: one row per (model, GPU count, QPS) where both were measured."""
    data = select_repeats(runs, repeat_policy)
    ref = data[data.hardware == reference][["model", "request_rate_qps", metric]]
    challenger = data[data.gpu_name == challenger_gpu][
        ["model", "gpu_count", "hardware", "request_rate_qps", metric]]
    merged = challenger.merge(ref, on=["model", "request_rate_qps"], suffixes=("", "_reference"))
    merged["throughput_ratio"] = merged[metric] / merged[f"{metric}_reference"]
    return merged.sort_values(["model", "gpu_count", "request_rate_qps"],
                              kind="stable").reset_index(drop=True)


def headline_numbers(runs: pd.DataFrame, model: str = PAPER_MODEL,
                     scenario: str = "alternative",
                     hardware: Sequence[str] = TABLE2_HARDWARE) -> dict[str, object]:
    """A few numbers to print after ``reproduce`` (from Table 2's data: ``model`` on
    ``hardware``, the notebook's configurations, so another model's run has them)."""
    data = configuration_runs(runs, model, list(hardware), scenario)
    best = data.loc[data.groupby("hardware").cost_usd_per_1m_tok.idxmin()]
    out: dict[str, object] = {"runs": len(runs), "models": int(runs.model.nunique())}
    for row in best.sort_values("hardware").itertuples():
        out[f"cheapest {row.hardware} ({model})"] = (
            f"${row.cost_usd_per_1m_tok:.3f} per 1M tokens at {row.request_rate_qps:g} QPS, "
            f"TTFT p99 {row.p99_ttft_ms:.1f} ms")
    ratio = throughput_ratio_table(runs)
    out["RTX-4090 / H100 output-throughput ratio range"] = (
        f"{ratio.throughput_ratio.min():.2f}–{ratio.throughput_ratio.max():.2f} "
        f"over {len(ratio)} matched points")
    return out


# ---------------------------------------------------------------------------------------------
# Table 3: energy efficiency under the paper's TDP model, and its ratio under every estimate
# ---------------------------------------------------------------------------------------------

def pick_configurations(runs: pd.DataFrame, model: str,
                        configurations: Iterable[tuple[str, int, float]]) -> pd.DataFrame:
    """Rows of ``runs`` for ``model`` at each (GPU, GPU count, QPS), in the order given.

    Raises :class:`KeyError` naming the configuration when one has no run (so a typo in a
    notebook parameter is not silently dropped).
    """
    rows = []
    for gpu_name, gpu_count, qps in configurations:
        hit = runs[(runs.model == model) & (runs.gpu_name == gpu_name)
                   & (runs.gpu_count == int(gpu_count)) & (runs.request_rate_qps == float(qps))
                   & (runs.replicas == 1)]
        if hit.empty:
            raise KeyError(f"no run of {model} on {hardware_label(gpu_name, gpu_count)} "
                           f"at {qps} QPS")
        rows.append(hit)
    return pd.concat(rows, ignore_index=True)


def table3(runs: pd.DataFrame, model: str = PAPER_MODEL,
           configurations: Iterable[tuple[str, int, float]] = TABLE3_CONFIGURATIONS,
           tdp: str = "paper", tdp_overrides: dict[str, float] | None = None,
           grid_g_per_kwh: float = PAPER_GRID_G_PER_KWH) -> pd.DataFrame:
    """The paper's Table 3: energy efficiency of the chosen configurations under the TDP model.

    ``runs`` should hold one run per point (``select_repeats(runs, "first")``: the paper's
    14B H100 points were run twice and the first run is used). One row per configuration with
    throughput, tokens per hour, assumed power and kWh per hour, tokens per kWh, g CO2 per 1M
    tokens and the efficiency ratio: tokens per kWh relative to the least efficient row.
    """
    picked = add_tdp_energy(pick_configurations(runs, model, configurations), tdp,
                            tdp_overrides, grid_g_per_kwh)
    table = pd.DataFrame({
        "Hardware": picked.hardware,
        "QPS": picked.request_rate_qps,
        "TDP per GPU (W)": picked.tdp_per_gpu_w,
        "Tokens/s": picked.total_token_throughput_tok_per_s,
        "Tokens per hour (M)": picked.tok_per_h / TOKENS_PER_MILLION,
        "Energy per hour (kWh)": picked.tdp_kwh_per_h,
        "Tokens per kWh (M)": picked.tdp_tok_per_kwh / TOKENS_PER_MILLION,
        "g CO2 per 1M tokens": picked.tdp_g_co2_per_1m_tok,
    })
    table["Efficiency ratio"] = table["Tokens per kWh (M)"] / table["Tokens per kWh (M)"].min()
    return table.reset_index(drop=True)


def table3_repeats(all_runs: pd.DataFrame, model: str = PAPER_MODEL,
                   configurations: Iterable[tuple[str, int, float]] = TABLE3_CONFIGURATIONS,
                   tdp: str = "paper") -> pd.DataFrame:
    """Tokens per kWh (TDP model) of every repeat of the Table 3 configurations, so a table
    that shows one repeat can say what the others give. ``all_runs``: every run (repeats
    included). Columns: ``hardware``, ``request_rate_qps``, ``repeat_index``,
    ``tdp_tok_per_kwh``."""
    picked = add_tdp_energy(pick_configurations(all_runs, model, configurations), tdp)
    return picked[["hardware", "request_rate_qps", "repeat_index", "tdp_tok_per_kwh"]]


#: How a table note names each repeat policy of :func:`hgresearch.data.ingest.select_repeats`.
TABLE3_REPEAT_WORDS = {"first": "the first of repeated runs as listed in the result file",
                       "mean": "the mean of repeated runs"}


def table3_repeat_note(all_runs: pd.DataFrame, model: str = PAPER_MODEL,
                       configurations: Iterable[tuple[str, int, float]] = TABLE3_CONFIGURATIONS,
                       tdp: str = "paper", repeat_policy: str = "first") -> str:
    """Table 3's note: what power and tokens are, which run of a repeated point the table
    shows, and the tokens per kWh of every repeat (:func:`table3_repeats`)."""
    repeats = table3_repeats(all_runs, model, configurations, tdp)
    compared = "; ".join(
        f"{h}: " + " / ".join(f"{v / TOKENS_PER_MILLION:.2f}" for v in g.tdp_tok_per_kwh)
        + f" M (mean {g.tdp_tok_per_kwh.mean() / TOKENS_PER_MILLION:.2f} M)"
        for h, g in repeats.groupby("hardware", sort=False) if len(g) > 1)
    return (f"Power = GPU count x TDP for the whole run; tokens = input + output. "
            f"Repeated points use {TABLE3_REPEAT_WORDS[repeat_policy]}. Efficiency ratio = "
            f"tokens per kWh over the least efficient row. Tokens per kWh of each repeat: "
            f"{compared}.")


def ratio_estimates(runs: pd.DataFrame, model: str = PAPER_MODEL,
                    configurations: Iterable[tuple[str, int, float]] = TABLE3_CONFIGURATIONS
                    ) -> pd.DataFrame:
    """The efficiency ratio of the first configuration over the second (tokens per kWh) under
    every estimate: TDP as the paper, datasheet TDP, the power model (central with the
    independent-bounds bracket; and with both at the same bound), and measured energy when
    both runs have it. ``runs``: output of :func:`hgresearch.accounting.energy.energy_per_run`
    (one run per point)."""
    configurations = list(configurations)
    if len(configurations) != 2:
        raise ValueError("ratio_estimates compares exactly two configurations")
    picked = pick_configurations(runs, model, configurations)
    a, b = picked.iloc[0], picked.iloc[1]
    rows = []
    for tdp in TdpAssumption:
        t = add_tdp_energy(picked, tdp)
        watts = "/".join(f"{w:.0f} W" for w in t.tdp_per_gpu_w)
        rows.append({"estimate": f"TDP model, {tdp} TDP ({watts})",
                     "ratio": efficiency_ratio(t.tdp_tok_per_kwh.iloc[0],
                                               t.tdp_tok_per_kwh.iloc[1]),
                     "low": math.nan, "high": math.nan})
    if "model_tok_per_kwh_central" in picked:
        bracket = ratio_bracket(a, b)
        rows.append({"estimate": "Power model, central (bracket: independent bounds)",
                     "ratio": bracket["central"], "low": bracket["low"],
                     "high": bracket["high"]})
        rows.append({"estimate": "Power model, both at the same bound",
                     "ratio": bracket["central"],
                     "low": min(bracket["same_low"], bracket["same_high"]),
                     "high": max(bracket["same_low"], bracket["same_high"])})
    if "measured_tok_per_kwh" in picked and picked.measured_tok_per_kwh.notna().all():
        # Interval from the two runs' energy-per-token intervals, taken as independent bounds.
        ratio = efficiency_ratio(a.measured_tok_per_kwh, b.measured_tok_per_kwh)
        rows.append({"estimate": "Measured (NVML)", "ratio": ratio,
                     "low": b.measured_energy_per_tok_ci_low_j
                     / a.measured_energy_per_tok_ci_high_j,
                     "high": b.measured_energy_per_tok_ci_high_j
                     / a.measured_energy_per_tok_ci_low_j})
    return pd.DataFrame(rows)
