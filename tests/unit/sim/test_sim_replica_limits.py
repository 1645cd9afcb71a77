"""KV capacity, roofline floor and step-time models of the replica simulator."""

from __future__ import annotations

import pytest

from hgresearch.errors import InputError
from hgresearch.sim import (
    ConstantStepTimeModel,
    LinearStepTimeModel,
    RooflineFloor,
    kv_bytes_per_token,
    num_kv_blocks_from_memory,
    replica_config_from_catalogs,
    roofline_floor_from_catalogs,
    weights_bytes,
)

GIB = 1024**3
QWEN_14B = "DeepSeek-R1-Distill-Qwen-14B"


def test_kv_bytes_per_token_from_the_architecture():
    # 14B: 48 layers, 8 KV heads of 128, bf16: K and V.
    assert kv_bytes_per_token(QWEN_14B) == 2 * 48 * 8 * 128 * 2
    assert kv_bytes_per_token(QWEN_14B, kv_dtype_bytes=1) == 2 * 48 * 8 * 128
    assert weights_bytes(QWEN_14B) == pytest.approx(14.77e9 * 2)


def test_kv_blocks_from_memory_by_hand():
    # 80 GiB x 0.9 = 72 GiB, less 27.5 GiB of weights, in 16-token blocks of 192 KiB tokens.
    blocks = num_kv_blocks_from_memory(80, 29.54e9, 196_608, gpu_memory_utilization=0.9)
    assert blocks == int((72 * GIB - 29.54e9) // (196_608 * 16))
    # Tensor parallel: memory adds up, the weights are counted once.
    two = num_kv_blocks_from_memory(24, 29.54e9, 196_608, num_gpus=2)
    assert two == int((2 * 24 * 0.9 * GIB - 29.54e9) // (196_608 * 16))
    assert num_kv_blocks_from_memory(80, 29.54e9, 196_608, reserved_gib=4.0) < blocks


def test_replica_config_from_catalogs():
    h100 = replica_config_from_catalogs(QWEN_14B, "NVIDIA-H100-PCIe")  # an alias works too
    assert h100.num_kv_blocks == num_kv_blocks_from_memory(80, weights_bytes(QWEN_14B),
                                                           kv_bytes_per_token(QWEN_14B))
    assert h100.kv_cache_tokens > 200_000
    two_4090 = replica_config_from_catalogs(QWEN_14B, "RTX-4090", num_gpus=2)
    assert two_4090.num_kv_blocks < h100.num_kv_blocks


def test_catalog_errors_are_input_errors():
    with pytest.raises(InputError, match="unknown model"):
        replica_config_from_catalogs("No-Such-Model", "H100-PCIe")
    with pytest.raises(InputError, match="unknown GPU"):
        replica_config_from_catalogs(QWEN_14B, "GTX-1080")
    with pytest.raises(InputError, match="no room for KV cache"):
        replica_config_from_catalogs("DeepSeek-R1-Distill-Qwen-32B", "RTX-4090")  # 61 GiB on 24
    with pytest.raises(InputError, match="fraction"):
        num_kv_blocks_from_memory(80, 1e9, 1e5, gpu_memory_utilization=1.5)


def test_linear_step_time_and_its_roofline_floor():
    floor = RooflineFloor(weights_bytes=2e9, kv_bytes_per_token=1e5, bandwidth_bytes_per_s=1e12,
                          flops_per_token=2e9, peak_flops_per_s=1e14)
    # Memory-bound decode: (2e9 + 1e5 x 1e4) / 1e12 = 3 ms.
    assert floor.floor_s(0, 10, 10_000) == pytest.approx(3e-3)
    # Compute-bound prefill: 2e9 x 1e4 / 1e14 = 200 ms.
    assert floor.floor_s(10_000, 0, 10_000) == pytest.approx(0.2)
    linear = LinearStepTimeModel(c0_s=1e-3, c_prefill_s_per_token=1e-6, c_decode_s_per_seq=1e-4,
                                 c_kv_s_per_token=1e-8)
    assert linear.step_time_s(100, 10, 1000) == pytest.approx(1e-3 + 1e-4 + 1e-3 + 1e-5)
    floored = LinearStepTimeModel(c0_s=1e-3, floor=floor)
    assert floored.step_time_s(0, 10, 10_000) == pytest.approx(3e-3)  # the floor binds
    assert ConstantStepTimeModel(0.5).step_time_s(1, 2, 3) == 0.5


def test_roofline_floor_from_catalogs_scales_with_gpus():
    one = roofline_floor_from_catalogs(QWEN_14B, "H100-PCIe")
    assert one.bandwidth_bytes_per_s == 2000e9 and one.peak_flops_per_s == 756e12
    assert one.flops_per_token == pytest.approx(2 * 14.77e9)
    two = roofline_floor_from_catalogs(QWEN_14B, "RTX-4090", num_gpus=2)
    assert two.bandwidth_bytes_per_s == 2 * 1008e9
    # 14B weights at 2 TB/s: a decode step cannot beat ~15 ms.
    assert one.floor_s(0, 1, 100) == pytest.approx((29.54e9 + 100 * 196_608) / 2000e9)
