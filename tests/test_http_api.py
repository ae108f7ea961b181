"""The REST API against a real uvicorn server on an ephemeral 127.0.0.1 port:
every endpoint, every error type a client can cause, auth isolation, quota and
rate-limit windows (injectable clock), and the 409 re-post recipe."""

from __future__ import annotations

import time
from typing import Any, Iterator

import anyio
import httpx
import pytest

from tauopt import ApiError, Client
from tauopt.engine._auth import DAY_S, Limits, new_credential
from tauopt.store import MemoryStore
from tauopt.models import Experiment, Observation, Suggestion
from tauopt.transport.http._server import create_app, render_error
from tauopt.errors import api_error
from test_http_support import ServerThread

X = [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}]
METRIC = {"name": "y", "objective": "minimize"}


class FakeClock:
    """The quotas' clock: frozen at the start, moved only by the test."""

    def __init__(self) -> None:
        self.start = time.time()
        self.offset = 0.0

    def __call__(self) -> float:
        return self.start + self.offset


class Api:
    def __init__(self, url: str, tokens: dict[str, str], store: MemoryStore, clock: FakeClock) -> None:
        self.url, self.tokens, self.store, self.clock = url, tokens, store, clock
        self._http: dict[str | None, httpx.Client] = {}

    def http(self, who: str | None = "alice") -> httpx.Client:
        if who not in self._http:
            headers = {} if who is None else {"Authorization": f"Bearer {self.tokens[who]}"}
            self._http[who] = httpx.Client(base_url=self.url, headers=headers, timeout=10)
        return self._http[who]

    def close(self) -> None:
        for http in self._http.values():
            http.close()

    def client(self, who: str = "alice") -> Client:
        async def no_sleep(_: float) -> None:
            return None

        return Client(driver="http", base_url=self.url, token=self.tokens[who], sleep=no_sleep)


@pytest.fixture(scope="module")
def api() -> Iterator[Api]:
    store = MemoryStore()
    tokens: dict[str, str] = {}

    async def seed() -> None:
        for name, per_day, cap in (("alice", None, None), ("bob", None, None), ("quota", 3, 2), ("rate", None, None), ("gone", None, None)):
            cred, tokens[name] = new_credential(name, suggestions_per_day=per_day, max_active_experiments=cap)
            await store.put_credential(cred)

    anyio.run(seed)
    clock = FakeClock()
    app = create_app(db=store, clock=clock, limits=Limits(heavy_read_rate=15.0, heavy_read_burst=30))
    with ServerThread(app) as server:
        api = Api(server.url, tokens, store, clock)
        yield api
        api.close()


def create(http: httpx.Client, **extra: Any) -> dict[str, Any]:
    r = http.post("/v1/experiments", json={"name": "e", "parameters": X, "metric": METRIC, **extra})
    assert r.status_code == 201, r.text
    return r.json()


def error_of(r: httpx.Response) -> tuple[int, str]:
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"type", "message", "details"}
    return r.status_code, body["error"]["type"]


# -- every endpoint ---------------------------------------------------------------


def test_health_needs_no_token(api: Api) -> None:
    r = api.http(None).get("/v1/health")
    assert r.status_code == 200 and r.json()["status"] == "ok" and r.json()["ready"] is True


def test_every_operation_round_trips_through_the_http_client(api: Api) -> None:
    with api.client() as c:
        exp = c.create_experiment("round-trip", X, METRIC, parallel_bandwidth=2, observation_budget=10)
        assert isinstance(exp, Experiment) and exp.parallel_bandwidth == 2
        assert c.experiment(exp.id).name == "round-trip"
        assert exp.id in [e.id for e in c.experiments()]
        assert exp.id in [e.id for e in c.experiments(state="active")]
        assert exp.id not in [e.id for e in c.experiments(state="archived")]
        updated = c.update_experiment(exp.id, name="renamed", suggestion_ttl_s=60.0)
        assert (updated.name, updated.suggestion_ttl_s, updated.observation_budget) == ("renamed", 60.0, 10)
        assert c.update_experiment(exp.id, observation_budget=None).observation_budget is None
        s1 = c.suggest(exp.id, tag="worker-1")
        s2 = c.suggest(exp.id)
        assert isinstance(s1, Suggestion) and s1.tag == "worker-1" and s1.state == "open"
        assert [s.id for s in c.suggestions(exp.id, state="open", tag="worker-1")] == [s1.id]
        assert c.suggestion(exp.id, s2.id).assignments == s2.assignments
        o = c.observe(exp.id, suggestion_id=s1.id, value=0.25, metrics={"acc": 0.9})
        assert isinstance(o, Observation) and o.suggestion_id == s1.id and o.metrics == {"acc": 0.9}
        assert c.close_suggestion(exp.id, s2.id).state == "closed"
        c.suggest(exp.id)
        c.suggest(exp.id)
        assert c.close_all_suggestions(exp.id) == 2
        failed = c.observe(exp.id, assignments={"x": 0.5}, failed=True)
        assert failed.failed and failed.value is None and failed.suggestion_id is None
        assert [ob.id for ob in c.observations(exp.id)] == [o.id, failed.id]
        assert c.best(exp.id) == o
        archived = c.archive_experiment(exp.id)
        assert archived.state == "archived"


