"""The byte pipes under H11Transport: a plain TCP socket read and written
directly, or (https) an anyio TLS stream. Both have the same four members:
`fd`, `send`, `receive` (b"" at the end of the stream) and `aclose`.

Why a plain socket rather than anyio's SocketStream for http://: an exchange is
one small write and one or two small reads. Through the stream, each `send`
goes through asyncio's transport and then yields a loop turn even when the
kernel took the bytes at once, and each `receive` resumes and pauses the
transport's reading around a protocol callback, a queue and an event. Here a
write is one `socket.send` (waiting for writability only when the kernel
buffer is full) and a read is one wait for readability (`anyio.wait_readable`:
asyncio or trio) and one `recv`. Measured with 16 workers on one client
against a canned server: fewer instructions per ask+observe (valgrind; the
benchmarks log), too few for the process time of a loaded 2-core box to show. Cancellation and timeouts are the caller's anyio
cancel scopes, as with streams; connection errors are OSError (the transport
maps them to httpx's); nothing here parses HTTP. The connect tries each
address the name resolves to in turn (no happy eyeballs, unlike
anyio.connect_tcp: a daemon's address is rarely dual-stack with one side dead).
"""

from __future__ import annotations

import errno
import os
import socket
import ssl

import anyio
import anyio.abc
import anyio.lowlevel
from anyio.abc import SocketAttribute

__all__ = ["Pipe", "PlainSocket", "TlsStream", "open_plain", "open_tls"]

_RECV = 65536
_IN_PROGRESS = {errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN, getattr(errno, "WSAEWOULDBLOCK", -1)}


class PlainSocket:
    """A connected non-blocking TCP socket."""

    __slots__ = ("sock", "fd")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.fd = sock.fileno()

    async def send(self, data: bytes) -> None:
        await anyio.lowlevel.checkpoint_if_cancelled()  # as a stream's send: a cancelled caller sends nothing
        view = memoryview(data)
        while view:
            try:
                view = view[self.sock.send(view) :]
            except BlockingIOError:
                await anyio.wait_writable(self.sock)

    async def receive(self) -> bytes:
        while True:
            await anyio.wait_readable(self.sock)
            try:
                return self.sock.recv(_RECV)
            except BlockingIOError:  # a spurious wake-up
                continue

    async def aclose(self) -> None:
        self.sock.close()


class TlsStream:
    """An anyio TLS stream (https), with the same members as PlainSocket."""

    __slots__ = ("stream", "fd")

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream
        try:
            self.fd = stream.extra(SocketAttribute.raw_socket).fileno()
        except Exception:
            self.fd = -1

    async def send(self, data: bytes) -> None:
        await self.stream.send(data)

    async def receive(self) -> bytes:
        try:
            return await self.stream.receive(_RECV)
        except anyio.EndOfStream:
            return b""

    async def aclose(self) -> None:
        await anyio.aclose_forcefully(self.stream)


Pipe = PlainSocket | TlsStream


async def open_plain(host: str, port: int) -> PlainSocket:
    """Connect to each address `host` resolves to in turn; the last failure is raised (OSError)."""
    last: OSError = OSError(f"{host} resolved to no address")
    for family, kind, proto, _, address in await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small requests go out at once
            code = sock.connect_ex(address)
            if code in _IN_PROGRESS:
                await anyio.wait_writable(sock)
                code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                raise OSError(code, os.strerror(code))
            return PlainSocket(sock)
        except OSError as exc:
            sock.close()
            last = exc
        except BaseException:  # cancelled, timed out
            sock.close()
            raise
    raise last


async def open_tls(host: str, port: int, ssl_context: ssl.SSLContext) -> TlsStream:
    stream = await anyio.connect_tcp(host, port, tls=True, tls_standard_compatible=False, ssl_context=ssl_context)
    return TlsStream(stream)
