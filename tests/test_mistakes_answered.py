"""Plausible mistakes answered with what to do, the same in every door: a base_url
without a scheme, a rule given as a string over HTTP, an observation naming a metric
twice or one the experiment lacks, an unsolicited result after the budget, a server
that is not tauopt, a refused token= , NaN in a report, the daemon-is-running
refusals and the token commands' slips."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from tauopt import ApiError, Client
from tauopt.cli import main
from test_http_support import ServerThread, served_with_token

X = [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}]
TWO = [{"name": "loss", "objective": "minimize"}, {"name": "mem", "constraint": {"<=": 2.0}}]


@pytest.fixture(scope="module")
def daemon() -> Iterator[tuple[str, str]]:
    with served_with_token("me") as running:
        yield running


@pytest.fixture(params=["local", "http"])
def client(request: pytest.FixtureRequest, daemon: tuple[str, str]) -> Iterator[Client]:
    if request.param == "local":
        with Client(driver="local") as c:
            yield c
    else:
        with Client(driver="http", base_url=daemon[0], token=daemon[1]) as c:
            yield c


def refused(call: Any, *args: Any, **kwargs: Any) -> ApiError:
    with pytest.raises(ApiError) as info:
        call(*args, **kwargs)
    return info.value


def test_a_base_url_without_a_scheme_says_to_add_http() -> None:
    e = refused(Client, driver="http", base_url="127.0.0.1:8080", token="tau_x")
    assert e.error_type == "invalid_request" and "http://127.0.0.1:8080" in e.message


def test_a_rule_given_as_a_string_gets_the_engines_400_with_an_example(client: Client) -> None:
    e = refused(client.create_experiment, "e", X, {"name": "y"}, early_stopping="median")
    assert (e.status_code, e.error_type) == (400, "invalid_request")
    assert e.message == 'early_stopping: give an object such as {"rule": "median", "min_trials": 5}'


def test_observe_refuses_an_unknown_metric_and_one_metric_given_twice(client: Client) -> None:
    exp = client.create_experiment("e", X, metrics=TWO, parallel_bandwidth=4, strategy="random")
    s = client.suggest(exp.id)
    e = refused(client.observe, exp.id, suggestion_id=s.id, values={"loss": 1.0, "mem": 1.0, "lsos": 3.0})
    assert e.status_code == 400 and "['lsos'] not a metric of this experiment" in e.message and "metrics=" in e.message
    e = refused(client.observe, exp.id, suggestion_id=s.id, values={"loss": 1.0, "mem": 1.0}, metrics={"mem": 1.5})
    assert e.status_code == 400 and "'mem' is given twice with different values" in e.message
    assert client.observations(exp.id) == []  # nothing stored silently
    client.observe(exp.id, suggestion_id=s.id, values={"loss": 1.0, "mem": 1.0}, metrics={"mem": 1.0, "epochs": 3})


def test_an_unsolicited_observation_after_the_budget_answers_experiment_completed(client: Client) -> None:
    exp = client.create_experiment("e", X, {"name": "y"}, observation_budget=1, parallel_bandwidth=2, strategy="random")
    a, b = client.suggest(exp.id), client.suggest(exp.id)
    client.observe(exp.id, suggestion_id=a.id, value=1.0)
    e = refused(client.observe, exp.id, assignments={"x": 0.5}, value=2.0)
    assert (e.status_code, e.error_type) == (409, "experiment_completed")
    client.observe(exp.id, suggestion_id=b.id, value=0.5)  # an open suggestion's result is still taken
    assert len(client.observations(exp.id)) == 2


def test_suggestion_ids_are_taken_as_numbers_or_text_by_every_driver(client: Client) -> None:
    exp = client.create_experiment("e", X, {"name": "y"}, strategy="random")
    s = client.suggest(exp.id)
    assert client.observe(exp.id, suggestion_id=int(s.id), value=1.0).suggestion_id == s.id  # type: ignore[arg-type]


def test_the_rest_api_takes_a_suggestion_id_as_a_number_too(daemon: tuple[str, str]) -> None:
    url, token = daemon
    with Client(driver="http", base_url=url, token=token) as c:
        exp = c.create_experiment("e", X, {"name": "y"}, strategy="random")
        s = c.suggest(exp.id)
    r = httpx.post(
        f"{url}/v1/experiments/{exp.id}/observations", json={"suggestion_id": int(s.id), "value": 1.0},
        headers={"Authorization": f"Bearer {token}"}, timeout=30,
    )  # fmt: skip
    assert r.status_code == 201 and r.json()["suggestion_id"] == s.id, r.text


def test_nan_in_a_report_is_refused_without_suggesting_failed(client: Client) -> None:
    exp = client.create_experiment("e", X, {"name": "y"}, strategy="random")
    e = refused(client.report, exp.id, client.suggest(exp.id).id, 1, math.nan)
    assert e.status_code == 400 and "finite" in e.message and "failed" not in e.message


def test_a_refused_token_says_where_it_came_from(daemon: tuple[str, str]) -> None:
    with Client(driver="http", base_url=daemon[0], token="tau_not-a-token") as c:
        e = refused(c.experiments)
    assert e.error_type == "unauthorized" and "token=" in e.message and "TAUOPT_TOKEN" not in e.message


def test_a_refused_token_file_is_named_by_the_cli(daemon: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "old.token"
    bad.write_text("tau_revoked-long-ago")
    assert main(["experiments", "list", "--url", daemon[0], "--token-file", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tauopt: unauthorized:") and f"--token-file {bad}" in err and "token=" not in err


def _not_tauopt(request: Request) -> HTMLResponse:
    return HTMLResponse("<html><body><h1>Welcome to nginx!</h1></body></html>", status_code=404)


def _not_implemented(request: Request) -> HTMLResponse:
    return HTMLResponse("<html>Unsupported method</html>", status_code=501)


def test_a_server_that_is_not_tauopt_is_named_as_such() -> None:
    app = Starlette(routes=[
        Route("/v1/experiments", _not_tauopt, methods=["GET"]), Route("/v1/experiments", _not_implemented, methods=["POST"]),
    ])  # fmt: skip
    with ServerThread(app) as other, Client(driver="http", base_url=other.url, token="tau_x") as c:
        for e in (refused(c.experiments), refused(c.create_experiment, "e", X, {"name": "y"})):
            assert e.error_type == "not_found" and e.message.startswith(f"no tauopt API at {other.url}"), e.message
            assert "<html>" not in e.message and "base_url" in e.message


def test_changing_a_file_an_engine_holds_leads_with_the_commands_advice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "held.db")
    with Client(driver="local", store=db) as holder:
        exp = holder.create_experiment("e", X, {"name": "y"})
        assert main(["experiments", "archive", exp.id, "--db", db]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"tauopt: {db} is open in a running engine") and "--url" in err.splitlines()[0]
        assert main(["token", "transfer", "a", "b", "--db", db]) == 1
        assert capsys.readouterr().err.startswith("tauopt: stop `tauopt serve` first, transfer")


def test_token_names_are_unique_transfer_to_itself_is_refused_and_a_second_revoke_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "tokens.db")
    assert main(["token", "create", "--db", db, "--name", "ci", "--create"]) == 0
    capsys.readouterr()
    assert main(["token", "create", "--db", db, "--name", "ci"]) != 0
    assert "already named 'ci'" in capsys.readouterr().err
    assert main(["token", "transfer", "ci", "ci", "--db", db]) == 1
    assert "the same credential" in capsys.readouterr().err
    assert main(["token", "revoke", "ci", "--db", db]) == 0
    assert "revoked ci" in capsys.readouterr().err
    assert main(["token", "revoke", "ci", "--db", db]) == 0
    assert "ci was already revoked" in capsys.readouterr().err
