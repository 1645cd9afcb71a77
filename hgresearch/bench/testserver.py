"""A local OpenAI-compatible streaming server for tests and client benchmarks (a TEST DOUBLE).

It stands in for vLLM where no GPU exists: it streams ``max_tokens`` tokens (``ignore_eos``
semantics) with a configured time to first token and inter-event delay, optionally several
tokens per event, answers ``/v1/models`` and ``/version``, honours
``stream_options.include_usage`` / ``continuous_usage_stats``, and injects faults at given
rates: HTTP 500, hangs past the client's timeout, disconnects mid-stream, malformed SSE lines,
streams cut before ``[DONE]``, and short outputs. Event times are absolute from the request's
arrival (precise sleeping), and each event carries the server's send time (``server_t_ns``,
same monotonic clock) so client timing bias can be measured. Real-server runs are elsewhere.

Run it alone: ``python -m hgresearch.bench.testserver --port 8000 --ttft-ms 20 --itl-ms 5``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from aiohttp import web

from hgresearch.bench.schedule import sleep_until_ns

FAULTS = ("error", "hang", "disconnect", "malformed", "truncate", "short")


@dataclass
class ServerConfig:
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
    api_key: str | None = None       # when set, requests need "Authorization: Bearer <key>"
    echo_auth: bool = False          # error bodies echo the Authorization header (worst case)
    seed: int = 0
    precise: bool = True             # spin the last ~1.5 ms before each event


class _Server:
    def __init__(self, cfg: ServerConfig) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.count = 0

    def _fault(self) -> str | None:
        draw = self.rng.random()
        edge = 0.0
        for name in FAULTS:
            edge += getattr(self.cfg, f"{name}_rate")
            if draw < edge:
                return name
        return None

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [
            {"id": self.cfg.model, "object": "model", "owned_by": "hgresearch-testserver"}]})

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": "hgresearch-testserver"})

    async def complete(self, request: web.Request) -> web.StreamResponse:
        t0 = time.monotonic_ns()
        cfg = self.cfg
        self.count += 1
        auth = request.headers.get("Authorization", "")
        if cfg.api_key is not None and auth != f"Bearer {cfg.api_key}":
            return web.json_response({"error": "unauthorized"}, status=401)
        body = await request.json()
        chat = request.path.endswith("chat/completions")
        prompt = (body["messages"][-1]["content"] if chat else body.get("prompt", "")) or ""
        prompt_tokens = len(str(prompt).split())
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        opts = body.get("stream_options") or {}
        usage_final = bool(opts.get("include_usage"))
        usage_each = usage_final and bool(opts.get("continuous_usage_stats"))
        fault = self._fault()
        if fault == "error":
            text = "injected fault"
            if cfg.echo_auth:
                text += f"; request had Authorization: {auth}"
            return web.json_response({"error": text}, status=500)
        if fault == "hang":
            await asyncio.sleep(cfg.hang_s)
            return web.json_response({"error": "hung"}, status=504)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
        await resp.prepare(request)
        try:
            await self._stream(request, resp, t0, body, chat, prompt_tokens, max_tokens,
                               usage_each, usage_final, fault)
        except ConnectionError:
            pass  # the client went away (it may close a stream it rejected)
        return resp

    async def _stream(self, request: web.Request, resp: web.StreamResponse, t0: int,
                      body: dict, chat: bool, prompt_tokens: int, max_tokens: int,
                      usage_each: bool, usage_final: bool, fault: str | None) -> None:
        cfg = self.cfg
        n_out = max_tokens if fault != "short" else max(1, max_tokens // 2)
        obj = "chat.completion.chunk" if chat else "text_completion"
        per = max(1, cfg.tokens_per_event)
        n_events = -(-n_out // per)
        stop_at = n_events // 2 if fault in ("disconnect", "malformed", "truncate") else None
        sent = 0
        for k in range(n_events):
            due = t0 + int((cfg.ttft_ms + k * cfg.itl_ms) * 1e6)
            if cfg.precise:
                await sleep_until_ns(due)
            else:
                await asyncio.sleep(max(0.0, (due - time.monotonic_ns()) / 1e9))
            if stop_at is not None and k == stop_at:
                if fault == "disconnect":
                    if request.transport is not None:
                        request.transport.close()
                    return
                if fault == "malformed":
                    await resp.write(b"data: {not json\n\n")
                    continue
                if fault == "truncate":
                    await resp.write_eof()
                    return
            n = min(per, n_out - sent)
            sent += n
            text = " tok" * n
            finish = "length" if sent == n_out and fault != "short" else (
                "stop" if sent == n_out else None)
            choice = ({"index": 0, "delta": {"content": text}, "finish_reason": finish}
                      if chat else {"index": 0, "text": text, "finish_reason": finish})
            chunk = {"id": f"cmpl-{self.count}", "object": obj, "model": cfg.model,
                     "choices": [choice], "server_t_ns": time.monotonic_ns()}
            if usage_each:
                chunk["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": sent,
                                  "total_tokens": prompt_tokens + sent}
            await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        if usage_final:
            chunk = {"id": f"cmpl-{self.count}", "object": obj, "model": cfg.model,
                     "choices": [], "usage": {"prompt_tokens": prompt_tokens,
                                              "completion_tokens": sent,
                                              "total_tokens": prompt_tokens + sent}}
            await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()


def make_app(cfg: ServerConfig) -> web.Application:
    """The aiohttp application of the test server."""
    server = _Server(cfg)
    app = web.Application(client_max_size=64 * 2**20)
    app.router.add_get("/v1/models", server.models)
    app.router.add_get("/version", server.version)
    app.router.add_post("/v1/completions", server.complete)
    app.router.add_post("/v1/chat/completions", server.complete)
    return app


def _bound_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


async def _serve(cfg: ServerConfig, sock: socket.socket, stop: asyncio.Event) -> None:
    runner = web.AppRunner(make_app(cfg), access_log=None, handle_signals=False,
                           shutdown_timeout=0.5)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    await stop.wait()
    await runner.cleanup()
    # Hanging handlers (injected faults) would outlive the loop otherwise.
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)


@contextlib.contextmanager
def serve_in_thread(cfg: ServerConfig | None = None, host: str = "127.0.0.1") -> Iterator[str]:
    """Run the server in a background thread; yields its base URL (for functional tests —
    timing tests should use :func:`serve_in_subprocess`, which does not share the GIL)."""
    cfg = cfg or ServerConfig()
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


def server_args(cfg: ServerConfig) -> list[str]:
    """Command-line flags reproducing ``cfg``."""
    args = []
    for name, value in vars(cfg).items():
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        args += [flag] if value is True else [flag, str(value)]
    return args


@contextlib.contextmanager
def serve_in_subprocess(cfg: ServerConfig | None = None, host: str = "127.0.0.1",
                        python: str | None = None) -> Iterator[str]:
    """Run the server as a separate process; yields its base URL, stops it afterwards."""
    cfg = cfg or ServerConfig()
    cmd = [python or sys.executable, "-m", "hgresearch.bench.testserver", "--host", host,
           "--port", "0", *server_args(cfg)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
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
    defaults = ServerConfig()
    for name, value in vars(defaults).items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=value)
        else:
            kind = type(value) if value is not None else str
            parser.add_argument(flag, type=kind, default=value)
    args = parser.parse_args(argv)
    cfg = ServerConfig(**{k: getattr(args, k) for k in vars(defaults)})
    sock = _bound_socket(args.host, args.port)
    print(f"listening on http://{args.host}:{sock.getsockname()[1]}", flush=True)
    stop = asyncio.Event()
    try:
        asyncio.run(_serve(cfg, sock, stop))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