def test_best_is_null_before_any_observation(api: Api) -> None:
    http = api.http()
    exp = create(http)
    r = http.get(f"/v1/experiments/{exp['id']}/best")
    assert r.status_code == 200 and r.json() is None


def test_suggest_accepts_no_body_and_an_empty_object(api: Api) -> None:
    http = api.http()
    exp = create(http, parallel_bandwidth=2)
    assert http.post(f"/v1/experiments/{exp['id']}/suggestions").status_code == 201
    assert http.post(f"/v1/experiments/{exp['id']}/suggestions", json={}).status_code == 201


def test_openapi_and_docs_are_served(api: Api) -> None:
    http = api.http(None)
    schema = http.get("/openapi.json").json()
    assert "/v1/experiments/{id}/suggestions" in schema["paths"]
    assert all("422" not in op["responses"] for path in schema["paths"].values() for op in path.values())
    assert http.get("/docs").status_code == 200


def test_openapi_states_the_validation_rules_and_links_create_and_suggest_to_their_uses(api: Api) -> None:
    schema = api.http(None).get("/openapi.json").json()
    create = schema["components"]["schemas"]["ExperimentSpec"]
    assert [rule["required"] for rule in create["oneOf"]] == [["metric"], ["metrics"]]  # one of them, not both
    body = create["properties"]
    # one named variant per parameter type, chosen by `type` (a discriminator: clients read the variants by name)
    parameter = body["parameters"]["items"]
    variants = [schema["components"]["schemas"][v["$ref"].rsplit("/", 1)[1]] for v in parameter["oneOf"]]
    kinds = [v["properties"]["type"]["const"] for v in variants]
    assert kinds == ["double", "int", "categorical", "boolean", "fixed"]
    assert parameter["discriminator"] == {"propertyName": "type", "mapping": {k: v["$ref"] for k, v in zip(kinds, parameter["oneOf"])}}
    double = variants[0]["properties"]
    assert (double["bounds"]["minItems"], double["bounds"]["maxItems"]) == (2, 2)
    assert double["scale"]["enum"] == ["linear", "log", "reverse_log", None]  # null is linear
    assert double["bounds"]["uniqueItems"] is True  # lo < hi: the part JSON Schema can say
    int_bound = variants[1]["properties"]["bounds"]["items"]
    assert [(type(b), b) for b in (int_bound["minimum"], int_bound["exclusiveMaximum"])] == [(int, -(2**63)), (int, 2**63)]
    log_scale = variants[0]["oneOf"][1]["properties"]
    assert log_scale["bounds"]["items"]["exclusiveMinimum"] == 0 and log_scale["scale"]["enum"] == ["log", "reverse_log"]
    assert body["strategy"]["enum"] == ["auto", "random", "sobol", "grid", "gp"]
    assert body["metric"]["properties"]["objective"]["enum"] == ["minimize", "maximize"]
    assert body["parallel_bandwidth"]["minimum"] == 1 and body["name"]["maxLength"] == 256
    tag = schema["components"]["schemas"]["SuggestBody"]["properties"]["tag"]["anyOf"][0]
    assert (tag["minLength"], tag["maxLength"]) == (1, 128)
    paths = schema["paths"]
    from_create = paths["/v1/experiments"]["post"]["responses"]["201"]["links"]
    # every operation on an experiment (15 since the dashboard's and issue 18's), each fed the created id; 19 with the plot sample
    by_experiment = {op["operationId"] for path, ops in paths.items() if "{id}" in path and "{suggestion_id}" not in path for op in ops.values()}
    assert len(by_experiment) == 19 and {l["operationId"] for l in from_create.values()} == by_experiment
    assert all(l["parameters"] == {"path.id": "$response.body#/id"} for l in from_create.values())
    from_suggest = paths["/v1/experiments/{id}/suggestions"]["post"]["responses"]["201"]["links"]
    assert from_suggest["observe"]["requestBody"] == {"suggestion_id": "$response.body#/id", "assignments": None}
    # the suggestion's path parameter is documented by what it is (`{suggestion_id}`: a fuzzer fills it from a
    # suggestion's id); the URL is the same
    by_suggestion = {op["operationId"] for path, ops in paths.items() if "{suggestion_id}" in path for op in ops.values()}
    assert len(by_suggestion) == 4 and by_suggestion <= {l["operationId"] for l in from_suggest.values()}
    ids = {op["operationId"] for path in paths.values() for op in path.values()}
    assert all(l["operationId"] in ids for l in [*from_create.values(), *from_suggest.values()])


