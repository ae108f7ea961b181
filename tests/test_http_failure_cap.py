"""max_consecutive_failures over a real HTTP server: the field in create, PATCH and
every read, its rules in /openapi.json, the 409 too_many_failures an ask answers
once the cap is reached, and the PATCH that lifts it; the same through the HTTP client."""

from __future__ import annotations

from typing import Iterator

import anyio
import httpx
import pytest

from tauopt import ApiError, Client
from tauopt.engine._auth import new_credential
from tauopt.store import MemoryStore
from tauopt.transport.http._server import create_app

from test_http_support import ServerThread

X = [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}]
METRIC = {"name": "y", "objective": "minimize"}


class Server:
    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=10)

    def client(self) -> Client:
        return Client(driver="http", base_url=self.url, token=self.token)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    store = MemoryStore()
    cred, token = new_credential("alice")
    anyio.run(store.put_credential, cred)
    with ServerThread(create_app(db=store)) as running:
        yield Server(running.url, token)


def fail_one(http: httpx.Client, eid: str) -> None:
    s = http.post(f"/v1/experiments/{eid}/suggestions")
    assert s.status_code == 201, s.text
    r = http.post(f"/v1/experiments/{eid}/observations", json={"suggestion_id": s.json()["id"], "failed": True})
    assert r.status_code == 201, r.text


def test_the_cap_is_a_field_that_stops_asks_with_409_until_a_patch_sets_it_again(server: Server) -> None:
    with server.http() as http:
        r = http.post("/v1/experiments", json={"name": "e", "parameters": X, "metric": METRIC, "max_consecutive_failures": 2})
        assert r.status_code == 201, r.text
        exp = r.json()
        assert (exp["max_consecutive_failures"], exp["consecutive_failures"], exp["stopped_reason"]) == (2, 0, None)
        eid = exp["id"]
        fail_one(http, eid)
        assert http.get(f"/v1/experiments/{eid}").json()["consecutive_failures"] == 1
        fail_one(http, eid)
        r = http.post(f"/v1/experiments/{eid}/suggestions")
        assert r.status_code == 409 and "retry-after" not in r.headers
        err = r.json()["error"]
        assert err["type"] == "too_many_failures" and "update_experiment" in err["message"]
        assert err["details"] == {"consecutive_failures": 2, "max_consecutive_failures": 2}
        listed = [e for e in http.get("/v1/experiments").json() if e["id"] == eid][0]
        assert listed["state"] == "active" and "2 consecutive failed runs" in listed["stopped_reason"]
        r = http.patch(f"/v1/experiments/{eid}", json={"max_consecutive_failures": 3})
        assert r.status_code == 200 and (r.json()["consecutive_failures"], r.json()["stopped_reason"]) == (0, None)
        assert http.post(f"/v1/experiments/{eid}/suggestions").status_code == 201
        r = http.patch(f"/v1/experiments/{eid}", json={"max_consecutive_failures": None})
        assert r.status_code == 200 and r.json()["max_consecutive_failures"] is None


def test_a_bad_cap_answers_400_naming_the_field(server: Server) -> None:
    with server.http() as http:
        for bad in (0, -3, 1.5, "2", True):
            r = http.post("/v1/experiments", json={"name": "e", "parameters": X, "metric": METRIC, "max_consecutive_failures": bad})
            assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request", (bad, r.text)
            assert "max_consecutive_failures" in r.json()["error"]["message"], (bad, r.text)
        eid = http.post("/v1/experiments", json={"name": "e", "parameters": X, "metric": METRIC}).json()["id"]
        r = http.patch(f"/v1/experiments/{eid}", json={"max_consecutive_failures": 0})
        assert r.status_code == 400 and "max_consecutive_failures" in r.json()["error"]["message"]


def test_openapi_states_the_field_its_bounds_and_the_409(server: Server) -> None:
    with server.http() as http:
        schema = http.get("/openapi.json").json()
    schemas = schema["components"]["schemas"]
    for body in ("ExperimentSpec", "UpdateExperimentBody"):
        field = schemas[body]["properties"]["max_consecutive_failures"]
        assert {"type": "integer", "minimum": 1} in field["anyOf"] and {"type": "null"} in field["anyOf"]
    out = schemas["ExperimentOut"]["properties"]
    assert {"max_consecutive_failures", "consecutive_failures", "stopped_reason"} <= set(out)
    ask = schema["paths"]["/v1/experiments/{id}/suggestions"]["post"]["responses"]["409"]
    assert "too_many_failures" in ask["description"]


def test_the_http_client_sets_the_cap_and_raises_too_many_failures(server: Server) -> None:
    with server.client() as c:
        exp = c.create_experiment("client", X, METRIC, strategy="random", max_consecutive_failures=1)
        assert exp.max_consecutive_failures == 1
        c.observe(exp.id, suggestion_id=c.suggest(exp.id).id, failed=True)
        with pytest.raises(ApiError) as got:
            c.suggest(exp.id)
        assert (got.value.status_code, got.value.error_type) == (409, "too_many_failures")
        assert c.experiment(exp.id).stopped_reason is not None
        again = c.update_experiment(exp.id, max_consecutive_failures=4)
        assert (again.max_consecutive_failures, again.stopped_reason) == (4, None)
        c.suggest(exp.id)
