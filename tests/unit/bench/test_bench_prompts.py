"""Workloads: ShareGPT filters as vLLM, random lengths, synthetic draws, custom JSONL."""

from __future__ import annotations

import json

import pytest

from hgresearch.bench.prompts import build_requests, parse_workload
from hgresearch.errors import InputError


def _words(n: int) -> str:
    return " ".join(f"x{i}" for i in range(n))


def test_sharegpt_takes_first_human_turn_and_applies_vllm_filters(tmp_path):
    data = [
        {"conversations": [{"from": "human", "value": _words(10)},
                           {"from": "gpt", "value": _words(20)}]},          # kept
        {"conversations": [{"from": "human", "value": _words(3)},
                           {"from": "gpt", "value": _words(20)}]},          # prompt < 4
        {"conversations": [{"from": "human", "value": _words(10)},
                           {"from": "gpt", "value": _words(3)}]},           # output < 4
        {"conversations": [{"from": "human", "value": _words(1025)},
                           {"from": "gpt", "value": _words(5)}]},           # prompt > 1024
        {"conversations": [{"from": "human", "value": _words(1000)},
                           {"from": "gpt", "value": _words(1049)}]},        # total > 2048
        {"conversations": [{"from": "system", "value": "s"},
                           {"from": "human", "value": _words(1024)},
                           {"from": "gpt", "value": _words(1024)}]},        # kept (limits)
        {"conversations": [{"from": "human", "value": _words(5)}]},         # no reply
    ]
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(data))
    reqs = build_requests({"kind": "sharegpt", "path": str(path)}, 4, seed=1)
    lengths = sorted({(r.prompt_len, r.output_len) for r in reqs})
    assert lengths == [(10, 20), (1024, 1024)]
    assert [r.index for r in reqs] == [0, 1, 2, 3]


def test_random_lengths_follow_range_ratio_and_seed():
    spec = {"kind": "random", "input_len": 40, "output_len": 20, "range_ratio": 0.5}
    reqs = build_requests(spec, 200, seed=3)
    assert all(20 <= r.prompt_len <= 40 and 10 <= r.output_len <= 20 for r in reqs)
    assert all(len(r.prompt.split()) == r.prompt_len for r in reqs)
    assert reqs == build_requests(spec, 200, seed=3)
    assert reqs != build_requests(spec, 200, seed=4)
    fixed = build_requests({"kind": "random", "input_len": 8, "output_len": 4}, 5)
    assert {(r.prompt_len, r.output_len) for r in fixed} == {(8, 4)}


def test_synthetic_distributions_are_clipped():
    spec = {"kind": "synthetic",
            "input": {"dist": "lognormal", "median": 100, "sigma": 1.0, "min": 10, "max": 300},
            "output": {"dist": "uniform", "low": 5, "high": 9}}
    reqs = build_requests(spec, 300, seed=0)
    assert min(r.prompt_len for r in reqs) >= 10 and max(r.prompt_len for r in reqs) <= 300
    assert {r.output_len for r in reqs} <= set(range(5, 10))
    with pytest.raises(InputError, match="unknown distribution"):
        build_requests({"kind": "synthetic", "input": {"dist": "zipf"}}, 3)


def test_jsonl_workload_and_errors_name_line_and_field(tmp_path):
    path = tmp_path / "w.jsonl"
    path.write_text('{"prompt": "a b c", "output_len": 7}\n\n{"prompt": "d", "output_len": 2}\n')
    reqs = build_requests({"kind": "jsonl", "path": str(path)}, 3)
    assert [(r.prompt, r.output_len) for r in reqs] == [("a b c", 7), ("d", 2), ("a b c", 7)]
    path.write_text('{"prompt": "a", "output_len": 7}\n{"prompt": "b", "output_len": 0}\n')
    with pytest.raises(InputError) as err:
        build_requests({"kind": "jsonl", "path": str(path)}, 2)
    assert err.value.line == 2 and err.value.field == "output_len"
    path.write_text('{"prompt": "a", "output_len": 7}\n\n{"prompt": "b", "output_len": \n')
    with pytest.raises(InputError, match="malformed JSON") as err:
        build_requests({"kind": "jsonl", "path": str(path)}, 2)
    assert err.value.line == 3 and err.value.file == str(path)


def test_parse_workload_spec():
    assert parse_workload("random:input_len=128,output_len=64,range_ratio=0.5") == {
        "kind": "random", "input_len": 128, "output_len": 64, "range_ratio": 0.5}
    assert parse_workload("sharegpt:path=/data/s.json") == {"kind": "sharegpt",
                                                            "path": "/data/s.json"}
    with pytest.raises(InputError, match="unknown workload"):
        build_requests({"kind": "nope"}, 1)


def test_parse_workload_json_form():
    spec = parse_workload('{"kind": "synthetic", "input": {"dist": "constant", "value": 5}}')
    assert spec["input"] == {"dist": "constant", "value": 5}
    with pytest.raises(InputError, match="kind"):
        parse_workload('{"input": 1}')