def test_bodies_using_every_field_openapi_lists_are_valid_by_it_and_accepted(api: Api) -> None:
    # the other direction from the fuzzer's: the schema is no stricter than the engine (every field, nulls where
    # the schema allows them, one condition on its own, metrics with a constraint, each early-stopping option)
    import jsonschema_rs

    http = api.http()
    doc = http.get("/openapi.json").json()

    def valid(model: str, body: dict[str, Any]) -> bool:
        return jsonschema_rs.Draft202012Validator({**doc["components"]["schemas"][model], "components": doc["components"]}).is_valid(body)

    create = {
        "name": "every field", "metric": None, "parallel_bandwidth": 3, "suggestion_ttl_s": None, "observation_budget": 10,
        "strategy": "random", "strategy_options": {"seed": 1, "grid_size": None}, "early_stopping": {"rule": "asha", "max_step": 9},
        "metrics": [{"name": "y", "objective": "minimize", "constraint": None}, {"name": "m", "constraint": {"<=": 1}, "objective": None}],
        "parameters": [
            {"name": "c", "type": "categorical", "values": ["a", 1, 1.5, True], "default": "a", "scale": "linear",
             "bounds": None, "step": None, "value": None, "conditions": None},
            {"name": "d", "type": "double", "bounds": [1e-3, 1.0], "scale": "log", "step": None, "default": 0.5,
             "values": None, "value": None, "conditions": [{"parent": "c", "values": ["a"]}]},
            {"name": "i", "type": "int", "bounds": [1, 9], "scale": None, "step": 2, "default": 3, "conditions": {"parent": "c", "values": [1]}},
            {"name": "b", "type": "boolean", "default": True, "scale": "linear"},
            {"name": "f", "type": "fixed", "value": "v", "default": None},
        ],
    }  # fmt: skip
    assert valid("ExperimentSpec", create)
    r = http.post("/v1/experiments", json=create)
    assert r.status_code == 201, r.text
    eid = r.json()["id"]
    s = http.post(f"/v1/experiments/{eid}/suggestions", json={"tag": None}).json()
    observe = {"suggestion_id": s["id"], "assignments": None, "value": None, "failed": False, "metrics": None,
               "values": {"y": 1.0, "m": 0.5}, "stopped": False}  # fmt: skip
    assert valid("ObserveBody", observe)
    assert http.post(f"/v1/experiments/{eid}/observations", json=observe).status_code == 201
    unsolicited = {"assignments": s["assignments"], "failed": True}
    assert valid("ObserveBody", unsolicited)
    assert http.post(f"/v1/experiments/{eid}/observations", json=unsolicited).status_code == 201
    for rule in ({}, {"rule": "none"}, {"rule": "median", "min_trials": 2, "grace_steps": 0}, None):
        update = {"early_stopping": rule, "suggestion_ttl_s": None, "observation_budget": None, "name": "renamed"}
        assert valid("UpdateExperimentBody", update)
        assert http.patch(f"/v1/experiments/{eid}", json=update).status_code == 200


