"""Builders of the paper's tables (Table 1, Table 2) and of the data behind its figures.

Each function takes the runs table (plus catalogs) and returns a data frame; writing is done
by :func:`hgresearch.report.writers.write_table`. No number here is typed in by hand.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hgresearch.accounting.costs import add_costs
from hgresearch.data.catalogs import price_catalog
from hgresearch.data.ingest import select_repeats
from hgresearch.identity import replicated_label

#: The paper's running example.
PAPER_MODEL = "DeepSeek-R1-Distill-Qwen-14B"
#: Table 2 configurations, in the order the table lists them.
TABLE2_HARDWARE = ["1x H100-PCIe", "2x RTX-4090", "4x RTX-4090", "8x RTX-4090"]

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
                       scenario: str = "alternative", repeat_policy: str = "first"
                       ) -> pd.DataFrame:
    """Runs of one model (optionally some configurations) with costs, one row per point."""
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
    return add_costs(select_repeats(selected, repeat_policy), scenario)


def table2_cost_performance(runs: pd.DataFrame, model: str = PAPER_MODEL,
                            hardware: list[str] | None = None, scenario: str = "alternative",
                            repeat_policy: str = "first") -> pd.DataFrame:
    """Table 2: one row per (QPS, hardware), ordered by QPS then hardware, numbered from 1."""
    hardware = hardware or TABLE2_HARDWARE
    data = configuration_runs(runs, model, hardware, scenario, repeat_policy)
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
                   repeat_policy: str = "first") -> pd.DataFrame:
    """Target vs achieved request rate with cost per 1M tokens, per configuration and QPS."""
    data = configuration_runs(runs, model, hardware, scenario, repeat_policy)
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
                     scenario: str = "alternative") -> dict[str, object]:
    """A few numbers to print after ``reproduce`` (from Table 2's data)."""
    data = configuration_runs(runs, model, TABLE2_HARDWARE, scenario)
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
