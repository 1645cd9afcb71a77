"""KV capacity and roofline numbers of a replica, from the catalogs.

vLLM sizes its KV cache after loading the weights: ``total GPU memory × gpu_memory_utilization
− (weights + activations + other)``, divided into blocks of ``block_size`` tokens, each token
holding K and V for every layer: ``2 × layers × kv_heads × head_dim × dtype bytes``. With
tensor parallelism over ``n`` GPUs both the memory and the per-token KV are split ``n`` ways,
so the block count of the replica is ``(n × memory × utilisation − weights) / bytes per token``.
Activation memory and CUDA graphs are not known from the catalogs; pass ``reserved_gib`` for
them, or better use the block count the server reported (vLLM logs ``# GPU blocks``): a
simulator that overestimates KV capacity underestimates preemption and TTFT.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hgresearch.data.catalogs import (
    dense_peak_tflops,
    hardware_catalog,
    kv_cache_dtype_bytes,
    model_row,
    normalize_gpu_name,
)
from hgresearch.errors import InputError
from hgresearch.sim.entities import ReplicaConfig
from hgresearch.sim.step_time import RooflineFloor

GIB = 1024**3


def _gpu_row(gpu: str) -> Any:
    table = hardware_catalog()
    return table[table.gpu_name == normalize_gpu_name(gpu, field="gpu")].iloc[0]


def kv_bytes_per_token(model: str, kv_dtype_bytes: float | None = None) -> float:
    """Bytes of KV cache one token takes: ``2 × layers × kv_heads × head_dim × dtype bytes``;
    dtype: ``kv_dtype_bytes`` when given, else vLLM's default (:func:`kv_cache_dtype_bytes`)."""
    row = model_row(model)
    dtype = (kv_cache_dtype_bytes(row.weight_bytes_per_param) if kv_dtype_bytes is None
             else kv_dtype_bytes)
    return 2.0 * float(row.num_layers) * float(row.num_kv_heads) * float(row.head_dim) * dtype


def peak_dense_flops_per_s(model: str, gpu: str) -> float:
    """Dense peak FLOP/s of one ``gpu`` for ``model``'s matrix products
    (:func:`~hgresearch.data.catalogs.dense_peak_tflops`: FP8 tensor cores for FP8 weights on
    a GPU that has them, else FP16)."""
    return dense_peak_tflops(_gpu_row(gpu), model_row(model).weight_bytes_per_param) * 1e12


def weights_bytes(model: str) -> float:
    """Bytes of the model's weights (parameters × bytes per parameter)."""
    row = model_row(model)
    return float(row.params_b) * 1e9 * float(row.weight_bytes_per_param)