def test_observe_bodies_the_server_refuses_for_any_experiment_are_invalid_by_the_schema(api: Api) -> None:
    # the fuzzer's direction: an outcome is a value, `values` (an object), or failed=true; one of suggestion_id
    # or assignments (`values: null` was valid by the schema and refused as "give the metric's value")
    import jsonschema_rs

    http = api.http()
    doc = http.get("/openapi.json").json()
    validator = jsonschema_rs.Draft202012Validator({**doc["components"]["schemas"]["ObserveBody"], "components": doc["components"]})
    eid = create(http)["id"]
    sid = http.post(f"/v1/experiments/{eid}/suggestions", json={}).json()["id"]
    for body in ({"suggestion_id": sid, "values": None}, {"suggestion_id": sid}, {"suggestion_id": sid, "value": None, "failed": False},
                 {"suggestion_id": sid, "assignments": {"x": 0.5}, "failed": True}, {"failed": True},
                 {"suggestion_id": sid, "value": 0.5, "values": {}}, {"suggestion_id": sid, "failed": True, "values": {"y": 0.5}}):  # fmt: skip
        assert not validator.is_valid(body), body
        assert error_of(http.post(f"/v1/experiments/{eid}/observations", json=body)) == (400, "invalid_request"), body
    for body in ({"suggestion_id": sid, "value": 0.5}, {"suggestion_id": sid, "failed": True, "assignments": None}):
        assert validator.is_valid(body), body


def test_integral_json_numbers_are_integers_and_fractions_are_refused(api: Api) -> None:
    http = api.http()
    exp = create(http, parallel_bandwidth=3.0, observation_budget=10.0, strategy_options={"seed": 7.0})
    assert (exp["parallel_bandwidth"], exp["observation_budget"], exp["strategy_options"]["seed"]) == (3, 10, 7)
    r = http.post("/v1/experiments", json={"name": "e", "parameters": X, "metric": METRIC, "parallel_bandwidth": 1.5})
    assert error_of(r) == (400, "invalid_request")
    r = http.patch(f"/v1/experiments/{exp['id']}", json={"parallel_bandwidth": 4.0})
    assert r.status_code == 200 and r.json()["parallel_bandwidth"] == 4


# -- errors -----------------------------------------------------------------------


def test_missing_wrong_or_revoked_tokens_answer_401(api: Api) -> None:
    anonymous = api.http(None)
    for r in (
        anonymous.get("/v1/experiments"),
        anonymous.get("/v1/experiments", headers={"Authorization": "Bearer nope"}),
        anonymous.get("/v1/experiments", headers={"Authorization": "Basic abc"}),
    ):
        assert error_of(r) == (401, "unauthorized")
        assert r.headers["www-authenticate"].startswith("Bearer")
    gone = api.http("gone")
    assert gone.get("/v1/experiments").status_code == 200

    async def revoke() -> None:
        cred = next(c for c in await api.store.credentials() if c.name == "gone")
        await api.store.revoke_credential(cred.id)

    anyio.run(revoke)
    api.clock.offset += 5  # past the credential cache
    assert error_of(gone.get("/v1/experiments")) == (401, "unauthorized")


def test_another_credential_gets_404_never_403(api: Api) -> None:
    alice, bob = api.http("alice"), api.http("bob")
    exp = create(alice, parallel_bandwidth=2)
    eid = exp["id"]
    sid = alice.post(f"/v1/experiments/{eid}/suggestions").json()["id"]
    attempts = [
        bob.get(f"/v1/experiments/{eid}"),
        bob.patch(f"/v1/experiments/{eid}", json={"name": "mine"}),
        bob.post(f"/v1/experiments/{eid}/archive"),
        bob.post(f"/v1/experiments/{eid}/suggestions"),
        bob.get(f"/v1/experiments/{eid}/suggestions"),
        bob.get(f"/v1/experiments/{eid}/suggestions/{sid}"),
        bob.delete(f"/v1/experiments/{eid}/suggestions/{sid}"),
        bob.delete(f"/v1/experiments/{eid}/suggestions"),
        bob.post(f"/v1/experiments/{eid}/observations", json={"suggestion_id": sid, "value": 1.0}),
        bob.get(f"/v1/experiments/{eid}/observations"),
        bob.get(f"/v1/experiments/{eid}/best"),
    ]
    assert [error_of(r) for r in attempts] == [(404, "not_found")] * len(attempts)
    assert eid not in [e["id"] for e in bob.get("/v1/experiments").json()]
    # and nothing of alice's changed
    assert alice.get(f"/v1/experiments/{eid}/suggestions/{sid}").json()["state"] == "open"
    assert alice.get(f"/v1/experiments/{eid}").json()["state"] == "active"


