"""What the HTTP door tells strangers and how long it lets them hold it (a real uvicorn
server on 127.0.0.1 over a real SQLite file): /metrics names no experiment without the
metrics token; /docs loads Swagger UI at one pinned version, integrity-checked, under a
strict CSP; a body that does not arrive in time is answered 408; a caller without a token
is refused before its body is read; one client address cannot take every connection;
one credential's waiting asks are capped."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from tauopt.engine._auth import Gate, Limits, new_credential
from tauopt.transport.http._guard import ConnectionLimits, guarded_protocol
from tauopt.transport.http._server import create_app
from test_http_support import ServerThread, seed_credentials

PARAMS = [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}]
METRIC = {"name": "y", "objective": "minimize"}


def _seed(db: Path) -> str:
    return seed_credentials(db, "alice")["alice"]


def _busy_experiments(http: httpx.Client) -> list[str]:
    """Three experiments with 3, 4 and 5 open suggestions: the busiest in the process."""
    busy = []
    for n in range(3):
        r = http.post("/v1/experiments", json={"name": f"secret-{n}", "parameters": PARAMS, "metric": METRIC,
                                               "strategy": "random", "parallel_bandwidth": 8})  # fmt: skip
        busy.append(r.json()["id"])
        for _ in range(n + 3):
            assert http.post(f"/v1/experiments/{busy[-1]}/suggestions", json={}).status_code == 201
    return busy


@pytest.fixture(scope="module")
def open_metrics(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    db = tmp_path_factory.mktemp("hardening") / "t.db"
    token = _seed(db)
    with ServerThread(create_app(db=str(db), engine_options={"pool": None}, metrics_top_experiments=2)) as server:
        yield server.url, token


def test_metrics_without_a_token_name_no_experiment(open_metrics: tuple[str, str]) -> None:
    url, token = open_metrics
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as http:
        busy = _busy_experiments(http)
    text = httpx.get(url + "/metrics", timeout=10).text
    assert not any(eid in text for eid in busy) and "secret-" not in text
    assert 'experiment="' not in text
    assert re.search(r'^tauopt_experiments\{state="active"\} 3', text, re.M)  # the aggregate stays


def test_one_daemon_on_sqlite_is_ready_unshared_and_names_itself_not_its_experiments(open_metrics: tuple[str, str]) -> None:
    url, token = open_metrics
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as http:
        busy = _busy_experiments(http)
    health = httpx.get(url + "/v1/health", timeout=10)  # no token
    body = health.json()
    assert health.status_code == 200 and not any(eid in health.text for eid in busy)
    assert body == {"status": "ok", "ready": True, "daemon_id": body["daemon_id"], "shared": False,
                    "owned_experiments": None, "live_daemons": None}  # fmt: skip
    text = httpx.get(url + "/metrics", timeout=10).text
    assert f'tauopt_daemon_info{{daemon_id="{body["daemon_id"]}"}} 1.0' in text
    assert re.search(r"^tauopt_daemon_ready 1\.0$", text, re.M)
    assert "tauopt_daemon_owned_experiments" not in text and "tauopt_daemons_live" not in text  # not shared


def test_with_the_metrics_token_the_per_experiment_gauges_are_bounded_to_the_top_n(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    token = _seed(db)
    app = create_app(db=str(db), engine_options={"pool": None}, metrics_token="s3cret", metrics_top_experiments=2)
    with ServerThread(app) as server:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as http:
            busy = _busy_experiments(http)
            assert http.get("/metrics").status_code == 401  # a tenant's token is not the admin's
        text = httpx.get(server.url + "/metrics", headers={"Authorization": "Bearer s3cret"}, timeout=10).text
    series = re.findall(r'^tauopt_experiment_open_suggestions\{experiment="([^"]+)"\} (\S+)$', text, re.M)
    assert len(series) == 2  # metrics_top_experiments=2
    assert {eid for eid, _ in series} == {busy[2], busy[1]}
    assert dict(series)[busy[2]] == "5.0"


def test_docs_load_one_pinned_integrity_checked_swagger_ui_under_a_strict_csp(open_metrics: tuple[str, str]) -> None:
    url, _ = open_metrics
    r = httpx.get(url + "/docs", timeout=10)
    assert r.status_code == 200
    scripts = re.findall(r'<script src="([^"]+)" integrity="(sha384-[^"]+)" crossorigin="anonymous">', r.text)
    styles = re.findall(r'<link rel="stylesheet" href="([^"]+)" integrity="(sha384-[^"]+)" crossorigin="anonymous">', r.text)
    assert len(scripts) == len(styles) == 1
    for src, _ in scripts + styles:
        assert re.fullmatch(r"https://cdn\.jsdelivr\.net/npm/swagger-ui-dist@\d+\.\d+\.\d+/swagger-ui(-bundle\.js|\.css)", src), src
    assert len(re.findall(r"<script", r.text)) == 2  # the bundle and the one inline start-up script
    csp = dict(d.strip().split(" ", 1) for d in r.headers["content-security-policy"].split(";"))
    assert csp["default-src"] == "'none'" and csp["connect-src"] == "'self'" and csp["frame-ancestors"] == "'none'"
    script_src = csp["script-src"].split()
    assert script_src[0] == scripts[0][0] and len(script_src) == 2 and script_src[1].startswith("'sha256-")
    assert '"/openapi.json"' in r.text


# -- slow bodies, unauthenticated bodies, one address, one credential's waiting asks --------


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int, str, str]]:
    db = tmp_path_factory.mktemp("slow") / "t.db"
    token = _seed(db)
    guard = ConnectionLimits(body_timeout_s=1.0, max_connections=16, max_connections_per_address=4)
    app = create_app(db=str(db), engine_options={"pool": None}, limits=Limits(max_waiting_asks=0))
    with ServerThread(app, http=guarded_protocol(guard)) as server:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as http:
            r = http.post("/v1/experiments", json={"name": "e", "parameters": PARAMS, "metric": METRIC, "strategy": "random"})
            eid = r.json()["id"]
        yield server.url, server.port, token, eid


def _unfinished_body(port: int, path: str, token: str | None, source: str = "127.0.0.1") -> socket.socket:
    """Complete headers announcing 1000 bytes of body, and one byte of it."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{auth}Content-Length: 1000\r\n\r\n{{".encode())
    return s


