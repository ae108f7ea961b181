"""Asks and observes, each served by its one route function (`_routes.py`),
answer exactly as the FastAPI routes did: statuses, error types and response
shapes for each body below are those the FastAPI routes gave (recorded from
the last version that had them, when a fast path answered beside them); plus
the limits they must keep (body size, mounting under a prefix)."""

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


def _server(**options: Any) -> tuple[ServerThread, str, str]:
    store = MemoryStore()
    tokens: dict[str, str] = {}

    async def seed() -> None:
        for name in ("alice", "bob"):
            cred, tokens[name] = new_credential(name)
            await store.put_credential(cred)

    anyio.run(seed)
    app = create_app(db=store, limits=Limits(suggestions_per_day=10_000), **options)
    return ServerThread(app), tokens["alice"], tokens["bob"]


@pytest.fixture(scope="module")
def servers() -> Iterator[list[tuple[str, str, str]]]:
    server, alice, bob = _server()
    with server:
        yield [(server.url, alice, bob)]


# (what is sent) -> each is sent on a fresh experiment (bandwidth 2) after one ask
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


SUGGESTION = sorted(["id", "experiment_id", "assignments", "state", "tag", "created_at"])
# stopped_at_step: issue 19's field, on every observation answer since it landed; values: every metric by name
OBSERVATION = sorted(["id", "experiment_id", "suggestion_id", "assignments", "value", "failed", "created_at", "metrics", "stopped_at_step",
                      "values"])  # fmt: skip
# What the FastAPI routes answered to each case (status, error type or sorted keys).
ROUTE_ANSWERS: dict[str, dict[str, tuple[int, Any]]] = {"suggest": {
    'no body': (201, SUGGESTION),
    'empty object': (201, SUGGESTION),
    'tag': (201, SUGGESTION),
    'null tag': (201, SUGGESTION),
    'int tag': (400, 'invalid_request'),
    'empty tag': (400, 'invalid_request'),
    'extra key': (400, 'invalid_request'),
    'array': (400, 'invalid_request'),
    'text/plain': (400, 'invalid_request'),
    'bad JSON': (400, 'invalid_request'),
    'NaN': (400, 'invalid_request'),
}, "observe": {
    'float value': (201, OBSERVATION),
    'int value': (201, OBSERVATION),
    'bool value': (400, 'invalid_request'),
    'failed': (201, OBSERVATION),
    'failed as int': (400, 'invalid_request'),
    'metrics': (201, OBSERVATION),
    'int metric': (201, OBSERVATION),
    'no value': (400, 'invalid_request'),
    'extra key': (400, 'invalid_request'),
    'NaN': (400, 'invalid_request'),
    'unknown suggestion': (404, 'not_found'),
    'unsolicited': (201, OBSERVATION),
    'no body': (400, 'invalid_request'),
}}


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
def test_ask_answers_as_the_fastapi_route_did(servers: list[tuple[str, str, str]], name: str, body: Any) -> None:
    ((url, token, _),) = servers
    assert _run(url, token, "suggest", body) == ROUTE_ANSWERS["suggest"][name]


@pytest.mark.parametrize("name,body", OBSERVE_CASES, ids=[c[0] for c in OBSERVE_CASES])
def test_observe_answers_as_the_fastapi_route_did(servers: list[tuple[str, str, str]], name: str, body: Any) -> None:
    ((url, token, _),) = servers
    assert _run(url, token, "observe", body) == ROUTE_ANSWERS["observe"][name]


def test_auth_ownership_and_backpressure_on_the_hot_routes(servers: list[tuple[str, str, str]]) -> None:
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


def test_a_body_over_the_limit_is_refused_with_413_on_the_hot_routes() -> None:
    server, token, _ = _server(max_body_bytes=1000)
    with server, httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}) as http:
        exp = http.post("/v1/experiments", json={"name": "e", "parameters": X, "metric": METRIC}).json()
        big = json.dumps({"tag": "x" * 2000}).encode()

        def chunks() -> Iterator[bytes]:  # streamed, no Content-Length: counted as it arrives
            yield big[:500]
            yield big[500:]

        for content in (big, chunks()):
            r = http.post(f"/v1/experiments/{exp['id']}/suggestions", content=content, headers={"Content-Type": "application/json"})
            assert (r.status_code, r.json()["error"]["type"]) == (413, "payload_too_large")


def test_the_hot_routes_serve_the_app_mounted_under_a_prefix() -> None:
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


