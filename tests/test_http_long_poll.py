"""The HTTP door's waiting ask (`wait_s` in the suggest body) over a real uvicorn
server with the daemon's guarded protocol: a waiting ask gets the slot another
worker's observe frees; one whose wait runs out answers bandwidth_full once
(the client neither retries it nor times it out early); bad waits answer 400;
a client that hangs up while waiting takes no slot."""

from __future__ import annotations

import json
import socket
import time
from typing import Any, Iterator

import anyio
import httpx
import pytest

from tauopt import ApiError, AsyncClient
from tauopt.engine._auth import new_credential
from tauopt.store import MemoryStore
from tauopt.transport.http._guard import ConnectionLimits, guarded_protocol
from tauopt.transport.http._server import create_app
from test_http_support import ServerThread

X = [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}]
METRIC = {"name": "y", "objective": "minimize"}


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, str]]:
    store = MemoryStore()
    token: list[str] = []

    async def seed() -> None:
        cred, t = new_credential("waiter")
        token.append(t)
        await store.put_credential(cred)

    anyio.run(seed)
    with ServerThread(create_app(db=store), http=guarded_protocol(ConnectionLimits())) as server:
        yield server.url, token[0]


def _refused(served: tuple[str, str]) -> float:
    """The server's count of 429 bandwidth_full answers (GET /metrics)."""
    text = httpx.get(served[0] + "/metrics", timeout=10).text
    key = 'tauopt_rejections_429_total{type="bandwidth_full"} '
    return sum(float(line[len(key):]) for line in text.splitlines() if line.startswith(key))


def _client(served: tuple[str, str], **options: Any) -> AsyncClient:
    url, token = served
    return AsyncClient(driver="http", base_url=url, token=token, **options)


@pytest.mark.anyio
async def test_a_waiting_ask_gets_the_slot_another_workers_observe_frees(served: tuple[str, str]) -> None:
    async with _client(served) as a, _client(served) as b:
        exp = await a.create_experiment("lp-http", X, METRIC, parallel_bandwidth=1, strategy="sobol")
        held = await a.suggest(exp.id, tag="a")
        got: list[Any] = []

        async def wait_for_a_slot() -> None:
            started = time.monotonic()
            got.append(await b.suggest(exp.id, tag="b", wait_s=30))
            got.append(time.monotonic() - started)

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait_for_a_slot)
                await anyio.sleep(0.5)
                assert got == []  # b waits; it was not refused
                await a.observe(exp.id, suggestion_id=held.id, value=0.5)
        s, waited = got
        assert s.tag == "b" and s.state == "open" and s.id != held.id
        assert 0.4 < waited < 10  # answered by the observe, not by the 30 s bound
        assert [x.tag for x in await a.suggestions(exp.id, state="open")] == ["b"]


@pytest.mark.anyio
async def test_a_wait_that_runs_out_answers_bandwidth_full_once_and_not_early(served: tuple[str, str]) -> None:
    # A read timeout (1 s) shorter than the wait (2.5 s): the driver stretches it for
    # this request; and the 429 that ends the wait is final, not retried (Retry-After: 1).
    async with _client(served, timeout=1.0) as c:
        exp = await c.create_experiment("lp-http-out", X, METRIC, parallel_bandwidth=1)
        await c.suggest(exp.id)
        refused_before = _refused(served)
        started = time.monotonic()
        with pytest.raises(ApiError) as err:
            await c.suggest(exp.id, wait_s=2.5)
        took = time.monotonic() - started
        assert err.value.status_code == 429 and err.value.error_type == "bandwidth_full"
        assert "for the 2.5 s this ask waited" in err.value.message
        assert 2.4 < took < 10, took  # the whole wait: the 1 s read timeout did not end it
        assert _refused(served) == refused_before + 1  # sent once: the client did not retry the 429
        with pytest.raises(ApiError) as now:
            await c.suggest(exp.id, deadline_s=0)  # without wait_s: refused at once, as before
        assert now.value.error_type == "bandwidth_full" and "waited" not in now.value.message


