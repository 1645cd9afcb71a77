"""Options of a benchmark: the fixed choices as enums, and the parsers and validators of every
option, so that a command only calls them.

Every check raises :class:`OptionError` (an :class:`~hgresearch.errors.InputError`) whose
one-line message starts with the command-line option, e.g. ``--qps: empty value between commas
in '20,,8'``; the error handler of the command line turns it into exit code 2. They run before
anything is written: a bad value never leaves a run folder behind.

The parsers also take what a notebook's parameters hold (``notebooks/01_benchmark.ipynb``):
papermill's ``-p`` passes a list or a mapping as its text and a number as a number, ``-y`` and
the defaults pass the values themselves; :func:`parse_qps`, :func:`parse_workload_option` and
:func:`parse_json_mapping` accept either form.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from hgresearch.data.summary import LATENCY_METRICS
from hgresearch.errors import InputError

if TYPE_CHECKING:
    from hgresearch.bench.config import BenchConfig
    from hgresearch.bounds import WorkEstimate


class Endpoint(StrEnum):
    """OpenAI-compatible API the requests go to."""

    COMPLETIONS = "completions"
    CHAT = "chat"


class Arrival(StrEnum):
    """Inter-arrival distribution (:func:`hgresearch.bench.schedule.arrival_offsets_ns`)."""

    GAMMA = "gamma"        # Poisson at burstiness 1
    CONSTANT = "constant"


class HttpClient(StrEnum):
    """HTTP engine of the measurement client."""

    FAST = "fast"          # hgresearch.bench.fasthttp (protocol level, lowest overhead)
    AIOHTTP = "aiohttp"


#: Latency metrics a goodput SLO can bound (milliseconds), as vLLM's ``--goodput``.
GOODPUT_METRICS = LATENCY_METRICS

#: Command-line option of each :class:`~hgresearch.bench.config.BenchConfig` field whose option
#: is not simply ``--`` + the field name with dashes.
FIELD_OPTIONS = {"warmup_requests": "--warmup", "tensor_parallel_size": "--tp",
                 "goodput_slo_ms": "--goodput", "request_rate_qps": "--qps",
                 "policy_threshold_tokens": "--threshold-tokens",
                 "policy_max_outstanding": "--max-outstanding"}


class OptionError(InputError):
    """A bad option value; the message starts with the option (``--qps: ...``)."""

    def __init__(self, option: str, message: str, *, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.option = option
        self.args = (f"{option}: {message}",)


def option_name(field: str) -> str:
    """The command-line option of a BenchConfig field (``timeout_s`` -> ``--timeout-s``)."""
    return FIELD_OPTIONS.get(field, "--" + field.replace("_", "-"))


def _fail(field: str, message: str) -> OptionError:
    return OptionError(option_name(field), message, field=field)


def parse_qps(value: str | float | Sequence[float | str]) -> list[float]:
    """``"32,16,8"`` -> ``[32.0, 16.0, 8.0]``; ``inf`` sends all requests at once.

    Also takes a list's text (``"[32, 16, 8]"``, papermill ``-p``), a list, or one number.
    Each rate must be > 0 and given once (each rate gets its own run folder).
    """
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1]
    elif isinstance(value, int | float):
        text = str(value)
    else:
        text = ",".join(str(item) for item in value)
    items = [item.strip() for item in text.split(",")]
    if not any(items):
        raise _fail("request_rate_qps", "expected comma-separated request rates (req/s), "
                                        f"got {text!r}")
    rates: list[float] = []
    for item in items:
        if not item:
            raise _fail("request_rate_qps", f"empty value between commas in {text!r}")
        try:
            rate = float(item)
        except ValueError:
            raise _fail("request_rate_qps", f"{item!r} is not a number of requests per second "
                                            f"or inf (in {text!r})") from None
        if not rate > 0:  # also NaN
            raise _fail("request_rate_qps", f"request rates must be > 0 (or inf), got {item!r}")
        if rate in rates:
            raise _fail("request_rate_qps", f"{item!r} is given twice in {text!r}")
        rates.append(rate)
    return rates


def parse_goodput(text: str | None) -> dict[str, float] | None:
    """``"ttft:500,tpot:50"`` -> ``{"ttft": 500.0, "tpot": 50.0}`` (milliseconds); None or
    empty: no goodput."""
    if text is None or not str(text).strip():
        return None
    slo: dict[str, float] = {}
    for item in (part.strip() for part in str(text).split(",")):
        metric, sep, value = item.partition(":")
        metric = metric.strip()
        if not item or not sep:
            raise _fail("goodput_slo_ms", f"expected metric:milliseconds items like "
                                          f"ttft:500,tpot:50, got {text!r}")
        try:
            slo_ms = float(value)
        except ValueError:
            raise _fail("goodput_slo_ms", f"{value.strip()!r} is not a number of milliseconds "
                                          f"(in {item!r})") from None
        if metric in slo:
            raise _fail("goodput_slo_ms", f"{metric!r} is given twice in {text!r}")
        slo[metric] = slo_ms
    validate_goodput(slo)
    return slo


def validate_goodput(slo_ms: dict[str, Any] | None) -> None:
    """Goodput SLOs: known metrics, each a positive, finite number of milliseconds."""
    if slo_ms is None:
        return
    if not isinstance(slo_ms, dict):
        raise _fail("goodput_slo_ms", f"expected a mapping metric -> milliseconds, got "
                                      f"{slo_ms!r}")
    for metric, value in slo_ms.items():
        if metric not in GOODPUT_METRICS:
            raise _fail("goodput_slo_ms", f"unknown metric {metric!r}; expected one of "
                                          f"{', '.join(GOODPUT_METRICS)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not 0 < value < math.inf:
            raise _fail("goodput_slo_ms", f"{metric} must be a positive number of "
                                          f"milliseconds, got {value!r}")


def parse_workload_option(value: str | Mapping[str, Any]) -> dict[str, Any]:
    """The ``--workload`` text (or a spec mapping) as a checked spec (see
    :func:`hgresearch.bench.prompts.parse_workload` and ``validate_workload``)."""
    from hgresearch.bench.prompts import parse_workload, validate_workload

    try:
        spec = dict(value) if isinstance(value, Mapping) else parse_workload(str(value))
        validate_workload(spec)
    except InputError as err:
        raise _fail("workload", err.reason) from None
    return spec


def parse_json_mapping(value: str | Mapping[str, Any] | None, field: str) -> dict[str, Any]:
    """A mapping parameter given as a mapping or as its JSON text (``'{"port": 8011}'``);
    None, ``""`` and ``{}`` are the empty mapping. ``field`` names it in errors."""
    if value is None or isinstance(value, Mapping):
        return dict(value or {})
    text = str(value).strip()
    if not text:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise _fail(field, f"malformed JSON: {err.msg} at column {err.colno} of "
                           f"{text!r}") from None
    if not isinstance(data, dict):
        raise _fail(field, f"expected a JSON object such as {{\"key\": 1}}, got {text!r}")
    return data


def _choice(field: str, value: Any, choices: type[StrEnum]) -> None:
    if value not in {c.value for c in choices}:
        raise _fail(field, f"expected one of {', '.join(c.value for c in choices)}, "
                           f"got {value!r}")


def _integer(field: str, value: Any, low: int, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise _fail(field, f"expected an integer >= {low}, got {value!r}")


def _number(field: str, value: Any, *, low: float, strict: bool, unit: str = "",
            optional: bool = False, allow_inf: bool = False) -> None:
    if optional and value is None:
        return
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and (
        value > low if strict else value >= low) and (allow_inf or math.isfinite(value))
    if not ok:
        bound = f"{'>' if strict else '>='} {low:g}"
        raise _fail(field, f"expected a number {bound}{unit}, got {value!r}")


def validate_config(config: BenchConfig, *, files: bool = True) -> None:
    """Check every field of a :class:`~hgresearch.bench.config.BenchConfig` (before anything
    is written); raises :class:`OptionError` naming the option of the first bad field.
    ``files=False`` leaves out whether the workload's file and the tokenizer exist."""
    from pathlib import Path

    from hgresearch.bench.prompts import validate_workload

    c = config
    if not isinstance(c.base_url, str) or not c.base_url.startswith(("http://", "https://")):
        raise _fail("base_url", f"must start with http:// or https://, got {c.base_url!r}")
    if not isinstance(c.model, str) or not c.model.strip():
        raise _fail("model", f"expected the served model name, got {c.model!r}")
    _choice("endpoint", c.endpoint, Endpoint)
    _choice("arrival", c.arrival, Arrival)
    _choice("http_client", c.http_client, HttpClient)
    _number("request_rate_qps", c.request_rate_qps, low=0, strict=True, unit=" req/s",
            allow_inf=True)
    _integer("num_prompts", c.num_prompts, 1)
    _number("burstiness", c.burstiness, low=0, strict=True)
    _integer("max_concurrency", c.max_concurrency, 1, optional=True)
    _integer("warmup_requests", c.warmup_requests, 0)
    try:
        validate_workload(c.workload, files=files)
    except InputError as err:
        raise _fail("workload", err.reason) from None
    _integer("seed", c.seed, 0)
    if files and c.tokenizer is not None and not Path(c.tokenizer).exists():
        raise _fail("tokenizer", f"no such file or folder: {c.tokenizer}")
    _number("timeout_s", c.timeout_s, low=0, strict=True, unit=" s")
    if c.api_key_env is not None and (not isinstance(c.api_key_env, str)
                                      or not c.api_key_env.strip()):
        raise _fail("api_key_env", f"expected an environment variable name, got "
                                   f"{c.api_key_env!r}")
    _integer("gpu_count", c.gpu_count, 1, optional=True)
    _integer("tensor_parallel_size", c.tensor_parallel_size, 1, optional=True)
    _integer("replicas", c.replicas, 1)
    _number("price_usd_per_gpu_h", c.price_usd_per_gpu_h, low=0, strict=False,
            unit=" USD", optional=True)
    _number("telemetry_hz", c.telemetry_hz, low=0, strict=True, unit=" Hz")
    _number("idle_baseline_s", c.idle_baseline_s, low=0, strict=False, unit=" s")
    validate_goodput(c.goodput_slo_ms)
    _number("steady_fraction", c.steady_fraction, low=0, strict=False)
    if not c.steady_fraction < 0.5:  # the steady window drops this share at each end
        raise _fail("steady_fraction", f"expected a share below 0.5, got {c.steady_fraction!r}")
    _integer("bootstrap_reps", c.bootstrap_reps, 0)
    _integer("spin_ns", c.spin_ns, 0)
    validate_fleet(c)


