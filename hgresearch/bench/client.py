"""Asyncio streaming client for OpenAI-compatible servers (vLLM): one request -> one record.

Timing uses ``time.monotonic_ns()`` (the clock of the run's records and telemetry). Every
streamed event is timestamped the moment its line is read, before it is parsed. The server's
``usage`` (``stream_options.include_usage``; with vLLM's ``continuous_usage_stats`` on every
event) is the source of truth for token counts; without it each content event counts one token
and the record says so (``usage_source``).

Error classes (``error_class``): ``http_error``, ``timeout``, ``connection_dropped``,
``stream_truncated`` (no ``[DONE]``), ``malformed_stream`` (an SSE data line that is not JSON),
``short_output`` (fewer tokens than asked under ``ignore_eos``), ``client_error`` (other).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp

from hgresearch.bench.fasthttp import FastPool
from hgresearch.bench.prompts import RequestSpec

T = TypeVar("T")

#: Most characters of an error body kept in a record.
ERROR_TEXT_CHARS = 300


@dataclass
class ClientOptions:
    """How requests are built and sent (one object per run)."""

    base_url: str
    model: str
    endpoint: str = "completions"  # or "chat"
    timeout_s: float = 600.0
    ignore_eos: bool = True
    continuous_usage: bool = True
    temperature: float = 0.0
    extra_body: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        path = "chat/completions" if self.endpoint == "chat" else "completions"
        return self.base_url.rstrip("/") + "/v1/" + path


def encode_payload(spec: RequestSpec, opts: ClientOptions) -> bytes:
    """The request body, encoded once before the run (nothing to encode while sending)."""
    body: dict[str, Any] = {
        "model": opts.model,
        "max_tokens": spec.output_len,
        "temperature": opts.temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if opts.continuous_usage:
        body["stream_options"]["continuous_usage_stats"] = True
    if opts.ignore_eos:
        body["ignore_eos"] = True
    if opts.endpoint == "chat":
        body["messages"] = [{"role": "user", "content": spec.prompt}]
    else:
        body["prompt"] = spec.prompt
    body.update(opts.extra_body)
    return json.dumps(body).encode()


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every secret replaced by ``***`` (error bodies may echo headers)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


@dataclass
class SSEResult:
    """Token events parsed from a streamed body."""

    event_t: list[int] = field(default_factory=list)
    event_tok: list[int] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    done: bool = False
    error: str | None = None  # set for a malformed data line


def parse_sse(pieces: list[tuple[int, bytes]], chat: bool) -> SSEResult:
    """Token events of an SSE body received as ``(arrival ns, bytes)`` pieces.

    A line's time is the arrival of the piece that completed it. Events without ``choices``
    (the final usage event) carry no token; token counts come from the continuous usage deltas
    when present, else one per content event.
    """
    out = SSEResult()
    last_completion_tokens = 0
    pending = b""
    for t, data_in in pieces:
        lines = (pending + data_in).split(b"\n") if pending else data_in.split(b"\n")
        pending = lines.pop()
        for line in lines:
            if not line.startswith(b"data:"):
                continue  # blank separators and SSE comments
            data = line[5:].strip()
            if data == b"[DONE]":
                out.done = True
                return out
            try:
                chunk = json.loads(data)
            except ValueError:
                out.error = ("SSE data line is not JSON: "
                             f"{data[:80].decode(errors='replace')!r}")
                return out
            chunk_usage = chunk.get("usage")
            if chunk_usage:
                out.usage = chunk_usage
            choices = chunk.get("choices")
            if not choices:
                continue  # the usage-only final event carries no token
            if chunk_usage and chunk_usage.get("completion_tokens") is not None:
                total = int(chunk_usage["completion_tokens"])
                n_tok = total - last_completion_tokens
                last_completion_tokens = total
            else:
                n_tok = 1
            if chat:
                text = (choices[0].get("delta") or {}).get("content")
            else:
                text = choices[0].get("text")
            if not text and (n_tok == 0 or not chunk_usage):
                continue  # e.g. the role-only opening chat event carries no token
            out.event_t.append(t)
            out.event_tok.append(n_tok)
    return out


def _record(spec: RequestSpec, opts: ClientOptions, t_sent: int, t_done: int,
            status: int | None, pieces: list[tuple[int, bytes]], error_class: str | None,
            error: str | None, secrets: tuple[str, ...]) -> dict[str, Any]:
    """The request record from what came back (both HTTP engines end here)."""
    sse = parse_sse(pieces, opts.endpoint == "chat") if status == 200 else SSEResult()
    if error_class is None and status is not None and status != 200:
        body = b"".join(p for _, p in pieces).decode(errors="replace")[:ERROR_TEXT_CHARS]
        error_class, error = "http_error", f"HTTP {status}: {body}"
    elif error_class is None and sse.error is not None:
        error_class, error = "malformed_stream", sse.error
    elif error_class is None and not sse.done:
        error_class, error = "stream_truncated", "stream ended without [DONE]"
    rec: dict[str, Any] = {
        "index": spec.index, "expected_output_tokens": spec.output_len,
        "client_prompt_tokens": spec.prompt_len, "http_status": status,
        "t_sent_ns": t_sent,
        "t_first_token_ns": sse.event_t[0] if sse.event_t else None,
        "t_last_token_ns": sse.event_t[-1] if sse.event_t else None,
        "t_done_ns": t_done, "event_t_ns": sse.event_t, "event_tokens": sse.event_tok,
    }
    usage = sse.usage
    if usage is not None and usage.get("completion_tokens") is not None:
        rec["usage_source"] = "server"
        rec["output_tokens"] = int(usage["completion_tokens"])
    else:
        rec["usage_source"] = "client_events"
        rec["output_tokens"] = sum(sse.event_tok)
    # The server's prompt count is kept as given, 0 included; only a missing one falls back to
    # the client's estimate, and the record says which it is.
    if usage is not None and usage.get("prompt_tokens") is not None:
        rec["prompt_tokens"] = int(usage["prompt_tokens"])
        rec["prompt_tokens_source"] = "server"
    else:
        rec["prompt_tokens"] = spec.prompt_len
        rec["prompt_tokens_source"] = "client_estimate"
    if error_class is None:
        if not sse.event_t:
            error_class, error = "stream_truncated", "no token received"
        elif opts.ignore_eos and rec["output_tokens"] < spec.output_len:
            error_class = "short_output"
            error = (f"{rec['output_tokens']} output tokens, asked for {spec.output_len} "
                     "with ignore_eos")
    rec["success"] = error_class is None
    rec["error_class"] = error_class
    rec["error"] = scrub(error, secrets)[:ERROR_TEXT_CHARS] if error else None
    return rec


#: Awaited by a finished request before its record is built (see
#: :class:`hgresearch.bench.schedule.SendGuard`); None: build it at once.
RecordGate = Callable[[], Awaitable[None]] | None


async def send_request(
    session: aiohttp.ClientSession, opts: ClientOptions, spec: RequestSpec, payload: bytes,
    headers: dict[str, str], secrets: tuple[str, ...] = (), gate: RecordGate = None,
) -> dict[str, Any]:
    """Send one streaming request with aiohttp and return its record (never raises for
    request faults). Bytes are only collected with their arrival times while streaming;
    parsing happens after the stream ends.

    The record holds ``t_sent_ns``, ``t_first_token_ns``, ``t_last_token_ns``, ``t_done_ns``,
    ``event_t_ns``/``event_tokens`` (arrival and token count of every content event),
    ``prompt_tokens``/``output_tokens`` (server usage when given; ``usage_source`` and
    ``prompt_tokens_source`` say where each count came from), ``http_status``,
    ``success``, ``error_class``, ``error``.
    """
    pieces: list[tuple[int, bytes]] = []
    status: int | None = None
    error_class: str | None = None
    error: str | None = None
    timeout = aiohttp.ClientTimeout(total=opts.timeout_s)
    t_sent = time.monotonic_ns()
    try:
        async with session.post(opts.url, data=payload, headers=headers,
                                timeout=timeout) as resp:
            status = resp.status
            # Read to the end of the body: a fully read response returns its connection to
            # the pool instead of closing it.
            async for data_in in resp.content.iter_any():
                pieces.append((time.monotonic_ns(), data_in))
    except TimeoutError:
        error_class, error = "timeout", f"no complete answer within {opts.timeout_s} s"
    except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError,
            aiohttp.ClientConnectionError, ConnectionError) as err:
        error_class, error = "connection_dropped", f"{type(err).__name__}: {err}"
    except asyncio.CancelledError:
        raise
    except Exception as err:  # noqa: BLE001 - any other fault is recorded, not raised
        error_class, error = "client_error", f"{type(err).__name__}: {err}"
    t_done = time.monotonic_ns()
    if gate is not None:
        await gate()
    return _record(spec, opts, t_sent, t_done, status, pieces, error_class, error, secrets)


async def send_request_fast(
    pool: FastPool, opts: ClientOptions, spec: RequestSpec, request: bytes,
    secrets: tuple[str, ...] = (), gate: RecordGate = None,
) -> dict[str, Any]:
    """Like :func:`send_request`, on :class:`~hgresearch.bench.fasthttp.FastPool` with request
    bytes built before the run (``pool.build_request``)."""
    t_sent = time.monotonic_ns()
    try:
        resp = await pool.request(request, opts.timeout_s)
    except asyncio.CancelledError:
        raise
    except Exception as err:  # noqa: BLE001 - any other fault is recorded, not raised
        return _record(spec, opts, t_sent, time.monotonic_ns(), None, [], "client_error",
                       f"{type(err).__name__}: {err}", secrets)
    t_done = time.monotonic_ns()
    if gate is not None:
        await gate()
    return _record(spec, opts, t_sent, t_done, resp.status, resp.pieces, resp.error_class,
                   resp.error, secrets)


def run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` — in a fresh thread when this one already runs a loop (Jupyter)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench") as pool:
        return pool.submit(asyncio.run, coro).result()


def make_session(pool_size: int, read_bufsize: int = 1 << 20) -> aiohttp.ClientSession:
    """One shared session for the run: keep-alive pool of ``pool_size`` connections."""
    connector = aiohttp.TCPConnector(limit=pool_size, limit_per_host=0, ttl_dns_cache=300,
                                     enable_cleanup_closed=True)
    return aiohttp.ClientSession(connector=connector, read_bufsize=read_bufsize,
                                 timeout=aiohttp.ClientTimeout(total=None),
                                 auto_decompress=False)


async def get_json(session: aiohttp.ClientSession, url: str, headers: dict[str, str],
                   timeout_s: float = 10.0, secrets: tuple[str, ...] = ()) -> Any:
    """GET ``url`` as JSON (server info is best-effort: this never raises).

    A non-200 answer gives ``{"error": "HTTP <status>: <body excerpt>", "status": ...}``; no
    answer at all (refused, dropped, or nothing within ``timeout_s``) gives ``{"error": ...,
    "no_answer": True}`` plus ``"timed_out": True`` for the timeout. Secrets are scrubbed.
    """
    try:
        async with session.get(url, headers=headers,
                               timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            if resp.status != 200:
                body = (await resp.read()).decode(errors="replace")[:ERROR_TEXT_CHARS]
                return {"error": scrub(f"HTTP {resp.status}: {body}", secrets),
                        "status": resp.status}
            return await resp.json(content_type=None)
    except TimeoutError:
        return {"error": f"no answer within {timeout_s:g} s", "no_answer": True,
                "timed_out": True}
    except (aiohttp.ClientConnectionError, ConnectionError) as err:
        return {"error": scrub(f"{type(err).__name__}: {err}", secrets), "no_answer": True}
    except Exception as err:  # noqa: BLE001 - e.g. a 200 answer that is not JSON
        return {"error": scrub(f"{type(err).__name__}: {err}", secrets)[:ERROR_TEXT_CHARS]}
