"""H11Transport: an httpx transport with a small keep-alive pool, framed by h11.

Why not httpx's default transport (httpcore's pool): measured against the
engine-less floor server (`benchmarks/client_cpu.py`), 16 async workers sharing
one httpx client cost ~6.4 ms of client CPU per ask+observe, most of it in the
pool: every request and release scans every connection, with an anyio cancel
scope and an `extra_attributes` dict per check. This transport keeps what a
JSON API client needs: one request per connection at a time, idle connections
reused last-in-first-out, answers read whole (they are small JSON). HTTP/1.1
framing is h11's, the parser httpcore itself is built on; nothing is parsed
by hand. Client policy (base URL, headers, timeouts, redirects off, retries)
stays in `httpx.AsyncClient` and `HttpDriver`, as in httpx.

Errors are httpx's own, raised with the request: ConnectError / ConnectTimeout
(nothing was sent), WriteError / WriteTimeout, ReadError / ReadTimeout,
RemoteProtocolError (the server closed or spoke garbage). Nothing is retried
here, like httpx's default `retries=0`.

Stale keep-alive connections: an idle connection whose socket is readable (the
server closed it, or sent something unasked) or idle longer than `KEEPALIVE_S`
(under uvicorn's 5 s keep-alive timeout) is dropped before reuse, as httpcore
does, so a request is never written to a connection we could know is dead.
"""

from __future__ import annotations

import math
import select
import ssl
import time

import anyio
import anyio.abc
import h11
import httpx
from anyio.abc import SocketAttribute

__all__ = ["H11Transport", "KEEPALIVE_S"]

KEEPALIVE_S = 4.0
_RECV = 65536
Origin = tuple[bytes, bytes, int]


class _Conn:
    __slots__ = ("stream", "fd", "h11", "idle_since")

    def __init__(self, stream: anyio.abc.ByteStream, fd: int) -> None:
        self.stream = stream
        self.fd = fd
        self.h11 = h11.Connection(h11.CLIENT)
        self.idle_since = 0.0


def _readable(fd: int) -> bool:
    """True when the socket has data or EOF waiting: for an idle keep-alive
    connection, that means the server closed it (or broke the protocol)."""
    if fd < 0:
        return True
    try:
        if hasattr(select, "poll"):
            p = select.poll()
            p.register(fd, select.POLLIN)
            return bool(p.poll(0))
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return True


