"""A small HTTP/1.1 keep-alive connection pool on anyio streams: HttpDriver's wire.

Why not httpx's own pool: measured on the 2-core development box against the
engine-less floor server, httpx + httpcore cost ~1.2-1.4 ms of client CPU per
request (request building, h11, one anyio cancel scope and one
`extra_attributes` dict per pool scan, and a scan of every connection on each
request and release: O(connections x waiting requests)); 16 async workers
sharing one httpx client got 73 pairs/s, one client per worker 134, a raw
HTTP/1.1 client 600. This pool does what a JSON API client needs and nothing
more: one request per connection at a time, one `send` per request, the
answer framed by Content-Length (chunked and read-to-close are understood
too), idle connections reused last-in-first-out.

Errors are httpx's, so callers see one hierarchy whichever wire runs:
ConnectError / ConnectTimeout (nothing was sent), WriteError / WriteTimeout,
ReadError / ReadTimeout, RemoteProtocolError (the server closed or spoke
garbage). None of them is retried here: the driver's policy raises them.

Stale keep-alive connections: an idle connection whose socket is readable
(the server closed it, or sent something unasked) or that has been idle longer
than `KEEPALIVE_S` (under uvicorn's 5 s keep-alive timeout) is dropped before
reuse, as httpcore does, so a request is never written to a dead connection
that we could have known about.
"""

from __future__ import annotations

import select
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio
import anyio.abc
import httpx
from anyio.abc import SocketAttribute

__all__ = ["WirePool", "WireResponse", "KEEPALIVE_S"]

KEEPALIVE_S = 4.0
_MAX_HEAD = 64 * 1024
_RECV = 65536


@dataclass(frozen=True)
class WireResponse:
    """One answer: status, headers (lower-case names), body, and what was asked."""

    status_code: int
    headers: dict[str, str]
    content: bytes
    method: str
    url: str

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")


class _Conn:
    __slots__ = ("stream", "fd", "buf", "idle_since")

    def __init__(self, stream: anyio.abc.ByteStream, fd: int) -> None:
        self.stream = stream
        self.fd = fd
        self.buf = bytearray()
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


