"""A minimal HTTP/1.1 client on asyncio protocols, for streamed responses on the hot path.

Why not aiohttp here: aiohttp wakes a coroutine for every line it hands over, so each streamed
token costs a task switch (tens of microseconds of CPU on a small machine), and building a
request costs a few hundred microseconds. This client sends bytes built before the run. It
timestamps each socket read in ``data_received``, undoes the chunked transfer encoding there,
and wakes the waiting coroutine once, when the response is complete. SSE parsing happens after
that, off the hot path. Connections are kept alive and reused. It speaks only what
OpenAI-compatible servers (uvicorn/h11 in vLLM) answer: a status line, headers, and a body that
is chunked, has a Content-Length, or runs until close.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass
class RawResponse:
    """What came back: status, body pieces with their arrival times, and any transport fault."""

    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    pieces: list[tuple[int, bytes]] = field(default_factory=list)  # (monotonic ns, body bytes)
    complete: bool = False            # the body ended as framed (last chunk / length / close)
    error_class: str | None = None    # "timeout" | "connection_dropped"
    error: str | None = None

    @property
    def body(self) -> bytes:
        return b"".join(p for _, p in self.pieces)


def set_nodelay(transport: asyncio.BaseTransport) -> None:
    """Send small writes at once on a TCP transport: Nagle's algorithm with the peer's delayed
    ACK would hold a streamed event or a request for ~40 ms."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _Conn(asyncio.Protocol):
    """One keep-alive connection; carries one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.served = 0               # requests started on this connection
        self._fut: asyncio.Future[None] | None = None
        self._resp: RawResponse | None = None
        self._buf = b""
        self._state = "idle"          # head | chunk_size | chunk_data | chunk_trailer | length
        self._remaining = 0           # bytes left in the current chunk / body
        self._keep_alive = True

    # -- asyncio callbacks ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        set_nodelay(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        resp = self._resp
        if resp is None:
            return
        if self._state == "until_close":
            resp.complete = True
        else:
            resp.error_class = "connection_dropped"
            resp.error = ("connection closed before the response was complete"
                          + (f": {exc}" if exc else ""))
        self._finish()

    def data_received(self, data: bytes) -> None:
        t = time.monotonic_ns()  # first: this is the arrival time of everything in `data`
        if self._resp is None:
            if self.transport is not None:
                self.transport.close()  # unsolicited bytes: the connection is unusable
            return
        buf = self._buf + data if self._buf else data
        self._buf = b""
        resp = self._resp
        out: list[bytes] = []
        while buf and self._resp is not None:
            state = self._state
            if state == "chunk_data":
                take = buf[:self._remaining]
                out.append(take)
                self._remaining -= len(take)
                buf = buf[len(take):]
                if self._remaining == 0:
                    self._state = "chunk_crlf"
            elif state == "chunk_crlf":
                if len(buf) < 2:
                    break
                buf = buf[2:]
                self._state = "chunk_size"
            elif state == "chunk_size":
                end = buf.find(b"\r\n")
                if end < 0:
                    break
                size = int(buf[:end].split(b";")[0].strip() or b"0", 16)
                buf = buf[end + 2:]
                if size == 0:
                    self._state = "chunk_trailer"
                else:
                    self._remaining = size
                    self._state = "chunk_data"
            elif state == "chunk_trailer":
                end = buf.find(b"\r\n")
                if end < 0:
                    break
                line, buf = buf[:end], buf[end + 2:]
                if not line:
                    resp.complete = True
                    self._emit(out, t)
                    out = []
                    self._finish()
            elif state in ("length", "until_close"):
                take = buf if state == "until_close" else buf[:self._remaining]
                out.append(take)
                buf = buf[len(take):]
                if state == "length":
                    self._remaining -= len(take)
                    if self._remaining == 0:
                        resp.complete = True
                        self._emit(out, t)
                        out = []
                        self._finish()
            elif state == "head":
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    break
                self._parse_head(buf[:end])
                buf = buf[end + 4:]
                if self._resp is not None and self._state == "length" and self._remaining == 0:
                    resp.complete = True
                    self._finish()
            else:
                break
        if out:
            self._emit(out, t)
        if buf:
            self._buf = buf

    # -- internals -----------------------------------------------------------------------
    def _emit(self, out: list[bytes], t: int) -> None:
        if self._resp is not None:
            self._resp.pieces.append((t, out[0] if len(out) == 1 else b"".join(out)))

    def _parse_head(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        resp = self._resp
        assert resp is not None
        resp.status = int(parts[1])
        for line in lines[1:]:
            key, _, value = line.partition(":")
            resp.headers[key.strip().lower()] = value.strip()
        conn = resp.headers.get("connection", "").lower()
        self._keep_alive = parts[0] == "HTTP/1.1" and conn != "close" or conn == "keep-alive"
        if "chunked" in resp.headers.get("transfer-encoding", "").lower():
            self._state = "chunk_size"
        elif "content-length" in resp.headers:
            self._state = "length"
            self._remaining = int(resp.headers["content-length"])
        else:
            self._state = "until_close"
            self._keep_alive = False

    def _finish(self) -> None:
        fut, self._fut, self._resp = self._fut, None, None
        self._state = "idle"
        if not self._keep_alive and self.transport is not None:
            self.transport.close()
        if fut is not None and not fut.done():
            fut.set_result(None)

    def start(self, request: bytes, resp: RawResponse) -> asyncio.Future[None]:
        """Send ``request``; the returned future completes when ``resp`` is complete."""
        assert self.transport is not None
        self._fut = asyncio.get_running_loop().create_future()
        self._resp = resp
        self._state = "head"
        self._buf = b""
        self._keep_alive = True
        self.served += 1
        self.transport.write(request)
        return self._fut

    def abort(self) -> None:
        """Give up on the current request (timeout): the connection cannot be reused."""
        self._resp = None
        self._fut = None
        if self.transport is not None:
            self.transport.abort()


class FastPool:
    """Keep-alive connections to one server and the prebuilt-request API."""

    def __init__(self, base_url: str, limit: int | None = None) -> None:
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https"):
            raise ValueError(f"base URL must be http:// or https://, got {base_url!r}")
        self.host = url.hostname or "127.0.0.1"
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.ssl = ssl.create_default_context() if url.scheme == "https" else None
        self.prefix = url.path.rstrip("/")
        self.host_header = url.netloc.rsplit("@", 1)[-1]
        self._idle: list[_Conn] = []
        self._sem = asyncio.Semaphore(limit) if limit else None
        self.connections_opened = 0

    def build_request(self, path: str, body: bytes, headers: dict[str, str]) -> bytes:
        """The full request bytes (built once, before the run)."""
        head = [f"POST {self.prefix}{path} HTTP/1.1", f"Host: {self.host_header}",
                "Accept: text/event-stream", f"Content-Length: {len(body)}"]
        head += [f"{k}: {v}" for k, v in headers.items()
                 if k.lower() not in ("host", "content-length")]
        return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(_Conn, self.host, self.port, ssl=self.ssl)
        self.connections_opened += 1
        return conn

    async def request(self, request: bytes, timeout_s: float) -> RawResponse:
        """Send prebuilt ``request`` bytes; never raises for transport faults (see
        ``RawResponse.error_class``). A reused connection that turns out closed before any
        byte of the answer is retried once on a fresh one."""
        if self._sem is not None:
            await self._sem.acquire()
        try:
            deadline = time.monotonic() + timeout_s
            for attempt in range(2):
                conn = None
                while self._idle:
                    candidate = self._idle.pop()
                    if not candidate.closed:
                        conn = candidate
                        break
                resp = RawResponse()
                try:
                    if conn is None:
                        conn = await asyncio.wait_for(self._connect(),
                                                      max(deadline - time.monotonic(), 0))
                    await asyncio.wait_for(conn.start(request, resp),
                                           max(deadline - time.monotonic(), 0))
                except TimeoutError:
                    if conn is not None:
                        conn.abort()
                    resp.error_class = "timeout"
                    resp.error = f"no complete answer within {timeout_s} s"
                    return resp
                except OSError as err:
                    resp.error_class = "connection_dropped"
                    resp.error = f"{type(err).__name__}: {err}"
                    return resp
                stale = attempt == 0 and conn.served > 1 and resp.status is None
                if resp.error_class == "connection_dropped" and stale:
                    continue  # stale keep-alive connection: retry once on a new one
                if resp.complete and not conn.closed:
                    self._idle.append(conn)
                return resp
            return resp
        finally:
            if self._sem is not None:
                self._sem.release()

    def close(self) -> None:
        """Close idle connections."""
        for conn in self._idle:
            if conn.transport is not None:
                conn.transport.close()
        self._idle.clear()