def test_served_routes_and_the_openapi_document_describe_the_same_operations() -> None:
    from starlette.routing import Route

    from tauopt.transport.http._openapi import documented_path
    from tauopt.transport.http._server import SERVED as OPERATIONS

    app = create_app(db=MemoryStore())
    served = {
        (method, route.path, route.name)
        for route in app.routes
        if isinstance(route, Route) and route.path.startswith("/v1/")
        for method in (route.methods or ()) - {"HEAD"}
    }
    with ServerThread(app) as server:
        spec = httpx.get(server.url + "/openapi.json").json()
    documented = {
        (method.upper(), path, doc["operationId"].split("_v1_")[0])
        for path, ops in spec["paths"].items()
        for method, doc in ops.items()
    }
    served = {(method, documented_path(path), name) for method, path, name in served}  # `{sid}` is documented by what it is
    # 14 before issues 18/19/14 landed: + report, list_reports, pareto_front, summary, workers, importance;
    # + the report log and the columnar observations (issue 14's learning curves and scale)
    # + unarchive, delete, export, import (issue 41); + the dashboard's plot sample
    assert served == documented and len(served) == len(OPERATIONS) == 27
    assert [r.name for r in app.routes[:2]] == ["suggest", "observe"]  # the worker loop's calls match first
    for op in OPERATIONS:  # one function per operation, each served by exactly one route
        assert [r.name for r in app.routes if getattr(r, "name", None) == op.name] == [op.name]
        doc = spec["paths"][documented_path(op.path)][op.method.lower()]
        assert str(op.status) in doc["responses"]
        assert ("requestBody" in doc) == (op.body is not None)
        assert ("security" in doc) == op.auth
        assert {p["name"] for p in doc.get("parameters", []) if p["in"] == "query"} == set(op.query)


def test_the_old_fast_path_module_is_gone_one_definition_per_operation() -> None:
    import importlib.util

    assert importlib.util.find_spec("tauopt.transport.http._fastpath") is None
    assert importlib.util.find_spec("tauopt.transport.http._wire") is None


def test_ttl_expiry_only_at_the_next_ask_on_the_one_route_path(servers: list[tuple[str, str, str]]) -> None:
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


def test_an_unexpected_error_on_a_hot_route_is_the_catalogues_internal_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hot routes skip the router, not the app's catch-all: a bug answers 500
    `internal` from the catalogue, as any other route's does."""
    from tauopt.engine._engine import Engine

    async def broken(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(Engine, "suggest", broken)
    app = create_app(db=MemoryStore(), auth=False)
    with ServerThread(app) as server, httpx.Client(base_url=server.url) as http:
        exp = http.post("/v1/experiments", json={"name": "e", "parameters": X, "metric": METRIC}).json()
        r = http.post(f"/v1/experiments/{exp['id']}/suggestions", json={})
        assert (r.status_code, r.json()["error"]["type"]) == (500, "internal")
        assert "RuntimeError" in r.json()["error"]["message"]


def test_the_hot_call_is_parsed_once_per_request_and_again_for_a_rewritten_path() -> None:
    """MetricsMiddleware and HotRoutes both ask `hot_call`; the path is split once
    and the answer kept in the scope with the path it came from, so a scope
    copied with another path (a rewrite, a mount) is parsed for its own path."""
    from tauopt.transport.http._routes import hot_call

    scope: dict[str, Any] = {"type": "http", "method": "POST", "path": "/v1/experiments/e1/observations"}
    assert hot_call(scope) == ("observe", "e1")
    assert scope["tauopt.hot_call"] == (scope["path"], ("observe", "e1"))  # kept for the next middleware
    assert hot_call(scope) == ("observe", "e1")
    assert hot_call({**scope, "path": "/v1/experiments/e2/suggestions"}) == ("suggest", "e2")
    assert hot_call({**scope, "path": "/v1/experiments/e2"}) is None
    assert hot_call({"type": "lifespan"}) is None


@pytest.mark.anyio
async def test_the_hot_routes_request_reads_a_body_sent_in_parts_and_a_hang_up_as_a_disconnect() -> None:
    from starlette.requests import ClientDisconnect

    from tauopt.transport.http._hot import _HotRequest

    scope = {"type": "http", "method": "POST", "path": "/", "headers": []}
    parts = [{"type": "http.request", "body": b'{"a"', "more_body": True}, {"type": "http.request", "body": b":1}"}]

    async def receive() -> dict[str, Any]:
        return parts.pop(0)

    request = _HotRequest(scope, receive)
    assert await request.body() == b'{"a":1}' and await request.body() == b'{"a":1}' and not parts

    async def hang_up() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    gone = _HotRequest(scope, hang_up)
    with pytest.raises(ClientDisconnect):
        await gone.body()
    assert gone._is_disconnected


@pytest.mark.anyio
async def test_a_hot_call_whose_client_hung_up_before_its_body_is_neither_answered_nor_an_error() -> None:
    """An overloaded daemon's timed-out workers: nobody to answer, and no traceback per request."""
    app = create_app(db=MemoryStore(), auth=False)
    async with app.router.lifespan_context(app) as state:
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": "/v1/experiments/e1/observations", "raw_path": b"/v1/experiments/e1/observations", "root_path": "",
            "query_string": b"", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1), "state": dict(state),
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"40")],
        }  # fmt: skip
        sent: list[Any] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.disconnect"}

        async def send(message: Any) -> None:
            sent.append(message)

        await app(scope, receive, send)  # no exception
        assert sent == []
