"""Hostile input over real HTTP (uvicorn on 127.0.0.1, a real SQLite file): a bad write
is a 400 naming the field and leaves the experiment and the tenant's list working;
deep JSON is a 400 without a traceback; a huge create runs off the event loop."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from tauopt.engine._auth import Limits
from tauopt.space import Space
from tauopt.transport.http._server import create_app
from test_http_support import ServerThread, seed_credentials

X = [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}, {"name": "c", "type": "categorical", "values": ["a", "b"]}]
METRIC = {"name": "y", "objective": "minimize"}
BAD = "\ud800"  # a lone UTF-16 surrogate: valid JSON text (as an escape), not valid Unicode


class Api:
    def __init__(self, url: str, token: str) -> None:
        self.http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)

    def send(self, method: str, path: str, body: Any = None) -> httpx.Response:
        """body as ASCII-escaped JSON, so a lone surrogate travels as the 6 characters \\ud800."""
        content = None if body is None else json.dumps(body).encode("ascii")
        return self.http.request(method, path, content=content, headers={"Content-Type": "application/json"})

    def create(self, **extra: Any) -> dict[str, Any]:
        r = self.send("POST", "/v1/experiments", {"name": "e", "parameters": X, "metric": METRIC, "parallel_bandwidth": 4, **extra})
        assert r.status_code == 201, r.text
        return r.json()


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    db = tmp_path_factory.mktemp("bad-input") / "tauopt.db"
    token = [seed_credentials(db, "alice")["alice"]]
    with ServerThread(create_app(db=str(db), limits=Limits(suggestions_per_day=100_000, max_active_experiments=1000))) as server:
        api = Api(server.url, token[0])
        yield api
        api.http.close()


def assert_refused(r: httpx.Response, *words: str) -> None:
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request", error
    for w in words:
        assert w in error["message"], error["message"]


def still_works(api: Api, exp_id: str) -> None:
    """Listing, suggest and observe on the experiment, and the tenant's list, all succeed."""
    listed = api.send("GET", "/v1/experiments")
    assert listed.status_code == 200, listed.text
    assert exp_id in [e["id"] for e in listed.json()]
    assert api.send("GET", f"/v1/experiments/{exp_id}").status_code == 200
    s = api.send("POST", f"/v1/experiments/{exp_id}/suggestions", {})
    assert s.status_code == 201, s.text
    o = api.send("POST", f"/v1/experiments/{exp_id}/observations", {"suggestion_id": s.json()["id"], "value": 1.0, "metrics": {"m": 2.0}})
    assert o.status_code == 201, o.text
    for path in ("suggestions", "observations"):
        r = api.send("GET", f"/v1/experiments/{exp_id}/{path}")
        assert r.status_code == 200, r.text
    assert api.send("GET", f"/v1/experiments/{exp_id}/suggestions?state=open").json() == []  # no slot held by a failed ask


def test_a_lone_surrogate_in_any_text_field_is_refused_and_nothing_is_poisoned(api: Api) -> None:
    exp = api.create()
    eid = exp["id"]
    creates = [
        ({"parameters": [{"name": "c", "type": "categorical", "values": ["a", BAD]}]}, "values"),
        ({"parameters": [{"name": BAD, "type": "boolean"}]}, "name"),
        ({"parameters": [{"name": "f", "type": "fixed", "value": BAD}]}, "value"),
        ({"parameters": [{"name": "b", "type": "boolean"}, {"name": "d", "type": "boolean", "conditions": [{"parent": "b" + BAD, "values": [True]}]}]}, "parent"),
        ({"metric": {"name": BAD}}, "metric.name"),
        ({"name": "exp" + BAD}, "name"),
    ]
    for extra, field in creates:
        body = {"name": "e", "parameters": X, "metric": METRIC, **extra}
        assert_refused(api.send("POST", "/v1/experiments", body), field, "surrogate")
    s = api.send("POST", f"/v1/experiments/{eid}/suggestions", {"tag": "t" + BAD})
    assert s.status_code == 400 and s.json()["error"]["type"] == "invalid_request", s.text
    opened = api.send("POST", f"/v1/experiments/{eid}/suggestions", {}).json()
    observe = {"suggestion_id": opened["id"], "value": 1.0, "metrics": {"m" + BAD: 1.0}}
    assert_refused(api.send("POST", f"/v1/experiments/{eid}/observations", observe), "metrics", "surrogate")
    assert_refused(api.send("PATCH", f"/v1/experiments/{eid}", {"name": BAD}), "name", "surrogate")
    # the suggestion opened before the bad observe is still open and can be observed
    ok = api.send("POST", f"/v1/experiments/{eid}/observations", {"suggestion_id": opened["id"], "value": 0.5})
    assert ok.status_code == 201, ok.text
    still_works(api, eid)
    r = api.send("GET", f"/v1/experiments/{eid}")
    assert r.json()["name"] == "e" and [p["name"] for p in r.json()["parameters"]] == ["x", "c"]


