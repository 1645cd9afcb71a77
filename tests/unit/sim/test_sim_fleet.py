"""Fleet simulator: one event loop over several replicas behind a routing policy; replicas
from a fleet file; per-replica and overall summaries (the fleet file's own checks:
test_fleet_spec.py)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hgresearch.errors import InputError
from hgresearch.sim import LinearStepTimeModel, ReplicaConfig, simulate_replica
from hgresearch.sim.calibrate import Calibration, StepCoefficients, replica_for
from hgresearch.sim.fleet import (
    CALIBRATED,
    FLEET_FILE,
    ROOFLINE_ONLY,
    SimReplica,
    fleet_summary,
    run_fleet,
    sim_replicas,
    simulate_fleet,
)
from hgresearch.sim.fleet_spec import load_fleet
from hgresearch.sim.simulator import make_requests
from hgresearch.traffic.arrivals import arrival_offsets_ns
from hgresearch.traffic.routing import JoinShortestQueue, Policy, RoundRobin, make_policy

FAST = LinearStepTimeModel(c0_s=0.005, c_prefill_s_per_token=2e-5, c_decode_s_per_seq=1e-4)
SLOW = LinearStepTimeModel(c0_s=0.02, c_prefill_s_per_token=1e-4, c_decode_s_per_seq=5e-4)


def _workload(n: int, seed: int, rate: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    arrivals = arrival_offsets_ns(n, rate, seed=seed) / 1e9
    return arrivals, rng.integers(5, 600, n), rng.integers(1, 300, n)


def _fleet(num_kv_blocks: int = 400) -> list[SimReplica]:
    """One fast replica and two slow ones (price: the slow ones are cheaper per hour)."""
    return [SimReplica(name="fast", config=ReplicaConfig(num_kv_blocks=num_kv_blocks),
                       step_model=FAST, capacity_weight=4.0, price_usd_per_gpu_h=2.0),
            *[SimReplica(name=f"slow #{k}", config=ReplicaConfig(num_kv_blocks=num_kv_blocks),
                         step_model=SLOW, capacity_weight=1.0, num_gpus=2,
                         price_usd_per_gpu_h=0.3) for k in (1, 2)]]


def test_one_replica_fleet_equals_the_replica_simulator() -> None:
    arrivals, prompts, outputs = _workload(300, seed=3, rate=20.0)
    config = ReplicaConfig(num_kv_blocks=120)  # small: preemptions happen
    single = simulate_replica(config, FAST, arrivals, prompts, outputs)
    fleet = simulate_fleet([SimReplica(name="only", config=config, step_model=FAST)],
                           JoinShortestQueue(), arrivals, prompts, outputs)
    assert single.num_preemptions.sum() > 0
    pd.testing.assert_frame_equal(fleet.drop(columns=["replica", "endpoint"]),
                                  single.drop(columns=["endpoint"]))
    assert single.endpoint.isna().all()
    assert set(fleet.endpoint) == {"only"}


@pytest.mark.parametrize("policy", list(Policy))
def test_conservation_every_request_finishes_once_on_one_replica(policy: Policy) -> None:
    arrivals, prompts, outputs = _workload(400, seed=5, rate=40.0)
    replicas = _fleet(num_kv_blocks=150)
    requests = make_requests(replicas[0].config, arrivals, prompts, outputs)
    run = run_fleet(replicas, make_policy(policy, seed=1, threshold_tokens=300,
                                          max_outstanding=4), requests)
    assert all(0 <= i < 3 for i in run.replica_of)
    assert sum(r.num_arrivals for r in run.runs) == 400
    assert sum(r.num_completions for r in run.runs) == 400
    served = sorted(r.index for part in run.runs for r in part.requests)
    assert served == list(range(400))  # each on exactly one replica
    assert all(r.num_generated == r.output_tokens for r in requests)
    assert all(r.first_token_s > r.arrival_s and r.done_s >= r.first_token_s for r in requests)


def test_state_dependent_policies_use_the_shared_clock() -> None:
    """JSQ sends more to the fast replica than round-robin does (it frees up sooner), and the
    fleet's p99 TTFT is lower than round-robin's."""
    arrivals, prompts, outputs = _workload(600, seed=11, rate=30.0)
    by_policy = {}
    for policy in (RoundRobin(), JoinShortestQueue()):
        frame = simulate_fleet(_fleet(), policy, arrivals, prompts, outputs)
        by_policy[type(policy).__name__] = frame
    rr, jsq = by_policy["RoundRobin"], by_policy["JoinShortestQueue"]
    assert (rr.replica == 0).sum() == 200
    assert (jsq.replica == 0).sum() > 300
    assert np.percentile(jsq.ttft_ms, 99) < np.percentile(rr.ttft_ms, 99)


def test_deterministic_by_seed() -> None:
    arrivals, prompts, outputs = _workload(300, seed=2, rate=30.0)

    def run(seed: int) -> pd.DataFrame:
        return simulate_fleet(_fleet(), make_policy("weighted-random", seed=seed), arrivals,
                              prompts, outputs)

    pd.testing.assert_frame_equal(run(4), run(4))
    assert not run(4).replica.equals(run(5).replica)


def test_summary_per_replica_and_overall_with_costs() -> None:
    arrivals, prompts, outputs = _workload(200, seed=1, rate=10.0)
    replicas = _fleet()
    frame = simulate_fleet(replicas, JoinShortestQueue(), arrivals, prompts, outputs)
    table = fleet_summary(frame, replicas)
    assert list(table.replica) == ["fast", "slow #1", "slow #2", "all"]
    assert table.completed.iloc[:3].sum() == table.completed.iloc[3] == 200
    duration_h = (frame.t_done_ns.max() - frame.t_sent_ns.min()) / 1e9 / 3600
    assert table.cost_usd.iloc[3] == pytest.approx(duration_h * (2.0 + 2 * 2 * 0.3))
    tokens = frame.prompt_tokens.sum() + frame.output_tokens.sum()
    assert table.cost_usd_per_1m_tok.iloc[3] == pytest.approx(
        table.cost_usd.iloc[3] / (tokens / 1e6))
    assert table.p99_ttft_ms.iloc[3] == pytest.approx(np.percentile(frame.ttft_ms, 99))
    # Test replicas name no GPU: no TDP, so energy is missing (NaN), never zero.
    assert table.tdp_energy_j.isna().all()


def test_summary_energy_and_carbon_follow_the_paper_tdp_model(tmp_path: Path) -> None:
    from hgresearch.accounting.energy import PAPER_GRID_G_PER_KWH, PAPER_TDP_W

    path = tmp_path / "fleet.yaml"
    path.write_text(FLEET_YAML)
    replicas = sim_replicas(load_fleet(path), fits={})
    arrivals, prompts, outputs = _workload(100, seed=1, rate=20.0)
    frame = simulate_fleet(replicas, JoinShortestQueue(), arrivals, prompts, outputs)
    table = fleet_summary(frame, replicas)
    duration_s = (frame.t_done_ns.max() - frame.t_sent_ns.min()) / 1e9
    power_w = PAPER_TDP_W["H100-PCIe"] + 3 * 2 * PAPER_TDP_W["RTX-4090"]
    assert table.tdp_energy_j.iloc[-1] == pytest.approx(power_w * duration_s)
    tokens = frame.prompt_tokens.sum() + frame.output_tokens.sum()
    kwh_per_1m = power_w * duration_s / 3.6e6 / (tokens / 1e6)
    assert table.tdp_kwh_per_1m_tok.iloc[-1] == pytest.approx(kwh_per_1m)
    assert table.tdp_g_co2_per_1m_tok.iloc[-1] == pytest.approx(
        kwh_per_1m * PAPER_GRID_G_PER_KWH)


FLEET_YAML = """\
name: hybrid
replicas:
  - config: DeepSeek-R1-Distill-Qwen-14B on 1x H100-PCIe
    count: 1
    step_time: {c0_s: 0.01, c_decode_s_per_seq: 0.0002}
  - config: DeepSeek-R1-Distill-Qwen-14B on 2x RTX-4090
    count: 3
    price_usd_per_gpu_h: 0.35