def test_bad_input_answers_400_invalid_request_never_500(api: Api) -> None:
    http = api.http()
    eid = create(http)["id"]
    raw = {"Content-Type": "application/json"}
    cases = [
        http.post("/v1/experiments", json={"name": "e", "parameters": [{"name": "x", "type": "double", "bounds": [1, 0]}], "metric": METRIC}),
        http.post("/v1/experiments", json={"name": "e", "parameters": X, "metric": METRIC, "parallel_bandwidth": "2"}),
        http.post("/v1/experiments", json={"name": "e", "parameters": X, "metric": METRIC, "surprise": 1}),
        http.post("/v1/experiments", json=[1, 2]),
        http.post("/v1/experiments", content=b"{not json", headers=raw),
        http.post(f"/v1/experiments/{eid}/observations", content=b'{"assignments": {"x": 0.5}, "value": NaN}', headers=raw),
        http.post(f"/v1/experiments/{eid}/observations", json={"assignments": {"x": 7.0}, "value": 1.0}),
        http.post(f"/v1/experiments/{eid}/suggestions", json={"tag": "x" * 129}),
        http.get("/v1/experiments", params={"state": "sleeping"}),
        http.patch(f"/v1/experiments/{eid}", json={"parallel_bandwidth": 0}),
    ]
    for r in cases:
        assert error_of(r) == (400, "invalid_request"), r.text
        assert r.json()["error"]["message"]


def test_unknown_routes_and_methods_use_the_catalogue(api: Api) -> None:
    http = api.http()
    assert error_of(http.get("/v1/nothing")) == (404, "not_found")
    assert error_of(http.put("/v1/experiments")) == (405, "method_not_allowed")
    assert error_of(http.get("/v1/experiments/nope")) == (404, "not_found")


def test_bodies_over_one_mib_answer_413_declared_or_chunked(api: Api) -> None:
    http = api.http()
    big = b'{"name": "' + b"x" * (1 << 20) + b'"}'
    assert error_of(http.post("/v1/experiments", content=big, headers={"Content-Type": "application/json"})) == (
        413,
        "payload_too_large",
    )

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(big), 65536):
            yield big[i : i + 65536]

    r = http.post("/v1/experiments", content=chunks(), headers={"Content-Type": "application/json"})
    assert error_of(r) == (413, "payload_too_large")


def test_bandwidth_full_is_429_with_retry_after_1_and_the_exact_message(api: Api) -> None:
    http = api.http()
    eid = create(http)["id"]
    assert http.post(f"/v1/experiments/{eid}/suggestions").status_code == 201
    r = http.post(f"/v1/experiments/{eid}/suggestions")
    assert error_of(r) == (429, "bandwidth_full")
    assert r.headers["retry-after"] == "1"
    assert r.json()["error"]["message"] == "1 open suggestions >= parallel_bandwidth=1; observe or close one first"


def test_the_client_raises_the_final_429_with_headers_and_retry_after(api: Api) -> None:
    with api.client() as c:
        exp = c.create_experiment("full", X, METRIC)
        c.suggest(exp.id)
        with pytest.raises(ApiError) as info:
            c.suggest(exp.id)
    e = info.value
    assert (e.status_code, e.error_type, e.retry_after) == (429, "bandwidth_full", 1.0)
    assert e.headers["retry-after"] == "1"


