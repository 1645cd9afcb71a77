"""Roofline bounds: the physical limits every measured run is judged against.

From the hardware catalog (memory bandwidth, dense tensor TFLOPS: FP8 for FP8 weights on a GPU
with FP8 tensor cores, else FP16) and the model
architecture catalog (parameters, layers, KV heads, head dim, vocabulary, bytes per weight):

* **decode step** at batch B on n GPUs (tensor parallel: every GPU reads its 1/n shard in
  parallel) cannot be faster than
  ``t_min(B) = max( (W + B·c·kv) / (n·BW) ,  2·P·B / (n·F) )``
  where W is the weight bytes that must be read every step, c the mean context length per
  sequence during decode, kv the KV-cache bytes per token, P the parameters that multiply
  (FLOPs per token ≈ 2P) and BW, F the per-GPU bandwidth and FLOP/s;
* **prefill** of a prompt of p tokens cannot take less than
  ``max( 2·P·p / (n·F) ,  W / (n·BW) )``.

Bytes and FLOPs are deliberately *lower* estimates so the bounds stay bounds: the input
embedding table is not counted (only B rows of it are gathered per step; with tied embeddings
it is the LM head and is counted), activations and all-reduce traffic are ignored, KV bytes are
those of vLLM's default cache dtype (16-bit for FP8 checkpoints), and FP8 checkpoints count every
weight at one byte and multiply at the FP8 rate (W8A8; with the FP16 rate their compute bound
would be twice the true one, not a bound).

For a measured run the decode batch is not recorded, but Little's law gives its time average:
``B = output tokens/s × mean TPOT``. Achieved decode tokens/s divided by the bound at that B
simplifies to ``t_min(B) / mean TPOT``. The prefill ratio is ``bound(mean prompt) /
mean TTFT``. Both must be ≤ 1; a run above 1 means the catalog or the formula is wrong.
The *ceiling* is the decode bound at the largest batch the KV cache can hold
(90 % of GPU memory minus weights, at most 256 sequences — vLLM's defaults).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import pandas as pd

from hgresearch.data.catalogs import (
    ACTIVATION_DTYPE_BYTES,
    dense_peak_tflops,
    hardware_catalog,
    kv_cache_dtype_bytes,
    model_catalog,
)
from hgresearch.fits.common import ModelInputError, config_label, require_columns, warn

ROOFLINE_COLUMNS = ["model", "gpu_name", "gpu_count", "output_throughput_tok_per_s",
                    "mean_tpot_ms", "mean_ttft_ms", "total_input_tok", "total_output_tok",
                    "completed"]
GPU_MEMORY_UTILIZATION = 0.9  # vLLM default
MAX_NUM_SEQS = 256  # vLLM default


def model_constants(model: str, overrides: dict[str, float] | None = None
                    ) -> dict[str, float]:
    """Bytes and FLOPs per token of a model from
    ``hgresearch/data/catalogs/model_architectures.csv``
    (``overrides`` replaces catalog columns, e.g. ``{"weight_bytes_per_param": 2}``)."""
    catalog = model_catalog()
    rows = catalog[catalog.model == model]
    if rows.empty:
        raise ModelInputError(f"model {model!r} is not in "
                              "hgresearch/data/catalogs/model_architectures.csv "
                              "(add its config.json values there)")
    row = rows.iloc[0].copy()
    for column, value in (overrides or {}).items():
        row[column] = value
    params = float(row.params_b) * 1e9
    embedding = float(row.vocab_size) * float(row.hidden_size)
    tied = str(row.tie_word_embeddings).strip().lower() == "true"
    # Untied: the input table is only gathered, never streamed; tied: it is the LM head.
    streamed = params if tied else params - embedding
    multiplied = params if tied else params - embedding  # the LM head multiplies either way
    return {
        "weight_bytes_per_param": float(row.weight_bytes_per_param),
        "weight_bytes_streamed": streamed * float(row.weight_bytes_per_param),
        "weight_bytes_total": params * float(row.weight_bytes_per_param),
        "flops_per_token": 2.0 * multiplied,
        "kv_bytes_per_token": 2.0 * float(row.num_layers) * float(row.num_kv_heads)
        * float(row.head_dim) * kv_cache_dtype_bytes(row.weight_bytes_per_param),
    }


def gpu_constants(gpu_name: str, overrides: dict[str, float] | None = None, *,
                  weight_bytes_per_param: float = ACTIVATION_DTYPE_BYTES) -> dict[str, float]:
    """Memory bandwidth (bytes/s), dense FLOP/s for weights of ``weight_bytes_per_param``
    (:func:`~hgresearch.data.catalogs.dense_peak_tflops`) and memory (bytes) of one GPU
    (``overrides`` replaces catalog columns, e.g. ``{"fp16_dense_tflops": 165}``)."""
    catalog = hardware_catalog()
    rows = catalog[catalog.gpu_name == gpu_name]
    if rows.empty or not np.isfinite(float(rows.iloc[0].memory_bandwidth_gb_per_s)):
        raise ModelInputError(f"GPU {gpu_name!r} has no bandwidth/TFLOPS in "
                              "hgresearch/data/catalogs/hardware.csv")
    row = rows.iloc[0].copy()
    for column, value in (overrides or {}).items():
        row[column] = value
    return {"bandwidth_b_per_s": float(row.memory_bandwidth_gb_per_s) * 1e9,
            "flop_per_s": dense_peak_tflops(row, weight_bytes_per_param) * 1e12,
            "memory_b": float(row.memory_gb) * 1e9}


def decode_step_min_s(batch: npt.ArrayLike, context_tok: npt.ArrayLike, n_gpus: npt.ArrayLike,
                      model: dict[str, float], gpu: dict[str, float]) -> np.ndarray:
    """Lower bound on one decode step (seconds) at batch ``batch``."""
    batch = np.asarray(batch, float)
    gpus = np.asarray(n_gpus, float)
    memory = (model["weight_bytes_streamed"] + batch * np.asarray(context_tok, float)
              * model["kv_bytes_per_token"]) / (gpus * gpu["bandwidth_b_per_s"])
    compute = model["flops_per_token"] * batch / (gpus * gpu["flop_per_s"])
    step_s: np.ndarray = np.maximum(memory, compute)
    return step_s


def max_batch(context_tok: float, n_gpus: int, model: dict[str, float],
              gpu: dict[str, float]) -> float:
    """Sequences the KV cache holds at vLLM's defaults (at least 1, at most 256)."""
    free = n_gpus * gpu["memory_b"] * GPU_MEMORY_UTILIZATION - model["weight_bytes_total"]
    seqs = free / (context_tok * model["kv_bytes_per_token"])
    return float(min(max(seqs, 1.0), MAX_NUM_SEQS))