"""


def test_fleet_file_expands_counts_and_builds_replicas(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(FLEET_YAML)
    fleet = load_fleet(path)
    names = [r.name for r in fleet.replicas]
    assert names == ["DeepSeek-R1-Distill-Qwen-14B on 1x H100-PCIe",
                     *[f"DeepSeek-R1-Distill-Qwen-14B on 2x RTX-4090 #{k}" for k in (1, 2, 3)]]
    replicas = sim_replicas(fleet, fits={})
    assert [r.step_time_source for r in replicas] == ["fleet file"] + ["roofline floor only"] * 3
    assert replicas[1].price_usd_per_gpu_h == 0.35 and replicas[1].num_gpus == 2
    assert replicas[0].price_usd_per_gpu_h > 0  # from hgresearch/data/catalogs/prices.csv
    assert replicas[0].capacity_weight > 0
    arrivals, prompts, outputs = _workload(50, seed=1, rate=20.0)
    frame = simulate_fleet(replicas, JoinShortestQueue(), arrivals, prompts, outputs)
    assert frame.success.all() and len(frame) == 50


def test_unknown_model_found_when_simulating_names_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(textwrap.dedent("""\
        replicas:
          - config: DeepSeek-R1-Distill-Qwen-14B on 1x H100-PCIe
          - config: NoSuchModel on 1x H100-PCIe
        """))
    with pytest.raises(InputError, match=r"fleet.yaml:3, field 'model': NoSuchModel on 1x"):
        sim_replicas(load_fleet(path), fits={})


def test_cli_sim_fleet_prints_per_replica_and_overall(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """No calibrations (an empty stand-in): fitting every reference configuration takes
    minutes and is not what this test is about."""
    from typer.testing import CliRunner

    from hgresearch.cli import app
    from hgresearch.sim import fleet as fleet_module

    monkeypatch.setattr(fleet_module, "fleet_calibrations", lambda *args, **kwargs: {})
    path = tmp_path / "fleet.yaml"
    path.write_text(FLEET_YAML)
    result = CliRunner().invoke(app, ["sim", "fleet", str(path), "--policy", "jsq", "--qps",
                                      "20", "--num-prompts", "60", "--seed", "1"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"fleet {path}, policy jsq, 20 req/s, 60 requests")
    assert sum(" on 2x RTX-4090 #" in line for line in lines) == 3
    assert lines[-1].split()[:3] == ["all", "7", "60"]  # 1 + 3 × 2 GPUs, every request
    path.write_text("replicas:\n  - config: nonsense\n")
    bad = CliRunner().invoke(app, ["sim", "fleet", str(path)])
    assert bad.exit_code == 2
    assert f"{path}:2, field 'replicas[0].config'" in bad.output


# --- calibrated replicas ------------------------------------------------------------------------

H100_LABEL = "DeepSeek-R1-Distill-Qwen-14B on 1x H100-PCIe"
HYBRID_YAML = f"""\
replicas:
  - config: {H100_LABEL}
  - config: DeepSeek-R1-Distill-Qwen-14B on 2x RTX-4090
    num_kv_blocks: 700
