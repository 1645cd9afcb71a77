"""The shared cross-configuration step-time model, its folds, anomalies and intervals (issue 18,
items 2, 3 and 7)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hgresearch.errors import InputError
from hgresearch.sim.anomalies import excluded_metrics, falling_ttft
from hgresearch.sim.calibrate import replica_for, simulate_summary, vllm085_scheduler_limits
from hgresearch.sim.intervals import coverage_table, intervals_from_points
from hgresearch.sim.replay import reference_workload
from hgresearch.sim.step_model import (
    FIT_TARGETS,
    INITIAL,
    PARAMETERS,
    PREDICTED_UNMEASURED,
    ConfigData,
    GpuFit,
    calibration_for,
    coefficients_for,
    config_physics,
    fit_gpu,
    tensor_parallel_problem,
)
from hgresearch.sim.validation import _folds

GPU = "RTX-4090"


def _fit(values: dict[str, float]) -> GpuFit:
    return GpuFit(gpu_name=GPU, values=values, rel_se=dict.fromkeys(PARAMETERS, 0.1),
                  status=dict.fromkeys(PARAMETERS, "free"), configurations=("a", "b"),
                  num_points=10, num_residuals=50, rms_log_error=0.1, num_evaluations=1)


def test_physics_follow_the_datasheet_and_tensor_parallelism():
    one = config_physics("DeepSeek-R1-Distill-Qwen-14B", GPU, 1)
    four = config_physics("DeepSeek-R1-Distill-Qwen-14B", GPU, 4)
    # 14.77e9 parameters x 2 bytes at 1008 GB/s
    assert one.weights_s == pytest.approx(14.77e9 * 2 / 1008e9)
    assert four.weights_s == pytest.approx(one.weights_s / 4)
    assert four.flops_s_per_token == pytest.approx(one.flops_s_per_token / 4)
    assert one.allreduce_calls == 0 and one.allreduce_s_per_token == 0.0
    # 2 x 48 all-reduces of 5120 x 2 bytes per token, 2(n-1)/n of it over 32 GB/s
    assert four.allreduce_calls == 96
    assert four.allreduce_s_per_token == pytest.approx(96 * 5120 * 2 * 1.5 / 32e9)
    with pytest.raises(InputError):
        config_physics("tiny-llama-cpu", "CPU", 1)
    # 40 attention heads: vLLM cannot split them over 3 GPUs
    with pytest.raises(InputError, match="needs 3 to divide DeepSeek-R1-Distill-Qwen-14B's 40 attention"):
        config_physics("DeepSeek-R1-Distill-Qwen-14B", GPU, 3)
    # a model the catalog does not hold (a calibration file's own architecture): unchecked
    assert tensor_parallel_problem("my-own-model", 3) is None
    assert tensor_parallel_problem("DeepSeek-R1-Distill-Qwen-14B", 8) is None



def test_fp8_weights_compute_at_the_fp8_rate_where_the_gpu_has_it_and_keep_a_16_bit_kv():
    """An FP8 (W8A8) checkpoint runs its GEMMs on FP8 tensor cores (twice the FP16 rate on an
    H100) but falls back to the FP16 rate on a GPU without them (A100); its KV cache stays
    16-bit (vLLM's kv_cache_dtype="auto"), so a token's KV is that of a 16-bit model."""
    fp8 = "Llama-3.1-Nemotron-70B-Instruct-HF-FP8-dynamic"
    h100 = config_physics(fp8, "H100-PCIe", 2)
    a100 = config_physics(fp8, "A100-SXM", 2)
    # 70.55e9 parameters: 2 FLOPs each, split over 2 GPUs of 1513 (FP8) / 312 (FP16) TFLOPS
    assert h100.flops_s_per_token == pytest.approx(2 * 70.55e9 / 2 / 1513e12)
    assert a100.flops_s_per_token == pytest.approx(2 * 70.55e9 / 2 / 312e12)
    # a 16-bit model on the same H100s keeps the FP16 rate
    fp16 = config_physics("Meta-Llama-3-70B-Instruct", "H100-PCIe", 2)
    assert fp16.flops_s_per_token == pytest.approx(2 * 70.55e9 / 2 / 756e12, rel=0.01)
    # 80 layers x 8 KV heads x 128 x K and V x 2 bytes, halved per GPU, at 2000 GB/s
    assert h100.kv_s_per_token == pytest.approx(80 * 8 * 128 * 2 * 2 / 2 / 2000e9)
    assert h100.kv_s_per_token == pytest.approx(fp16.kv_s_per_token)
    # the weights themselves are read as FP8: half the 16-bit model's bytes
    assert h100.weights_s == pytest.approx(fp16.weights_s / 2, rel=0.01)

@pytest.mark.parametrize(("count", "per_call"), [(2, 1.0), (4, 1.5), (8, 2.25)])
def test_derived_linear_model_is_the_documented_formula(count, per_call):
    physics = config_physics("DeepSeek-R1-Distill-Qwen-14B", GPU, count)
    values = {**INITIAL, "allreduce_latency_doubling": 1.5, "allreduce_decode_factor": 5.0}
    replica = replica_for("DeepSeek-R1-Distill-Qwen-14B", GPU, count)
    model = coefficients_for(physics, values).step_model(replica)
    prefill, decode, kv = 300, 40, 9000
    # the per-call latency is allreduce_latency_s at 2 GPUs, x1.5 per doubling beyond
    expected = (values["step_overhead_s"] + values["weights_factor"] * physics.weights_s
                + values["allreduce_latency_s"] * per_call * physics.allreduce_calls
                + (values["prefill_factor"] * physics.flops_s_per_token
                   + values["allreduce_factor"] * physics.allreduce_s_per_token) * prefill
                # a decode step's small all-reduces have their own per-token factor
                + (values["decode_factor"] * physics.flops_s_per_token
                   + values["allreduce_decode_factor"] * physics.allreduce_s_per_token) * decode
                + values["kv_factor"] * physics.kv_s_per_token * kv)
    assert model.step_time_s(prefill, decode, kv) == pytest.approx(expected)


def test_vllm_085_scheduler_defaults_by_device_name():
    assert vllm085_scheduler_limits("H100-PCIe") == {"max_num_seqs": 1024,
                                                     "max_num_batched_tokens": 8192}
    assert vllm085_scheduler_limits("RTX-4090") == {"max_num_seqs": 256,
                                                    "max_num_batched_tokens": 2048}


def test_unmeasured_configuration_is_labelled_a_prediction():
    fit = _fit(dict(INITIAL))
    calibration = calibration_for("DeepSeek-R1-Distill-Qwen-32B", GPU, 4, {GPU: fit})
    assert calibration.extra["source"] == PREDICTED_UNMEASURED
    assert "not measured" in calibration.extra["note"]
    assert calibration.replica.num_gpus == 4
    assert calibration.replica.config.max_num_batched_tokens == 2048
    with pytest.raises(InputError, match="no shared step-time model"):
        calibration_for("DeepSeek-R1-Distill-Qwen-32B", "H100-PCIe", 1, {GPU: fit})


def _data(model: str, count: int, values: dict[str, float], rates: list[float],
          n: int = 60) -> ConfigData:
    physics = config_physics(model, GPU, count)
    replica = replica_for(model, GPU, count)
    coefficients = coefficients_for(physics, values)
    workloads = [reference_workload(r, n, 200.0, 120.0) for r in rates]
    rows = [{"request_rate_qps": r, "gpu_name": GPU, "gpu_count": count, "model": model,
             **simulate_summary(replica, coefficients, w)}
            for r, w in zip(rates, workloads, strict=True)]
    points = pd.DataFrame(rows)
    return ConfigData(label=f"{model} on {count}x {GPU}", points=points, replica=replica,
                      workloads=tuple(workloads), physics=physics,
                      mask=np.ones((len(points), len(FIT_TARGETS)), dtype=bool))


def test_fit_recovers_known_shared_parameters():
    true = {**INITIAL, "weights_factor": 1.6, "prefill_factor": 3.0, "step_overhead_s": 4e-3,
            "ttft_offset_s": 0.02}
    rates = [1.0, 8.0, 32.0]
    data = [_data("DeepSeek-R1-Distill-Qwen-1.5B", 1, true, rates),
            _data("DeepSeek-R1-Distill-Qwen-7B", 1, true, rates),
            _data("DeepSeek-R1-Distill-Llama-8B", 1, true, rates)]
    start = fit_gpu(data, max_evaluations=1, uncertainty=False)
    fit = fit_gpu(data, max_evaluations=60)
    assert fit.status["allreduce_factor"].startswith("fixed")  # no tensor-parallel config
    assert fit.values["allreduce_latency_doubling"] == 1.0
    assert fit.rms_log_error < 0.5 * start.rms_log_error
    assert fit.rms_log_error < 0.06
    assert fit.values["weights_factor"] == pytest.approx(1.6, rel=0.25)
    assert all(math.isfinite(fit.rel_se[p]) or fit.status[p] != "free" for p in PARAMETERS)


def test_latency_doubling_is_fixed_with_one_tensor_parallel_degree():
    """With tensor parallelism at one degree only, the per-doubling factor cannot be told from
    the per-call latency: it is fixed at 1 and reported so; the all-reduce terms stay free."""
    rates = [1.0, 8.0]
    data = [_data("DeepSeek-R1-Distill-Qwen-1.5B", 1, dict(INITIAL), rates, n=20),
            _data("DeepSeek-R1-Distill-Qwen-7B", 2, dict(INITIAL), rates, n=20)]
    fit = fit_gpu(data, max_evaluations=2, uncertainty=False)
    assert fit.status["allreduce_latency_doubling"] == "fixed (one tensor-parallel degree)"
    assert fit.values["allreduce_latency_doubling"] == 1.0
    assert fit.status["allreduce_latency_s"] != "fixed (no tensor-parallel configuration)"
    both = data + [_data("DeepSeek-R1-Distill-Llama-8B", 4, dict(INITIAL), rates, n=20)]
    fit = fit_gpu(both, max_evaluations=2, uncertainty=False)
    assert not fit.status["allreduce_latency_doubling"].startswith("fixed")


def test_folds_never_train_on_what_they_predict():
    rates = [1.0, 4.0, 16.0]
    values = dict(INITIAL)
    configs = [_data("DeepSeek-R1-Distill-Qwen-1.5B", 1, values, rates, n=20),
               _data("DeepSeek-R1-Distill-Qwen-7B", 2, values, rates, n=20),
               _data("DeepSeek-R1-Distill-Llama-8B", 1, values, rates, n=20)]
    folds = _folds(GPU, configs)
    schemes = [scheme for scheme, *_ in folds]
    assert schemes.count("LOCO") == 3 and schemes.count("LOQO") == 3
    for scheme, _, training, held in folds:
        if scheme == "LOCO":
            (held_data, _), = held
            assert held_data.label not in {d.label for d in training}
        elif scheme == "LOQO":
            held_rates = {float(d.points.request_rate_qps.iloc[i]) for d, rows in held
                          for i in rows}
            assert len(held_rates) == 1
            trained = {float(r) for d in training for r in d.points.request_rate_qps}
            assert not held_rates & trained


def test_ttft_falling_with_load_is_excluded_with_a_reason():
    points = pd.DataFrame({"request_rate_qps": [1.0, 4.0, 8.0, 16.0],
                           "request_throughput_rps": [1.0, 3.4, 4.5, 4.9],
                           "p50_ttft_ms": [7000.0, 90.0, 120.0, 140.0],
                           "p90_ttft_ms": [9000.0, 200.0, 210.0, 220.0],
                           "p99_ttft_ms": [9500.0, 750.0, 268.0, 266.0]})
    table = falling_ttft(points)
    assert table.request_rate_qps.tolist() == [1.0, 4.0]
    assert "falls" in table.reason.iloc[0]
    assert excluded_metrics(points)[4.0] == {"p50_ttft_ms", "p90_ttft_ms", "p99_ttft_ms"}
    rising = points.assign(p50_ttft_ms=[10.0, 20.0, 40.0, 80.0],
                           p90_ttft_ms=[12.0, 24.0, 48.0, 96.0],
                           p99_ttft_ms=[15.0, 30.0, 60.0, 120.0])
    assert falling_ttft(rising).empty


def test_throughput_falling_with_load_excludes_the_whole_point():
    from hgresearch.sim.anomalies import ALL_METRICS, falling_throughput

    points = pd.DataFrame({"request_rate_qps": [1.0, 8.0, 16.0, 32.0],
                           "request_throughput_rps": [1.0, 4.5, 4.9, 3.7],
                           "p50_ttft_ms": [50.0, 60.0, 80.0, 900.0],
                           "p90_ttft_ms": [60.0, 70.0, 90.0, 1000.0],
                           "p99_ttft_ms": [70.0, 80.0, 100.0, 1100.0]})
    table = falling_throughput(points)
    assert table.request_rate_qps.tolist() == [32.0]
    assert excluded_metrics(points) == {32.0: set(ALL_METRICS)}
    assert falling_throughput(points.assign(request_throughput_rps=[1.0, 4.5, 4.9, 4.8])).empty


def _points(residuals: dict[str, np.ndarray]) -> pd.DataFrame:
    rows = []
    for label, values in residuals.items():
        for i, r in enumerate(values):
            for metric in ("request_throughput_rps", "mean_tpot_ms", "p50_ttft_ms",
                           "p90_ttft_ms", "p99_ttft_ms"):
                rows.append({"scheme": "LOCO", "configuration": label, "held_out_qps": i,
                             "metric": metric, "measured": 100.0, "predicted": 100.0 * (1 + r),
                             "excluded": False})
    return pd.DataFrame(rows)


def test_cross_fitted_coverage_is_near_nominal_and_leaves_the_configuration_out():
    rng = np.random.default_rng(1)
    points = _points({f"c{k}": rng.normal(0.0, 0.2, 40) for k in range(10)})
    table = coverage_table(points).set_index(["metric", "nominal_pct"])
    assert 84 <= table.loc[("mean_tpot_ms", 90.0), "coverage_pct"] <= 96
    assert 74 <= table.loc[("mean_tpot_ms", 80.0), "coverage_pct"] <= 86
    # One configuration far off: its points are judged by the others' residuals only.
    shifted = _points({**{f"c{k}": rng.normal(0.0, 0.05, 40) for k in range(5)},
                       "odd": np.full(40, 1.0)})
    table = coverage_table(shifted).set_index(["metric", "nominal_pct"])
    # Had its own residuals been in the pool, its points would sit inside the 90% interval.
    assert table.loc[("mean_tpot_ms", 90.0), "below"] >= 40
    intervals = intervals_from_points(shifted, leave_out="odd")
    assert "5 configurations" in intervals.source


def test_a_prediction_contradicting_a_met_slo_is_listed_with_its_reason():
    from hgresearch.sim.intervals import PredictionIntervals
    from hgresearch.sim.validation import slo_contradictions

    intervals = PredictionIntervals(
        residuals={"p90_ttft_ms": np.linspace(-0.2, 0.2, 101).tolist(),
                   "p99_ttft_ms": np.linspace(-0.2, 0.2, 101).tolist()}, source="test")
    rows = []
    for label, rate, measured, predicted in [("a", 1.0, 400.0, 420.0),    # agrees
                                             ("a", 4.0, 400.0, 900.0),    # met, sure missed
                                             ("b", 1.0, 7000.0, 120.0)]:  # missed, sure met
        for metric in ("p90_ttft_ms", "p99_ttft_ms"):
            rows.append({"scheme": "in-sample", "configuration": label, "held_out_qps": rate,
                         "metric": metric, "measured": measured, "predicted": predicted})
    excluded = pd.DataFrame({"configuration": ["b"], "request_rate_qps": [1.0],
                             "reason": ["TTFT falls as the offered load rises"]})
    table = slo_contradictions(pd.DataFrame(rows), intervals, excluded=excluded)
    pairs = set(zip(table.configuration, table.request_rate_qps, strict=True))
    assert pairs == {("a", 4.0), ("b", 1.0)}
    assert (table[table.configuration == "a"].reason == "").all()
    assert table[table.configuration == "b"].reason.str.contains("falls").all()
    assert set(table[table.configuration == "a"].limit_ms) == {500.0}



def test_a_met_slo_contradicted_only_by_a_kv_bound_queue_says_so():
    """A met SLO whose prediction lies above the limit only because the simulated queue waits
    for KV blocks (the unbounded-KV counterfactual's interval reaches the limit) gets that
    reason; one whose unbounded-KV prediction is still too slow keeps none."""
    from hgresearch.sim.intervals import PredictionIntervals
    from hgresearch.sim.validation import slo_contradictions

    intervals = PredictionIntervals(residuals={"p90_ttft_ms": np.linspace(-0.2, 0.2, 101).tolist()},
                                    source="test")
    rows = [{"scheme": "in-sample", "configuration": label, "held_out_qps": 16.0,
             "metric": "p90_ttft_ms", "measured": 350.0, "predicted": 2250.0}
            for label in ("kv-bound", "slow-steps")]
    unbounded = pd.DataFrame({"configuration": ["kv-bound", "slow-steps"],
                              "request_rate_qps": [16.0, 16.0],
                              "metric": ["p90_ttft_ms", "p90_ttft_ms"],
                              "predicted": [290.0, 1900.0]})
    table = slo_contradictions(pd.DataFrame(rows), intervals, unbounded_kv=unbounded)
    reasons = table.groupby("configuration").reason.first()
    assert reasons["kv-bound"].startswith("the simulated queue waits for KV blocks")
    assert "290 ms" in reasons["kv-bound"]
    assert reasons["slow-steps"] == ""


def test_unbounded_kv_predictions_lift_a_kv_bound_queue():
    """With the KV cache of a KV-starved replica unbounded, the simulated TTFT of a burst falls
    (nothing waits for blocks) and the counterfactual has one row per point and metric."""
    from dataclasses import replace

    from hgresearch.sim.calibrate import Calibration
    from hgresearch.sim.validation import unbounded_kv_predictions

    model = "DeepSeek-R1-Distill-Qwen-7B"
    replica = replica_for(model, GPU, 1, **vllm085_scheduler_limits(GPU))
    starved = replace(replica, config=replace(replica.config, num_kv_blocks=200))
    coefficients = coefficients_for(config_physics(model, GPU, 1), INITIAL)
    calibration = Calibration(replica=starved, coefficients=coefficients,
                              rel_se=(0.0, 0.0, 0.0), rates_qps=(16.0,), rms_log_error=0.0,
                              num_simulations=0)
    points = pd.DataFrame({"request_rate_qps": [16.0], "completed": [200],
                           "total_input_tok": [200 * 200], "total_output_tok": [200 * 200]})
    table = unbounded_kv_predictions({"c": calibration}, {"c": points})
    assert len(table) == 2 and set(table.metric) == {"p90_ttft_ms", "p99_ttft_ms"}
    workload = reference_workload(16.0, 200, 200.0, 200.0)
    bound = simulate_summary(starved, coefficients, workload)["p90_ttft_ms"]
    free = float(table[table.metric == "p90_ttft_ms"].predicted.iloc[0])
    assert free < 0.5 * bound

def test_fleet_replica_of_an_unmeasured_configuration_is_predicted(tmp_path, monkeypatch):
    from hgresearch.sim import fleet as fleet_module
    from hgresearch.sim import validation as validation_module
    from hgresearch.sim.fleet import PREDICTED, ROOFLINE_ONLY, sim_replicas
    from hgresearch.sim.fleet_spec import load_fleet
    from hgresearch.sim.step_model import calibration_from_fit

    fit = _fit(dict(INITIAL))
    measured = calibration_from_fit(fit, replica_for("DeepSeek-R1-Distill-Qwen-7B", GPU, 1))
    monkeypatch.setattr(fleet_module, "fleet_calibrations",
                        lambda *args, **kwargs: {"DeepSeek-R1-Distill-Qwen-7B on 1x RTX-4090":
                                                 measured})
    monkeypatch.setattr(validation_module, "reference_shared_fits",
                        lambda *args, **kwargs: {GPU: fit})
    path = tmp_path / "fleet.yaml"
    path.write_text("replicas:\n  - config: DeepSeek-R1-Distill-Qwen-32B on 4x RTX-4090\n")
    [replica] = sim_replicas(load_fleet(path), build_dir=tmp_path)
    assert replica.step_time_source == PREDICTED
    expected = calibration_for("DeepSeek-R1-Distill-Qwen-32B", GPU, 4, {GPU: fit})
    assert replica.step_model.step_time_s(100, 8, 4000) == pytest.approx(
        expected.coefficients.step_model(expected.replica).step_time_s(100, 8, 4000))
    # Calibrations the caller chose (here none) are not second-guessed.
    [alone] = sim_replicas(load_fleet(path), fits={}, build_dir=tmp_path)
    assert alone.step_time_source == ROOFLINE_ONLY


def test_scaled_shared_calibration_slows_every_step_including_the_kv_read():
    calibration = calibration_for("DeepSeek-R1-Distill-Qwen-14B", GPU, 4, {GPU: _fit(INITIAL)})
    slow = calibration.scaled(1.5)
    for args in [(0, 8, 100_000), (2048, 0, 0), (0, 1, 0)]:
        base = calibration.coefficients.step_model(calibration.replica).step_time_s(*args)
        assert slow.coefficients.step_model(slow.replica).step_time_s(*args) == pytest.approx(
            1.5 * base)


def test_cost_hessian_and_standard_errors_of_a_known_quadratic():
    """On a quadratic cost the central-difference Hessian is exact; the standard errors are
    s² H⁻¹ where the cost curves upward and inf for a parameter on a flat or downward
    direction (a number there would claim a precision the fit does not have)."""
    from hgresearch.sim.step_model import _cost_hessian, _standard_errors

    true = np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 0.0], [0.0, 0.0, 2.0]])
    center = np.array([0.3, -0.2, 0.1])

    def cost(u: np.ndarray) -> float:
        d = u - center
        return float(0.5 * d @ true @ d + 7.0)

    hessian = _cost_hessian(cost, center, [0, 1, 2], 0.1)
    np.testing.assert_allclose(hessian, true, atol=1e-9)
    se = _standard_errors(hessian, 0.5)
    np.testing.assert_allclose(se, np.sqrt(np.diag(0.5 * np.linalg.inv(true))))
    # the third parameter's direction turns downward: it alone has no standard error
    descending = true.copy()
    descending[2, 2] = -1.0
    se = _standard_errors(descending, 0.5)
    assert math.isinf(se[2]) and np.isfinite(se[:2]).all()
    # only over a subset of the coordinates: the others stay where they are
    assert _cost_hessian(cost, center, [1], 0.1) == pytest.approx(np.array([[3.0]]))
