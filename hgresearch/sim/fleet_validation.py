"""The fleet simulator against the live CPU fleet experiment (``data/raw/fleet-cpu``, made by
``scripts/fleet_cpu_experiment.py``).

Each server is calibrated on its runs alone (:func:`hgresearch.sim.calibrate.calibrate` on all
its rates, KV capacity from its startup log); each fleet run is then replayed — its measured
send times and lengths (:func:`hgresearch.sim.replay.replay_workload`) — through the fleet
simulator (:func:`hgresearch.sim.fleet.simulate_fleet`) with the run's routing policy, and its
summary is compared with the measured one. A replica's request-path delay (the calibrated
``ttft_offset``: HTTP, tokenisation) is added to its requests' first-token and done times, as
:func:`hgresearch.sim.calibrate.summary_from_times` does for one replica. The fleet runs never
reach a calibration.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from hgresearch.data.runfolder import (
    find_run_dirs,
    read_config,
    read_requests,
    read_summary,
    requests_table,
)
from hgresearch.errors import InputError

if TYPE_CHECKING:
    from hgresearch.sim.calibrate import Calibration

#: Metrics compared on the fleet runs (runs-table names), with the summary key of each.
FLEET_VALIDATION_METRICS = {"request_throughput_rps": "request_throughput",
                            "mean_tpot_ms": "mean_tpot_ms", "p50_ttft_ms": "p50_ttft_ms",
                            "p90_ttft_ms": "p90_ttft_ms"}
#: Where the experiment keeps each server's log (``<root>/_experiment/<model>/server.log``).
EXPERIMENT_DIR = "_experiment"


@dataclass(frozen=True)
class ExperimentRuns:
    """The run folders of a fleet experiment: alone-runs by served model, and fleet runs."""

    alone: dict[str, list[Path]]
    fleet: list[Path]


def experiment_runs(root: str | Path) -> ExperimentRuns:
    """Sort the finished run folders under ``root`` into alone-runs (one endpoint; by served
    model) and fleet runs (``config.fleet`` set)."""
    alone: dict[str, list[Path]] = {}
    fleet: list[Path] = []
    for run_dir in find_run_dirs([root]):
        config = read_config(run_dir)["config"]
        if config.get("fleet"):
            fleet.append(run_dir)
        else:
            alone.setdefault(str(config["model"]), []).append(run_dir)
    if not alone or not fleet:
        raise InputError(f"expected alone-runs and fleet runs under {root}, found "
                         f"{sum(map(len, alone.values()))} and {len(fleet)}", file=str(root))
    return ExperimentRuns(alone=alone, fleet=fleet)


def _kv_cache_tokens(root: Path, model: str) -> int | None:
    from hgresearch.data.runfolder import SERVER_LOG_FILE
    from hgresearch.sim.replica_limits import kv_cache_tokens_from_log

    log = root / EXPERIMENT_DIR / model / SERVER_LOG_FILE
    return kv_cache_tokens_from_log(log.read_text(errors="replace")) if log.is_file() \
        else None


def calibrate_servers(root: str | Path, runs: ExperimentRuns | None = None
                      ) -> dict[str, Calibration]:
    """Per served model: its :class:`~hgresearch.sim.calibrate.Calibration` on its alone-runs
    (every rate; the runs table's columns via :func:`hgresearch.data.ingest.read_runs`)."""
    from hgresearch.data.ingest import read_runs
    from hgresearch.sim.calibrate import calibrate, replica_for
    from hgresearch.sim.replay import run_workload

    root = Path(root)
    runs = runs or experiment_runs(root)
    out = {}
    for model, dirs in sorted(runs.alone.items()):
        table = read_runs([str(d) for d in dirs]).sort_values("request_rate_qps")
        table = table.reset_index(drop=True)
        first = table.iloc[0]
        replica = replica_for(model, str(first.gpu_name), int(first.gpu_count),
                              label=f"{model} alone",
                              kv_cache_tokens=_kv_cache_tokens(root, model))
        out[model] = calibrate(replica, table, [run_workload(row) for _, row in table.iterrows()])
    return out


def simulate_fleet_run(run_dir: str | Path, calibrations: dict[str, Calibration]
                       ) -> dict[str, Any]:
    """The simulated summary of one measured fleet run (its requests replayed, its policy)."""
    from hgresearch.data.summary import summarize
    from hgresearch.sim.fleet import SimReplica, simulate_fleet
    from hgresearch.sim.replay import replay_workload
    from hgresearch.traffic.routing import make_policy

    config = read_config(run_dir)["config"]
    endpoints = config["fleet"]
    replicas = []
    for endpoint in endpoints:
        model = endpoint.get("model") or config["model"]
        if model not in calibrations:
            raise InputError(f"no alone-run calibrates {model!r}", file=str(run_dir),
                             field="fleet")
        fit = calibrations[model]
        step = fit.coefficients.step_model(fit.replica)
        # The live router weighed the endpoints as the run's config says (1 unless given).
        replicas.append(SimReplica(name=endpoint["base_url"], config=fit.replica.config,
                                   step_model=step,
                                   capacity_weight=float(endpoint.get("capacity_weight", 1.0)),
                                   max_outstanding=endpoint.get("max_outstanding"),
                                   ttft_offset_s=fit.coefficients.ttft_offset_s))
    workload = replay_workload(read_requests(run_dir))
    policy = make_policy(config["policy"], seed=int(config.get("seed", 0)),
                         threshold_tokens=int(config.get("policy_threshold_tokens", 1024)),
                         max_outstanding=int(config.get("policy_max_outstanding", 16)))
    # simulate_fleet adds each replica's request-path delay; the derived latencies are
    # recomputed from the shifted times.
    frame = simulate_fleet(replicas, policy, workload.arrivals_s, workload.prompt_tokens,
                           workload.output_tokens)
    return summarize(requests_table(frame.to_dict("records")), bootstrap_reps=0)


def fleet_validation(root: str | Path) -> pd.DataFrame:
    """Per fleet run and metric: measured, simulated and the signed error (%), the servers
    calibrated on their alone-runs (:func:`calibrate_servers`)."""
    runs = experiment_runs(root)
    calibrations = calibrate_servers(root, runs)
    rows = []
    for run_dir in runs.fleet:
        config = read_config(run_dir)["config"]
        measured = read_summary(run_dir)
        simulated = simulate_fleet_run(run_dir, calibrations)
        for metric, key in FLEET_VALIDATION_METRICS.items():
            m, s = measured.get(key), simulated.get(key)
            rows.append({"policy": config["policy"],
                         "offered_qps": float(config["request_rate_qps"]),
                         "metric": metric, "measured": m, "simulated": s,
                         "error_pct": (100.0 * (s / m - 1.0)
                                       if m and s is not None else np.nan),
                         "measured_client_limited": bool(measured.get("client_limited"))})
    return pd.DataFrame(rows).sort_values(["policy", "offered_qps", "metric"],
                                          ignore_index=True)


def fleet_validation_table(points: pd.DataFrame) -> pd.DataFrame:
    """:func:`fleet_validation`'s rows as one row per fleet run: each metric's measured and
    simulated value and error (%), then the mean absolute error per metric."""
    wide = points.pivot_table(index=["policy", "offered_qps"], columns="metric",
                              values=["measured", "simulated", "error_pct"], aggfunc="first")
    columns = {}
    for metric in FLEET_VALIDATION_METRICS:
        for what in ("measured", "simulated", "error_pct"):
            columns[f"{metric} {what}"] = wide[(what, metric)]
    table = pd.DataFrame(columns).reset_index()
    mean_abs = {f"{m} error_pct": float(points[points.metric == m].error_pct.abs().mean())
                for m in FLEET_VALIDATION_METRICS}
    summary = pd.DataFrame([{"policy": "mean |error|", "offered_qps": np.nan, **mean_abs}])
    return pd.concat([table, summary], ignore_index=True)


def experiment_table(root: str | Path) -> pd.DataFrame:
    """One row per measured point of the experiment (alone-runs and fleet runs): offered rate,
    what the client achieved and saw, how well it kept the schedule, and for fleet runs the
    share of requests each endpoint served."""
    rows = []
    for run_dir in find_run_dirs([root]):
        config = read_config(run_dir)["config"]
        summary = read_summary(run_dir)
        fleet = config.get("fleet")
        split = ""
        if fleet:
            served = {url: part.get("completed") or 0
                      for url, part in (summary.get("endpoints") or {}).items()}
            total = sum(served.values()) or 1
            shares = [(e.get("name") or e["base_url"], served.get(e["base_url"], 0) / total)
                      for e in fleet]
            split = ", ".join(f"{name} {share:.0%}" for name, share in shares)
        rows.append({
            "point": (f"fleet, {config['policy']}" if fleet else f"{config['model']} alone"),
            "offered_qps": float(config["request_rate_qps"]),
            "completed": summary.get("completed"),
            "request_throughput_rps": summary.get("request_throughput"),
            "mean_tpot_ms": summary.get("mean_tpot_ms"),
            "p50_ttft_ms": summary.get("p50_ttft_ms"),
            "p90_ttft_ms": summary.get("p90_ttft_ms"),
            "late_send_share": summary.get("late_send_share"),
            "client_limited": bool(summary.get("client_limited")),
            "requests_per_endpoint": split,
        })
    return pd.DataFrame(rows).sort_values(["offered_qps", "point"], ignore_index=True)