def test_numbers_too_large_for_a_float_are_400s_over_http(api: Api) -> None:
    eid = api.create()["id"]
    raw_create = b'{"name": "e", "metric": {"name": "y"}, "parameters": [{"name": "i", "type": "int", "bounds": [0, 1' + b"0" * 400 + b"]}]}"
    r = api.http.post("/v1/experiments", content=raw_create, headers={"Content-Type": "application/json"})
    assert_refused(r, "64-bit")
    sid = api.send("POST", f"/v1/experiments/{eid}/suggestions", {}).json()["id"]
    raw_observe = b'{"suggestion_id": "%s", "value": 1%s}' % (sid.encode(), b"0" * 400)
    r = api.http.post(f"/v1/experiments/{eid}/observations", content=raw_observe, headers={"Content-Type": "application/json"})
    assert_refused(r, "value")  # the body model refuses it already; the engine does too (test_space_limits)
    assert api.send("POST", f"/v1/experiments/{eid}/observations", {"suggestion_id": sid, "value": 1.0}).status_code == 201
    assert_refused(api.send("POST", "/v1/experiments", {"name": "e", "metric": METRIC, "parameters": [{"name": "x", "type": "double", "bounds": [-1e308, 1e308]}]}), "overflows")
    still_works(api, eid)


def test_a_scale_or_conditions_that_is_neither_null_nor_valid_is_refused_as_openapi_json_says(api: Api) -> None:
    # null is the default (linear, none); "" or false used to pass as the default too, which the spec never said
    for key, value, says in [("scale", "", "is not one of"), ("scale", False, "is not one of"),
                             ("conditions", "", "give a list of conditions"), ("conditions", 0, "give a list of conditions")]:
        r = api.send("POST", "/v1/experiments", {"name": "e", "metric": METRIC, "parameters": [{**X[0], key: value}]})
        assert_refused(r, f"parameters[0] ('x').{key}", says)
    r = api.send("POST", "/v1/experiments", {"name": "e", "metric": METRIC, "parameters": [{**X[0], "scale": None, "conditions": None}]})
    assert r.status_code == 201 and r.json()["parameters"] == [X[0]], r.text


def test_json_nested_1000_deep_is_a_400_with_no_traceback_logged(api: Api, caplog: pytest.LogCaptureFixture) -> None:
    eid = api.create()["id"]
    deep = b"[" * 1000 + b"]" * 1000
    nested = b'{"name": "e", "metric": {"name": "y"}, "parameters": ' + b"[" * 40 + b"]" * 40 + b"}"
    with caplog.at_level(logging.ERROR):
        for path in ("/v1/experiments", f"/v1/experiments/{eid}/observations", f"/v1/experiments/{eid}/suggestions"):
            for body in (deep, nested):
                r = api.http.post(path, content=body, headers={"Content-Type": "application/json"})
                assert_refused(r, "nested deeper than")
    assert not [rec for rec in caplog.records if rec.exc_info], [rec.getMessage() for rec in caplog.records]
    still_works(api, eid)