def num_kv_blocks_from_memory(
    gpu_memory_gib: float, weights_bytes: float, kv_bytes_per_token: float, *,
    num_gpus: int = 1, gpu_memory_utilization: float = 0.9, block_size: int = 16,
    reserved_gib: float = 0.0,
) -> int:
    """KV blocks of a replica: ``(num_gpus × (memory × utilisation − reserved) − weights)
    / (kv bytes per token × block_size)``, rounded down.

    Raises :class:`InputError` when the weights leave no room for a single block.
    """
    if not 0 < gpu_memory_utilization <= 1:
        raise InputError(f"expected a fraction in (0, 1], got {gpu_memory_utilization}",
                         field="gpu_memory_utilization")
    free_bytes = (num_gpus * (gpu_memory_gib * gpu_memory_utilization - reserved_gib) * GIB
                  - weights_bytes)
    blocks = int(free_bytes // (kv_bytes_per_token * block_size))
    if blocks < 1:
        raise InputError(
            f"no room for KV cache: {num_gpus} × {gpu_memory_gib} GiB × "
            f"{gpu_memory_utilization} holds less than the weights "
            f"({weights_bytes / GIB:.1f} GiB)", field="num_gpus")
    return blocks


def replica_config_from_catalogs(
    model: str, gpu: str, *, num_gpus: int = 1, gpu_memory_utilization: float = 0.9,
    block_size: int = 16, max_num_seqs: int = 256, max_num_batched_tokens: int = 2048,
    reserved_gib: float = 0.0, kv_dtype_bytes: float | None = None,
) -> ReplicaConfig:
    """A :class:`ReplicaConfig` whose KV blocks come from the catalogs' GPU memory
    (``memory_gb``, read as GiB: the H100's 80 GB and the RTX 4090's 24 GB are binary sizes)
    and the model's architecture; see the module docstring for what this leaves out."""
    blocks = num_kv_blocks_from_memory(
        float(_gpu_row(gpu).memory_gb), weights_bytes(model),
        kv_bytes_per_token(model, kv_dtype_bytes), num_gpus=num_gpus,
        gpu_memory_utilization=gpu_memory_utilization, block_size=block_size,
        reserved_gib=reserved_gib)
    return ReplicaConfig(num_kv_blocks=blocks, block_size=block_size, max_num_seqs=max_num_seqs,
                         max_num_batched_tokens=max_num_batched_tokens)


def roofline_floor_from_catalogs(
    model: str, gpu: str, *, num_gpus: int = 1, kv_dtype_bytes: float | None = None,
) -> RooflineFloor:
    """The roofline floor of ``model`` on ``num_gpus`` × ``gpu`` (:func:`roofline_floor`, the
    model's numbers from the architecture catalog)."""
    row = model_row(model)
    return roofline_floor(weights_bytes=weights_bytes(model),
                          kv_bytes_per_token=kv_bytes_per_token(model, kv_dtype_bytes),
                          params_b=float(row.params_b),
                          weight_bytes_per_param=float(row.weight_bytes_per_param),
                          gpu=gpu, num_gpus=num_gpus)


def roofline_floor(*, weights_bytes: float, kv_bytes_per_token: float, params_b: float,
                   weight_bytes_per_param: float, gpu: str, num_gpus: int) -> RooflineFloor:
    """The roofline floor of a model with these numbers on ``num_gpus`` × ``gpu`` (tensor
    parallel: bandwidth and peak FLOPs add up; communication is ignored): catalog bandwidth
    (GB/s, decimal) and dense peak FLOP/s (:func:`~hgresearch.data.catalogs.dense_peak_tflops`),
    FLOPs per token = 2 × parameters. Catalog models and a user's architecture share it."""
    gpu_row = _gpu_row(gpu)
    return RooflineFloor(
        weights_bytes=weights_bytes,
        kv_bytes_per_token=kv_bytes_per_token,
        bandwidth_bytes_per_s=num_gpus * float(gpu_row.memory_bandwidth_gb_per_s) * 1e9,
        flops_per_token=2.0 * (params_b * 1e9),
        peak_flops_per_s=num_gpus * (dense_peak_tflops(gpu_row, weight_bytes_per_param) * 1e12),
    )


#: vLLM's startup lines that state the KV cache it allocated (V1: tokens; V0: blocks).
_KV_TOKENS_RE = re.compile(r"KV cache size: ([\d,]+) tokens")
_GPU_BLOCKS_RE = re.compile(r"# GPU blocks: (\d+)")
_CPU_BLOCKS_RE = re.compile(r"# CPU blocks: (\d+)")


def kv_cache_tokens_from_log(text: str, block_size: int = 16) -> int | None:
    """KV tokens a vLLM server reported at startup (its log text), or ``None`` if it did not:
    V1's ``KV cache size: N tokens`` (the last one logged) or V0's ``# GPU blocks: B`` (its
    ``# CPU blocks`` are swap space on a GPU, the KV cache only on the CPU backend)."""
    tokens = _KV_TOKENS_RE.findall(text)
    if tokens:
        return int(tokens[-1].replace(",", ""))
    blocks = _GPU_BLOCKS_RE.findall(text) or _CPU_BLOCKS_RE.findall(text)
    return int(blocks[-1]) * block_size if blocks else None


# ---------------------------------------------------------------------------------------------
# The KV cache a measured server reported (calibration of a user's runs)
# ---------------------------------------------------------------------------------------------

#: Where a replica's KV capacity came from, best first: the server's ``/metrics``
#: (``vllm:cache_config_info``, kept in ``server_metrics.json``), its start-up log, a number the
#: user gave, the catalogs' memory bound (an upper bound: activations are not subtracted).
KV_SOURCES = ("server_metrics", "server_log", "given", "catalog")


@dataclass(frozen=True)
class KvCache:
    """A replica's KV cache: ``num_blocks`` blocks of ``block_size`` tokens, where the number
    came from (one of :data:`KV_SOURCES`) and which file said so (``detail``)."""

    num_blocks: int
    block_size: int
    source: str
    detail: str = ""

    @property
    def tokens(self) -> int:
        """Tokens the cache holds."""
        return self.num_blocks * self.block_size


def server_kv_cache(run_dirs: Sequence[str | Path]) -> KvCache | None:
    """The KV cache the server of these run folders reported, best source first: the
    ``server_metrics.json`` of a run (``num_gpu_blocks`` × ``block_size``), else a server log
    (:func:`kv_cache_tokens_from_log`: V1 states tokens, so the block size is the metrics' where a
    run has them, else vLLM's default 16); None when no run folder says. Runs that disagree
    (two server configurations given as one) are an :class:`InputError` naming both files."""
    from hgresearch.data.runfolder import (
        SERVER_METRICS_FILE,
        read_server_kv_cache,
        server_log_paths,
    )

    found: list[KvCache] = []
    for run_dir in map(Path, run_dirs):
        kv = read_server_kv_cache(run_dir)
        if kv is not None:
            found.append(KvCache(int(kv["num_gpu_blocks"]), int(kv.get("block_size") or 16),
                                 "server_metrics", str(run_dir / SERVER_METRICS_FILE)))
    if found:
        for other in found[1:]:
            if other.num_blocks != found[0].num_blocks:
                raise InputError(f"the server reported {other.num_blocks} KV blocks here but "
                                 f"{found[0].num_blocks} in {found[0].detail}: runs of "
                                 "different server configurations", file=other.detail,
                                 field="server.kv_cache.num_gpu_blocks")
        return found[0]
    for run_dir in map(Path, run_dirs):
        for log in server_log_paths(run_dir):
            text = log.read_text(encoding="utf-8", errors="replace")
            tokens = kv_cache_tokens_from_log(text)
            if tokens:
                block_size = 16
                return KvCache(max(tokens // block_size, 1), block_size, "server_log", str(log))
    return None