def _until_closed(s: socket.socket) -> bytes:
    chunks = []
    try:
        while chunk := s.recv(65536):
            chunks.append(chunk)
    except (ConnectionResetError, TimeoutError):  # a server that never closes: the 10 s socket timeout
        pass
    return b"".join(chunks)


def test_a_body_that_does_not_arrive_in_time_is_answered_408_and_closed(guarded: tuple[str, int, str, str]) -> None:
    url, port, token, eid = guarded
    t0 = time.monotonic()
    with _unfinished_body(port, f"/v1/experiments/{eid}/observations", token) as s:
        answer = _until_closed(s)
    assert time.monotonic() - t0 < 8
    assert answer.startswith(b"HTTP/1.1 408") and b'"type":"request_timeout"' in answer, answer[:300]
    assert httpx.get(url + "/v1/health").status_code == 200


def test_a_request_without_a_token_is_refused_before_its_body_is_read(guarded: tuple[str, int, str, str]) -> None:
    _, port, _, eid = guarded
    t0 = time.monotonic()
    with _unfinished_body(port, f"/v1/experiments/{eid}/observations", None) as s:
        answer = _until_closed(s)
    assert time.monotonic() - t0 < 0.9  # before the 1 s body timeout: not waiting for the body
    assert answer.startswith(b"HTTP/1.1 401") and b'"type":"unauthorized"' in answer, answer[:300]


def test_one_address_cannot_take_every_connection(guarded: tuple[str, int, str, str]) -> None:
    url, port, _, _ = guarded
    held = [socket.create_connection(("127.0.0.1", port), timeout=10, source_address=("127.0.0.2", 0)) for _ in range(4)]
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=("127.0.0.2", 0)) as extra:
            extra.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert _until_closed(extra) == b""  # the fifth from that address: closed at once
        assert httpx.get(url + "/v1/health").status_code == 200  # another address is served
    finally:
        for s in held:
            s.close()


def test_a_credential_over_its_waiting_asks_cap_is_answered_at_once(guarded: tuple[str, int, str, str]) -> None:
    url, _, token, eid = guarded
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as http:
        held = http.post(f"/v1/experiments/{eid}/suggestions", json={})  # the only slot
        t0 = time.monotonic()
        r = http.post(f"/v1/experiments/{eid}/suggestions", json={"wait_s": 30})
        assert time.monotonic() - t0 < 5 and r.status_code == 429 and r.json()["error"]["type"] == "bandwidth_full"
        http.delete(f"/v1/experiments/{eid}/suggestions/{held.json()['id']}")