#: Keys of one endpoint of ``BenchConfig.fleet``.
FLEET_ENDPOINT_KEYS = ("base_url", "model", "name", "capacity_weight", "price_usd_per_h",
                       "max_outstanding")


def validate_fleet(config: BenchConfig) -> None:
    """Several endpoints (``fleet``): each a distinct http(s) URL with a served model name,
    a positive capacity weight and a non-negative price; a known routing policy."""
    from hgresearch.traffic.routing import Policy

    c = config
    _choice("policy", c.policy, Policy)
    _integer("policy_threshold_tokens", c.policy_threshold_tokens, 1)
    _integer("policy_max_outstanding", c.policy_max_outstanding, 1)
    if c.fleet is None:
        return
    if not isinstance(c.fleet, list) or not c.fleet:
        raise _fail("fleet", f"expected a list of endpoints, got {c.fleet!r}")
    seen: set[str] = set()
    for i, endpoint in enumerate(c.fleet):
        if not isinstance(endpoint, dict) or set(endpoint) - set(FLEET_ENDPOINT_KEYS):
            raise _fail("fleet", f"endpoint {i}: expected a mapping with keys "
                                 f"{', '.join(FLEET_ENDPOINT_KEYS)}, got {endpoint!r}")
        url = endpoint.get("base_url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise _fail("base_url", f"must start with http:// or https://, got {url!r}")
        if url in seen:
            raise _fail("base_url", f"{url} is given twice")
        seen.add(url)
        model = endpoint.get("model", c.model)
        if not isinstance(model, str) or not model.strip():
            raise _fail("model", f"endpoint {url}: expected the served model name, "
                                 f"got {model!r}")
        weight = endpoint.get("capacity_weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) \
                or not 0 < weight < math.inf:
            raise _fail("fleet", f"endpoint {url}: capacity_weight must be > 0, got {weight!r}")
        price = endpoint.get("price_usd_per_h", 0.0)
        if isinstance(price, bool) or not isinstance(price, (int, float)) \
                or not 0 <= price < math.inf:
            raise _fail("fleet", f"endpoint {url}: price_usd_per_h must be >= 0, got {price!r}")
        _integer("policy_max_outstanding", endpoint.get("max_outstanding"), 1, optional=True)


#: Client memory per request of a benchmark point (bytes), beside the prompt's text: its
#: schedule entry, request spec and record (a JSON line of ~1 kB, kept for the summary).
#: An allowance, not a measurement: the sweep's and bench's bounds are set by their time.
BENCH_BYTES_PER_REQUEST = 4_000
#: Bytes of prompt text per prompt token (words of a few characters).
BENCH_BYTES_PER_PROMPT_TOKEN = 6


def bench_estimate(config: BenchConfig, rates_qps: Sequence[float]) -> WorkEstimate:
    """What benchmarking ``config`` at each of ``rates_qps`` costs, for
    :func:`hgresearch.bounds.check_work`: the time of its arrivals (``num_prompts / rate``
    per rate; none for ``inf``) and idle baselines, and the client's memory for the largest
    point (:data:`BENCH_BYTES_PER_REQUEST` plus the prompt text)."""
    from hgresearch.bounds import WorkEstimate

    arrivals_s = sum(config.num_prompts / rate for rate in rates_qps if math.isfinite(rate))
    time_s = arrivals_s + len(rates_qps) * config.idle_baseline_s
    input_len = config.workload.get("input_len", 1024)
    per_request = BENCH_BYTES_PER_REQUEST + BENCH_BYTES_PER_PROMPT_TOKEN * (
        input_len if isinstance(input_len, int) else 1024)
    return WorkEstimate(what=f"benchmarking {config.num_prompts:,} requests at each of "
                             f"{len(rates_qps)} rate(s)",
                        memory_bytes=config.num_prompts * per_request, time_s=time_s)
