"""Connection limits for `tauopt serve`, below the ASGI app.

uvicorn (0.54) bounds none of these on its default parser (httptools): it
waits for request headers forever (`timeout_keep_alive` only runs *between*
requests), accepts any header size and count, and accepts any number of
connections (`limit_concurrency` answers 503 to requests, but the sockets stay
open). So one client holding thousands of half-open connections exhausts the
daemon's file descriptors. `guarded_protocol(limits)` returns uvicorn's
httptools protocol with:

- a header deadline: a request whose headers are not complete within
  `header_timeout_s` of the connection opening (or of its first byte, on a
  kept-alive connection) is closed;
- header bounds: more than `max_header_bytes` (request line + headers) or
  `max_headers` lines answers 400 and closes, while the bytes arrive;
- a connection cap: beyond `max_connections` open connections a new one is
  closed at once, so descriptors stay bounded; and a cap per client address
  (`max_connections_per_address`), so one address cannot take every slot;
- a body deadline: a request whose body has not fully arrived within
  `body_timeout_s` of its headers is answered 408 `request_timeout` (if nothing
  was answered yet) and closed; a request answered before its body arrived (a 401:
  the routes check the token before reading a body) is closed at once, its body
  never read.

And things for speed, each a visible share of a busy daemon's CPU: an answer whose
head declares its length goes out in one write with its body (`_HeadWithBody`),
not two (a send() system call fewer per request); the header and body deadlines
are armed only when a read leaves a request's headers or body incomplete, not for
every request; and the keep-alive deadline is one lazy timer per connection
instead of a timer armed after every answer and cancelled at the next request.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ...errors import api_error
from ._render import render_error

__all__ = ["ConnectionLimits", "guarded_protocol"]


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout_s: float = 10.0
    max_header_bytes: int = 64 * 1024
    max_headers: int = 100
    max_connections: int = 1000
    body_timeout_s: float = 10.0
    max_connections_per_address: int | None = None  # None: a quarter of max_connections (at least 1)

    @property
    def per_address(self) -> int:
        given = self.max_connections_per_address
        return given if given is not None else max(1, self.max_connections // 4)


class HeaderLimitExceeded(Exception):
    """Raised inside a parser callback: httptools turns it into a parse error (400)."""


class _GuardedProtocol(HttpToolsProtocol):
    limits = ConnectionLimits()
    by_address: dict[Any, int] = {}  # open connections per client address (one dict per guarded_protocol)
    too_slow = b""  # the 408 answer, rendered once per guarded_protocol

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._headers_pending = False
        self._body_pending = False
        self._idle_since: float | None = None  # when the last answer left, while no request has begun since
        self._idle_timer: asyncio.TimerHandle | None = None
        self._header_bytes = 0
        self._header_count = 0
        self._address: Any = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        peer = transport.get_extra_info("peername")
        address = peer[0] if isinstance(peer, tuple) and peer else None
        held = self.by_address.get(address, 0)
        if len(self.server_state.connections) >= self.limits.max_connections or held >= self.limits.per_address:
            transport.abort()  # before uvicorn counts it: it never was a connection
            self.transport = transport
            return
        self._address = address
        self.by_address[address] = held + 1
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._disarm_body()
        _cancel(self._idle_timer)
        self._idle_timer = None
        if self not in self.server_state.connections:
            return  # refused in connection_made
        left = self.by_address.get(self._address, 1) - 1
        if left > 0:
            self.by_address[self._address] = left
        else:
            self.by_address.pop(self._address, None)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        # The deadlines are armed only for what this read left incomplete: a request
        # that arrives whole (nearly every one) costs no timer.
        if self.transport.is_closing():
            return
        if self._headers_pending and self._header_timer is None:
            self._arm()  # the first bytes of a request on a kept-alive (or pipelining) connection
        if self._body_pending and self._body_timer is None:
            self._body_timer = self.loop.call_later(self.limits.body_timeout_s, self._body_too_slow)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._headers_pending = True
        self._header_bytes = 0
        self._header_count = 0

    def on_url(self, url: bytes) -> None:
        self._count(len(url), 0)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value), 1)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._headers_pending = False
        self._disarm()
        before = self.cycle
        super().on_headers_complete()
        if self.cycle is not before and self.scope["method"] != "HEAD":  # a HEAD answer is its head: never held
            self.cycle.transport = _HeadWithBody(self.transport)  # type: ignore[assignment]
        self._body_pending = True  # until on_message_complete, in this same read for a bodiless request

    def on_message_complete(self) -> None:
        self._body_pending = False
        self._disarm_body()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        # uvicorn's, with its keep-alive timer made lazy (`_idle`)
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        if self._body_pending:
            # answered before its body arrived (401, 413): the rest is never read, the slot not kept
            self._disarm_body()
            self.transport.close()
            return
        self._unset_keepalive_if_required()
        self.flow.resume_reading()
        if self.pipeline:
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
        else:
            self._idle()

    # The keep-alive deadline. uvicorn arms a timer after every answer and cancels it at
    # the next request's first bytes: two timer operations per request, a visible share
    # of a busy daemon's CPU. Here one timer per connection stays armed while it is kept
    # alive; when it fires, a connection that was busy since is given the rest of its time.

    def _idle(self) -> None:
        self._idle_since = self.loop.time()
        if self._idle_timer is None:
            self._idle_timer = self.loop.call_later(self.timeout_keep_alive, self._idle_check)

    def _unset_keepalive_if_required(self) -> None:
        self._idle_since = None

    def _idle_check(self) -> None:
        self._idle_timer = None
        if self._idle_since is None:
            return  # a request is under way; the next answer starts the count again
        left = self._idle_since + self.timeout_keep_alive - self.loop.time()
        if left > 0:
            self._idle_timer = self.loop.call_later(left, self._idle_check)
        else:
            self.timeout_keep_alive_handler()

    def _disarm_body(self) -> None:
        _cancel(self._body_timer)
        self._body_timer = None

    def _body_too_slow(self) -> None:
        self._body_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_started:
            self.transport.write(self.too_slow)
        self.transport.close()

    def _count(self, nbytes: int, lines: int) -> None:
        self._header_bytes += nbytes
        self._header_count += lines
        if self._header_bytes > self.limits.max_header_bytes or self._header_count > self.limits.max_headers:
            self._disarm()
            raise HeaderLimitExceeded

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.limits.header_timeout_s, self._headers_too_slow)

    def _disarm(self) -> None:
        _cancel(self._header_timer)
        self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


class _HeadWithBody:
    """One answer's view of the connection: a head that declares its length is held
    and written with the first body bytes, so a whole answer is one write (one
    send() system call) instead of two. Anything else (100 Continue, a chunked
    head, the body) is written as it comes; closing writes a held head first."""

    __slots__ = ("_transport", "_head", "_first")

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._head = b""
        self._first = True

    def write(self, data: bytes) -> None:
        if self._first and not data.startswith(b"HTTP/1.1 100 "):
            self._first = False
            if b"\r\ncontent-length: " in data:
                self._head = data
                return
        if self._head:
            data, self._head = self._head + data, b""
        self._transport.write(data)

    def close(self) -> None:
        if self._head:
            self._transport.write(self._head)
            self._head = b""
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def _cancel(timer: asyncio.TimerHandle | None) -> None:
    if timer is not None:
        timer.cancel()


def guarded_protocol(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol with these limits; pass as `uvicorn.Config(http=...)`."""
    return type("GuardedHttpProtocol", (_GuardedProtocol,), {"limits": limits, "by_address": {}, "too_slow": _too_slow(limits)})


def _too_slow(limits: ConnectionLimits) -> bytes:
    """The raw 408 answer (written on the transport: the app is still waiting for the body)."""
    seconds = limits.body_timeout_s
    answer = render_error(api_error("request_timeout", f"the request body did not arrive within {seconds:g} s of its headers; send it whole, promptly"))
    head = b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
    return head + b"content-length: %d\r\n\r\n" % len(answer.body) + bytes(answer.body)
