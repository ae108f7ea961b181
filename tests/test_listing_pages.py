"""Listings that grow without bound are read by cursor: GET /v1/experiments (state and
name filters, `after` = the last experiment id you have, `limit`, a Link to the next page
carrying the filters) and an experiment's observations (`failed` filter), through the
HTTP door, both client drivers and `tauopt experiments list`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from tauopt import ApiError, Client
from tauopt.client import _http as http_client
from tauopt.transport.http import _routes
from test_cli_experiments import tauopt
from test_http_support import served_with_token

X = [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}]
METRIC = {"name": "y", "objective": "minimize"}
NAMES = ["resnet-a", "vit-b", "ResNet-c", "resnet_d", "mlp-e"]


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, str, list[str]]]:
    """A server holding NAMES' experiments (vit-b archived): (url, token, their ids)."""
    with served_with_token() as (url, token):
        with Client(driver="http", base_url=url, token=token) as c:
            ids = [c.create_experiment(n, X, METRIC).id for n in NAMES]
            c.archive_experiment(ids[1])
        yield url, token, ids


def _get(url: str, token: str, path: str) -> httpx.Response:
    return httpx.get(url + path, headers={"Authorization": f"Bearer {token}"}, timeout=10)


def _read_on(url: str, token: str, path: str) -> list[list[str]]:
    """Every page's names, following each answer's Link."""
    pages = []
    while True:
        r = _get(url, token, path)
        assert r.status_code == 200, r.text
        pages.append([e["name"] for e in r.json()])
        if "next" not in r.links:
            return pages
        path = r.links["next"]["url"]


def test_the_experiment_list_is_read_page_by_page_with_its_filters_carried_on(served: tuple[str, str, list[str]]) -> None:
    url, token, ids = served
    assert _read_on(url, token, "/v1/experiments?limit=2") == [NAMES[:2], NAMES[2:4], NAMES[4:]]
    assert _read_on(url, token, "/v1/experiments?limit=2&name=RESNET") == [["resnet-a", "ResNet-c"], ["resnet_d"]]
    assert _read_on(url, token, "/v1/experiments?limit=2&state=active&name=e") == [["resnet-a", "ResNet-c"], ["resnet_d", "mlp-e"]]
    assert _read_on(url, token, f"/v1/experiments?after={ids[3]}") == [["mlp-e"]]
    assert _read_on(url, token, "/v1/experiments?name=_") == [["resnet_d"]]  # no wildcard


def test_a_bad_cursor_or_limit_is_refused_saying_what_to_do(served: tuple[str, str, list[str]]) -> None:
    url, token, _ = served
    r = _get(url, token, "/v1/experiments?after=0123456789abcdef")
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request"
    assert "list again without after" in r.json()["error"]["message"]
    for bad in ("limit=0", "limit=x", "after=", "name="):
        r = _get(url, token, f"/v1/experiments?{bad}")
        assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request", bad


def test_the_clients_page_and_filter_on_both_drivers(served: tuple[str, str, list[str]], tmp_path: Path) -> None:
    url, token, ids = served
    with Client(driver="http", base_url=url, token=token) as c:
        assert [e.name for e in c.experiments(limit=2, after=ids[0])] == NAMES[1:3]
        assert [e.name for e in c.experiments(state="active", name="resnet")] == ["resnet-a", "ResNet-c", "resnet_d"]
    with Client(driver="local", store=str(tmp_path / "local.db")) as c:
        local = [c.create_experiment(n, X, METRIC).id for n in NAMES]
        assert [e.name for e in c.experiments(limit=2, after=local[0])] == NAMES[1:3]
        assert [e.name for e in c.experiments(name="RESNET", limit=2)] == ["resnet-a", "ResNet-c"]
        with pytest.raises(ApiError) as info:
            c.experiments(limit=0)
        assert info.value.error_type == "invalid_request"


def test_the_http_client_reads_every_page_when_no_limit_is_given(
    served: tuple[str, str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, token, _ = served
    monkeypatch.setattr(_routes, "MAX_EXPERIMENTS_PAGE", 2)  # the server and the client in this process
    monkeypatch.setattr(http_client, "MAX_EXPERIMENTS_PAGE", 2)
    with Client(driver="http", base_url=url, token=token) as c:
        assert [e.name for e in c.experiments()] == NAMES
    assert len(_get(url, token, "/v1/experiments").json()) == 2


def test_observations_filter_by_failed_and_page_with_the_filter_carried_on(served: tuple[str, str, list[str]]) -> None:
    url, token, ids = served
    with Client(driver="http", base_url=url, token=token) as c:
        for i in range(5):
            s = c.suggest(ids[4])
            if i % 2:
                c.observe(ids[4], s.id, failed=True)
            else:
                c.observe(ids[4], s.id, value=float(i))
        assert [o.value for o in c.observations(ids[4], failed=False)] == [0.0, 2.0, 4.0]
        assert [o.failed for o in c.observations(ids[4], failed=True)] == [True, True]
        assert len(c.observations(ids[4], limit=2)) == 2
    r = _get(url, token, f"/v1/experiments/{ids[4]}/observations?failed=false&limit=2")
    assert [o["value"] for o in r.json()] == [0.0, 2.0] and "failed=false" in r.links["next"]["url"]
    r = _get(url, token, r.links["next"]["url"])
    assert [o["value"] for o in r.json()] == [4.0] and "next" not in r.links


def test_the_cli_lists_one_page_with_filters(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    with Client(driver="local", store=str(db)) as c:
        ids = [c.create_experiment(n, X, METRIC).id for n in NAMES]
    listed = json.loads(tauopt("experiments", "list", "--db", str(db), "--name", "resnet", "--limit", "2", "--json").stdout)
    assert [e["name"] for e in listed] == ["resnet-a", "ResNet-c"]
    listed = json.loads(tauopt("experiments", "list", "--db", str(db), "--after", ids[3], "--json").stdout)
    assert [e["name"] for e in listed] == ["mlp-e"]
    r = tauopt("experiments", "list", "--db", str(db), "--limit", "0")
    assert r.returncode == 2 and "positive integer" in r.stderr
