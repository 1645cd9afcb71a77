"""The protocol-level HTTP client: framing, keep-alive, faults, and interop with a real web
framework (aiohttp's server stands in for uvicorn; the hgresearch test server is a test double
for vLLM)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading

import pytest
from aiohttp import web

from hgresearch.bench.client import ClientOptions, parse_sse, send_request_fast
from hgresearch.bench.fasthttp import FastPool
from hgresearch.bench.prompts import RequestSpec


def _event(text: str, completion_tokens: int) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "text": text}], "usage": {
        "prompt_tokens": 3, "completion_tokens": completion_tokens}}).encode() + b"\n\n"


class _ScriptedServer:
    """Answers each request with fixed raw bytes, written in the given pieces with pauses."""

    def __init__(self, pieces: list[bytes], pause_s: float = 0.01) -> None:
        self.pieces = pieces
        self.pause_s = pause_s
        self.connections = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = [int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length")][0]
                await reader.readexactly(length)
                for piece in self.pieces:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(self.pause_s)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


async def _with_server(server: _ScriptedServer, body) -> object:
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    try:
        return await body(f"http://127.0.0.1:{port}")
    finally:
        srv.close()


def _chunked(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def test_chunk_framing_split_anywhere_and_connection_reuse():
    """Chunk headers split across reads, two events in one read, then the final chunk."""
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    e1, e2, e3 = _event(" a", 1), _event(" b", 2), _event(" c", 3)
    stream = _chunked(e1) + _chunked(e2 + e3) + _chunked(b"data: [DONE]\n\n") + b"0\r\n\r\n"
    cut1, cut2 = len(_chunked(e1)) + 1, len(_chunked(e1)) + 9  # inside the 2nd chunk header
    server = _ScriptedServer([head, stream[:cut1], stream[cut1:cut2], stream[cut2:]])

    async def body(url):
        pool = FastPool(url)
        request = pool.build_request("/v1/completions", b"{}", {"Content-Type": "x"})
        first = await pool.request(request, 5.0)
        second = await pool.request(request, 5.0)
        return pool, first, second

    pool, first, second = asyncio.run(_with_server(server, body))
    for resp in (first, second):
        assert resp.status == 200 and resp.complete and resp.error_class is None
        assert resp.body == e1 + e2 + e3 + b"data: [DONE]\n\n"
        sse = parse_sse(resp.pieces, chat=False)
        assert sse.done and sse.event_tok == [1, 1, 1]
        # e1 arrived in the first read; e2 and e3 completed in the last read together.
        assert sse.event_t[0] < sse.event_t[1] == sse.event_t[2]
    assert server.connections == 1 and pool.connections_opened == 1


def test_content_length_error_body_and_dropped_connection():
    error = b'{"error": "boom"}'
    server = _ScriptedServer([b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: "
                              + str(len(error)).encode() + b"\r\n\r\n" + error])

    async def body(url):
        pool = FastPool(url)
        return await pool.request(pool.build_request("/v1/completions", b"{}", {}), 5.0)

    resp = asyncio.run(_with_server(server, body))
    assert resp.status == 500 and resp.body == error and resp.complete

    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    dropping = _ScriptedServer([head + _chunked(_event(" a", 1))])

    async def dropped(url):
        pool = FastPool(url)
        task = pool.request(pool.build_request("/v1/completions", b"{}", {}), 0.5)
        return await task

    resp = asyncio.run(_with_server(dropping, dropped))
    assert resp.error_class == "timeout"  # the server never ends the body


def test_refused_connection_is_recorded_not_raised():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now

    async def body():
        pool = FastPool(f"http://127.0.0.1:{port}")
        opts = ClientOptions(base_url=f"http://127.0.0.1:{port}", model="m")
        spec = RequestSpec(0, "a b", 2, 3)
        return await send_request_fast(pool, opts, spec,
                                       pool.build_request("/v1/completions", b"{}", {}))

    rec = asyncio.run(body())
    assert rec["success"] is False and rec["error_class"] == "connection_dropped"


@pytest.fixture()
def aiohttp_sse_server():
    """A real web framework streaming SSE with chunked encoding (stands in for uvicorn)."""

    async def handler(request: web.Request) -> web.StreamResponse:
        await request.json()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i in range(1, 6):
            await resp.write(_event(" t", i))
            await asyncio.sleep(0.002)
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/v1/completions", handler)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}"
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.run_until_complete(runner.cleanup())
    loop.close()


def test_interop_with_a_real_web_framework(aiohttp_sse_server):
    url = aiohttp_sse_server

    async def body():
        pool = FastPool(url)
        opts = ClientOptions(base_url=url, model="m", ignore_eos=True)
        spec = RequestSpec(0, "a b c", 3, 5)
        request = pool.build_request("/v1/completions", b'{"prompt": "a b c"}', {})
        recs = [await send_request_fast(pool, opts, spec, request) for _ in range(3)]
        return pool, recs

    pool, recs = asyncio.run(body())
    for rec in recs:
        assert rec["success"], rec["error"]
        assert rec["output_tokens"] == 5 and rec["event_tokens"] == [1] * 5
        assert rec["usage_source"] == "server" and rec["prompt_tokens"] == 3
    assert pool.connections_opened == 1  # keep-alive reused
