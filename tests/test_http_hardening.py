"""What the HTTP door tells strangers and how long it lets them hold it (a real uvicorn
server on 127.0.0.1 over a real SQLite file): /metrics names no experiment without the
metrics token; /docs loads Swagger UI at one pinned version, integrity-checked, under a
strict CSP."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

import httpx
import pytest

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