def test_409s_for_observed_closed_completed_archived_and_exhausted(api: Api) -> None:
    http = api.http()
    eid = create(http, parallel_bandwidth=3, observation_budget=2)["id"]
    s1, s2, s3 = (http.post(f"/v1/experiments/{eid}/suggestions").json()["id"] for _ in range(3))
    assert http.post(f"/v1/experiments/{eid}/observations", json={"suggestion_id": s1, "value": 1.0}).status_code == 201
    again = http.post(f"/v1/experiments/{eid}/observations", json={"suggestion_id": s1, "value": 1.0})
    assert error_of(again) == (409, "suggestion_observed")
    assert http.delete(f"/v1/experiments/{eid}/suggestions/{s2}").status_code == 200
    closed = http.post(f"/v1/experiments/{eid}/observations", json={"suggestion_id": s2, "value": 1.0})
    assert error_of(closed) == (409, "suggestion_closed")
    assert http.post(f"/v1/experiments/{eid}/observations", json={"suggestion_id": s3, "value": 2.0}).status_code == 201
    assert error_of(http.post(f"/v1/experiments/{eid}/suggestions")) == (409, "experiment_completed")

    eid = create(http)["id"]
    http.post(f"/v1/experiments/{eid}/archive")
    assert error_of(http.post(f"/v1/experiments/{eid}/suggestions")) == (409, "experiment_archived")

    flag = [{"name": "flag", "type": "categorical", "values": ["a", "b"]}]
    r = http.post("/v1/experiments", json={"name": "tiny", "parameters": flag, "metric": METRIC, "parallel_bandwidth": 3})
    eid = r.json()["id"]
    assert http.post(f"/v1/experiments/{eid}/suggestions").status_code == 201
    assert http.post(f"/v1/experiments/{eid}/suggestions").status_code == 201
    assert error_of(http.post(f"/v1/experiments/{eid}/suggestions")) == (409, "space_exhausted")


def test_expired_suggestion_409_then_repost_as_unsolicited_observation(api: Api) -> None:
    with api.client() as c:
        exp = c.create_experiment("ttl", X, METRIC, parallel_bandwidth=2, suggestion_ttl_s=0.2)
        lost = c.suggest(exp.id, tag="job-1/rank-0")
        time.sleep(0.3)
        c.suggest(exp.id)  # expiry happens at the experiment's next ask, not at the observe
        with pytest.raises(ApiError) as info:
            c.observe(exp.id, suggestion_id=lost.id, value=0.7)
        e = info.value
        assert (e.status_code, e.error_type) == (409, "suggestion_expired")
        assert e.details["assignments"] == lost.assignments
        reposted = c.observe(exp.id, assignments=e.details["assignments"], value=0.7)
        assert reposted.suggestion_id is None and reposted.assignments == lost.assignments
        assert c.suggestion(exp.id, lost.id).state == "expired"
        assert [o.value for o in c.observations(exp.id)] == [0.7]


# -- quotas and rate limits, per credential -----------------------------------------


def test_daily_suggestion_quota_is_a_rolling_24h_window(api: Api) -> None:
    http = api.http("quota")
    eid = create(http, parallel_bandwidth=10)["id"]
    for _ in range(3):
        assert http.post(f"/v1/experiments/{eid}/suggestions").status_code == 201
    r = http.post(f"/v1/experiments/{eid}/suggestions")
    assert error_of(r) == (429, "quota_exceeded")
    assert DAY_S - 60 <= int(r.headers["retry-after"]) <= DAY_S
    # other credentials are not affected
    other = create(api.http("bob"))["id"]
    assert api.http("bob").post(f"/v1/experiments/{other}/suggestions").status_code == 201
    api.clock.offset += DAY_S + 1
    assert http.post(f"/v1/experiments/{eid}/suggestions").status_code == 201


def test_refused_asks_do_not_use_the_quota(api: Api) -> None:
    http = api.http("quota")
    eid = create(http, parallel_bandwidth=1)["id"]
    api.clock.offset += DAY_S + 1  # a fresh window
    assert http.post(f"/v1/experiments/{eid}/suggestions").status_code == 201
    for _ in range(5):
        assert error_of(http.post(f"/v1/experiments/{eid}/suggestions")) == (429, "bandwidth_full")
    assert error_of(http.post("/v1/experiments/nope/suggestions")) == (404, "not_found")
    http.delete(f"/v1/experiments/{eid}/suggestions")
    assert http.post(f"/v1/experiments/{eid}/suggestions").status_code == 201  # 2 of 3 used


def test_active_experiment_cap_is_429_without_retry_after_and_archiving_helps(api: Api) -> None:
    http = api.http("quota")
    for e in http.get("/v1/experiments").json():
        http.post(f"/v1/experiments/{e['id']}/archive")
    first = create(http)["id"]
    create(http)
    r = http.post("/v1/experiments", json={"name": "e", "parameters": X, "metric": METRIC})
    assert error_of(r) == (429, "active_experiment_cap")
    assert "retry-after" not in r.headers
    http.post(f"/v1/experiments/{first}/archive")
    create(http)


