"""Option parsers and validators: every bad value is a one-line error naming the option."""

from __future__ import annotations

import pytest

from hgresearch.bench.options import (
    Arrival,
    Endpoint,
    HttpClient,
    OptionError,
    parse_goodput,
    parse_json_mapping,
    parse_qps,
    parse_workload_option,
)
from hgresearch.bench.prompts import build_requests, validate_workload
from hgresearch.errors import InputError


def test_parse_qps():
    assert parse_qps("32, 16,8,inf") == [32.0, 16.0, 8.0, float("inf")]


@pytest.mark.parametrize("value", ["[32, 16, 0.5]", [32, 16, 0.5], (32.0, "16", "0.5"),
                                   " [32,16,0.5] "])
def test_parse_qps_takes_a_notebook_parameter_as_text_or_list(value):
    """papermill -p passes a list as its text, -y and the defaults as a list."""
    assert parse_qps(value) == [32.0, 16.0, 0.5]


def test_parse_qps_takes_one_number():
    """papermill -p qps 8 passes the number 8."""
    assert parse_qps(8) == [8.0] and parse_qps(float("inf")) == [float("inf")]
    with pytest.raises(OptionError, match="given twice"):
        parse_qps([8, 8.0])
    with pytest.raises(OptionError, match="empty value"):
        parse_qps("[8,]")


def test_parse_workload_option_takes_a_spec_or_its_text():
    spec = {"kind": "random", "input_len": 8, "output_len": 5}
    assert parse_workload_option(spec) == spec
    assert parse_workload_option(spec) is not spec  # a copy: the caller's stays as it was
    assert parse_workload_option("random:input_len=8,output_len=5") == spec
    with pytest.raises(OptionError, match="^--workload: random workload: input_len must be"):
        parse_workload_option({"kind": "random", "input_len": 0})


def test_parse_json_mapping():
    assert parse_json_mapping({"port": 8011}, "server") == {"port": 8011}
    assert parse_json_mapping('{"port": 8011, "dtype": "float32"}', "server") == {
        "port": 8011, "dtype": "float32"}
    assert parse_json_mapping("", "server") == parse_json_mapping(None, "server") == {}
    assert parse_json_mapping("{}", "server") == {}


@pytest.mark.parametrize("text,message", [
    ('{"port": 80', "--server: malformed JSON"),
    ("[1, 2]", "--server: expected a JSON object"),
    ("port=8011", "--server: malformed JSON"),
])
def test_bad_json_mapping(text, message):
    with pytest.raises(OptionError, match="^" + message) as err:
        parse_json_mapping(text, "server")
    assert err.value.field == "server"


@pytest.mark.parametrize("text,message", [
    ("20,,8", "--qps: empty value between commas in '20,,8'"),
    ("20,8,", "--qps: empty value between commas in '20,8,'"),
    ("", "--qps: expected comma-separated request rates"),
    ("20,abc", "--qps: 'abc' is not a number of requests per second or inf"),
    ("0", "--qps: request rates must be > 0"),
    ("nan", "--qps: request rates must be > 0"),
    ("8,8", "--qps: '8' is given twice"),
])
def test_bad_qps(text, message):
    with pytest.raises(OptionError) as err:
        parse_qps(text)
    assert str(err.value).startswith(message) and err.value.field == "request_rate_qps"


def test_parse_goodput():
    assert parse_goodput("ttft:500, tpot:50") == {"ttft": 500.0, "tpot": 50.0}
    assert parse_goodput(None) is None and parse_goodput("") is None


@pytest.mark.parametrize("text,message", [
    ("ttft:abc", "--goodput: 'abc' is not a number of milliseconds"),
    ("ttft", "--goodput: expected metric:milliseconds"),
    ("ttft:500,,tpot:5", "--goodput: expected metric:milliseconds"),
    ("itl:5", "--goodput: unknown metric 'itl'"),
    ("ttft:-5", "--goodput: ttft must be a positive number"),
    ("ttft:5,ttft:6", "--goodput: 'ttft' is given twice"),
])
def test_bad_goodput(text, message):
    with pytest.raises(OptionError, match="^" + message):
        parse_goodput(text)


@pytest.mark.parametrize("text,message", [
    ("random:output_len=0", "output_len must be an integer >= 1, got 0"),       # was low >= high
    ("random:input_len=abc", "input_len must be an integer >= 1, got 'abc'"),   # was int('abc')
    ("random:input_len=-5", "input_len must be an integer >= 1, got -5"),       # ran before
    ("random:input_len=8.5", "input_len must be an integer >= 1, got 8.5"),
    ("random:range_ratio=2", "range_ratio must be a number in [0, 1]"),
    ("random:inpt_len=8", "unknown key 'inpt_len'"),
    ("sharegpt:path=/no/such.json", "no such file: /no/such.json"),
    ("sharegpt", "needs path=FILE"),
    ("jsonl:path=/no/such.jsonl", "no such file"),
    ("zipf:a=1", "unknown workload 'zipf'"),
    ('{"kind": "synthetic", "input": {"dist": "uniform", "low": 9, "high": 2}}',
     "impossible uniform parameters"),
    ('{"kind": "synthetic", "output": {"dist": "constant"}}', "constant needs a number 'value'"),
    ('{"kind": "synthetic", "output": {"dist": "constant", "value": 5, "min": 0}}',
     "1 <= min <= max"),
])
def test_bad_workload_is_named_before_any_request_is_built(text, message):
    with pytest.raises(OptionError) as err:
        parse_workload_option(text)
    assert str(err.value).startswith("--workload: ") and message in str(err.value)
    assert "\n" not in str(err.value)
    with pytest.raises(InputError, match="workload"):  # the library says it as well
        build_requests(_spec(text), 2)


def _spec(text: str) -> dict:
    from hgresearch.bench.prompts import parse_workload

    return parse_workload(text)


def test_good_workloads_pass(tmp_path):
    path = tmp_path / "w.jsonl"
    path.write_text('{"prompt": "a", "output_len": 3}\n')
    for spec in ({"kind": "random", "input_len": 8, "output_len": 1, "range_ratio": 0.0,
                  "prefix_len": 0},
                 {"kind": "jsonl", "path": str(path), "shuffle": True},
                 {"kind": "synthetic", "input": {"dist": "lognormal", "median": 100,
                                                 "sigma": 0.5, "min": 2, "max": 300}}):
        validate_workload(spec)


def test_choices_are_enums_with_the_config_values():
    assert [e.value for e in Endpoint] == ["completions", "chat"]
    assert [a.value for a in Arrival] == ["gamma", "constant"]
    assert [h.value for h in HttpClient] == ["fast", "aiohttp"]
    assert Endpoint.CHAT == "chat"  # usable wherever the config takes the string
