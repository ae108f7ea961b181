"""Several metrics over HTTP against a real uvicorn server: metrics=[...] and
values= in bodies, 400s that name the field, /best and /pareto_front, OpenAPI."""

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
METRICS = [
    {"name": "acc", "objective": "maximize"},
    {"name": "latency_ms", "objective": "minimize"},
    {"name": "mem_mb", "constraint": {"<=": 512}},
]


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, str]]:
    store = MemoryStore()
    cred, token = new_credential("alice")
    anyio.run(store.put_credential, cred)
    with ServerThread(create_app(db=store)) as running:
        yield running.url, token


@pytest.fixture
def url(server: tuple[str, str]) -> str:
    return server[0]


@pytest.fixture
def http(server: tuple[str, str]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server[0], headers={"Authorization": f"Bearer {server[1]}"}, timeout=10) as client:
        yield client


def test_multi_objective_round_trip_through_the_http_client(server: tuple[str, str]) -> None:
    with Client(driver="http", base_url=server[0], token=server[1]) as c:
        exp = c.create_experiment("mo", X, metrics=METRICS, strategy="random")
        assert [m.to_dict() for m in exp.metrics] == METRICS[:2] + [{"name": "mem_mb", "constraint": {"<=": 512.0}}]
        rows = [(0.90, 50.0, 100.0), (0.80, 30.0, 100.0), (0.85, 60.0, 100.0), (0.99, 10.0, 900.0), (0.95, 90.0, 512.0)]
        ids = []
        for acc, lat, mem in rows:
            s = c.suggest(exp.id)
            ids.append(c.observe(exp.id, suggestion_id=s.id, values={"acc": acc, "latency_ms": lat, "mem_mb": mem}).id)
        assert [o.id for o in c.pareto_front(exp.id)] == [ids[0], ids[1], ids[4]]
        assert c.best(exp.id).id == ids[4]  # type: ignore[union-attr]
        listed = c.observations(exp.id)
        assert listed[3].value == 0.99 and listed[3].metrics == {"latency_ms": 10.0, "mem_mb": 900.0}
        assert [o.values for o in listed] == [{"acc": a, "latency_ms": lat, "mem_mb": mem} for a, lat, mem in rows]
        assert c.best(exp.id).values == {"acc": 0.95, "latency_ms": 90.0, "mem_mb": 512.0}  # type: ignore[union-attr]
        assert c.experiment(exp.id).metrics == exp.metrics
        with pytest.raises(ApiError) as info:
            c.observe(exp.id, assignments={"x": 0.5}, values={"acc": 0.5})
        assert info.value.status_code == 400 and info.value.error_type == "invalid_request"
        assert "['latency_ms', 'mem_mb'] missing" in info.value.message


def test_raw_bodies_validation_names_the_field(http: httpx.Client) -> None:
    r = http.post("/v1/experiments", json={"name": "e", "parameters": X, "metrics": [METRICS[0], METRICS[0]]})
    assert r.status_code == 400 and "metrics[1].name: 'acc' appears twice" in r.json()["error"]["message"]
    r = http.post("/v1/experiments", json={"name": "e", "parameters": X, "metrics": [{"name": f"m{i}", "objective": "minimize"} for i in range(5)]})
    assert r.status_code == 400 and "at most 4" in r.json()["error"]["message"]
    r = http.post("/v1/experiments", json={"name": "e", "parameters": X})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request"
    r = http.post("/v1/experiments", json={"name": "e", "parameters": X, "metrics": METRICS})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["metric"] == {"name": "acc", "objective": "maximize"} and len(body["metrics"]) == 3
    exp_id = body["id"]
    r = http.post(f"/v1/experiments/{exp_id}/observations", json={"assignments": {"x": 0.2}, "values": {"acc": 0.5, "latency_ms": 1.0}})
    assert r.status_code == 400 and "['mem_mb'] missing" in r.json()["error"]["message"]
    r = http.post(f"/v1/experiments/{exp_id}/observations", json={"assignments": {"x": 0.2}, "values": {"acc": 0.5, "latency_ms": 1.0, "mem_mb": 600}})
    assert r.status_code == 201, r.text
    assert r.json()["values"] == {"acc": 0.5, "latency_ms": 1.0, "mem_mb": 600.0}
    r = http.post(f"/v1/experiments/{exp_id}/observations", json={"assignments": {"x": 0.3}, "failed": True})
    assert r.status_code == 201 and r.json()["values"] == {}
    assert [o["values"] for o in http.get(f"/v1/experiments/{exp_id}/observations").json()] == [
        {"acc": 0.5, "latency_ms": 1.0, "mem_mb": 600.0}, {}
    ]
    assert http.get(f"/v1/experiments/{exp_id}/best").json() is None  # nothing feasible yet
    assert http.get(f"/v1/experiments/{exp_id}/pareto_front").json() == []
    assert http.get("/v1/experiments/nope/pareto_front").status_code == 404