def test_heavy_reads_are_rate_limited_15_per_second_burst_30(api: Api) -> None:
    http = api.http("rate")
    eid = create(http)["id"]
    codes = []
    for i in range(31):
        path = "suggestions" if i % 2 else "observations"
        codes.append(http.get(f"/v1/experiments/{eid}/{path}").status_code)
    assert codes[:30] == [200] * 30
    assert codes[30] == 429
    r = http.get(f"/v1/experiments/{eid}/observations")
    assert error_of(r) == (429, "rate_limited") and r.headers["retry-after"] == "1"
    # single reads are not heavy
    assert http.get(f"/v1/experiments/{eid}").status_code == 200
    api.clock.offset += 1.0
    ok = 0
    for _ in range(20):
        ok += http.get(f"/v1/experiments/{eid}/observations").status_code == 200
    assert ok == 15


def test_internal_errors_render_from_the_catalogue() -> None:
    r = render_error(api_error("internal", "boom"))
    assert r.status_code == 500 and b'"type":"internal"' in r.body
    r = render_error(api_error("unavailable", "shutting down"))
    assert r.status_code == 503


@pytest.mark.anyio
async def test_create_app_serves_an_engine_the_caller_owns() -> None:
    """An embedding service enters the engine itself; the app neither opens nor closes it."""
    import socket

    import uvicorn

    from tauopt.engine import Engine
    from tauopt.client import HttpDriver
    from tauopt.transport.http import create_app as lazy_create_app

    async with Engine() as engine:
        cred, token = new_credential("embedded")
        await engine.store.put_credential(cred)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        server = uvicorn.Server(uvicorn.Config(lazy_create_app(engine), log_level="warning", lifespan="on"))
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            while not server.started:
                await anyio.sleep(0.01)
            async with HttpDriver(f"http://127.0.0.1:{sock.getsockname()[1]}", token) as d:
                exp = await d.create_experiment("embedded", X, METRIC, parallel_bandwidth=8)
                # many concurrent tasks share one driver
                async with anyio.create_task_group() as workers:
                    for _ in range(8):
                        workers.start_soon(d.suggest, exp.id)
                assert (await d.experiment(exp.id)).open_suggestions == 8
            server.should_exit = True
        sock.close()
        # the engine outlived the app and still serves its owner
        assert len(await engine.as_owner(cred.id).suggestions(exp.id)) == 8


def test_update_experiment_adds_parameters_over_http(api: Api) -> None:
    with api.client() as c:
        exp = c.create_experiment("grow", X, METRIC)
        params = [p.to_dict() for p in exp.parameters] + [{"name": "k", "type": "int", "bounds": [1, 4]}]
        grown = c.update_experiment(exp.id, parameters=params)
        assert [p.name for p in grown.parameters] == ["x", "k"]
        assert set(c.suggest(exp.id).assignments) == {"x", "k"}
        with pytest.raises(ApiError) as info:
            c.update_experiment(exp.id, parameters=params[1:])
        assert info.value.status_code == 400 and "missing" in info.value.message