def roofline_table(runs: pd.DataFrame,
                   model_overrides: dict[str, dict[str, float]] | None = None,
                   gpu_overrides: dict[str, dict[str, float]] | None = None) -> pd.DataFrame:
    """Achieved / bound for every run (GPU runs with catalog entries; others are skipped
    with a warning). Adds ``exceeds_bound`` — must be False everywhere.

    ``model_overrides`` / ``gpu_overrides`` (by model / GPU name) replace catalog values, to
    test how sensitive the check is to a catalog entry."""
    require_columns(runs, ROOFLINE_COLUMNS, "roofline")
    rows = []
    skipped: set[str] = set()
    for run in runs.itertuples(index=False):
        try:
            model = model_constants(run.model, (model_overrides or {}).get(run.model))
            gpu = gpu_constants(run.gpu_name, (gpu_overrides or {}).get(run.gpu_name),
                                weight_bytes_per_param=model["weight_bytes_per_param"])
        except ModelInputError as err:
            skipped.add(str(err))
            continue
        n = int(run.gpu_count)
        prompt = run.total_input_tok / run.completed
        output = run.total_output_tok / run.completed
        context = prompt + output / 2.0
        tpot_s = run.mean_tpot_ms / 1e3
        batch = run.output_throughput_tok_per_s * tpot_s
        step_min = float(decode_step_min_s(batch, context, n, model, gpu))
        prefill_min = max(model["flops_per_token"] * prompt / (n * gpu["flop_per_s"]),
                          model["weight_bytes_streamed"] / (n * gpu["bandwidth_b_per_s"]))
        b_max = max_batch(context, n, model, gpu)
        ceiling = b_max / float(decode_step_min_s(b_max, context, n, model, gpu))
        rows.append({
            "run_id": getattr(run, "run_id", None), "model": run.model,
            "gpu_name": run.gpu_name, "gpu_count": n,
            "request_rate_qps": getattr(run, "request_rate_qps", math.nan),
            "repeat_index": getattr(run, "repeat_index", 0),
            "batch_little": batch, "context_tok": context,
            "decode_bound_tok_per_s": batch / step_min,
            "achieved_decode_tok_per_s": run.output_throughput_tok_per_s,
            "decode_ratio": step_min / tpot_s,
            "memory_bound_share": float(
                (model["weight_bytes_streamed"] + batch * context * model["kv_bytes_per_token"])
                / (n * gpu["bandwidth_b_per_s"]) / step_min),
            "prefill_min_ms": 1e3 * prefill_min,
            "prefill_ratio": 1e3 * prefill_min / run.mean_ttft_ms,
            "max_batch": b_max,
            "decode_ceiling_tok_per_s": ceiling,
            "ceiling_ratio": run.output_throughput_tok_per_s / ceiling,
        })
    for reason in sorted(skipped):
        warn(f"roofline: skipped runs — {reason}")
    table = pd.DataFrame(rows)
    if not table.empty:
        table["exceeds_bound"] = (table.decode_ratio > 1.0) | (table.prefill_ratio > 1.0) | (
            table.ceiling_ratio > 1.0)
        if table.exceeds_bound.any():
            bad = table[table.exceeds_bound]
            warn(f"roofline: {len(bad)} run(s) exceed their bound (first: "
                 f"{config_label(bad.iloc[0])}); check the catalogs")
    return table
