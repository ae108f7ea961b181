"""The /v1 endpoints the dashboard draws from, /metrics, and the dashboard's static
files, against a real uvicorn server on 127.0.0.1 and a real SQLite file."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

import anyio
import httpx
import pytest

from tauopt.engine._activity import SPARKLINE_POINTS
from tauopt.engine._auth import new_credential
from tauopt.store._sqlite import SqliteStore
from tauopt.models import Observation
from tauopt.transport._columns import ColumnsCache, observation_columns
from tauopt.transport.http._dashboard import CSP
from tauopt.transport.http._render import render_json
from tauopt.transport.http._server import create_app
from test_http_support import ServerThread

PARAMS = [
    {"name": "x", "type": "double", "bounds": [0.0, 1.0]},
    {"name": "noise", "type": "double", "bounds": [0.0, 1.0]},
    {"name": "act", "type": "categorical", "values": ["relu", "tanh"]},
]
METRIC = {"name": "loss", "objective": "minimize"}


class Served:
    def __init__(self, url: str, tokens: dict[str, str]) -> None:
        self.url = url
        self.tokens = tokens

    def http(self, who: str | None = "alice") -> httpx.Client:
        headers = {} if who is None else {"Authorization": f"Bearer {self.tokens[who]}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=10)


def _seed(path: Path) -> dict[str, str]:
    tokens: dict[str, str] = {}

    async def seed() -> None:
        async with SqliteStore(str(path)) as store:
            for name in ("alice", "bob"):
                cred, tokens[name] = new_credential(name)
                await store.put_credential(cred)

    anyio.run(seed)
    return tokens


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    db = tmp_path_factory.mktemp("insight") / "t.db"
    tokens = _seed(db)
    app = create_app(db=str(db), engine_options={"pool": "thread"}, metrics_token=None, metrics_top_experiments=2)
    with ServerThread(app) as server:
        yield Served(server.url, tokens)


def create(http: httpx.Client, **extra: Any) -> dict[str, Any]:
    body = {"name": "e", "parameters": PARAMS, "metric": METRIC, "strategy": "random", "parallel_bandwidth": 8, **extra}
    r = http.post("/v1/experiments", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def ask(http: httpx.Client, eid: str, tag: str | None = None) -> dict[str, Any]:
    r = http.post(f"/v1/experiments/{eid}/suggestions", json={"tag": tag})
    assert r.status_code == 201, r.text
    return r.json()


def tell(http: httpx.Client, eid: str, sid: str, value: float | None, failed: bool = False) -> dict[str, Any]:
    r = http.post(f"/v1/experiments/{eid}/observations", json={"suggestion_id": sid, "value": value, "failed": failed})
    assert r.status_code == 201, r.text
    return r.json()


def test_observations_after_returns_only_newer_ones(served: Served) -> None:
    with served.http() as http:
        eid = create(http)["id"]
        ids = [tell(http, eid, ask(http, eid)["id"], float(i))["id"] for i in range(5)]
        assert [o["id"] for o in http.get(f"/v1/experiments/{eid}/observations").json()] == ids
        assert [o["id"] for o in http.get(f"/v1/experiments/{eid}/observations", params={"after": ids[2]}).json()] == ids[3:]
        assert http.get(f"/v1/experiments/{eid}/observations", params={"after": ids[-1]}).json() == []
        assert [o["id"] for o in http.get(f"/v1/experiments/{eid}/observations", params={"after": 0}).json()] == ids
        bad = http.get(f"/v1/experiments/{eid}/observations", params={"after": -1})
        assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request"


def test_summary_has_best_failed_last_activity_and_a_best_so_far_line(served: Served) -> None:
    with served.http() as http:
        eid = create(http)["id"]
        empty = http.get(f"/v1/experiments/{eid}/summary").json()
        assert (empty["observations"], empty["failed"], empty["best_value"], empty["best_so_far"]) == (0, 0, None, [])
        assert empty["suggestions_by_state"] == {}
        values = [5.0, 3.0, None, 4.0, 1.0, 2.0]
        for v in values:
            tell(http, eid, ask(http, eid)["id"], v, failed=v is None)
        s = http.get(f"/v1/experiments/{eid}/summary").json()
        assert s["experiment"]["id"] == eid and s["experiment"]["observations"] == 6
        assert (s["observations"], s["failed"], s["best_value"]) == (6, 1, 1.0)
        assert s["best_so_far"] == [[1, 5.0], [2, 3.0], [5, 1.0], [6, 1.0]]
        assert s["last_activity"] >= s["experiment"]["created_at"]
        ask(http, eid)
        assert http.get(f"/v1/experiments/{eid}/summary").json()["suggestions_by_state"] == {"observed": 6, "open": 1}


def test_summary_line_is_thinned_for_long_histories(served: Served) -> None:
    with served.http() as http:
        eid = create(http, parallel_bandwidth=1)["id"]
        for i in range(SPARKLINE_POINTS * 2):
            tell(http, eid, ask(http, eid)["id"], float(-i))  # every observation improves
        line = http.get(f"/v1/experiments/{eid}/summary").json()["best_so_far"]
        assert len(line) <= SPARKLINE_POINTS + 1
        assert line[0] == [1, 0.0] and line[-1] == [SPARKLINE_POINTS * 2, float(-(SPARKLINE_POINTS * 2 - 1))]


def test_workers_view_counts_per_tag_and_lists_changes_after_a_cursor(served: Served) -> None:
    with served.http() as http:
        eid = create(http, suggestion_ttl_s=3600)["id"]
        a1, a2, b1 = ask(http, eid, "job-a"), ask(http, eid, "job-a"), ask(http, eid, "job-b")
        tell(http, eid, a1["id"], 1.0)
        tell(http, eid, a2["id"], None, failed=True)
        first = http.get(f"/v1/experiments/{eid}/workers").json()
        assert first["suggestion_ttl_s"] == 3600
        tags = {t["tag"]: t for t in first["tags"]}
        assert tags["job-a"] == {"tag": "job-a", "open": 0, "observed": 2, "closed": 0, "expired": 0, "failed": 1}
        assert tags["job-b"]["open"] == 1
        assert [s["id"] for s in first["open"]] == [b1["id"]] and first["open"][0]["age_s"] >= 0
        rows = {r["id"]: r for r in first["changes"]}
        assert set(rows) == {a1["id"], a2["id"], b1["id"]}
        assert rows[a1["id"]]["state"] == "observed" and rows[a1["id"]]["ended_at"] >= rows[a1["id"]]["created_at"]
        assert rows[b1["id"]]["ended_at"] is None
        # nothing changed: an empty page, same cursor
        again = http.get(f"/v1/experiments/{eid}/workers", params={"after": first["cursor"]}).json()
        assert again["changes"] == [] and again["cursor"] == first["cursor"]
        assert http.delete(f"/v1/experiments/{eid}/suggestions/{b1['id']}").status_code == 200
        c1 = ask(http, eid, None)
        later = http.get(f"/v1/experiments/{eid}/workers", params={"after": first["cursor"]}).json()
        assert [(r["id"], r["state"]) for r in later["changes"]] == [(b1["id"], "closed"), (c1["id"], "open")]
        assert {t["tag"]: t["closed"] for t in later["tags"]}["job-b"] == 1
        assert [t["tag"] for t in later["tags"]][-1] is None  # untagged last


def test_workers_and_summary_survive_a_restart_from_the_store(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    tokens = _seed(db)
    headers = {"Authorization": f"Bearer {tokens['alice']}"}
    with ServerThread(create_app(db=str(db), engine_options={"pool": "thread"})) as server:
        with httpx.Client(base_url=server.url, headers=headers, timeout=10) as http:
            eid = create(http)["id"]
            s1 = ask(http, eid, "w1")
            tell(http, eid, s1["id"], 2.0)
            ask(http, eid, "w1")
            before = (http.get(f"/v1/experiments/{eid}/workers").json(), http.get(f"/v1/experiments/{eid}/summary").json())
    with ServerThread(create_app(db=str(db), engine_options={"pool": "thread"})) as server:
        with httpx.Client(base_url=server.url, headers=headers, timeout=10) as http:
            workers = http.get(f"/v1/experiments/{eid}/workers").json()
            summary = http.get(f"/v1/experiments/{eid}/summary").json()
    assert workers["tags"] == before[0]["tags"]
    assert {r["id"]: r["state"] for r in workers["changes"]} == {r["id"]: r["state"] for r in before[0]["changes"]}
    assert (summary["best_value"], summary["best_so_far"]) == (before[1]["best_value"], before[1]["best_so_far"])


def test_importance_names_its_method_and_ranks_the_parameter_that_matters(served: Served) -> None:
    with served.http() as http:
        eid = create(http, strategy_options={"seed": 7})["id"]  # the same 60 points every run
        for _ in range(60):
            s = ask(http, eid)
            a = s["assignments"]
            tell(http, eid, s["id"], (a["x"] - 0.3) ** 2 * 10 + (2.0 if a["act"] == "tanh" else 0.0) + 0.001 * a["noise"])
        imp = http.get(f"/v1/experiments/{eid}/importance").json()
        assert imp["method"] == "binned_variance" and imp["observations"] == 60
        ranked = [p["name"] for p in imp["parameters"]]
        assert ranked == ["x", "act", "noise"]
        assert all(0.0 <= p["importance"] <= 1.0 for p in imp["parameters"])


def test_the_report_log_lists_every_curve_and_then_only_what_is_new(served: Served) -> None:
    with served.http() as http:
        eid = create(http)["id"]
        a, b = ask(http, eid, "w1"), ask(http, eid, "w2")
        for sid, step, value in ((a["id"], 1, 0.9), (b["id"], 1, 0.8), (a["id"], 2, 0.7)):
            r = http.post(f"/v1/experiments/{eid}/suggestions/{sid}/reports", json={"step": step, "value": value})
            assert r.status_code == 200, r.text
        log = http.get(f"/v1/experiments/{eid}/reports").json()
        assert log["cursor"] == 3
        assert [(r["suggestion_id"], r["step"], r["value"]) for r in log["reports"]] == [(a["id"], 1, 0.9), (b["id"], 1, 0.8), (a["id"], 2, 0.7)]
        assert http.get(f"/v1/experiments/{eid}/reports", params={"after": 3}).json() == {"cursor": 3, "reports": [], "more": False}
        http.post(f"/v1/experiments/{eid}/suggestions/{b['id']}/reports", json={"step": 5, "value": 0.5})
        new = http.get(f"/v1/experiments/{eid}/reports", params={"after": log["cursor"]}).json()
        assert new["cursor"] == 4 and [(r["suggestion_id"], r["step"]) for r in new["reports"]] == [(b["id"], 5)]
        bad = http.get(f"/v1/experiments/{eid}/reports", params={"after": -1})
        assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request"


def test_the_report_log_is_read_in_pages_with_a_limit(served: Served) -> None:
    with served.http() as http:
        eid = create(http)["id"]
        sid = ask(http, eid, "w1")["id"]
        for step in range(1, 8):
            r = http.post(f"/v1/experiments/{eid}/suggestions/{sid}/reports", json={"step": step, "value": 1.0 / step})
            assert r.status_code == 200, r.text
        pages, after = [], 0
        while True:
            page = http.get(f"/v1/experiments/{eid}/reports", params={"after": after, "limit": 3}).json()
            pages.append([r["step"] for r in page["reports"]])
            after = page["cursor"]
            if not page["more"]:
                break
        assert pages == [[1, 2, 3], [4, 5, 6], [7]] and after == 7
        assert http.get(f"/v1/experiments/{eid}/reports", params={"after": 7, "limit": 3}).json() == {
            "cursor": 7, "reports": [], "more": False}
        bad = http.get(f"/v1/experiments/{eid}/reports", params={"limit": 0})
        assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request"


def test_workers_with_a_limit_lists_only_the_latest_changed_suggestions(served: Served) -> None:
    with served.http() as http:
        eid = create(http)["id"]
        sids = [ask(http, eid, f"w{i % 2}")["id"] for i in range(6)]
        tell(http, eid, sids[0], 1.0)  # the oldest suggestion changed last
        full = http.get(f"/v1/experiments/{eid}/workers").json()
        assert [r["id"] for r in full["changes"]] == sids[1:] + sids[:1]  # in order of their latest change
        some = http.get(f"/v1/experiments/{eid}/workers", params={"limit": 2}).json()
        assert [r["id"] for r in some["changes"]] == [sids[5], sids[0]]
        assert some["cursor"] == full["cursor"] and some["tags"] == full["tags"]
        bad = http.get(f"/v1/experiments/{eid}/workers", params={"limit": 0})
        assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request"
        http.delete(f"/v1/experiments/{eid}/suggestions")  # leave no open ones: the module's /metrics test ranks by them


def test_insight_endpoints_follow_ownership(served: Served) -> None:
    with served.http("alice") as alice, served.http("bob") as bob:
        eid = create(alice)["id"]
        for path in ("summary", "workers", "importance", "observations?after=0", "reports?after=0"):
            r = bob.get(f"/v1/experiments/{eid}/{path}")
            assert r.status_code == 404 and r.json()["error"]["type"] == "not_found", path
        with served.http(None) as anon:
            assert anon.get(f"/v1/experiments/{eid}/summary").status_code == 401


def test_openapi_documents_the_new_endpoints(served: Served) -> None:
    with served.http(None) as http:
        paths = http.get("/openapi.json").json()["paths"]
    for p in ("/v1/experiments/{id}/summary", "/v1/experiments/{id}/workers", "/v1/experiments/{id}/importance", "/v1/experiments/{id}/reports",
              "/v1/experiments/{id}/observations/columns"):
        assert "get" in paths[p]
    for listing in ("/v1/experiments/{id}/observations", "/v1/experiments/{id}/observations/columns"):
        assert "after" in {p["name"] for p in paths[listing]["get"]["parameters"]}
    columns = paths["/v1/experiments/{id}/observations/columns"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert columns  # its shape documented, though a full read is answered from pre-encoded bytes


# -- /metrics --------------------------------------------------------------------------


def sample(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = rf"^{re.escape(name)}{re.escape('{' + want + '}') if want else ''} (\S+)$"
    found = re.search(pattern, text, re.M)
    assert found, f"{name}{{{want}}} not in metrics"
    return float(found.group(1))


def test_metrics_count_asks_observations_and_429s_by_type(served: Served) -> None:
    with served.http() as http, served.http(None) as anon:
        eid = create(http, parallel_bandwidth=1)["id"]
        before = anon.get("/metrics").text
        s = ask(http, eid)
        full = http.post(f"/v1/experiments/{eid}/suggestions", json={})
        assert full.status_code == 429
        tell(http, eid, s["id"], 1.0)
        bad = http.post(f"/v1/experiments/{eid}/observations", json={"suggestion_id": s["id"], "value": 1.0})
        assert bad.status_code == 409
        r = anon.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    text = r.text

    def delta(name: str, **labels: str) -> float:
        try:
            old = sample(before, name, **labels)
        except AssertionError:
            old = 0.0
        return sample(text, name, **labels) - old

    assert delta("tauopt_asks_total", door="http", outcome="ok") == 1
    assert delta("tauopt_asks_total", door="http", outcome="bandwidth_full") == 1
    assert delta("tauopt_observations_total", door="http", outcome="ok") == 1
    assert delta("tauopt_observations_total", door="http", outcome="suggestion_observed") == 1
    assert delta("tauopt_rejections_429_total", type="bandwidth_full") == 1
    assert delta("tauopt_ask_seconds_count", door="http") == 2
    assert sample(text, "tauopt_store_commit_batches_count") > 0
    assert sample(text, "tauopt_store_commit_seconds_count") > 0
    assert sample(text, "tauopt_experiments", state="active") >= 1
    for name in ("tauopt_gp_fits_total", "tauopt_pool_queue_depth"):
        assert sample(text, name) >= 0


def test_metrics_token_guards_metrics_only(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _seed(db)
    with ServerThread(create_app(db=str(db), metrics_token="s3cret", engine_options={"pool": None})) as server:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            refused = http.get("/metrics")
            assert refused.status_code == 401 and refused.json()["error"]["type"] == "unauthorized"
            assert "--metrics-token" in refused.json()["error"]["message"]
            assert http.get("/metrics", headers={"Authorization": "Bearer nope"}).status_code == 401
            assert http.get("/metrics", headers={"Authorization": "Bearer s3cret"}).status_code == 200
            assert http.get("/v1/health").status_code == 200


# -- the dashboard's files ------------------------------------------------------------------


def test_dashboard_is_served_with_a_strict_csp_and_hashed_cacheable_assets(served: Served) -> None:
    with served.http(None) as http:
        index = http.get("/")
        assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
        assert index.headers["content-security-policy"] == CSP
        assert "unsafe-inline" not in CSP and "default-src 'self'" in CSP and "frame-ancestors 'none'" in CSP
        assert index.headers["cache-control"] == "no-cache"
        assert "<script>" not in index.text and " style=" not in index.text  # no inline code
        assets = re.findall(r'(?:src|href)="(/ui/[0-9a-f]{12}/[\w.-]+)"', index.text)
        assert {a.rsplit("/", 1)[1] for a in assets} == {"app.js", "style.css", "plotly-base.css", "plotly.min.js"}
        for path in assets:
            r = http.get(path)
            assert r.status_code == 200, path
            assert r.headers["cache-control"] == "public, max-age=31536000, immutable"
            assert r.headers["x-content-type-options"] == "nosniff"
        plotly = http.get(next(a for a in assets if a.endswith("plotly.min.js")))
        assert plotly.text.lstrip().startswith("/**") and "plotly.js v" in plotly.text[:200]
        stale = http.get("/ui/000000000000/app.js")
        assert stale.status_code == 404 and stale.json()["error"]["type"] == "not_found"
        assert http.get(assets[0].rsplit("/", 1)[0] + "/secrets.txt").status_code == 404


def test_dashboard_assets_go_gzipped_to_a_browser_that_accepts_it(served: Served) -> None:
    import gzip

    with served.http(None) as http:
        path = next(a for a in re.findall(r'src="(/ui/[0-9a-f]{12}/[\w.-]+)"', http.get("/").text) if a.endswith("plotly.min.js"))
        plain = http.get(path, headers={"Accept-Encoding": "identity"})
        assert "content-encoding" not in plain.headers and plain.headers["vary"] == "Accept-Encoding"
        for accept in ("gzip, deflate, br", "br;q=1.0, gzip;q=0.8"):
            with http.stream("GET", path, headers={"Accept-Encoding": accept}) as r:
                raw = b"".join(r.iter_raw())
            assert r.headers["content-encoding"] == "gzip" and r.headers["cache-control"] == "public, max-age=31536000, immutable"
            assert gzip.decompress(raw) == plain.content and len(raw) < len(plain.content) / 2
        refused = http.get(path, headers={"Accept-Encoding": "gzip;q=0, identity"})
        assert "content-encoding" not in refused.headers and refused.content == plain.content


def test_the_columnar_listing_carries_exactly_what_the_row_listing_does(served: Served) -> None:
    with served.http() as http:
        eid = create(http)["id"]
        for i in range(12):
            s = ask(http, eid)
            body: dict[str, Any] = {"suggestion_id": s["id"], "value": float(i), "metrics": {"aux": i * 2.0} if i % 3 else {}}
            if i == 5:
                body = {"suggestion_id": s["id"], "failed": True}
            assert http.post(f"/v1/experiments/{eid}/observations", json=body).status_code == 201
        for after in (0, 7):
            rows = http.get(f"/v1/experiments/{eid}/observations", params={"after": after}).json()
            cols = http.get(f"/v1/experiments/{eid}/observations/columns", params={"after": after}).json()
            assert cols["count"] == len(rows) and cols["id"] == [r["id"] for r in rows]
            rebuilt = [
                {"id": cols["id"][i], "experiment_id": eid, "suggestion_id": cols["suggestion_id"][i],
                 "assignments": {k: v[i] for k, v in cols["assignments"].items() if v[i] is not None},
                 "value": cols["value"][i], "failed": cols["failed"][i], "created_at": cols["created_at"][i],
                 "metrics": {k: v[i] for k, v in cols["metrics"].items() if v[i] is not None},
                 "stopped_at_step": cols["stopped_at_step"][i],
                 # `values`: `value` under the first objective's name, then the metrics
                 "values": ({} if cols["value"][i] is None else {"loss": cols["value"][i]})
                 | {k: v[i] for k, v in cols["metrics"].items() if v[i] is not None}}
                for i in range(cols["count"])
            ]  # fmt: skip
            assert rebuilt == rows
        with served.http("bob") as bob:
            assert bob.get(f"/v1/experiments/{eid}/observations/columns").status_code == 404


def test_the_plot_sample_is_cut_to_its_limit_with_the_exact_trace_and_follows_ownership(served: Served) -> None:
    with served.http() as http:
        eid = create(http)["id"]
        values = [5.0, 3.0, 4.0, 1.0, 2.0, 6.0, 0.5, 7.0, 8.0, 9.0, 3.0, 4.0]
        for v in values:
            assert http.post(f"/v1/experiments/{eid}/observations", json={"suggestion_id": ask(http, eid)["id"], "value": v}).status_code == 201
        cols = http.get(f"/v1/experiments/{eid}/observations/columns").json()
        r = http.get(f"/v1/experiments/{eid}/observations/sample", params={"limit": 5})
        assert r.status_code == 200, r.text
        s = r.json()
        assert s["total"] == 12 and s["count"] == 5 and len(s["position"]) == 5
        assert [cols["id"][p - 1] for p in s["position"]] == s["id"]  # each row at its place in the history
        assert s["best_trace"]["position"] == [1, 2, 4, 7] and s["best_trace"]["value"] == [5.0, 3.0, 1.0, 0.5]
        assert cols["id"][6] in s["id"] and s["id"][-1] == cols["id"][-1]  # the best and the latest
        whole = http.get(f"/v1/experiments/{eid}/observations/sample").json()
        assert whole["id"] == cols["id"] and whole["position"] == list(range(1, 13))
        bad = http.get(f"/v1/experiments/{eid}/observations/sample", params={"limit": 0})
        assert bad.status_code in (400, 422) and bad.json()["error"]["type"] == "invalid_request", bad.text
        with served.http("bob") as bob:
            assert bob.get(f"/v1/experiments/{eid}/observations/sample").status_code == 404


def test_the_full_columnar_listing_follows_a_growing_history_through_its_cache(served: Served) -> None:
    with served.http() as http:
        eid = create(http)["id"]
        for i in range(30):
            if i in (4, 11, 25):  # full reads in between: the cache is extended, not rebuilt
                full = http.get(f"/v1/experiments/{eid}/observations/columns")
                rows = http.get(f"/v1/experiments/{eid}/observations").json()
                assert full.json()["id"] == [r["id"] for r in rows] and full.json()["count"] == i
            s = ask(http, eid)
            body: dict[str, Any] = {"suggestion_id": s["id"], "value": i / 7, "metrics": {"late": 1.5} if i >= 20 else {}}
            assert http.post(f"/v1/experiments/{eid}/observations", json=body).status_code == 201
        cols = http.get(f"/v1/experiments/{eid}/observations/columns").json()
        assert cols == http.get(f"/v1/experiments/{eid}/observations/columns", params={"after": 0}).json()
        rows = http.get(f"/v1/experiments/{eid}/observations").json()
        assert cols["value"] == [r["value"] for r in rows] and cols["count"] == 30
        assert cols["metrics"]["late"] == [None] * 20 + [1.5] * 10  # a metric first seen late: back-filled with null


def _obs(i: int, **extra: Any) -> Observation:
    return Observation(str(i), "e", str(i), {"x": i / 3, "c": "a" if i % 2 else "b", **extra}, value=i * 0.1, created_at=1e9 + i)


def test_the_columns_cache_answers_the_bytes_a_fresh_encoding_would() -> None:
    cache, history = ColumnsCache(experiments=2), [_obs(i) for i in range(1, 8)]
    fresh = lambda obs: render_json(observation_columns(obs)).body  # noqa: E731
    assert cache.full("e", []) == fresh([])
    for n in (3, 3, 7):  # a first read, the same again, then grown
        assert cache.full("e", history[:n]) == fresh(history[:n])
    grown = history + [_obs(8, y=2.0), _obs(9)]  # a parameter first seen (conditional): encoded afresh
    assert cache.full("e", grown) == fresh(grown)
    other = [_obs(i + 100) for i in range(4)]  # not an extension of what was cached
    assert cache.full("e", other) == fresh(other)
    assert cache.full("f", history) == fresh(history) and cache.full("g", grown) == fresh(grown)
    assert cache.full("e", history[:2]) == fresh(history[:2])  # evicted (2 kept), then read again


def test_the_columns_cache_keeps_within_its_byte_budget_but_always_the_one_just_read() -> None:
    history = [_obs(i) for i in range(1, 200)]
    one = len(ColumnsCache().full("e", history))
    cache = ColumnsCache(experiments=8, max_bytes=int(one * 1.5))
    cache.full("a", history)
    cache.full("b", history)  # two would be over the budget: "a" goes
    assert "b" in cache and "a" not in cache
    tiny = ColumnsCache(max_bytes=10)
    assert tiny.full("a", history) == render_json(observation_columns(history)).body and "a" in tiny
