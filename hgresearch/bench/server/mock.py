"""A local OpenAI-compatible streaming server for tests and client benchmarks (a TEST DOUBLE).

It stands in for vLLM where no GPU exists (also as a sweep's ``engine: mock`` server): it
streams ``max_tokens`` tokens (``ignore_eos`` semantics) with a configured time to first token
and inter-event delay, optionally several tokens per event, answers a request without
``"stream": true`` with one JSON completion, answers ``/v1/models``, ``/version`` and
``/health``, honours ``stream_options.include_usage`` / ``continuous_usage_stats``, and injects
faults at given rates: HTTP 500, hangs past the client's timeout, disconnects mid-stream,
malformed SSE lines, streams cut before ``[DONE]``, and short outputs. It can also behave like
servers that cannot work: a wrong API key (401, as vLLM's ``--api-key``), an unknown model name
(404 with vLLM's message, ``strict_model``), an unknown route (404), or never answering
(``silent``). Event times are absolute from the request's arrival (precise sleeping), and each
event carries the server's send time (``server_t_ns``, same monotonic clock) so client timing
bias can be measured. Real-server runs are elsewhere.

Run it alone: ``python -m hgresearch.bench.server.mock --port 8000 --ttft-ms 20 --itl-ms 5``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from hgresearch.bench.fasthttp import set_nodelay
from hgresearch.bench.schedule import sleep_until_ns
from hgresearch.paths import REPO_ROOT

FAULTS = ("error", "hang", "disconnect", "malformed", "truncate", "short")


@dataclass
class MockServerConfig:
    """Behaviour of the test server (rates are per-request probabilities)."""

    ttft_ms: float = 20.0
    itl_ms: float = 5.0              # delay between events
    tokens_per_event: int = 1
    model: str = "test-model"
    error_rate: float = 0.0          # HTTP 500
    hang_rate: float = 0.0           # no answer for hang_s
    disconnect_rate: float = 0.0     # connection closed mid-stream
    malformed_rate: float = 0.0      # a non-JSON data line mid-stream
    truncate_rate: float = 0.0       # stream ends without [DONE]
    short_rate: float = 0.0          # stops early with finish_reason "stop"
    hang_s: float = 30.0
    api_key: str | None = None       # when set, /v1 routes need "Authorization: Bearer <key>"
    strict_model: bool = False       # 404 (as vLLM) for a request naming another model
    silent: bool = False             # accept connections, read requests, never answer
    echo_auth: bool = False          # error bodies echo the Authorization header (worst case)
    seed: int = 0
    precise: bool = True             # microsecond event timing (timer thread + short spin)
    event_log: str | None = None     # write realized send times (JSON) here at shutdown

_REASONS = {200: "OK", 401: "Unauthorized", 404: "Not Found", 411: "Length Required",
            500: "Internal Server Error", 504: "Gateway Timeout"}


class _Conn(asyncio.Protocol):
    """One client connection: a minimal HTTP/1.1 parser (Content-Length bodies, keep-alive).

    The test server speaks raw HTTP on asyncio's transport rather than through a web
    framework so that its own overhead stays small next to the client's being measured;
    a request's arrival is timestamped when its first byte is read.
    """

    def __init__(self, server: _Server) -> None:
        self.server = server
        self.buf = bytearray()
        self.t_arrival: int | None = None
        self.busy = False
        self.closed = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        set_nodelay(transport)  # small SSE writes must leave at once

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

    def data_received(self, data: bytes) -> None:
        if not self.buf and self.t_arrival is None:
            self.t_arrival = time.monotonic_ns()
        self.buf += data
        self._parse()

    def _parse(self) -> None:
        while not self.busy and not self.closed:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
            method, path = (lines[0].split(" ") + ["", ""])[:2]
            headers = {}
            for line in lines[1:]:
                key, _, value = line.partition(":")
                headers[key.strip().lower()] = value.strip()
            if "chunked" in headers.get("transfer-encoding", ""):
                self.write_json(411, {"error": "send a Content-Length body"}, close=True)
                return
            size = int(headers.get("content-length") or 0)
            if len(self.buf) < end + 4 + size:
                return
            body = bytes(self.buf[end + 4:end + 4 + size])
            del self.buf[:end + 4 + size]
            t0 = self.t_arrival or time.monotonic_ns()
            self.t_arrival = time.monotonic_ns() if self.buf else None
            self.busy = True
            asyncio.ensure_future(self.server.handle(self, method, path, headers, body, t0))

    def write(self, data: bytes) -> bool:
        """Write if still connected; False once the client has gone."""
        if self.closed or self.transport is None or self.transport.is_closing():
            return False
        self.transport.write(data)
        return True

    def write_json(self, status: int, obj: Any, close: bool = False) -> None:
        """A complete JSON response."""
        body = json.dumps(obj).encode()
        head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                + ("Connection: close\r\n" if close else "") + "\r\n")
        self.write(head.encode() + body)
        if close and self.transport is not None:
            self.transport.close()
        self.finish()

    def finish(self) -> None:
        """The response is complete: parse the next request on this connection."""
        self.busy = False
        if self.buf:
            self._parse()


_STREAM_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n")


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class _Server:
    def __init__(self, cfg: MockServerConfig) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.count = 0
        #: Realized timing per stream: [arrival_ns, [event send ns, ...]].
        self.log: list[tuple[int, list[int]]] = []

    def _fault(self) -> str | None:
        draw = self.rng.random()
        edge = 0.0
        for name in FAULTS:
            edge += getattr(self.cfg, f"{name}_rate")
            if draw < edge:
                return name
        return None

    async def handle(self, conn: _Conn, method: str, path: str, headers: dict[str, str],
                     body: bytes, t0: int) -> None:
        cfg = self.cfg
        if cfg.silent:
            await asyncio.Event().wait()  # until the server stops (its tasks are cancelled)
        auth = headers.get("authorization", "")
        if cfg.api_key is not None and path.startswith("/v1/") and \
                auth != f"Bearer {cfg.api_key}":
            if method == "POST":
                self.count += 1
            conn.write_json(401, {"error": "Unauthorized"})
            return
        if method == "GET" and path == "/v1/models":
            conn.write_json(200, {"object": "list", "data": [
                {"id": cfg.model, "object": "model", "owned_by": "hgresearch-testserver"}]})
            return
        if method == "GET" and path == "/health":
            conn.write_json(200, {})
            return
        if method == "GET" and path == "/version":
            conn.write_json(200, {"version": "hgresearch-testserver"})
            return
        if method != "POST" or path not in ("/v1/completions", "/v1/chat/completions"):
            conn.write_json(404, {"error": f"no route {method} {path}"})
            return
        self.count += 1
        request = json.loads(body or b"{}")
        if cfg.strict_model and request.get("model") != cfg.model:
            conn.write_json(404, {"object": "error", "type": "NotFoundError", "code": 404,
                                  "message": f"The model `{request.get('model')}` does not "
                                             "exist."})
            return
        chat = path.endswith("chat/completions")
        prompt = (request["messages"][-1]["content"] if chat else request.get("prompt")) or ""
        prompt_tokens = len(str(prompt).split())
        max_tokens = int(request.get("max_tokens") or request.get("max_completion_tokens")
                         or 16)
        opts = request.get("stream_options") or {}
        usage_final = bool(opts.get("include_usage"))
        usage_each = usage_final and bool(opts.get("continuous_usage_stats"))
        fault = self._fault()
        if fault == "error":
            text = "injected fault"
            if cfg.echo_auth:
                text += f"; request had Authorization: {auth}"
            conn.write_json(500, {"error": text})
            return
        if fault == "hang":
            await asyncio.sleep(cfg.hang_s)
            conn.write_json(504, {"error": "hung"})
            return
        n_out = max_tokens if fault != "short" else max(1, max_tokens // 2)
        if not request.get("stream", False):  # one JSON answer (e.g. a sweep's warm-up)
            await asyncio.sleep((cfg.ttft_ms + max(n_out - 1, 0) * cfg.itl_ms) / 1e3)
            text_key = ({"message": {"role": "assistant", "content": " tok" * n_out}} if chat
                        else {"text": " tok" * n_out})
            conn.write_json(200, {
                "id": f"cmpl-{self.count}", "model": cfg.model,
                "choices": [{"index": 0, **text_key,
                             "finish_reason": "stop" if fault == "short" else "length"}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": n_out,
                          "total_tokens": prompt_tokens + n_out}})
            return
        conn.write(_STREAM_HEAD)
        rid = f"cmpl-{self.count}"
        kind = "chat.completion.chunk" if chat else "text_completion"
        prefix = f'{{"id":"{rid}","object":"{kind}","model":{json.dumps(cfg.model)},'.encode()
        per = max(1, cfg.tokens_per_event)
        n_events = -(-n_out // per)
        stop_at = n_events // 2 if fault in ("disconnect", "malformed", "truncate") else None
        sent = 0
        times: list[int] = []
        self.log.append((t0, times))
        for k in range(n_events):
            due = t0 + int((cfg.ttft_ms + k * cfg.itl_ms) * 1e6)
            if cfg.precise:
                await sleep_until_ns(due)
            else:
                delay = (due - time.monotonic_ns()) / 1e9
                if delay > 0:
                    await asyncio.sleep(delay)
            if conn.closed:
                return
            if stop_at is not None and k == stop_at:
                if fault == "disconnect":
                    if conn.transport is not None:
                        conn.transport.close()
                    return
                if fault == "malformed":
                    conn.write(_chunk(b"data: {not json\n\n"))
                    continue
                if fault == "truncate":
                    conn.write(b"0\r\n\r\n")
                    conn.finish()
                    return
            n = min(per, n_out - sent)
            sent += n
            finish = "null" if sent < n_out else ('"stop"' if fault == "short" else '"length"')
            text = json.dumps(" tok" * n)
            choice = (f'{{"index":0,"delta":{{"content":{text}}},"finish_reason":{finish}}}'
                      if chat else f'{{"index":0,"text":{text},"finish_reason":{finish}}}')
            usage = (f',"usage":{{"prompt_tokens":{prompt_tokens},"completion_tokens":{sent},'
                     f'"total_tokens":{prompt_tokens + sent}}}' if usage_each else "")
            t_send = time.monotonic_ns()
            times.append(t_send)
            conn.write(_chunk(b"data: " + prefix + b'"choices":[' + choice.encode() + b"]"
                              + usage.encode() + b',"server_t_ns":%d}\n\n' % t_send))
        tail = b""
        if usage_final:
            tail += b"data: " + prefix + (
                f'"choices":[],"usage":{{"prompt_tokens":{prompt_tokens},'
                f'"completion_tokens":{sent},"total_tokens":{prompt_tokens + sent}}}}}\n\n'
            ).encode()
        conn.write(_chunk(tail + b"data: [DONE]\n\n") + b"0\r\n\r\n")
        conn.finish()


def _bound_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


async def _serve(cfg: MockServerConfig, sock: socket.socket, stop: asyncio.Event) -> None:
    server = _Server(cfg)
    loop = asyncio.get_running_loop()
    listener = await loop.create_server(lambda: _Conn(server), sock=sock, backlog=1024)
    await stop.wait()
    listener.close()
    # Hanging handlers (injected faults) would outlive the loop otherwise.
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)
    if cfg.event_log:
        with open(cfg.event_log, "w", encoding="utf-8") as fh:
            json.dump(server.log, fh)


@contextlib.contextmanager
def serve_in_thread(cfg: MockServerConfig | None = None, host: str = "127.0.0.1") -> Iterator[str]:
    """Run the server in a background thread; yields its base URL (for functional tests —
    timing tests should use :func:`serve_in_subprocess`, which does not share the GIL)."""
    cfg = cfg or MockServerConfig()
    sock = _bound_socket(host, 0)
    url = f"http://{host}:{sock.getsockname()[1]}"
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    thread = threading.Thread(target=loop.run_until_complete, args=(_serve(cfg, sock, stop),),
                              daemon=True, name="testserver")
    thread.start()
    try:
        yield url
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)
        loop.close()


def server_args(cfg: MockServerConfig) -> list[str]:
    """Command-line flags reproducing ``cfg``."""
    args = []
    for name, value in vars(cfg).items():
        if value is None:
            continue
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            args.append(flag if value else "--no-" + name.replace("_", "-"))
        else:
            args += [flag, str(value)]
    return args


@contextlib.contextmanager
def serve_in_subprocess(cfg: MockServerConfig | None = None, host: str = "127.0.0.1",
                        python: str | None = None) -> Iterator[str]:
    """Run the server as a separate process; yields its base URL, stops it afterwards."""
    cfg = cfg or MockServerConfig()
    cmd = [python or sys.executable, "-m", "hgresearch.bench.server.mock", "--host", host,
           "--port", "0", *server_args(cfg)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("listening on "):
            raise RuntimeError(f"test server did not start: {line!r}")
        yield line.split()[-1]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def main(argv: list[str] | None = None) -> None:
    """Command-line entry: serve until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    defaults = MockServerConfig()
    for name, value in vars(defaults).items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=value)
        else:
            kind = type(value) if value is not None else str
            parser.add_argument(flag, type=kind, default=value)
    args = parser.parse_args(argv)
    cfg = MockServerConfig(**{k: getattr(args, k) for k in vars(defaults)})
    sock = _bound_socket(args.host, args.port)
    print(f"listening on http://{args.host}:{sock.getsockname()[1]}", flush=True)
    async def serve_until_signal() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await _serve(cfg, sock, stop)

    asyncio.run(serve_until_signal())


if __name__ == "__main__":
    main()