def test_reports_over_http_answer_the_rule_and_keep_the_curve(api: Api) -> None:
    http = api.http()
    exp = create(http, parallel_bandwidth=3, strategy="random", early_stopping={"rule": "asha", "max_step": 9})
    assert exp["early_stopping"] == {"rule": "asha", "min_step": 1, "max_step": 9, "reduction_factor": 3}
    eid = exp["id"]
    a, b = (http.post(f"/v1/experiments/{eid}/suggestions").json()["id"] for _ in range(2))
    r = http.post(f"/v1/experiments/{eid}/suggestions/{a}/reports", json={"step": 1, "value": 0.2})
    assert r.status_code == 200 and r.json() == {"should_stop": False, "reason": None}
    r = http.post(f"/v1/experiments/{eid}/suggestions/{b}/reports", json={"step": 1, "value": 0.5})
    assert r.json()["should_stop"] is True and "asha" in r.json()["reason"]
    r = http.post(f"/v1/experiments/{eid}/suggestions/{b}/reports", json={"step": 1, "value": 0.5})
    assert error_of(r) == (400, "invalid_request") and "increasing order" in r.json()["error"]["message"]
    r = http.post(f"/v1/experiments/{eid}/observations", json={"suggestion_id": b, "value": 0.5, "stopped": True})
    assert r.status_code == 201 and r.json()["stopped_at_step"] == 1
    r = http.post(f"/v1/experiments/{eid}/suggestions/{b}/reports", json={"step": 2, "value": 0.4})
    assert error_of(r) == (409, "suggestion_observed")
    r = http.post(f"/v1/experiments/{eid}/suggestions/{a}/reports", json={"step": 2.5, "value": 0.1})
    assert error_of(r) == (400, "invalid_request")
    listed = http.get(f"/v1/experiments/{eid}/suggestions/{a}/reports").json()
    assert [(x["step"], x["value"]) for x in listed] == [(1, 0.2)]
    r = http.patch(f"/v1/experiments/{eid}", json={"early_stopping": {"rule": "median", "min_trials": 2}})
    assert r.status_code == 200 and r.json()["early_stopping"] == {"rule": "median", "min_trials": 2, "grace_steps": 0}
    r = http.patch(f"/v1/experiments/{eid}", json={"early_stopping": {"rule": "bogus"}})
    assert error_of(r) == (400, "invalid_request") and "none, median, asha" in r.json()["error"]["message"]
    # another credential cannot report on it
    r = api.http("bob").post(f"/v1/experiments/{eid}/suggestions/{a}/reports", json={"step": 3, "value": 0.1})
    assert error_of(r) == (404, "not_found")
    paths = http.get("/openapi.json").json()["paths"]
    assert "post" in paths["/v1/experiments/{id}/suggestions/{suggestion_id}/reports"]


def test_the_http_client_reports_and_observes_a_stopped_trial(api: Api) -> None:
    with api.client() as c:
        exp = c.create_experiment("es-client", X, METRIC, parallel_bandwidth=2, strategy="random",
                                  early_stopping={"rule": "asha", "max_step": 9})
        s1, s2 = c.suggest(exp.id), c.suggest(exp.id)
        assert not c.report(exp.id, s1.id, 1, 0.1).should_stop
        decision = c.report(exp.id, s2.id, 1, 0.9)
        assert decision.should_stop and decision.reason and "asha" in decision.reason
        assert c.observe(exp.id, suggestion_id=s2.id, value=0.9, stopped=True).stopped_at_step == 1
        assert [(r.step, r.value) for r in c.reports(exp.id, s1.id)] == [(1, 0.1)]
        assert c.update_experiment(exp.id, early_stopping={"rule": "none"}).early_stopping == {"rule": "none"}


def test_issue_18_19_14_operations_are_client_methods_with_the_local_answers(api: Api) -> None:
    """pareto_front, observations(after=), summary, workers, importance and reports
    through the written-out Client over HTTP answer what the in-process driver does."""
    two = [{"name": "y", "objective": "minimize"}, {"name": "z", "objective": "maximize"}]
    points = [(0.1, 0.2, 1.0), (0.2, 0.1, 2.0), (0.3, 0.3, 0.5), (0.4, 0.4, 3.0)]

    def run(c: Client) -> list[Any]:
        exp = c.create_experiment("mo", X, metrics=two, parallel_bandwidth=4, strategy="random")
        for x, y, z in points:
            c.observe(exp.id, assignments={"x": x}, values={"y": y, "z": z})
        s = c.suggest(exp.id, tag="w1")
        c.report(exp.id, s.id, 1, 0.5)
        observed = c.observations(exp.id)
        newer = c.observations(exp.id, after=int(observed[1].id))
        summary, workers, importance = c.summary(exp.id), c.workers(exp.id), c.importance(exp.id)
        return [
            [o.assignments["x"] for o in c.pareto_front(exp.id)],
            [o.assignments["x"] for o in newer],
            (summary["experiment"].name, summary["observations"], summary["best_value"]),
            sorted((t["tag"], t["open"]) for t in workers["tags"]),
            (importance["method"], importance["observations"], sorted(p["name"] for p in importance["parameters"])),
            [(r.step, r.value) for r in c.reports(exp.id, s.id)],
        ]

    with Client(driver="local") as local, api.client() as remote:
        expected = run(local)
        assert expected[0] == [0.2, 0.4] and expected[1] == [0.3, 0.4]
        assert run(remote) == expected
        with pytest.raises(ApiError) as info:  # the REST API keeps reports under their suggestion
            remote.reports(remote.experiments()[0].id)
        assert info.value.error_type == "invalid_request" and "name the suggestion" in info.value.message
