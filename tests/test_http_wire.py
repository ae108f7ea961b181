"""HttpDriver's one wire, an httpx.AsyncClient over our H11Transport
(`_transport.py`): framing, keep-alive reuse and stale connections, the request
line it writes, https, and proxies through httpx's own transport. Scripted raw servers on 127.0.0.1 say exactly what goes over
the socket; https runs against a real uvicorn with a throwaway certificate."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
from pathlib import Path
from typing import Any, Awaitable, Callable

import anyio
import anyio.abc
import httpx
import pytest

from tauopt.client import HttpDriver
from test_http_support import ServerThread

Handler = Callable[[anyio.abc.SocketStream, int], Awaitable[None]]


class RawServer:
    """Accepts connections and hands each (stream, connection number) to `handler`."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.requests: list[bytes] = []

    async def read_request(self, stream: anyio.abc.SocketStream) -> bytes | None:
        buf = b""
        while b"\r\n\r\n" not in buf:
            try:
                buf += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return None
        head, _, body = buf.partition(b"\r\n\r\n")
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                while len(body) < int(line.split(b":")[1]):
                    body += await stream.receive()
        self.requests.append(head)
        return head

    async def _serve(self, stream: anyio.abc.SocketStream) -> None:
        self.connections += 1
        async with stream:
            await self.handler(stream, self.connections)

    async def __aenter__(self) -> str:
        self._listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._listener.serve, self._serve)
        port = self._listener.extra(anyio.abc.SocketAttribute.local_port)
        return f"http://127.0.0.1:{port}"

    async def __aexit__(self, *exc: Any) -> None:
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(None, None, None)
        await self._listener.aclose()


def _ok(body: dict[str, Any], extra: str = "") -> bytes:
    data = json.dumps(body).encode()
    return f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(data)}\r\n{extra}\r\n".encode() + data


@pytest.mark.anyio
async def test_chunked_and_read_to_close_answers_are_read_whole_and_close_ends_reuse() -> None:
    async def handler(stream: anyio.abc.SocketStream, n: int) -> None:
        server = srv
        while await server.read_request(stream) is not None:
            k = len(server.requests)
            if k == 1:  # an interim 100, then a chunked body split mid-JSON, with a trailer
                await stream.send(b"HTTP/1.1 100 Continue\r\n\r\n")
                await stream.send(
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    b"7\r\n{\"statu\r\n6;ext=1\r\ns\": \"o\r\n3\r\nk\"}\r\n0\r\nX-Trailer: 1\r\n\r\n"
                )
            elif k == 2:  # no length: the body runs to the close
                await stream.send(b'HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{"status": "closing"}')
                return
            else:
                await stream.send(_ok({"status": f"conn {n}"}))

    srv = RawServer(handler)
    async with srv as url, HttpDriver(url, "t0k") as d:
        assert await d.health() == {"status": "ok"}
        assert await d.health() == {"status": "closing"}
        assert await d.health() == {"status": "conn 2"}
        assert await d.health() == {"status": "conn 2"}
    assert srv.connections == 2


@pytest.mark.anyio
async def test_a_connection_the_server_closed_while_idle_is_replaced_not_reused() -> None:
    async def handler(stream: anyio.abc.SocketStream, n: int) -> None:
        if await srv.read_request(stream) is not None:
            # keep-alive is promised, then the server drops the connection (its idle timeout)
            await stream.send(_ok({"status": f"conn {n}"}))

    srv = RawServer(handler)
    async with srv as url, HttpDriver(url, "t0k") as d:
        assert await d.health() == {"status": "conn 1"}
        await anyio.sleep(0.05)
        assert await d.health() == {"status": "conn 2"}
    assert srv.connections == 2


@pytest.mark.anyio
async def test_bytes_after_an_answer_end_the_connections_reuse() -> None:
    """A server sends nothing unasked: bytes that arrive with an answer and after
    its end (here a second, unasked answer) mean the connection is broken. It is
    not reused, so the next request gets its own answer on a new connection, not
    the leftover bytes read as its answer."""
    async def handler(stream: anyio.abc.SocketStream, n: int) -> None:
        while await srv.read_request(stream) is not None:
            extra = _ok({"status": "unasked"}) if n == 1 else b""
            await stream.send(_ok({"status": f"conn {n}"}) + extra)

    srv = RawServer(handler)
    async with srv as url, HttpDriver(url, "t0k") as d:
        assert await d.health() == {"status": "conn 1"}
        assert await d.health() == {"status": "conn 2"}
        assert await d.health() == {"status": "conn 2"}
    assert srv.connections == 2


