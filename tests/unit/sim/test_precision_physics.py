"""One definition of a replica's precision physics: the KV-cache dtype (vLLM's
``kv_cache_dtype="auto"``) and the dense peak FLOP/s for the weights' precision
(``hgresearch.data.catalogs``). The simulator's catalog replica, a calibration file's
architecture, a user calibration's roofline floor and the roofline bounds of the runs must
all agree on every catalog model and GPU: they disagreed for the FP8 checkpoint (an 8-bit KV
cache and the FP16 rate in two of the four places)."""

from __future__ import annotations

import math

import pytest

from hgresearch.data.catalogs import (
    dense_peak_tflops,
    hardware_catalog,
    kv_cache_dtype_bytes,
    model_catalog,
)
from hgresearch.fits.roofline import gpu_constants, model_constants
from hgresearch.sim.calibration_file import catalog_architecture
from hgresearch.sim.replica_limits import kv_bytes_per_token, roofline_floor_from_catalogs
from hgresearch.sim.user_calibration import catalog_floor

FP8_MODEL = "Llama-3.1-Nemotron-70B-Instruct-HF-FP8-dynamic"


def _gpu(name: str):
    table = hardware_catalog()
    return table[table.gpu_name == name].iloc[0]


def test_kv_dtype_is_the_model_dtype_and_16_bit_for_quantized_weights() -> None:
    assert kv_cache_dtype_bytes(1.0) == 2.0  # FP8 weights, 16-bit model dtype
    assert kv_cache_dtype_bytes(0.5) == 2.0  # INT4
    assert kv_cache_dtype_bytes(2.0) == 2.0
    assert kv_cache_dtype_bytes(4.0) == 4.0  # an FP32 model (the CPU runs' tiny Llama)


def test_fp8_weights_use_the_fp8_rate_only_where_the_gpu_has_one() -> None:
    h100, a100 = _gpu("H100-PCIe"), _gpu("A100-SXM")
    assert dense_peak_tflops(h100, 1.0) == float(h100.fp8_dense_tflops) == 1513.0
    assert dense_peak_tflops(h100, 2.0) == float(h100.fp16_dense_tflops)
    assert math.isnan(float(a100.fp8_dense_tflops))
    assert dense_peak_tflops(a100, 1.0) == float(a100.fp16_dense_tflops)


@pytest.mark.parametrize("model", sorted(model_catalog().model))
def test_every_path_agrees_on_kv_bytes_and_peak_flops(model: str) -> None:
    architecture = catalog_architecture(model)
    assert architecture.kv_bytes_per_token == pytest.approx(kv_bytes_per_token(model))
    roofline_model = model_constants(model)
    assert roofline_model["kv_bytes_per_token"] == pytest.approx(kv_bytes_per_token(model))
    gpus = hardware_catalog()
    for gpu in gpus[gpus.fp16_dense_tflops > 0].gpu_name:
        for count in (1, 4):
            simulator = roofline_floor_from_catalogs(model, gpu, num_gpus=count)
            user = catalog_floor(architecture, gpu, count)
            assert user is not None, gpu
            for field in ("peak_flops_per_s", "kv_bytes_per_token", "weights_bytes",
                          "bandwidth_bytes_per_s", "flops_per_token"):
                assert getattr(user, field) == pytest.approx(getattr(simulator, field)), \
                    (gpu, count, field)
        bounds = gpu_constants(gpu, weight_bytes_per_param=roofline_model[
            "weight_bytes_per_param"])
        assert bounds["flop_per_s"] == pytest.approx(
            roofline_floor_from_catalogs(model, gpu).peak_flops_per_s), gpu


def test_the_fp8_checkpoint_is_bounded_at_the_fp8_rate() -> None:
    """The roofline bound of the FP8 model's prefill on an H100 uses 1513 TFLOPS; with the
    FP16 rate it would be twice the true minimum, so not a bound."""
    bounds = gpu_constants("H100-PCIe", weight_bytes_per_param=model_constants(FP8_MODEL)[
        "weight_bytes_per_param"])
    assert bounds["flop_per_s"] == pytest.approx(1513e12)
    assert gpu_constants("H100-PCIe")["flop_per_s"] == pytest.approx(
        float(_gpu("H100-PCIe").fp16_dense_tflops) * 1e12)
