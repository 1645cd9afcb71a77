"""Server-side accounting from Prometheus text (/metrics) and its cross-check with the client."""

from __future__ import annotations

import math

import pytest

from hgresearch.bench.server.prometheus import (
    cross_check,
    histogram_quantile,
    parse_prometheus,
    server_deltas,
)


def exposition(requests: int, gen_tokens: int, prompt_tokens: int, ttft_le_01: int,
               ttft_total: int, ttft_sum_s: float) -> str:
    m = 'engine="0",model_name="tiny"'
    return f"""# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{{m}}} {float(gen_tokens)}
vllm:prompt_tokens_total{{{m}}} {float(prompt_tokens)}
vllm:request_success_total{{{m},finished_reason="length"}} {float(requests)}
vllm:request_success_total{{{m},finished_reason="stop"}} 0.0
vllm:time_to_first_token_seconds_bucket{{{m},le="0.1"}} {float(ttft_le_01)}
vllm:time_to_first_token_seconds_bucket{{{m},le="0.5"}} {float(ttft_total)}
vllm:time_to_first_token_seconds_bucket{{{m},le="+Inf"}} {float(ttft_total)}
vllm:time_to_first_token_seconds_count{{{m}}} {float(ttft_total)}
vllm:time_to_first_token_seconds_sum{{{m}}} {ttft_sum_s}
"""


BEFORE = parse_prometheus(exposition(5, 84, 38, 5, 5, 0.2))
AFTER = parse_prometheus(exposition(45, 84 + 40 * 32, 38 + 40 * 64, 25, 45, 0.2 + 8.0))


def test_parse_reads_labels_and_values() -> None:
    names = {name for name, _, _ in BEFORE}
    assert "vllm:generation_tokens_total" in names
    bucket = [s for s in BEFORE if s[0].endswith("_bucket") and ("le", "+Inf") in s[1]]
    assert bucket and bucket[0][2] == 5.0


def test_deltas_count_only_the_run() -> None:
    deltas = server_deltas(BEFORE, AFTER)
    assert deltas["requests_finished"] == 40
    assert deltas["requests_finished_by_reason"] == {"length": 40, "stop": 0}
    assert deltas["generation_tokens"] == 1280 and deltas["prompt_tokens"] == 2560
    ttft = deltas["ttft"]
    assert ttft["count"] == 40 and ttft["mean_ms"] == pytest.approx(200.0)
    # 20 of 40 fell at or below 0.1 s: the median sits at the bucket bound.
    assert ttft["p50_ms"] == pytest.approx(100.0)
    assert 100.0 < ttft["p99_ms"] <= 500.0
    assert deltas["itl"] is None  # not exposed here


def test_quantile_interpolates_within_bucket() -> None:
    assert histogram_quantile({1.0: 0, 2.0: 10, math.inf: 10}, 0.5) == pytest.approx(1.5)
    assert math.isnan(histogram_quantile({}, 0.5))


def test_cross_check_flags_token_disagreement() -> None:
    summary = {"completed": 40, "failed": 0, "total_input_tokens": 2560,
               "total_output_tokens": 1280}
    ok = cross_check(summary, BEFORE, AFTER)
    assert ok["token_counts_agree"] is True and ok["disagreements"] == []
    bad = cross_check({**summary, "total_output_tokens": 1279}, BEFORE, AFTER)
    assert bad["token_counts_agree"] is False
    assert bad["disagreements"] == ["output_tokens: client 1279 vs server 1280"]
    missing = cross_check(summary, None, AFTER)
    assert missing["available"] is False and missing["token_counts_agree"] is None


def test_deltas_keep_engine_steps_and_the_allocated_kv_cache() -> None:
    """Engine steps (``iteration_tokens_total`` count) are a delta; the KV cache the server
    allocated comes from ``cache_config_info`` labels, as numbers."""
    m = 'engine="0",model_name="tiny"'
    info = (f'vllm:cache_config_info{{block_size="128",cache_dtype="auto",{m},'
            f'num_gpu_blocks="2048",num_gpu_blocks_override="None"}} 1.0\n')
    before = parse_prometheus(f"vllm:iteration_tokens_total_count{{{m}}} 10.0\n"
                              f"vllm:iteration_tokens_total_sum{{{m}}} 400.0\n" + info)
    after = parse_prometheus(f"vllm:iteration_tokens_total_count{{{m}}} 130.0\n"
                             f"vllm:iteration_tokens_total_sum{{{m}}} 2400.0\n"
                             f"vllm:num_preemptions_total{{{m}}} 3.0\n" + info)
    deltas = server_deltas(before, after)
    assert deltas["engine"]["steps"] == 120 and deltas["engine"]["step_tokens"] == 2000
    assert math.isnan(deltas["engine"]["preemptions"])  # absent before: no delta to take
    assert deltas["kv_cache"] == {"num_gpu_blocks": 2048, "block_size": 128,
                                  "num_gpu_blocks_override": None, "cache_dtype": "auto"}
    assert server_deltas(BEFORE, AFTER)["kv_cache"] is None
