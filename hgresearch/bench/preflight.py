"""Whether the server can serve a run, asked at three moments, and why it could not.

* before anything is written: :func:`preflight` asks ``/v1/models`` and ``/version`` (no
  answer at all stops the run: :class:`ServerUnreachable`);
* after the warm-up: :func:`check_warmup` stops a run whose warm-up requests all failed;
* after the run: :func:`check_outcome` warns about a client that fell behind its schedule and
  stops on a point whose requests all failed for a configuration reason;
  :func:`raise_for_failed_points` reports the points that failed otherwise, after a sweep went
  on to its other points.

:func:`diagnose` turns what the server answered into one message that says what to change.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hgresearch.bench.client import get_json, make_session, run_coroutine
from hgresearch.bench.config import BenchConfig, api_key, fleet_endpoints, request_headers
from hgresearch.data.runfolder import REQUESTS_FILE, read_records
from hgresearch.data.summary import LATE_SEND_MS
from hgresearch.errors import HgResearchError, InputError

#: Upper bound (s) on the wait for ``/v1/models`` and ``/version`` before a run. These answer
#: from the server's memory, in milliseconds even under full load; a server that cannot answer
#: them in this time cannot be measured, so the preflight does not wait the (long) per-request
#: ``timeout_s`` — a shorter ``timeout_s`` is honoured.
PREFLIGHT_TIMEOUT_S = 30.0
#: How often the preflight says it is still waiting.
PREFLIGHT_TICK_S = 5.0
#: Most characters of a server's answer quoted in an error message.
ANSWER_EXCERPT_CHARS = 200

#: Where status lines go (see :func:`hgresearch.bench.runner.run_benchmark`'s ``progress``).
Echo = Callable[[str], None]


class ServerUnusable(InputError):
    """The server answered, but cannot serve this configuration (wrong model name, base URL,
    API key, or a failed warm-up): nothing useful can be measured. The message says what the
    server answered and what to change. An :class:`InputError`, so the command line exits with
    code 2 (the user must change an option or the server)."""


class ServerUnreachable(ServerUnusable):
    """No server answers at the base URL (connection refused, or accepted without an answer
    within the preflight timeout)."""


class PointsFailed(HgResearchError, RuntimeError):
    """Every request of one or more measured points failed for a reason that is not the
    configuration (e.g. all timed out): the points are recorded, the sweep went on; the
    command line exits with code 1. ``failed`` holds those points' summaries."""

    exit_code = 1

    def __init__(self, failed: list[dict[str, Any]]) -> None:
        self.failed = failed
        points = "; ".join(f"qps {s.get('request_rate')}: {failure_text(s)}" for s in failed)
        super().__init__(f"{points}; their run folders are kept")


def failure_text(summary: dict[str, Any]) -> str:
    """``"all 200 requests failed (150 timeout, 50 http_error)"`` for a point's summary."""
    return f"all {summary.get('sent')} requests failed ({_error_counts(summary)})"


def _error_counts(summary: dict[str, Any]) -> str:
    errors = summary.get("errors") or {}
    return ", ".join(f"{n} {name}" for name, n in errors.items()) or "no error class"


def every_request_failed(summary: dict[str, Any]) -> bool:
    """Whether a point sent requests and none succeeded."""
    return bool(summary.get("sent")) and not summary.get("completed")


def raise_for_failed_points(summaries: list[dict[str, Any]]) -> None:
    """Raise :class:`PointsFailed` when any point's requests all failed (after a sweep went
    on to its other points)."""
    failed = [s for s in summaries if every_request_failed(s)]
    if failed:
        raise PointsFailed(failed)


def _answered(answer: Any) -> bool:
    """Whether a preflight answer came from the server (any HTTP status)."""
    return not (isinstance(answer, dict) and answer.get("no_answer"))


def preflight(config: BenchConfig, *, echo: Echo | None = None,
              tick_s: float = PREFLIGHT_TICK_S) -> dict[str, Any]:
    """Ask the server for ``/v1/models`` and ``/version`` (recorded in config.json).

    Each waits at most ``min(timeout_s, PREFLIGHT_TIMEOUT_S)`` and says every ``tick_s`` that
    it is still waiting. Raises :class:`ServerUnreachable` when ``/v1/models`` gets no answer
    at all (connection refused, or accepted but silent) — before anything is written. Any HTTP
    answer, an error status included, is kept for :func:`diagnose` after the warm-up.
    """
    say: Echo = echo or (lambda message: None)
    bound_s = min(config.timeout_s, PREFLIGHT_TIMEOUT_S)
    headers, secrets = request_headers(config)
    base = config.base_url.rstrip("/")

    async def ask() -> dict[str, Any]:
        answers: dict[str, Any] = {}
        async with make_session(2) as session:
            for key, path in (("models", "/v1/models"), ("version", "/version")):
                started = time.monotonic()
                task = asyncio.ensure_future(get_json(session, base + path, headers, bound_s,
                                                      secrets))
                while not (await asyncio.wait({task}, timeout=tick_s))[0]:
                    say(f"waiting for the server's answer to GET {path} ... "
                        f"({time.monotonic() - started:.0f} s of at most {bound_s:g} s)")
                answers[key] = task.result()
                if key == "models" and not _answered(answers[key]):
                    break  # /version would wait just as long for nothing
        return answers

    answers = run_coroutine(ask())
    models = answers["models"]
    if not _answered(models):
        hint = "start the server or fix --base-url"
        if models.get("timed_out"):
            hint = ("the connection was accepted but nothing came back: is the server still "
                    "starting, or stuck?")
            if bound_s < PREFLIGHT_TIMEOUT_S:
                hint += " (raise --timeout-s to wait longer)"
        raise ServerUnreachable(f"no server answers at {config.base_url}: GET /v1/models: "
                                f"{models['error']}; {hint}")
    return answers