def test_one_outcome_per_observation_is_what_the_schema_says_and_every_door_refuses_alike(server: tuple[str, str], http: httpx.Client) -> None:
    # value= with values= lacking the first objective was valid by the schema and stored; failed=true with values=
    # was too: exactly one of value, values or failed=true, refused with one message in process, by the client and raw
    import jsonschema_rs

    doc = http.get("/openapi.json").json()
    schema = jsonschema_rs.Draft202012Validator({**doc["components"]["schemas"]["ObserveBody"], "components": doc["components"]})
    every = {"acc": 0.5, "latency_ms": 1.0, "mem_mb": 100.0}
    refused = [({"value": 0.5, "values": {"latency_ms": 1.0, "mem_mb": 100.0}}, "send values={'acc': ..., 'latency_ms': ..., 'mem_mb': ...} alone"),
               ({"failed": True, "values": every}, "give values= or failed=true, not both")]  # fmt: skip
    with Client(driver="local", pool=None) as local, Client(driver="http", base_url=server[0], token=server[1]) as remote:
        for outcome, says in refused:
            messages = []
            for c in (local, remote):
                exp = c.create_experiment("one outcome", X, metrics=METRICS, strategy="random")
                with pytest.raises(ApiError) as info:
                    c.observe(exp.id, assignments={"x": 0.5}, **outcome)
                assert (info.value.status_code, info.value.error_type) == (400, "invalid_request") and says in info.value.message
                messages.append(info.value.message)
            body = {"assignments": {"x": 0.5}, **outcome}
            assert not schema.is_valid(body), body
            r = http.post(f"/v1/experiments/{exp.id}/observations", json=body)
            assert (r.status_code, r.json()["error"]["type"]) == (400, "invalid_request")
            assert messages == [r.json()["error"]["message"]] * 2
            assert remote.observations(exp.id) == []
        for outcome in ({"values": every}, {"failed": True, "metrics": {"mem_mb": 900.0}}):
            assert schema.is_valid({"assignments": {"x": 0.5}, **outcome})
            assert remote.observe(exp.id, assignments={"x": 0.5}, **outcome).failed is ("failed" in outcome)


def test_a_kept_page_of_the_front_follows_every_change_of_the_front(http: httpx.Client) -> None:
    exp_id = http.post("/v1/experiments", json={"name": "paged-front", "parameters": X, "metrics": METRICS[:2]}).json()["id"]
    path = f"/v1/experiments/{exp_id}/pareto_front"

    def post(acc: float, lat: float) -> str:
        r = http.post(f"/v1/experiments/{exp_id}/observations", json={"assignments": {"x": 0.5}, "values": {"acc": acc, "latency_ms": lat}})
        assert r.status_code == 201, r.text
        return str(r.json()["id"])

    ids = [post(0.1 * i, 10.0 * i) for i in range(1, 6)]  # all on the front
    ids_of = lambda r: [o["id"] for o in r.json()]  # noqa: E731
    first = http.get(path, params={"limit": 2})
    assert ids_of(first) == ids[:2] and first.links["next"]["url"] == f"{path}?after={ids[1]}&limit=2"
    assert ids_of(http.get(first.links["next"]["url"])) == ids[2:4]
    assert ids_of(http.get(path, params={"after": ids[3], "limit": 2})) == ids[4:]
    post(0.05, 60.0)  # dominated: the front is unchanged, and so is every page
    assert http.get(path, params={"limit": 2}).content == first.content
    new = post(0.45, 35.0)  # beats ids[3] (0.4, 40): the front keeps its length, its last point changes
    assert ids_of(http.get(path, params={"after": ids[1], "limit": 2})) == [ids[2], ids[4]]
    assert ids_of(http.get(path, params={"after": ids[4]})) == [new]
    assert ids_of(http.get(path)) == [*ids[:3], ids[4], new]


def test_openapi_documents_metrics_values_and_the_pareto_front(url: str) -> None:
    with httpx.Client(base_url=url, timeout=10) as http:
        spec = http.get("/openapi.json").json()
    assert "/v1/experiments/{id}/pareto_front" in spec["paths"]
    schemas = spec["components"]["schemas"]
    assert "metrics" in schemas["ExperimentSpec"]["properties"]
    assert "values" in schemas["ObserveBody"]["properties"]
    assert "values" in schemas["ObservationOut"]["required"] and "first objective" in schemas["ObservationOut"]["properties"]["values"]["description"]
    assert "metrics" in schemas["ExperimentOut"]["properties"]
