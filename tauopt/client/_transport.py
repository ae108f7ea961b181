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

The driver calls `exchange` (the answer's h11 head and its body, read whole)
and builds an httpx.Response (`response`) only for an answer it does not
simply decode (not 2xx); through httpx, `handle_async_request` returns the
response unread, as httpx's own transports do.

Errors are httpx's own, raised with the request: ConnectError / ConnectTimeout
(nothing was sent), WriteError / WriteTimeout, ReadError / ReadTimeout,
RemoteProtocolError (the server closed or spoke garbage). Nothing is retried
here, like httpx's default `retries=0`.

Stale keep-alive connections: an idle connection whose socket is readable (the
server closed it, or sent something unasked) or idle longer than `KEEPALIVE_S`
(under `tauopt serve`'s 75 s keep-alive timeout, and nginx's default 75 s; a
server closing sooner is seen by the readable check) is dropped before reuse, as httpcore
does, so a request is never written to a connection we could know is dead.
"""

from __future__ import annotations

import math
import select
import ssl
import time

import anyio
import h11
import httpx

from ._sockets import Pipe, open_plain, open_tls

__all__ = ["H11Transport", "KEEPALIVE_S"]

KEEPALIVE_S = 60.0
_FIRST_READ_SLACK = 0.01  # how early (a share of the read timeout) a first read's timeout may count from
Origin = tuple[bytes, bytes, int]
_END = h11.EndOfMessage()  # h11's events are immutable: one for every request


class _Conn:
    __slots__ = ("pipe", "h11", "idle_since")

    def __init__(self, pipe: Pipe) -> None:
        self.pipe = pipe
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
        self._events: dict[tuple[str, bytes, tuple[tuple[bytes, bytes], ...]], h11.Request] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """httpx's transport API: the answer comes back unread, as from httpx's own
        transports (the client reads it; here it is in memory already)."""
        head, content = await self.exchange(request, await request.aread())
        return self.response(request, head, content)

    async def exchange(self, request: httpx.Request, body: bytes) -> tuple[h11.Response, bytes]:
        """Send `request` with `body` and read the answer whole: (its head, h11's
        event, and its body). The driver's direct path: it decodes a 2xx answer's
        body and builds the httpx.Response (`response`) only for the others."""
        if self._closed:
            raise RuntimeError("this transport is closed; open a new client")
        if self._slots is None:  # created in the running event loop, whichever backend
            self._slots = anyio.Semaphore(self._max)
        url = request.url
        origin: Origin = (url.raw_scheme, url.raw_host, url.port or (443 if url.raw_scheme == b"https" else 80))
        timeouts = request.extensions.get("timeout", {})
        slots = self._slots
        try:  # a free slot is taken without a trip through the event loop (the request's I/O yields anyway)
            slots.acquire_nowait()
        except anyio.WouldBlock:
            await slots.acquire()
        try:
            conn = await self._take_idle(origin) or await self._connect(origin, request, timeouts.get("connect"))
            try:
                head, content, keep = await self._roundtrip(conn, request, body, timeouts)
            except BaseException:
                await conn.pipe.aclose()
                raise
            if keep and not self._closed:
                conn.idle_since = time.monotonic()
                self._idle.setdefault(origin, []).append(conn)
            else:
                await conn.pipe.aclose()
        finally:
            slots.release()
        return head, content

    @staticmethod
    def response(request: httpx.Request, head: h11.Response, content: bytes) -> httpx.Response:
        """The answer as httpx's own transports return it: unread, its stream a
        ByteStream (reading it through httpx's decoder chain costs more than
        building it; `read()` works as usual)."""
        return httpx.Response(
            head.status_code,
            headers=head.headers.raw_items(),
            stream=httpx.ByteStream(content),
            request=request,
            extensions={"http_version": b"HTTP/" + head.http_version, "reason_phrase": head.reason},
        )

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                await conn.pipe.aclose()

    # -- connections -----------------------------------------------------------------

    async def _take_idle(self, origin: Origin) -> _Conn | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if now - conn.idle_since < KEEPALIVE_S and not _readable(conn.pipe.fd):
                return conn
            await conn.pipe.aclose()  # stale
        return None

    async def _connect(self, origin: Origin, request: httpx.Request, timeout: float | None) -> _Conn:
        scheme, host, port = origin
        tls = scheme == b"https"
        where = f"{scheme.decode()}://{host.decode()}:{port}"
        try:
            with anyio.fail_after(timeout):
                if tls:
                    pipe: Pipe = await open_tls(host.decode("ascii"), port, self._ssl or ssl.create_default_context())
                else:
                    pipe = await open_plain(host.decode("ascii"), port)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connecting to {where} timed out after {timeout} s", request=request) from exc
        except (OSError, ssl.SSLError, anyio.BrokenResourceError) as exc:
            raise httpx.ConnectError(f"cannot connect to {where}: {exc}", request=request) from exc
        return _Conn(pipe)

    async def _roundtrip(
        self, conn: _Conn, request: httpx.Request, body: bytes, timeouts: dict[str, float | None]
    ) -> tuple[h11.Response, bytes, bool]:
        """One exchange on `conn`: (the answer's head, its body, whether the connection can be reused)."""
        c = conn.h11
        try:
            data = c.send(self._h11_request(request))
            if body:
                data += c.send(h11.Data(data=body))
            data += c.send(_END)
        except h11.LocalProtocolError as exc:
            raise httpx.LocalProtocolError(str(exc), request=request) from exc
        # One cancel scope for the whole exchange, its deadline moved per step (the
        # write, then each read): httpx's per-operation timeouts at the cost of one
        # scope. Moving a deadline costs a timer, so when both timeouts are equal (as
        # httpx.Timeout(60) makes them) and the write took under _FIRST_READ_SLACK of
        # it (a plain socket's write usually returns at once; a TLS stream's yields
        # once to the loop), the write's deadline serves as the first read's: that
        # read's timeout then counts from the write's start, at most 1% early.
        write_s, read_s = timeouts.get("write"), timeouts.get("read")
        reading = False
        with anyio.CancelScope() as scope:
            start = anyio.current_time()
            if write_s is not None:
                scope.deadline = start + write_s
            try:
                await conn.pipe.send(data)
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                raise httpx.WriteError(f"writing the request failed: {exc}", request=request) from exc
            reading = True
            took = anyio.current_time() - start
            armed = read_s is not None and read_s == write_s and took < read_s * _FIRST_READ_SLACK
            head, content = await self._read_answer(conn, request, scope, read_s, armed)
        if scope.cancelled_caught:
            if reading:
                raise httpx.ReadTimeout(f"no answer within {read_s} s", request=request)
            raise httpx.WriteTimeout("writing the request timed out", request=request)
        # Reused only when the answer ended cleanly and nothing followed it: a server
        # sends nothing unasked, so leftover bytes mean a broken connection (and the
        # next exchange can start by reading).
        keep = c.our_state is h11.DONE and c.their_state is h11.DONE and not c.trailing_data[0]
        if keep:
            c.start_next_cycle()
        return head, content, keep

    async def _read_answer(
        self, conn: _Conn, request: httpx.Request, scope: anyio.CancelScope, read_s: float | None, armed: bool
    ) -> tuple[h11.Response, bytes]:
        """h11's events up to the end of the answer, in this one frame (the answer
        usually sits in one chunk). `armed`: the scope's deadline already bounds the
        first read."""
        c = conn.h11
        head: h11.Response | None = None
        parts: list[bytes] = []
        event: object = h11.NEED_DATA  # nothing of the answer can be buffered yet (see `_roundtrip`): read first
        while True:
            if event is h11.NEED_DATA:
                if not armed:  # per read, as httpx
                    scope.deadline = math.inf if read_s is None else anyio.current_time() + read_s
                armed = False
                c.receive_data(await self._receive(conn, request))
            try:
                event = c.next_event()
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc), request=request) from exc
            kind = type(event)
            if kind is h11.Data:
                parts.append(event.data)  # type: ignore[union-attr]  # narrowed by `kind is`
            elif kind is h11.Response:
                head = event  # type: ignore[assignment]
            elif kind is h11.EndOfMessage:
                assert head is not None
                return head, b"".join(parts)  # bytes, whatever h11 handed out (bytearray slices)
            elif kind is h11.ConnectionClosed or event is h11.PAUSED:
                raise httpx.RemoteProtocolError("Server disconnected without sending a complete response.", request=request)
            # InformationalResponse (100 Continue, 103): the real answer follows

    def _h11_request(self, request: httpx.Request) -> h11.Request:
        """The request's h11 event. h11 validates a request's method, target and
        headers with regexes each time; a driver sends the same few requests over
        and over, so each distinct one is validated once (by h11, on first use)
        and its event reused (h11's events are immutable)."""
        key = (request.method, request.url.raw_path, tuple(request.headers.raw))
        event = self._events.get(key)
        if event is None:
            event = h11.Request(method=key[0], target=key[1], headers=list(key[2]))
            if len(self._events) >= 256:  # e.g. many ids or body lengths: stay bounded
                self._events.clear()
            self._events[key] = event
        return event

    async def _receive(self, conn: _Conn, request: httpx.Request) -> bytes:
        try:
            return await conn.pipe.receive()  # b"" at the end: h11 decides (a read-to-close body, or a premature close)
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise httpx.ReadError(f"reading the answer failed: {exc}", request=request) from exc