def preflight_all(config: BenchConfig, *, echo: Echo | None = None) -> dict[str, Any]:
    """:func:`preflight` of the one server, or of every endpoint of a multi-endpoint run (then
    ``{"endpoints": {base_url: answers}}``); an endpoint without a server stops the run before
    anything is written."""
    if not config.fleet:
        return preflight(config, echo=echo)
    return {"endpoints": {e["base_url"]: preflight(config.for_endpoint(e), echo=echo)
                          for e in fleet_endpoints(config)}}


def served_models(server_info: dict[str, Any] | None) -> list[str]:
    """Model ids in the server's ``/v1/models`` answer (empty when unknown)."""
    info = server_info or {}
    answer = info.get("models") or info.get("models_endpoint")
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        return []
    return [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]


def diagnose(config: BenchConfig, server_info: dict[str, Any] | None,
             failed: list[dict[str, Any]]) -> tuple[str, bool]:
    """Why requests that all failed did: ``(message, is_configuration)``.

    The message quotes what the server answered (status and body excerpt) and says what to
    change. ``is_configuration`` is True when no request of this configuration can succeed
    (no server, HTTP 401/403, 404, an unknown model name), False for failures that may be the
    load's (timeouts, cut streams, server errors).
    """
    first = failed[0]
    answer = str(first.get("error") or first.get("error_class"))[:ANSWER_EXCERPT_CHARS]
    status = first.get("http_status")
    models = served_models(server_info)
    path = "/v1/chat/completions" if config.endpoint == "chat" else "/v1/completions"
    if all(r.get("error_class") == "connection_dropped" and r.get("http_status") is None
           for r in failed):
        return f"no server answers at {config.base_url}: {answer}", True
    if status in (401, 403):
        if not api_key(config):
            advice = (f"the server wants an API key: put it in the environment variable "
                      f"{config.api_key_env or 'OPENAI_API_KEY'} (see --api-key-env)")
        else:
            advice = (f"the server refused the API key in ${config.api_key_env}: check it "
                      "(--api-key-env names the variable)")
        return f"the server answered {answer}; {advice}", True
    if config.base_url.rstrip("/").endswith("/v1") and status in (404, 405):
        return (f"the server answered {answer}; drop the trailing /v1 from --base-url "
                f"(requests go to {config.base_url.rstrip('/')}{path})"), True
    if models and config.model not in models and status in (400, 404):
        return (f"the server answered {answer}; it serves models {models}: pass "
                f"--model {models[0]}"), True
    if status == 404:
        return (f"the server answered {answer}; no {path} at {config.base_url}: check "
                "--base-url and --endpoint"), True
    if first.get("error_class") == "timeout":
        return (f"{answer}; is the model still loading, or --timeout-s "
                f"({config.timeout_s:g} s) too short?"), False
    return f"the server answered {answer}; see the server's log", False


def _unusable(message: str) -> type[ServerUnusable]:
    """The error class a configuration failure diagnosed as ``message`` raises."""
    return ServerUnreachable if message.startswith("no server answers") else ServerUnusable


def check_warmup(config: BenchConfig, server_info: dict[str, Any] | None,
                 warm_records: list[dict[str, Any]]) -> None:
    """Stop after the warm-up when every warm-up request failed: the server cannot serve this
    configuration (raises :class:`ServerUnusable`, or :class:`ServerUnreachable`)."""
    failed = [r for r in warm_records if not r["success"]]
    if not warm_records or len(failed) < len(warm_records):
        return
    message, _ = diagnose(config, server_info, failed)
    raise _unusable(message)(f"all {len(failed)} warm-up request(s) failed, nothing was "
                             f"measured: {message}")


def check_outcome(config: BenchConfig, run_dir: Path, summary: dict[str, Any],
                  server_info: dict[str, Any] | None) -> None:
    """Say what a finished point means. A client that fell behind is warned about; a point
    where every request failed for a configuration reason raises :class:`ServerUnusable` (its
    files stay); one that failed otherwise is warned about and left to the caller
    (:func:`raise_for_failed_points`)."""
    if summary.get("client_limited"):
        ratio = summary.get("realised_rate_ratio")
        warnings.warn(f"{run_dir}: the client could not keep the schedule: "
                      f"{summary['late_send_share']:.0%} of requests sent more than "
                      f"{LATE_SEND_MS:g} ms late, realised arrival rate "
                      f"{'n/a' if ratio is None else f'{ratio:.1%}'} of the offered one; the "
                      "run is marked client-limited", stacklevel=3)
    if not every_request_failed(summary):
        return
    failed = [r for r in read_records(run_dir / REQUESTS_FILE) if not r.get("warmup")]
    message, configuration = diagnose(config, server_info, failed)
    text = (f"{run_dir}: all {summary['sent']} measured requests failed "
            f"({_error_counts(summary)}): {message}")
    if configuration:
        raise _unusable(message)(text + "; the run folder is kept")
    warnings.warn(text, stacklevel=3)