def test_health_and_another_experiments_ask_answer_while_a_huge_create_is_checked(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The huge space's check is held inside Space.parse by a gate: were it on the event
    loop, nothing else could answer until the gate opens."""
    other = api.create()["id"]
    entered, release = threading.Event(), threading.Event()
    parse = Space.parse.__func__  # type: ignore[attr-defined]

    def gated(cls: type[Space], raw: Any) -> Space:
        if len(raw) >= 10_000:
            entered.set()
            release.wait(timeout=30)
        return parse(cls, raw)

    monkeypatch.setattr(Space, "parse", classmethod(gated))
    huge = {"name": "huge", "metric": METRIC, "parameters": [{"name": f"p{i}", "type": "double", "bounds": [0, 1]} for i in range(10_000)]}
    created: list[httpx.Response] = []
    client = httpx.Client(base_url=str(api.http.base_url), headers=dict(api.http.headers), timeout=60)
    worker = threading.Thread(target=lambda: created.append(client.post("/v1/experiments", json=huge)))
    worker.start()
    answered = []
    try:
        assert entered.wait(timeout=30), "the huge create never reached Space.parse"
        # while the check is held: other requests are served (the gate is still closed)
        fast = httpx.Client(base_url=str(api.http.base_url), headers=dict(api.http.headers), timeout=5)
        for _ in range(3):
            answered.append(fast.get("/v1/health").status_code)
            s = fast.post(f"/v1/experiments/{other}/suggestions", json={})
            answered.append(s.status_code)
            answered.append(fast.post(f"/v1/experiments/{other}/observations", json={"suggestion_id": s.json()["id"], "value": 1.0}).status_code)
        fast.close()
        assert not release.is_set() and not created
    finally:
        release.set()
        worker.join(timeout=60)
        client.close()
    assert answered == [200, 201, 201] * 3
    assert created and created[0].status_code == 201, created[0].text if created else "no reply"
    assert len(created[0].json()["parameters"]) == 10_000


@pytest.mark.parametrize(
    "body",
    [
        '{"a": [1, 2.5, "x"]}'.encode("utf-8"),
        '{"a": "é"}'.encode("utf-16"),
        '{"a": "é"}'.encode("utf-32-le"),
        b'\xef\xbb\xbf{"a": 1}',
        '{"a": 1}',
        '\ufeff{"a": 1}',
        b'{"a": NaN}',
        b'{"a": 1',
        b'\xff\xfe\xfd',
    ],
)
def test_the_shared_body_decoder_accepts_and_refuses_what_json_loads_does_nan_aside(body: bytes | str) -> None:
    from tauopt.transport._json import loads_body

    def outcome(parse: Any) -> Any:
        try:
            return ("ok", parse(body))
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError both
            return ("refused", type(exc).__name__)

    def no_constants(name: str) -> Any:
        raise json.JSONDecodeError(f"{name} is not valid JSON", name, 0)

    def strict(b: bytes | str) -> Any:  # what loads_body did before it kept one decoder
        return json.loads(b, parse_constant=no_constants)

    assert outcome(loads_body) == outcome(strict)


def test_a_long_body_is_parsed_off_the_event_loop_and_a_short_one_on_it(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """JSON parsing of a body long enough to stall the loop runs in a worker thread (the
    thread that parsed each body is recorded by a wrapper around the door's parser)."""
    import tauopt.transport.http._routes as routes

    parsed_by: list[tuple[int, str]] = []
    loads = routes.loads_body

    def recorded(raw: bytes) -> Any:
        parsed_by.append((len(raw), threading.current_thread().name))
        return loads(raw)

    monkeypatch.setattr(routes, "loads_body", recorded)
    api.create()
    long = {"name": "long", "metric": METRIC, "parameters": [{"name": f"p{i}", "type": "double", "bounds": [0, 1]} for i in range(2_000)]}
    assert api.send("POST", "/v1/experiments", long).status_code == 201
    (short, short_thread), (size, long_thread) = parsed_by
    assert short < 64 * 1024 < size
    assert long_thread != short_thread and "AnyIO worker thread" in long_thread
