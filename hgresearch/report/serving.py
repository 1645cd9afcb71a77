"""Our own measurements through the paper's pipeline (notebook ``06_cpu_sweep``): the committed
CPU sweep (means over repeats, the server-versus-client cross-check, per-request bootstrap
intervals), the peer comparison with ``vllm bench serve``, and the live CPU fleet with the
fleet simulator's error on it.

:func:`analyse_cpu_sweep` computes everything (:class:`CpuSweepReport`); :func:`cpu_sweep_tables`
with :data:`CPU_SWEEP_TABLES` is what :func:`hgresearch.report.writers.write_tables` writes;
:func:`cpu_sweep_headline` returns the numbers ``hgresearch reproduce`` prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from hgresearch.accounting.crosscheck import compare_clients, server_crosscheck
from hgresearch.data.ingest import read_runs, repeat_spread, select_repeats
from hgresearch.fits.uncertainty import run_request_cis
from hgresearch.identity import POINT_KEYS
from hgresearch.report.writers import TableSpec
from hgresearch.sim.fleet_validation import (
    experiment_table,
    fleet_validation,
    fleet_validation_table,
)

#: The sweep summary's columns, renamed as the table prints them (offered load first).
SUMMARY_COLUMNS = {"request_rate_qps": "offered QPS", "request_throughput_rps": "achieved req/s",
                   "output_throughput_tok_per_s": "output tok/s",
                   "p50_ttft_ms": "TTFT p50 (ms)", "p99_ttft_ms": "TTFT p99 (ms)",
                   "median_tpot_ms": "TPOT median (ms)", "p99_e2el_ms": "E2E p99 (ms)",
                   "completed": "completed", "failed": "failed"}
#: The metrics whose run-to-run spread over the sweep's repeats is shown.
SPREAD_METRICS = ["request_throughput_rps", "output_throughput_tok_per_s", "p50_ttft_ms"]
#: The bootstrap intervals the table shows (quantities of
#: :func:`hgresearch.fits.uncertainty.run_request_cis`).
CI_QUANTITIES = ("p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "cost_usd_per_1m_tok")
#: The fleet simulator's errors the headline quotes (columns of the validation table's last,
#: mean-absolute-error row).
FLEET_ERROR_COLUMNS = ("request_throughput_rps error_pct", "mean_tpot_ms error_pct",
                       "p90_ttft_ms error_pct")


@dataclass
class CpuSweepReport:
    """Everything notebook 06 shows: the sweep's runs, their means per offered rate
    (``points``) and summary table, the run-to-run spread per offered rate, the cross-check,
    the bootstrap intervals, the peer comparison, and the live fleet's points and
    simulated-vs-measured table."""

    runs: pd.DataFrame
    points: pd.DataFrame
    summary: pd.DataFrame
    spread: pd.DataFrame
    crosscheck: pd.DataFrame
    intervals: pd.DataFrame
    peer: pd.DataFrame
    fleet_points: pd.DataFrame
    fleet_errors: pd.DataFrame
    fleet_table: pd.DataFrame


def sweep_summary(points: pd.DataFrame) -> pd.DataFrame:
    """One row per offered rate of ``points`` (means over repeats), the columns of
    :data:`SUMMARY_COLUMNS` renamed, by offered rate."""
    return points[list(SUMMARY_COLUMNS)].sort_values("request_rate_qps").rename(
        columns=SUMMARY_COLUMNS)


def analyse_cpu_sweep(runs: pd.DataFrame, *, peer_dir: str | Path, fleet_dir: str | Path,
                      cpu_price_usd_per_h: float, n_boot: int = 1000) -> CpuSweepReport:
    """The CPU sweep's ``runs`` (run folders; repeats included) summarised, cross-checked
    against the server and bootstrapped per request (the cost interval at
    ``cpu_price_usd_per_h``, an illustrative price); the peer comparison of ``peer_dir``
    (``hgresearch/`` run folders and ``vllm-bench/`` result files); the live fleet of
    ``fleet_dir`` and the fleet simulator's error on it."""
    points = select_repeats(runs, "mean")
    cis = run_request_cis(runs, cpu_price_usd_per_h, n_boot=n_boot)
    intervals = cis[cis.quantity.isin(CI_QUANTITIES)].sort_values(
        ["request_rate_qps", "repeat_index", "quantity"], kind="stable")
    peer_runs = read_runs([Path(peer_dir) / "hgresearch", Path(peer_dir) / "vllm-bench"],
                          relative_to=peer_dir)
    fleet_errors = fleet_validation(fleet_dir)
    # one sweep: of the point keys only the offered rate tells its points apart
    spread = repeat_spread(runs, SPREAD_METRICS).droplevel(
        [k for k in POINT_KEYS if k != "request_rate_qps"])
    return CpuSweepReport(runs=runs, points=points, summary=sweep_summary(points), spread=spread,
                          crosscheck=server_crosscheck(runs), intervals=intervals,
                          peer=compare_clients(peer_runs),
                          fleet_points=experiment_table(fleet_dir), fleet_errors=fleet_errors,
                          fleet_table=fleet_validation_table(fleet_errors))