@pytest.mark.parametrize("bad", [-1, 300.5, "soon", True])
def test_a_bad_wait_answers_400_saying_the_bounds(served: tuple[str, str], bad: Any) -> None:
    url, token = served
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as http:
        exp = http.post("/v1/experiments", json={"name": "lp-bad", "parameters": X, "metric": METRIC}).json()
        r = http.post(f"/v1/experiments/{exp['id']}/suggestions", json={"wait_s": bad})
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["type"] == "invalid_request" and "wait_s" in json.dumps(err)
        ok = http.post(f"/v1/experiments/{exp['id']}/suggestions", json={"wait_s": 0})
        assert ok.status_code == 201  # 0: answer at once, as without wait_s


@pytest.mark.anyio
async def test_the_clients_refuse_a_bad_wait_before_the_wire(served: tuple[str, str]) -> None:
    async with _client(served) as c:
        with pytest.raises(ApiError) as err:
            await c.suggest("any", wait_s=301)
        assert err.value.error_type == "invalid_request" and "from 0 to 300" in err.value.message


def test_openapi_gives_wait_s_its_bounds(served: tuple[str, str]) -> None:
    url, _ = served
    spec = httpx.get(url + "/openapi.json").json()
    ref = spec["paths"]["/v1/experiments/{id}/suggestions"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    named = ref["$ref"]  # the body is optional (left out), never null: SuggestBody itself
    body = spec["components"]["schemas"][named.rsplit("/", 1)[1]]
    wait = body["properties"]["wait_s"]
    assert {"type": "number", "minimum": 0, "maximum": 300.0} in wait["anyOf"] and {"type": "null"} in wait["anyOf"]


@pytest.mark.anyio
async def test_a_client_that_hangs_up_while_waiting_takes_no_slot(served: tuple[str, str]) -> None:
    url, token = served
    async with _client(served) as c:
        exp = await c.create_experiment("lp-hangup", X, METRIC, parallel_bandwidth=1)
        held = await c.suggest(exp.id, tag="holder")
        body = json.dumps({"tag": "gone", "wait_s": 60}).encode()
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(
                f"POST /v1/experiments/{exp.id}/suggestions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n".encode() + body
            )
            await anyio.sleep(0.5)  # parked in the engine
        await anyio.sleep(0.3)  # the hang-up reaches the server
        await c.observe(exp.id, suggestion_id=held.id, value=1.0)
        s = await c.suggest(exp.id, tag="next")  # the freed slot is still there, for an ask without wait_s
        assert s.tag == "next"
        assert [x.tag for x in await c.suggestions(exp.id)] == ["holder", "next"]


def test_the_daemons_max_wait_s_cuts_a_longer_wait(tmp_path: Any) -> None:
    """`tauopt serve --max-wait-s 1`: an ask with wait_s=60 on a full bandwidth answers
    bandwidth_full after about a second, not a minute; a bad --max-wait-s is refused."""
    from test_http_daemon import Daemon, tauopt

    bad = tauopt("serve", "--db", str(tmp_path / "bad.db"), "--max-wait-s", "301")
    assert bad.returncode == 2 and "--max-wait-s" in bad.stderr and "from 0 to 300" in bad.stderr
    made = tauopt("token", "create", "--db", str(tmp_path / "cap.db"), "--name", "w", "--create")
    assert made.returncode == 0, made.stderr
    daemon = Daemon(tmp_path / "cap.db", "--max-wait-s", "1")
    try:
        headers = {"Authorization": f"Bearer {made.stdout.strip()}"}
        with httpx.Client(base_url=daemon.url, headers=headers, timeout=30) as http:
            body = {"name": "cap", "parameters": X, "metric": METRIC, "parallel_bandwidth": 1}
            eid = http.post("/v1/experiments", json=body).json()["id"]
            assert http.post(f"/v1/experiments/{eid}/suggestions", json={}).status_code == 201
            started = time.monotonic()
            r = http.post(f"/v1/experiments/{eid}/suggestions", json={"wait_s": 60})
            waited = time.monotonic() - started
        assert r.status_code == 429 and r.json()["error"]["type"] == "bandwidth_full", r.text
        assert 0.9 <= waited < 20  # cut to the daemon's 1 s, not the 60 asked for
    finally:
        code, _, err = daemon.stop()
    assert code == 0, err
