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
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from hgresearch.bench.workloads import RequestSpec

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


async def send_request(
    session: aiohttp.ClientSession, opts: ClientOptions, spec: RequestSpec, payload: bytes,
    headers: dict[str, str], secrets: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Send one streaming request and return its record (never raises for request faults).

    The record holds ``t_sent_ns``, ``t_first_token_ns``, ``t_last_token_ns``, ``t_done_ns``,
    ``event_t_ns``/``event_tokens`` (arrival and token count of every content event),
    ``prompt_tokens``/``output_tokens`` (server usage when given), ``http_status``,
    ``success``, ``error_class``, ``error``.
    """
    event_t: list[int] = []
    event_tok: list[int] = []
    rec: dict[str, Any] = {"index": spec.index, "expected_output_tokens": spec.output_len,
                           "client_prompt_tokens": spec.prompt_len, "http_status": None,
                           "success": False, "error_class": None, "error": None}
    usage: dict[str, Any] | None = None
    last_completion_tokens = 0
    done = False
    chat = opts.endpoint == "chat"
    timeout = aiohttp.ClientTimeout(total=opts.timeout_s)
    t_sent = time.monotonic_ns()
    try:
        async with session.post(opts.url, data=payload, headers=headers,
                                timeout=timeout) as resp:
            rec["http_status"] = resp.status
            if resp.status != 200:
                body = (await resp.text(errors="replace"))[:ERROR_TEXT_CHARS]
                rec["error_class"] = "http_error"
                rec["error"] = scrub(f"HTTP {resp.status}: {body}", secrets)
            else:
                async for line in resp.content:
                    t = time.monotonic_ns()  # first, before any parsing
                    if not line.startswith(b"data:"):
                        continue  # blank separators and SSE comments
                    data = line[5:].strip()
                    if data == b"[DONE]":
                        done = True
                        break
                    try:
                        chunk = json.loads(data)
                    except ValueError:
                        rec["error_class"] = "malformed_stream"
                        rec["error"] = scrub(f"SSE data line is not JSON: "
                                             f"{data[:80].decode(errors='replace')!r}", secrets)
                        break
                    chunk_usage = chunk.get("usage")
                    if chunk_usage:
                        usage = chunk_usage
                    choices = chunk.get("choices")
                    if not choices:
                        continue  # the usage-only final event carries no token
                    if chunk_usage and chunk_usage.get("completion_tokens") is not None:
                        n_tok = int(chunk_usage["completion_tokens"]) - last_completion_tokens
                        last_completion_tokens = int(chunk_usage["completion_tokens"])
                    else:
                        n_tok = 1
                    if chat:
                        text = (choices[0].get("delta") or {}).get("content")
                    else:
                        text = choices[0].get("text")
                    if not text and (n_tok == 0 or not chunk_usage):
                        continue  # e.g. the role-only opening chat event carries no token
                    event_t.append(t)
                    event_tok.append(n_tok)
                if rec["error_class"] is None and not done:
                    rec["error_class"] = "stream_truncated"
                    rec["error"] = "stream ended without [DONE]"
    except TimeoutError:
        rec["error_class"] = "timeout"
        rec["error"] = f"no complete answer within {opts.timeout_s} s"
    except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError,
            aiohttp.ClientConnectionError, ConnectionError) as err:
        rec["error_class"] = "connection_dropped"
        rec["error"] = scrub(f"{type(err).__name__}: {err}", secrets)[:ERROR_TEXT_CHARS]
    except asyncio.CancelledError:
        raise
    except Exception as err:  # noqa: BLE001 - any other fault is recorded, not raised
        rec["error_class"] = "client_error"
        rec["error"] = scrub(f"{type(err).__name__}: {err}", secrets)[:ERROR_TEXT_CHARS]
    t_done = time.monotonic_ns()
    rec["t_sent_ns"] = t_sent
    rec["t_first_token_ns"] = event_t[0] if event_t else None
    rec["t_last_token_ns"] = event_t[-1] if event_t else None
    rec["t_done_ns"] = t_done
    rec["event_t_ns"] = event_t
    rec["event_tokens"] = event_tok
    if usage is not None and usage.get("completion_tokens") is not None:
        rec["usage_source"] = "server"
        rec["output_tokens"] = int(usage["completion_tokens"])
        rec["prompt_tokens"] = int(usage.get("prompt_tokens") or spec.prompt_len)
    else:
        rec["usage_source"] = "client_events"
        rec["output_tokens"] = sum(event_tok)
        rec["prompt_tokens"] = spec.prompt_len
    if rec["error_class"] is None:
        if not event_t:
            rec["error_class"], rec["error"] = "stream_truncated", "no token received"
        elif opts.ignore_eos and rec["output_tokens"] < spec.output_len:
            rec["error_class"] = "short_output"
            rec["error"] = (f"{rec['output_tokens']} output tokens, asked for "
                            f"{spec.output_len} with ignore_eos")
        else:
            rec["success"] = True
    return rec


def make_session(pool_size: int, read_bufsize: int = 1 << 20) -> aiohttp.ClientSession:
    """One shared session for the run: keep-alive pool of ``pool_size`` connections."""
    connector = aiohttp.TCPConnector(limit=pool_size, limit_per_host=0, ttl_dns_cache=300,
                                     enable_cleanup_closed=True)
    return aiohttp.ClientSession(connector=connector, read_bufsize=read_bufsize,
                                 timeout=aiohttp.ClientTimeout(total=None),
                                 auto_decompress=False)


async def get_json(session: aiohttp.ClientSession, url: str, headers: dict[str, str],
                   timeout_s: float = 10.0) -> Any:
    """GET ``url`` as JSON, or ``{"error": ...}`` (server info is best-effort)."""
    try:
        async with session.get(url, headers=headers,
                               timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            if resp.status != 200:
                return {"error": f"HTTP {resp.status}"}
            return await resp.json(content_type=None)
    except Exception as err:  # noqa: BLE001
        return {"error": f"{type(err).__name__}"}
