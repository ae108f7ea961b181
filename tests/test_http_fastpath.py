"""The fast path for asks and observes (`_fastpath.py`) answers exactly as the
FastAPI routes do: the same requests against two real servers, one with the
fast path and one without, give the same statuses, error types and response
shapes; plus the limits it must keep (body size, mounting under a prefix)."""

from __future__ import annotations

import json
import time
from typing import Any, Iterator

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from tauopt.engine._auth import Limits, new_credential
from tauopt.store import MemoryStore
from tauopt.transport.http._server import create_app
from test_http_support import ServerThread

X = [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}]
METRIC = {"name": "y", "objective": "minimize"}


def _server(fast_path: bool, **options: Any) -> tuple[ServerThread, str, str]:
    store = MemoryStore()
    tokens: dict[str, str] = {}

    async def seed() -> None:
        for name in ("alice", "bob"):
            cred, tokens[name] = new_credential(name)
            await store.put_credential(cred)

    anyio.run(seed)
    app = create_app(db=store, limits=Limits(suggestions_per_day=10_000), fast_path=fast_path, **options)
    return ServerThread(app), tokens["alice"], tokens["bob"]


@pytest.fixture(scope="module")
def servers() -> Iterator[list[tuple[str, str, str]]]:
    (fast, fa, fb), (slow, sa, sb) = _server(True), _server(False)
    with fast, slow:
        yield [(fast.url, fa, fb), (slow.url, sa, sb)]


# (what is sent) -> each is sent to both servers on a fresh experiment (bandwidth 2) after one ask
SUGGEST_CASES: list[tuple[str, Any]] = [
    ("no body", None),
    ("empty object", {}),
    ("tag", {"tag": "job-1/rank-0"}),
    ("null tag", {"tag": None}),
    ("int tag", {"tag": 5}),
    ("empty tag", {"tag": ""}),
    ("extra key", {"tag": "a", "x": 1}),
    ("array", [1]),
    ("text/plain", b'{"tag": "a"}'),
    ("bad JSON", b'{"tag": '),
    ("NaN", b'{"tag": NaN}'),
]
OBSERVE_CASES: list[tuple[str, Any]] = [
    ("float value", {"value": 0.5}),
    ("int value", {"value": 1}),
    ("bool value", {"value": True}),
    ("failed", {"failed": True}),
    ("failed as int", {"failed": 1}),
    ("metrics", {"value": 0.5, "metrics": {"acc": 0.9}}),
    ("int metric", {"value": 0.5, "metrics": {"acc": 1}}),
    ("no value", {}),
    ("extra key", {"value": 0.5, "x": 1}),
    ("NaN", b'{"value": NaN, "suggestion_id": "SID"}'),
    ("unknown suggestion", {"value": 0.5, "suggestion_id": "nope"}),
    ("unsolicited", {"value": 0.5, "assignments": {"x": 0.25}, "suggestion_id": None}),
    ("no body", None),
]


def _post(http: httpx.Client, path: str, body: Any, sid: str | None = None) -> tuple[int, Any]:
    if body is None:
        r = http.post(path)
    elif isinstance(body, bytes):
        ct = "text/plain" if body.startswith(b'{"tag": "a"}') else "application/json"
        r = http.post(path, content=body.replace(b"SID", (sid or "").encode()), headers={"Content-Type": ct})
    else:
        if "suggestion_id" not in body and sid is not None and "assignments" not in body:
            body = {**body, "suggestion_id": sid}
        r = http.post(path, json=body)
    data = r.json()
    if r.status_code >= 400:
        return r.status_code, data["error"]["type"]
    return r.status_code, sorted(data)


def _run(url: str, token: str, kind: str, body: Any) -> tuple[int, Any]:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as http:
        exp = http.post("/v1/experiments", json={"name": "e", "parameters": X, "metric": METRIC, "parallel_bandwidth": 2}).json()
        path = f"/v1/experiments/{exp['id']}"
        if kind == "suggest":
            return _post(http, path + "/suggestions", body)
        sid = http.post(path + "/suggestions", json={}).json()["id"]
        return _post(http, path + "/observations", body, sid)


@pytest.mark.parametrize("name,body", SUGGEST_CASES, ids=[c[0] for c in SUGGEST_CASES])
def test_ask_answers_as_the_route_does(servers: list[tuple[str, str, str]], name: str, body: Any) -> None:
    (fast, ft, _), (slow, st, _) = servers
    assert _run(fast, ft, "suggest", body) == _run(slow, st, "suggest", body)


@pytest.mark.parametrize("name,body", OBSERVE_CASES, ids=[c[0] for c in OBSERVE_CASES])
def test_observe_answers_as_the_route_does(servers: list[tuple[str, str, str]], name: str, body: Any) -> None:
    (fast, ft, _), (slow, st, _) = servers
    assert _run(fast, ft, "observe", body) == _run(slow, st, "observe", body)


