"""The fleet-validation replay: a measured fleet run replayed through the fleet simulator.

The "measured" run here is itself simulated with known coefficients and request-path delays
(no live fleet exists in a unit test); replaying it with the same calibrations must give back
its summary exactly, so any slip in the plumbing (arrival times, routing policy, which
replica's delay goes to which request) shows as an error.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hgresearch.data.runfolder import CONFIG_FILE, REQUESTS_FILE, requests_table
from hgresearch.data.summary import summarize
from hgresearch.sim.calibrate import Calibration, StepCoefficients, replica_for
from hgresearch.sim.fleet import SimReplica, simulate_fleet
from hgresearch.sim.fleet_validation import simulate_fleet_run
from hgresearch.traffic.arrivals import arrival_offsets_ns
from hgresearch.traffic.routing import make_policy

MODELS = ("tiny-llama-cpu", "small-llama-cpu")
COEFFICIENTS = {"tiny-llama-cpu": StepCoefficients(0.004, 2e-5, 1e-4, 0.003),
                "small-llama-cpu": StepCoefficients(0.02, 1e-4, 5e-4, 0.008)}


def _calibrations() -> dict[str, Calibration]:
    return {model: Calibration(replica=replica_for(model, "CPU", 1, kv_cache_tokens=65536),
                               coefficients=COEFFICIENTS[model], rel_se=(0.0, 0.0, 0.0),
                               rates_qps=(1.0,), rms_log_error=0.0, num_simulations=0)
            for model in MODELS}


def _measured_run(run_dir: Path, policy: str) -> dict:
    """A fleet run folder whose requests come from the simulator (the stand-in for a live
    run), each request delayed by its replica's request-path offset; returns its summary."""
    calibrations = _calibrations()
    rng = np.random.default_rng(3)
    n = 60
    arrivals_s = arrival_offsets_ns(n, 3.0, seed=7) / 1e9
    prompts = rng.integers(16, 300, n)
    outputs = rng.integers(8, 120, n)
    urls = ["http://127.0.0.1:8021", "http://127.0.0.1:8022"]
    replicas = [SimReplica(name=url, config=calibrations[m].replica.config,
                           step_model=COEFFICIENTS[m].step_model(calibrations[m].replica))
                for url, m in zip(urls, MODELS, strict=True)]
    frame = simulate_fleet(replicas, make_policy(policy, seed=42), arrivals_s, prompts, outputs)
    offsets = np.array([COEFFICIENTS[m].ttft_offset_s for m in MODELS])
    shift_ns = np.round(offsets[frame.replica.to_numpy()] * 1e9).astype("int64")
    for column in ("t_first_token_ns", "t_last_token_ns", "t_done_ns"):
        frame[column] = frame[column].astype("int64") + shift_ns
    run_dir.mkdir(parents=True)
    config = {"model": MODELS[0], "request_rate_qps": 3.0, "policy": policy, "seed": 42,
              "fleet": [{"base_url": url, "model": m} for url, m in zip(urls, MODELS,
                                                                         strict=True)]}
    (run_dir / CONFIG_FILE).write_text(json.dumps({"config": config}))
    records = frame.drop(columns=["source", "num_preemptions", "replica"]).to_dict("records")
    with open(run_dir / REQUESTS_FILE, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps({k: (None if isinstance(v, float) and np.isnan(v) else v)
                                     for k, v in record.items()}, default=int) + "\n")
    return summarize(requests_table(records), bootstrap_reps=0)


@pytest.mark.parametrize("policy", ["round-robin", "jsq"])
def test_replaying_a_fleet_run_with_its_own_coefficients_gives_its_summary(
        tmp_path: Path, policy: str) -> None:
    measured = _measured_run(tmp_path / policy, policy)
    simulated = simulate_fleet_run(tmp_path / policy, _calibrations())
    for key in ("completed", "request_throughput", "mean_tpot_ms", "p50_ttft_ms",
                "p90_ttft_ms"):
        assert simulated[key] == pytest.approx(measured[key], rel=1e-9), key


def test_each_replica_gets_its_own_request_path_delay(tmp_path: Path) -> None:
    """Swapping the two servers' delays changes the replayed TTFT: the delay follows the
    replica that served the request, not the fleet's first server."""
    measured = _measured_run(tmp_path / "run", "round-robin")
    swapped = _calibrations()
    tiny, small = (swapped[m].coefficients for m in MODELS)
    swapped["tiny-llama-cpu"] = Calibration(**{**swapped["tiny-llama-cpu"].__dict__,
                                               "coefficients": StepCoefficients(
                                                   tiny.c0_s, tiny.c_prefill_s_per_token,
                                                   tiny.c_decode_s_per_seq, small.ttft_offset_s)})
    simulated = simulate_fleet_run(tmp_path / "run", swapped)
    assert simulated["p50_ttft_ms"] > measured["p50_ttft_ms"] + 1.0