def test_the_gate_counts_a_credentials_waiting_asks() -> None:
    cred, _ = new_credential("alice")
    gate = Gate(store=None, limits=Limits(max_waiting_asks=2))  # type: ignore[arg-type]
    with gate.waiting_ask(cred) as first, gate.waiting_ask(cred) as second:
        with gate.waiting_ask(cred) as third:
            assert (first, second, third) == (True, True, False)
        with gate.waiting_ask(new_credential("bob")[0]) as other:
            assert other  # per credential
    with gate.waiting_ask(cred) as again:
        assert again  # released on the way out


# -- one write per answer; one credential lookup at a time ----------------------------------


class _Recorded:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def test_a_head_that_declares_its_length_goes_out_with_the_body_in_one_write() -> None:
    from tauopt.transport.http._guard import _HeadWithBody

    t = _Recorded()
    out = _HeadWithBody(t)  # type: ignore[arg-type]
    out.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # written at once: the client waits for it to send its body
    assert t.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]
    out.write(b"HTTP/1.1 201 Created\r\ndate: x\r\ncontent-length: 2\r\n\r\n")
    out.write(b"{}")
    assert t.writes[1:] == [b"HTTP/1.1 201 Created\r\ndate: x\r\ncontent-length: 2\r\n\r\n{}"]
    chunked = _Recorded()
    out = _HeadWithBody(chunked)  # type: ignore[arg-type]
    out.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")  # a stream's head: at once
    assert chunked.writes == [b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"]
    cut = _Recorded()
    out = _HeadWithBody(cut)  # type: ignore[arg-type]
    out.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n")
    out.close()  # the app stopped before its body: the head still goes out, then the connection closes
    assert cut.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n"] and cut.closed


def test_a_connection_kept_busy_stays_open_past_the_keep_alive_and_closes_once_idle_that_long(tmp_path: Path) -> None:
    """The keep-alive deadline is one lazy timer per connection: a connection asked
    again within the keep-alive is never closed, however long it lives; one left idle
    for the keep-alive is closed."""
    app = create_app(db=str(tmp_path / "t.db"), engine_options={"pool": None}, auth=False)
    with ServerThread(app, http=guarded_protocol(ConnectionLimits()), timeout_keep_alive=1) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            t0 = time.monotonic()
            served = 0
            while time.monotonic() - t0 < 2.5:  # over twice the keep-alive, never idle 1 s
                s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
                answer = b""
                while not answer.endswith(b"}"):
                    chunk = s.recv(65536)
                    assert chunk, (served, answer)  # closed while kept busy
                    answer += chunk
                assert answer.startswith(b"HTTP/1.1 200")
                served += 1
                time.sleep(0.3)
            idle_from = time.monotonic()
            assert _until_closed(s) == b""  # closed by the server, not by the 10 s socket timeout
            assert 0.5 < time.monotonic() - idle_from < 5


def test_expect_100_continue_is_answered_before_the_body_and_the_answer_follows(guarded: tuple[str, int, str, str]) -> None:
    _, port, token, eid = guarded
    body = b'{"tag": "w"}'
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(
            f"POST /v1/experiments/{eid}/suggestions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        )
        assert s.recv(65536).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        s.sendall(body)
        answer = b""
        while b'"experiment_id"' not in answer:
            chunk = s.recv(65536)
            assert chunk, answer
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 201") and b"content-length: " in answer


@pytest.mark.anyio
async def test_requests_arriving_while_a_tokens_lookup_runs_wait_for_it_instead_of_asking_the_store() -> None:
    import anyio

    from tauopt.engine._auth import hash_token
    from tauopt.store import MemoryStore

    class SlowLookups(MemoryStore):
        lookups = 0
        release = anyio.Event()

        async def credential_by_hash(self, token_hash: str):  # type: ignore[no-untyped-def]
            SlowLookups.lookups += 1
            await self.release.wait()
            return await super().credential_by_hash(token_hash)

    store = SlowLookups()
    cred, token = new_credential("w")
    async with store:
        await store.put_credential(cred)
        gate = Gate(store)
        got = []
        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(lambda: _authenticate(gate, token, got))
            await anyio.wait_all_tasks_blocked()
            store.release.set()
        assert SlowLookups.lookups == 1 and len(got) == 20 and all(c.token_hash == hash_token(token) for c in got)
        with pytest.raises(Exception, match="unknown or revoked"):  # a bad token is still refused, by its own lookup
            await gate.authenticate("Bearer tau_wrong")


async def _authenticate(gate: Gate, token: str, got: list) -> None:
    got.append(await gate.authenticate(f"Bearer {token}"))