#: Notebook 06's tables (``paper/tables``); the summary's caption names ``{model}``.
CPU_SWEEP_TABLES = (
    TableSpec("cpu_sweep_summary", "{model} on vLLM for CPU (2 cores): mean over 2 repeats per "
              "point", "tab:cpu-sweep",
              decimals={"offered QPS": 0, "achieved req/s": 2, "output tok/s": 0,
                        "TTFT p50 (ms)": 1, "TTFT p99 (ms)": 1, "TPOT median (ms)": 2,
                        "E2E p99 (ms)": 1, "completed": 0, "failed": 0}),
    TableSpec("cpu_sweep_server_crosscheck",
              "Client figures vs the server's /metrics deltas per run", "tab:cpu-crosscheck",
              decimals={"p50_ttft_ms": 1, "server_p50_ttft_ms": 1, "p99_ttft_ms": 1,
                        "server_p99_ttft_ms": 1, "mean_itl_ms": 2, "server_mean_itl_ms": 2}),
    TableSpec("cpu_sweep_bootstrap_ci",
              "Bootstrap 95% intervals per run (per-request records)", "tab:cpu-bootstrap",
              decimals={"request_rate_qps": 0, "estimate": 3, "low": 3, "high": 3}),
    TableSpec("peer_comparison_cpu",
              "Our client vs vllm bench serve, same vLLM-CPU server, workload and seed",
              "tab:peer-cpu",
              decimals={"hgresearch": 2, "vllm bench serve": 2, "ratio ours/peer": 3}),
    TableSpec("fleet_cpu_runs", "Live CPU fleet: each server alone and both behind the router",
              "tab:fleet-cpu",
              decimals={"offered_qps": 0, "completed": 0, "request_throughput_rps": 2,
                        "mean_tpot_ms": 1, "p50_ttft_ms": 1, "p90_ttft_ms": 1,
                        "late_send_share": 2}),
    TableSpec("sim_fleet_validation",
              "Fleet simulator vs the live CPU fleet (servers calibrated alone)",
              "tab:sim-fleet-validation", default_decimals=1,
              decimals={"request_throughput_rps measured": 2,
                        "request_throughput_rps simulated": 2}),
)


def cpu_sweep_tables(report: CpuSweepReport) -> dict[str, pd.DataFrame | None]:
    """The frames of :data:`CPU_SWEEP_TABLES`, by file stem."""
    return {"cpu_sweep_summary": report.summary,
            "cpu_sweep_server_crosscheck": report.crosscheck,
            "cpu_sweep_bootstrap_ci": report.intervals, "peer_comparison_cpu": report.peer,
            "fleet_cpu_runs": report.fleet_points, "sim_fleet_validation": report.fleet_table}


def cpu_sweep_headline(report: CpuSweepReport) -> dict[str, object]:
    """Numbers ``hgresearch reproduce`` prints for notebook 06."""
    runs, peer, fleet = report.runs, report.peer, report.fleet_points
    rate_ratio = peer[peer.metric == "achieved req/s"]["ratio ours/peer"]
    errors = report.fleet_table.iloc[-1][list(FLEET_ERROR_COLUMNS)]
    return {
        "cpu sweep runs": len(runs),
        "cpu sweep: client/server token counts agree on every run":
            bool(report.crosscheck.token_counts_agree.all()),
        "cpu sweep: runs flagged client_limited": int(runs.client_limited.astype(bool).sum()),
        "cpu sweep: max achieved req/s (mean of repeats)":
            round(float(report.points.request_throughput_rps.max()), 2),
        "peer comparison: achieved req/s ratio ours/vllm (min..max over QPS)":
            f"{rate_ratio.min():.3f}..{rate_ratio.max():.3f}",
        "cpu fleet: points flagged client_limited":
            f"{int(fleet.client_limited.sum())} of {len(fleet)}",
        "cpu fleet simulator: mean |error| of request throughput, mean TPOT, p90 TTFT (%)":
            ", ".join(f"{float(value):.1f}" for value in errors),
    }