def test_auth_ownership_and_backpressure_on_the_fast_path(servers: list[tuple[str, str, str]]) -> None:
    url, alice, bob = servers[0]
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {alice}"}) as http:
        exp = http.post("/v1/experiments", json={"name": "e", "parameters": X, "metric": METRIC}).json()
        path = f"/v1/experiments/{exp['id']}"
        s = http.post(path + "/suggestions", json={"tag": "w"})
        assert s.status_code == 201 and s.json()["tag"] == "w"
        full = http.post(path + "/suggestions", json={})
        assert (full.status_code, full.json()["error"]["type"], full.headers["Retry-After"]) == (429, "bandwidth_full", "1")
        anon = httpx.post(url + path + "/suggestions", json={})
        assert (anon.status_code, anon.json()["error"]["type"]) == (401, "unauthorized")
        other = httpx.post(url + path + "/observations", json={"suggestion_id": s.json()["id"], "value": 0.5},
                           headers={"Authorization": f"Bearer {bob}"})  # fmt: skip
        assert (other.status_code, other.json()["error"]["type"]) == (404, "not_found")
        o = http.post(path + "/observations", json={"suggestion_id": s.json()["id"], "value": 0.5})
        assert o.status_code == 201 and o.json()["value"] == 0.5
        assert http.get(path).json()["observations"] == 1


def test_a_body_over_the_limit_is_refused_with_413_on_the_fast_path() -> None:
    server, token, _ = _server(True, max_body_bytes=1000)
    with server, httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}) as http:
        exp = http.post("/v1/experiments", json={"name": "e", "parameters": X, "metric": METRIC}).json()
        big = json.dumps({"tag": "x" * 2000}).encode()

        def chunks() -> Iterator[bytes]:  # streamed, no Content-Length: counted as it arrives
            yield big[:500]
            yield big[500:]

        for content in (big, chunks()):
            r = http.post(f"/v1/experiments/{exp['id']}/suggestions", content=content, headers={"Content-Type": "application/json"})
            assert (r.status_code, r.json()["error"]["type"]) == (413, "payload_too_large")


def test_the_fast_path_serves_the_app_mounted_under_a_prefix() -> None:
    store = MemoryStore()
    cred, token = new_credential("alice")
    anyio.run(store.put_credential, cred)
    inner = create_app(db=store)
    outer = Starlette(routes=[Mount("/tauopt", app=inner)], lifespan=lambda app: inner.router.lifespan_context(inner))
    with ServerThread(outer) as server, httpx.Client(base_url=server.url + "/tauopt", headers={"Authorization": f"Bearer {token}"}) as http:
        exp = http.post("/v1/experiments", json={"name": "e", "parameters": X, "metric": METRIC}).json()
        s = http.post(f"/v1/experiments/{exp['id']}/suggestions", json={"tag": "m"})
        assert s.status_code == 201 and s.json()["tag"] == "m"
        o = http.post(f"/v1/experiments/{exp['id']}/observations", json={"suggestion_id": s.json()["id"], "value": 0.1})
        assert o.status_code == 201 and o.json()["suggestion_id"] == s.json()["id"]


def test_ttl_expiry_only_at_the_next_ask_on_both_paths(servers: list[tuple[str, str, str]]) -> None:
    """A late observe with no sibling ask in between succeeds (the row is still
    listed open); once an ask has expired a row, its observe is 409 with the point."""
    for url, token, _ in servers:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as http:
            body = {"name": "ttl", "parameters": X, "metric": METRIC, "parallel_bandwidth": 2, "suggestion_ttl_s": 0.1}
            path = f"/v1/experiments/{http.post('/v1/experiments', json=body).json()['id']}"
            late = http.post(path + "/suggestions", json={}).json()
            time.sleep(0.2)  # past the TTL; no ask follows
            listed = http.get(path + "/suggestions", params={"state": "open"}).json()
            assert [s["id"] for s in listed] == [late["id"]], url
            r = http.post(path + "/observations", json={"suggestion_id": late["id"], "value": 0.5})
            assert r.status_code == 201 and r.json()["suggestion_id"] == late["id"], (url, r.text)
            lost = http.post(path + "/suggestions", json={}).json()
            time.sleep(0.2)
            assert http.post(path + "/suggestions", json={}).status_code == 201  # this ask expires `lost`
            assert http.get(f"{path}/suggestions/{lost['id']}").json()["state"] == "expired"
            r = http.post(path + "/observations", json={"suggestion_id": lost["id"], "value": 0.5})
            assert r.status_code == 409 and r.json()["error"]["type"] == "suggestion_expired", (url, r.text)
            assert r.json()["error"]["details"]["assignments"] == lost["assignments"]