class H11Transport(httpx.AsyncBaseTransport):
    """At most `max_connections` connections at once, over all origins.

    `ssl_context` is used for https URLs (default: the system's trust store).
    Callers beyond `max_connections` queue (waiting for a connection is
    queueing, so httpx's pool timeout does not apply).
    """

    def __init__(self, *, max_connections: int = 64, ssl_context: ssl.SSLContext | None = None) -> None:
        self._ssl = ssl_context
        self._max = max_connections
        self._slots: anyio.Semaphore | None = None
        self._idle: dict[Origin, list[_Conn]] = {}
        self._closed = False
        # h11 validates every header with regexes per request; a driver sends the
        # same few header sets over and over, so each distinct set is validated
        # once (by h11, on first use) and its validated form reused.
        self._heads: dict[tuple[tuple[bytes, bytes], ...], h11._headers.Headers] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._closed:
            raise RuntimeError("this transport is closed; open a new client")
        if self._slots is None:  # created in the running event loop, whichever backend
            self._slots = anyio.Semaphore(self._max)
        url = request.url
        origin: Origin = (url.raw_scheme, url.raw_host, url.port or (443 if url.raw_scheme == b"https" else 80))
        timeouts = request.extensions.get("timeout", {})
        body = request.content if request.stream is not None else b""
        slots = self._slots
        try:  # a free slot is taken without a trip through the event loop (the request's I/O yields anyway)
            slots.acquire_nowait()
        except anyio.WouldBlock:
            await slots.acquire()
        try:
            conn = await self._take_idle(origin) or await self._connect(origin, request, timeouts.get("connect"))
            try:
                response, keep = await self._roundtrip(conn, request, body, timeouts)
            except BaseException:
                await anyio.aclose_forcefully(conn.stream)
                raise
            if keep and not self._closed:
                conn.idle_since = time.monotonic()
                self._idle.setdefault(origin, []).append(conn)
            else:
                await anyio.aclose_forcefully(conn.stream)
        finally:
            slots.release()
        return response

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                await anyio.aclose_forcefully(conn.stream)

    # -- connections -----------------------------------------------------------------

    async def _take_idle(self, origin: Origin) -> _Conn | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if now - conn.idle_since < KEEPALIVE_S and not _readable(conn.fd):
                return conn
            await anyio.aclose_forcefully(conn.stream)  # stale
        return None

    async def _connect(self, origin: Origin, request: httpx.Request, timeout: float | None) -> _Conn:
        scheme, host, port = origin
        tls = scheme == b"https"
        where = f"{scheme.decode()}://{host.decode()}:{port}"
        try:
            with anyio.fail_after(timeout):
                stream: anyio.abc.ByteStream = await anyio.connect_tcp(
                    host.decode("ascii"), port, tls=tls, tls_standard_compatible=False,
                    ssl_context=(self._ssl or ssl.create_default_context()) if tls else None,
                )  # fmt: skip
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connecting to {where} timed out after {timeout} s", request=request) from exc
        except (OSError, ssl.SSLError, anyio.BrokenResourceError) as exc:
            raise httpx.ConnectError(f"cannot connect to {where}: {exc}", request=request) from exc
        try:
            fd = stream.extra(SocketAttribute.raw_socket).fileno()
        except Exception:
            fd = -1
        return _Conn(stream, fd)

    async def _roundtrip(
        self, conn: _Conn, request: httpx.Request, body: bytes, timeouts: dict[str, float | None]
    ) -> tuple[httpx.Response, bool]:
        c = conn.h11
        try:
            data = c.send(self._h11_request(request))
            if body:
                data += c.send(h11.Data(data=body))
            data += c.send(h11.EndOfMessage())
        except h11.LocalProtocolError as exc:
            raise httpx.LocalProtocolError(str(exc), request=request) from exc
        # One cancel scope for the whole exchange, its deadline moved per step (the
        # write, then each read): httpx's per-operation timeouts at the cost of one scope.
        write_s, read_s = timeouts.get("write"), timeouts.get("read")
        head: h11.Response | None = None
        parts: list[bytes] = []
        reading = False
        with anyio.CancelScope() as scope:
            if write_s is not None:
                scope.deadline = anyio.current_time() + write_s
            try:
                await conn.stream.send(data)
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                raise httpx.WriteError(f"writing the request failed: {exc}", request=request) from exc
            reading = True
            while True:
                event = await self._next_event(conn, request, scope, read_s)
                if isinstance(event, h11.Response):
                    head = event
                elif isinstance(event, h11.Data):
                    parts.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    break
                # InformationalResponse (100 Continue, 103): the real answer follows
        if scope.cancelled_caught:
            if reading:
                raise httpx.ReadTimeout(f"no answer within {read_s} s", request=request)
            raise httpx.WriteTimeout("writing the request timed out", request=request)
        assert head is not None
        keep = c.our_state is h11.DONE and c.their_state is h11.DONE
        if keep:
            c.start_next_cycle()
        response = httpx.Response(
            head.status_code,
            headers=head.headers.raw_items() if hasattr(head.headers, "raw_items") else list(head.headers),
            content=b"".join(parts),
            request=request,
            extensions={"http_version": b"HTTP/" + head.http_version, "reason_phrase": head.reason},
        )
        return response, keep

    def _h11_request(self, request: httpx.Request) -> h11.Request:
        raw = tuple(request.headers.raw)
        head = self._heads.get(raw)
        if head is None:
            event = h11.Request(method=request.method, target=request.url.raw_path, headers=list(raw))
            if len(self._heads) >= 256:  # e.g. many body lengths: stay bounded
                self._heads.clear()
            self._heads[raw] = event.headers
            return event
        return h11.Request(method=request.method, target=request.url.raw_path, headers=head)

    async def _next_event(
        self, conn: _Conn, request: httpx.Request, scope: anyio.CancelScope, read_s: float | None
    ) -> h11.Event:
        c = conn.h11
        while True:
            try:
                event = c.next_event()
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc), request=request) from exc
            if event is h11.NEED_DATA:
                scope.deadline = math.inf if read_s is None else anyio.current_time() + read_s  # per read, as httpx
                c.receive_data(await self._receive(conn, request))
                continue
            if isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                raise httpx.RemoteProtocolError(
                    "Server disconnected without sending a complete response.", request=request
                )
            return event

    async def _receive(self, conn: _Conn, request: httpx.Request) -> bytes:
        try:
            return await conn.stream.receive(_RECV)
        except anyio.EndOfStream:
            return b""  # h11 decides: the end of a read-to-close body, or a premature close
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise httpx.ReadError(f"reading the answer failed: {exc}", request=request) from exc