@pytest.mark.anyio
async def test_a_host_name_is_resolved_and_named_in_the_host_header() -> None:
    """The plain-socket connect resolves the name itself (anyio.getaddrinfo) and
    tries each address in turn; here `localhost` (one address on this box: the
    fallback to a later address is not exercised)."""
    async def handler(stream: anyio.abc.SocketStream, n: int) -> None:
        while await srv.read_request(stream) is not None:
            await stream.send(_ok({"status": "ok"}))

    srv = RawServer(handler)
    async with srv as url, HttpDriver(url.replace("127.0.0.1", "localhost"), "t0k") as d:
        assert await d.health() == {"status": "ok"}
    assert srv.requests[0].split(b"\r\n")[1].lower().startswith(b"host: localhost:")


@pytest.mark.anyio
async def test_concurrent_callers_reuse_a_bounded_set_of_keep_alive_connections() -> None:
    async def handler(stream: anyio.abc.SocketStream, n: int) -> None:
        while await srv.read_request(stream) is not None:
            await anyio.sleep(0.001)
            await stream.send(_ok({"status": "ok"}))

    srv = RawServer(handler)
    async with srv as url, HttpDriver(url, "t0k", max_connections=4) as d:
        async with anyio.create_task_group() as tg:
            for _ in range(16):
                tg.start_soon(lambda: _times(d, 10))
    assert len(srv.requests) == 160
    assert srv.connections <= 4


async def _times(d: HttpDriver, n: int) -> None:
    for _ in range(n):
        assert await d.health() == {"status": "ok"}


@pytest.mark.anyio
async def test_request_line_keeps_the_base_path_quotes_ids_and_encodes_the_query() -> None:
    async def handler(stream: anyio.abc.SocketStream, n: int) -> None:
        while await srv.read_request(stream) is not None:
            await stream.send(_ok([]))  # type: ignore[arg-type]

    srv = RawServer(handler)
    async with srv as url, HttpDriver(url + "/tauopt/", "t0k") as d:
        assert await d.suggestions("e/1", state="open", tag="job 7&x") == []
    lines = srv.requests[0].decode().split("\r\n")
    assert lines[0] == "GET /tauopt/v1/experiments/e%2F1/suggestions?state=open&tag=job+7%26x HTTP/1.1"
    assert "Authorization: Bearer t0k" in lines and f"Host: {url.split('//')[1]}" in lines


