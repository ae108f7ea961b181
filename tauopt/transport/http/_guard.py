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
  closed at once, so descriptors stay bounded.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["ConnectionLimits", "guarded_protocol"]


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout_s: float = 10.0
    max_header_bytes: int = 64 * 1024
    max_headers: int = 100
    max_connections: int = 1000


class HeaderLimitExceeded(Exception):
    """Raised inside a parser callback: httptools turns it into a parse error (400)."""


class _GuardedProtocol(HttpToolsProtocol):
    limits = ConnectionLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._header_bytes = 0
        self._header_count = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.server_state.connections) >= self.limits.max_connections:
            transport.abort()  # before uvicorn counts it: it never was a connection
            self.transport = transport
            return
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self not in self.server_state.connections:
            return  # refused in connection_made
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._header_timer is None:
            self._arm()  # the first byte of a request on a kept-alive (or pipelining) connection
        self._header_bytes = 0
        self._header_count = 0

    def on_url(self, url: bytes) -> None:
        self._count(len(url), 0)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value), 1)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

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
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def guarded_protocol(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol with these limits; pass as `uvicorn.Config(http=...)`."""
    return type("GuardedHttpProtocol", (_GuardedProtocol,), {"limits": limits})