"""


def _stand_in_calibration(ttft_offset_s: float = 0.3, kv_blocks: int = 1000) -> Calibration:
    """A calibration with known coefficients (a real fit takes seconds per configuration):
    a KV capacity and a request-path delay far from the catalogs' and from zero, so the test
    sees whether the fleet took them."""
    replica = replica_for("DeepSeek-R1-Distill-Qwen-14B", "H100-PCIe", 1,
                          kv_cache_tokens=16 * kv_blocks)
    coefficients = StepCoefficients(c0_s=0.03, c_prefill_s_per_token=5e-5,
                                    c_decode_s_per_seq=2e-4, ttft_offset_s=ttft_offset_s)
    return Calibration(replica=replica, coefficients=coefficients, rel_se=(0.0, 0.0, 0.0),
                       rates_qps=(1.0, 4.0), rms_log_error=0.0, num_simulations=0)


def test_fleet_replicas_use_their_configuration_calibration(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(HYBRID_YAML)
    fit = _stand_in_calibration()
    h100, rtx = sim_replicas(load_fleet(path), fits={H100_LABEL: fit})
    assert (h100.step_time_source, rtx.step_time_source) == (CALIBRATED, ROOFLINE_ONLY)
    assert h100.config.num_kv_blocks == 1000 and h100.ttft_offset_s == 0.3
    assert h100.step_model.step_time_s(100, 8, 4000) == pytest.approx(
        fit.coefficients.step_model(fit.replica).step_time_s(100, 8, 4000))
    assert rtx.config.num_kv_blocks == 700 and rtx.ttft_offset_s == 0.0
    # The file's scheduler limits replace the calibration's; its step_time replaces the fit.
    path.write_text(f"replicas:\n  - config: {H100_LABEL}\n    max_num_seqs: 8\n"
                    f"  - config: {H100_LABEL}\n    step_time: {{c0_s: 0.01}}\n")
    limited, given = sim_replicas(load_fleet(path), fits={H100_LABEL: fit})
    assert limited.config.max_num_seqs == 8 and limited.config.num_kv_blocks == 1000
    assert given.step_time_source == FLEET_FILE and given.config.num_kv_blocks != 1000


def test_calibrated_offset_is_added_to_each_replicas_requests() -> None:
    arrivals, prompts, outputs = _workload(60, seed=2, rate=10.0)
    plain = _fleet()
    delayed = [SimReplica(**{**vars(r), "ttft_offset_s": 0.25 if k == 0 else 0.0})
               for k, r in enumerate(plain)]
    base = simulate_fleet(plain, RoundRobin(), arrivals, prompts, outputs)
    shifted = simulate_fleet(delayed, RoundRobin(), arrivals, prompts, outputs)
    on_first = (base.replica == 0).to_numpy()
    np.testing.assert_allclose(shifted.ttft_ms - base.ttft_ms, np.where(on_first, 250.0, 0.0))
    np.testing.assert_allclose(shifted.tpot_ms, base.tpot_ms)


def test_cli_sim_fleet_uses_the_calibration_and_notes_the_rest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The calibrations are a one-entry stand-in (fitting every reference configuration takes
    minutes): the CLI must pick it up for the H100 replica and say that the other one has no
    calibration."""
    from typer.testing import CliRunner

    from hgresearch.cli import app
    from hgresearch.sim import fleet as fleet_module

    seen = {}

    def stand_in(build_dir, reference=None):
        seen["build_dir"] = build_dir
        return {H100_LABEL: _stand_in_calibration(ttft_offset_s=0.3)}

    monkeypatch.setattr(fleet_module, "fleet_calibrations", stand_in)
    path = tmp_path / "fleet.yaml"
    path.write_text(HYBRID_YAML)
    result = CliRunner().invoke(app, ["sim", "fleet", str(path), "--qps", "4",
                                      "--num-prompts", "40", "--build-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert seen["build_dir"] == tmp_path
    notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 2 and "2x RTX-4090: no calibration" in notes[0]
    # the stand-in is not the shared step-time model's: no interval, no stress run
    assert notes[1].startswith("note: no prediction interval and no stress run")
    h100_row = next(line for line in result.stdout.splitlines() if line.startswith(H100_LABEL))
    p50_ttft_ms = float(h100_row[len(H100_LABEL):].split()[5])
    assert p50_ttft_ms >= 300.0  # the stand-in's 0.3 s request-path delay


# --- intervals and the stress run ---------------------------------------------------------------


def test_slower_steps_are_the_same_run_on_a_slower_clock() -> None:
    """Every step and delay ``f`` times as long with every arrival ``f`` times as late is the
    same run with every time × ``f`` (the identity the slow end rests on): the router sees the
    same outstanding work at every arrival, so it makes the same choices."""
    from hgresearch.sim.fleet import with_slower_steps

    factor = 1.37
    replicas = [SimReplica(**{**vars(r), "ttft_offset_s": 0.05}) for r in _fleet()]
    arrivals, prompts, outputs = _workload(150, seed=4, rate=30.0)
    base = simulate_fleet(replicas, JoinShortestQueue(), arrivals, prompts, outputs)
    slow = simulate_fleet(with_slower_steps(replicas, factor), JoinShortestQueue(),
                          arrivals * factor, prompts, outputs)
    assert (slow.replica.to_numpy() == base.replica.to_numpy()).all()
    np.testing.assert_allclose(slow.ttft_ms, base.ttft_ms * factor, rtol=1e-6)
    np.testing.assert_allclose(slow.e2el_ms, base.e2el_ms * factor, rtol=1e-6)
    # the same arrivals on slower steps: every request waits at least as long
    stressed = simulate_fleet(with_slower_steps(replicas, factor), JoinShortestQueue(),
                              arrivals, prompts, outputs)
    assert stressed.ttft_ms.quantile(0.9) > base.ttft_ms.quantile(0.9)
    with pytest.raises(InputError, match="expected a positive step-time factor"):
        with_slower_steps(replicas, 0.0)


def test_cli_sim_fleet_prints_intervals_and_a_stress_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stand-ins: a shared-model calibration of the H100 replica (a real fit takes minutes)
    and the intervals' residuals (every metric 20 % too low to 50 % too high: intervals
    [p / 1.5, p / 0.8] and a slow end of 1 / 0.8 = 1.25; the reference cross-validation takes
    minutes). The RTX replica's step times are the fleet file's: no interval, a note, slowed
    all the same."""
    from typer.testing import CliRunner

    from hgresearch.cli import app
    from hgresearch.sim import fleet as fleet_module
    from hgresearch.sim import intervals as intervals_module
    from hgresearch.sim.step_model import SHARED_MODEL

    shared = _stand_in_calibration(ttft_offset_s=0.01)
    shared.extra["source"] = SHARED_MODEL
    monkeypatch.setattr(fleet_module, "fleet_calibrations",
                        lambda *args, **kwargs: {H100_LABEL: shared})
    residuals = dict.fromkeys(intervals_module.VALIDATION_METRIC, [-0.2, 0.0, 0.5] * 10)
    monkeypatch.setattr(intervals_module, "reference_intervals", lambda *args, **kwargs:
                        intervals_module.PredictionIntervals(residuals, "stand-in residuals"))
    path = tmp_path / "fleet.yaml"
    path.write_text(f"replicas:\n  - config: {H100_LABEL}\n"
                    "  - config: DeepSeek-R1-Distill-Qwen-14B on 2x RTX-4090\n"
                    "    step_time: {c0_s: 0.03, c_decode_s_per_seq: 3.0e-4}\n")
    args = ["sim", "fleet", str(path), "--qps", "6", "--num-prompts", "120",
            "--build-dir", str(tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = result.stdout.splitlines()
    h100_row = next(line for line in out if line.startswith(H100_LABEL))
    p90 = float(h100_row[len(H100_LABEL):].split()[6])
    start = out.index("90% prediction intervals (stand-in residuals):")
    line = out[start + 1]
    assert line.startswith(f"  {H100_LABEL}: request_throughput ")
    value, low, high = map(float, re.search(r"p90_ttft_ms (\S+) \[(\S+), (\S+)\]",
                                            line).groups())
    assert value == p90 and low == pytest.approx(p90 / 1.5, rel=1e-3)
    assert high == pytest.approx(p90 / 0.8, rel=1e-3)
    stress = out.index("stress: the same requests with every step and request-path delay x1.25 "
                       "(the slow end of the 90% step-time interval, one-sided)")
    assert stress == start + 2  # one interval line: the RTX replica has none
    assert out[stress + 1].split()[:3] == ["replica", "completed", "request_throughput"]
    stressed_h100 = next(row for row in out[stress:] if row.startswith(H100_LABEL))
    assert float(stressed_h100[len(H100_LABEL):].split()[5]) >= p90
    assert out[-1].split()[:2] == ["all", "120"]
    assert "note: no prediction interval for DeepSeek-R1-Distill-Qwen-14B on 2x RTX-4090" in (
        result.stderr)
    quiet = CliRunner().invoke(app, [*args, "--confidence", "0"])
    assert quiet.exit_code == 0 and "stress" not in quiet.stdout
    assert "prediction interval" not in quiet.output
    bad = CliRunner().invoke(app, [*args, "--confidence", "1"])
    assert bad.exit_code == 2 and "expected a confidence in [0, 1)" in bad.output