class WirePool:
    """Connections to one origin (`base_url`), at most `max_connections` at once.

    `headers` are sent with every request (Host is added). `ssl_context` is
    used for https URLs. Concurrent callers beyond `max_connections` queue on
    a semaphore (no pool timeout: waiting for a connection is queueing).
    """

    def __init__(
        self,
        base_url: str,
        headers: dict[str, str],
        *,
        timeout: httpx.Timeout,
        max_connections: int,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must be http://host[:port] or https://host[:port], got {base_url!r}")
        self.tls = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.tls else 80)
        self.prefix = parts.path.rstrip("/")
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self._ssl = ssl_context if ssl_context is not None or not self.tls else ssl.create_default_context()
        host_header = parts.netloc.rpartition("@")[2]
        lines = [f"Host: {host_header}"] + [f"{k}: {v}" for k, v in headers.items()]
        self._head = ("\r\n".join(lines) + "\r\n").encode("latin-1")
        self._connect_s = timeout.connect
        self._read_s = timeout.read
        self._write_s = timeout.write
        self._max = max_connections
        self._slots: anyio.Semaphore | None = None
        self._idle: list[_Conn] = []
        self._closed = False

    async def request(self, method: str, target: str, body: bytes | None = None, content_type: str | None = None) -> WireResponse:
        """Send one request (`target` = path and query, under the base URL's path) and read its answer."""
        if self._closed:
            raise RuntimeError("this HttpDriver is closed; open a new one")
        if self._slots is None:  # created in the running event loop, whichever backend
            self._slots = anyio.Semaphore(self._max)
        path = self.prefix + target
        head = [f"{method} {path} HTTP/1.1\r\n".encode("latin-1"), self._head]
        if body is not None:
            if content_type:
                head.append(f"Content-Type: {content_type}\r\n".encode("latin-1"))
            head.append(f"Content-Length: {len(body)}\r\n\r\n".encode("latin-1"))
            data = b"".join(head) + body
        else:
            if method in ("POST", "PUT", "PATCH"):
                head.append(b"Content-Length: 0\r\n")
            head.append(b"\r\n")
            data = b"".join(head)
        async with self._slots:
            conn = await self._take_idle()
            if conn is None:
                conn = await self._connect()
            try:
                status, headers, content, keep = await self._roundtrip(conn, data, method)
            except BaseException:
                await anyio.aclose_forcefully(conn.stream)
                raise
            if keep and not self._closed:
                conn.idle_since = time.monotonic()
                self._idle.append(conn)
            else:
                await anyio.aclose_forcefully(conn.stream)
        return WireResponse(status, headers, content, method, self.origin + path)

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            await anyio.aclose_forcefully(conn.stream)

    # -- connections -----------------------------------------------------------------

    async def _take_idle(self) -> _Conn | None:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if now - conn.idle_since < KEEPALIVE_S and not conn.buf and not _readable(conn.fd):
                return conn
            await anyio.aclose_forcefully(conn.stream)  # stale: only this path awaits
        return None

    async def _connect(self) -> _Conn:
        try:
            with anyio.fail_after(self._connect_s):
                stream: anyio.abc.ByteStream = await anyio.connect_tcp(
                    self.host, self.port, ssl_context=self._ssl if self.tls else None, tls=self.tls,
                    tls_standard_compatible=False,
                )  # fmt: skip
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connecting to {self.origin} timed out after {self._connect_s} s") from exc
        except (OSError, ssl.SSLError, anyio.BrokenResourceError) as exc:
            raise httpx.ConnectError(f"cannot connect to {self.origin}: {exc}") from exc
        try:
            fd = stream.extra(SocketAttribute.raw_socket).fileno()
        except Exception:
            fd = -1
        return _Conn(stream, fd)

    async def _roundtrip(self, conn: _Conn, data: bytes, method: str) -> tuple[int, dict[str, str], bytes, bool]:
        try:
            with anyio.fail_after(self._write_s):
                await conn.stream.send(data)
        except TimeoutError as exc:
            raise httpx.WriteTimeout(f"writing to {self.origin} timed out") from exc
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise httpx.WriteError(f"writing to {self.origin} failed: {exc}") from exc
        while True:
            end = await self._fill_until(conn, b"\r\n\r\n")
            raw_head = bytes(conn.buf[:end])
            del conn.buf[: end + 4]
            version, status, headers = _parse_head(raw_head)
            if 100 <= status < 200 and status != 101:
                continue  # interim answer (100 Continue, 103 Early Hints): the real one follows
            break
        keep = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return status, headers, b"", keep
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return status, headers, await self._read_chunked(conn), keep
        length = headers.get("content-length")
        if length is not None:
            try:
                n = int(length)
                if n < 0:
                    raise ValueError
            except ValueError:
                raise httpx.RemoteProtocolError(f"bad Content-Length {length!r} from {self.origin}") from None
            return status, headers, await self._read_exactly(conn, n), keep
        # no framing: the body runs to the end of the connection
        while await self._recv(conn, eof_ok=True):
            pass
        body = bytes(conn.buf)
        conn.buf.clear()
        return status, headers, body, False

    async def _recv(self, conn: _Conn, eof_ok: bool = False) -> bool:
        try:
            with anyio.fail_after(self._read_s):
                chunk = await conn.stream.receive(_RECV)
        except anyio.EndOfStream:
            if eof_ok:
                return False
            raise httpx.RemoteProtocolError("Server disconnected without sending a complete response.") from None
        except TimeoutError as exc:
            raise httpx.ReadTimeout(f"no answer from {self.origin} within {self._read_s} s") from exc
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise httpx.ReadError(f"reading from {self.origin} failed: {exc}") from exc
        conn.buf += chunk
        return True

    async def _fill_until(self, conn: _Conn, marker: bytes) -> int:
        start = 0
        while True:
            i = conn.buf.find(marker, start)
            if i >= 0:
                return i
            if len(conn.buf) > _MAX_HEAD:
                raise httpx.RemoteProtocolError(f"response head from {self.origin} over {_MAX_HEAD} bytes")
            start = max(0, len(conn.buf) - len(marker) + 1)
            await self._recv(conn)

    async def _read_exactly(self, conn: _Conn, n: int) -> bytes:
        while len(conn.buf) < n:
            await self._recv(conn)
        body = bytes(conn.buf[:n])
        del conn.buf[:n]
        return body

    async def _read_chunked(self, conn: _Conn) -> bytes:
        parts: list[bytes] = []
        while True:
            end = await self._fill_until(conn, b"\r\n")
            size_line = bytes(conn.buf[:end])
            del conn.buf[: end + 2]
            try:
                size = int(size_line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise httpx.RemoteProtocolError(f"bad chunk size {size_line[:20]!r} from {self.origin}") from None
            if size == 0:
                while True:  # trailers, up to the empty line
                    end = await self._fill_until(conn, b"\r\n")
                    del conn.buf[: end + 2]
                    if end == 0:
                        return b"".join(parts)
            parts.append(await self._read_exactly(conn, size))
            await self._read_exactly(conn, 2)  # the CRLF after the chunk


def _parse_head(raw: bytes) -> tuple[str, int, dict[str, str]]:
    lines = raw.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise httpx.RemoteProtocolError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise httpx.RemoteProtocolError(f"malformed header line: {line[:80]!r}")
        key = name.strip().lower()
        value = value.strip()
        # repeated headers join with ", " as RFC 9110 allows (Set-Cookie aside, which we never read)
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return version, int(code), headers