@pytest.mark.anyio
async def test_a_configured_proxy_is_honoured_through_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    async def handler(stream: anyio.abc.SocketStream, n: int) -> None:
        while await srv.read_request(stream) is not None:
            await stream.send(_ok({"status": "via proxy"}))

    srv = RawServer(handler)
    async with srv as proxy_url:
        monkeypatch.setenv("HTTP_PROXY", proxy_url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        async with HttpDriver("http://tauopt.example:8080", "t0k") as d:
            assert await d.health() == {"status": "via proxy"}
    assert srv.requests[0].split(b"\r\n")[0] == b"GET http://tauopt.example:8080/v1/health HTTP/1.1"


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a throwaway certificate")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        body = json.dumps({"status": "ok", "scheme": scope["scheme"]}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})

    with ServerThread(app, lifespan="off", ssl_certfile=str(cert), ssl_keyfile=str(key)) as server:
        yield server.url, cert


@pytest.mark.anyio
async def test_https_base_url_verifies_the_server_certificate(tls_server: tuple[str, Path]) -> None:
    url, cert = tls_server
    assert url.startswith("https://")
    async with HttpDriver(url, "t0k", verify=ssl.create_default_context(cafile=str(cert))) as d:
        assert await d.health() == {"status": "ok", "scheme": "https"}
        assert await d.health() == {"status": "ok", "scheme": "https"}
    async with HttpDriver(url, "t0k", verify=str(cert)) as d:
        assert (await d.health())["scheme"] == "https"
    async with HttpDriver(url, "t0k") as d:  # default trust store: a self-signed certificate is refused
        with pytest.raises(httpx.ConnectError):
            await d.health()


@pytest.mark.anyio
async def test_one_httpx_client_per_driver_on_our_h11_transport_unless_proxied(monkeypatch: pytest.MonkeyPatch) -> None:
    from tauopt.client._transport import H11Transport

    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    async with HttpDriver("http://127.0.0.1:9", "t0k") as d:
        assert isinstance(d._http, httpx.AsyncClient)
        assert isinstance(d._http._transport_for_url(httpx.URL("http://127.0.0.1:9/")), H11Transport)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    async with HttpDriver("http://tauopt.example:8080", "t0k") as d:
        assert not isinstance(d._http._transport_for_url(httpx.URL("http://tauopt.example:8080/")), H11Transport)


@pytest.mark.anyio
async def test_a_server_that_closes_mid_answer_raises_httpx_remote_protocol_error() -> None:
    async def handler(stream: anyio.abc.SocketStream, n: int) -> None:
        if await srv.read_request(stream) is not None:
            await stream.send(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{\"status")

    srv = RawServer(handler)
    async with srv as url, HttpDriver(url, "t0k") as d:
        with pytest.raises(httpx.RemoteProtocolError):
            await d.health()


@pytest.mark.anyio
async def test_the_driver_calls_our_transport_directly_with_httpx_semantics() -> None:
    """The driver skips AsyncClient.send's layers on our transport (auth, redirects,
    cookies: none apply) and h11 validates each distinct header set once; what is
    sent, what a closed client says and what a bad header raises stay httpx's."""
    from tauopt.client._transport import H11Transport

    async def handler(stream: anyio.abc.SocketStream, n: int) -> None:
        while await srv.read_request(stream) is not None:
            await stream.send(_ok({"id": "s", "experiment_id": "e", "assignments": {}, "state": "open", "tag": None, "created_at": 0.0}))

    srv = RawServer(handler)
    async with srv as url:
        d = HttpDriver(url, "t0k")
        assert isinstance(d._direct, H11Transport)
        for _ in range(3):  # the same header set, reused validated, is sent whole each time
            await d.suggest("e", tag="a")
        assert len(srv.requests) == 3 and len(set(srv.requests)) == 1
        lines = srv.requests[-1].decode().split("\r\n")
        assert "Authorization: Bearer t0k" in lines and "Content-Type: application/json" in lines
        await d.aclose()
        with pytest.raises(RuntimeError, match="closed"):
            await d.suggest("e")
        bad = HttpDriver(url, "t0k")
        bad._json_headers["X-Bad"] = "a\x00b"  # h11 refuses it on first use, as httpx's own transport would
        with pytest.raises(httpx.LocalProtocolError):
            await bad.suggest("e", tag="a")  # a body: the JSON header set
        await bad.aclose()


@pytest.mark.anyio
async def test_a_silent_server_raises_httpx_read_timeout_after_each_reads_timeout() -> None:
    """httpx's read timeout bounds each read (not the whole answer): an answer that
    trickles in under the timeout is read whole; a server that stops answering
    raises ReadTimeout once one read has waited `timeout` seconds."""
    async def handler(stream: anyio.abc.SocketStream, n: int) -> None:
        while (head := await srv.read_request(stream)) is not None:
            if b"/v1/health" in head and len(srv.requests) == 1:  # three pieces, 0.25 s apart: 0.5 s in all
                data = _ok({"status": "slow"})
                for piece in (data[:10], data[10:40], data[40:]):
                    await stream.send(piece)
                    await anyio.sleep(0.25)
            else:
                await anyio.sleep(30)  # silent

    srv = RawServer(handler)
    async with srv as url, HttpDriver(url, "t0k", timeout=0.4) as d:
        assert await d.health() == {"status": "slow"}  # 0.5 s in all, no read waited 0.4 s
        start = anyio.current_time()
        with pytest.raises(httpx.ReadTimeout):
            await d.health()
        assert 0.35 <= anyio.current_time() - start < 2.0
        assert await anyio.sleep(0) is None  # the driver's task is not left cancelled
