"""Result-file records shared by the ingest tests (written here in the tools' formats)."""

from __future__ import annotations

import numpy as np

# Three requests, the second failed (vLLM keeps it in every array with ttft 0 and an error).
TTFTS_S = [0.020, 0.0, 0.030]
LATENCIES_S = [0.200, 0.0, 0.330]
ITLS_S = [[0.010, 0.012, 0.011], [], [0.015, 0.020, 0.014, 0.016]]
OUTPUT_LENS = [4, 0, 5]


def vllm_bench_serve_record(detailed: bool = True) -> dict:
    """A ``vllm bench serve --save-result [--save-detailed]`` record: keys in the order of
    vllm/benchmarks/serve.py (main + benchmark), default ``--metric-percentiles 99``."""
    ok_ttft = np.array([20.0, 30.0])
    record = {
        "date": "20260101-120000", "endpoint_type": "openai", "backend": "openai",
        "label": None, "model_id": "Qwen/Qwen2.5-7B-Instruct",
        "tokenizer_id": "Qwen/Qwen2.5-7B-Instruct", "num_prompts": 3,
        "request_rate": 4.0, "burstiness": 1.0, "max_concurrency": None,
        "duration": 1.5, "completed": 2, "failed": 1,
        "total_input_tokens": 210, "total_output_tokens": 9,
        "request_throughput": 2 / 1.5, "request_goodput": None,
        "output_throughput": 9 / 1.5, "total_token_throughput": 219 / 1.5,
        "input_lens": [100, 90, 110], "output_lens": OUTPUT_LENS, "ttfts": TTFTS_S,
        "itls": ITLS_S, "latencies": LATENCIES_S, "start_times": [10.0, 10.25, 10.5],
        "queue_times": [0.0, 0.0, 0.0], "generated_texts": ["a b c d", "", "a b c d e"],
        "errors": ["", "Bad Request", ""],
        "max_output_tokens_per_s": 12.0, "max_concurrent_requests": 2, "rtfx": 0.0,
        "mean_ttft_ms": float(ok_ttft.mean()), "median_ttft_ms": float(np.median(ok_ttft)),
        "std_ttft_ms": float(ok_ttft.std()), "p99_ttft_ms": float(np.percentile(ok_ttft, 99)),
        "mean_tpot_ms": 60.0, "median_tpot_ms": 60.0, "std_tpot_ms": 0.0, "p99_tpot_ms": 60.0,
        "mean_itl_ms": 14.0, "median_itl_ms": 14.0, "std_itl_ms": 2.7, "p99_itl_ms": 19.8,
    }
    if not detailed:
        for key in ("input_lens", "output_lens", "start_times", "ttfts", "itls",
                    "generated_texts", "errors"):
            del record[key]
    return record
