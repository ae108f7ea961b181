"""Experiments a user can move, copy and remove: export / import (an exact round trip,
in process, over HTTP and through the CLI, between a memory store and a SQLite file),
delete (refused while suggestions are open unless forced) and unarchive."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from tauopt import ApiError, Client
from tauopt.cli import main
from test_http_support import served_with_token

SPEC: dict[str, Any] = {
    "name": "moved",
    "parameters": [
        {"name": "x", "type": "double", "bounds": [0.0, 1.0]},
        {"name": "act", "type": "categorical", "values": ["relu", "tanh"]},
    ],
    "metrics": [{"name": "loss", "objective": "minimize"}, {"name": "mem", "constraint": {"<=": 4.0}}],
    "early_stopping": {"rule": "median", "min_trials": 1, "grace_steps": 0},
    "parallel_bandwidth": 3,
    "strategy": "random",
    "strategy_options": {"seed": 3},
    "max_consecutive_failures": 5,
}


def history(c: Client) -> str:
    """An experiment with every kind of record: observed with all metrics, stopped early
    after reports, failed, closed, unsolicited, and one left open with a tag."""
    exp = c.create_experiment(**SPEC)
    a = c.suggest(exp.id, tag="w-1")
    c.report(exp.id, a.id, 1, 0.8)
    c.observe(exp.id, suggestion_id=a.id, values={"loss": 0.5, "mem": 2.0}, metrics={"epochs": 3})
    b = c.suggest(exp.id, tag="w-2")
    c.report(exp.id, b.id, 1, 0.9)
    c.observe(exp.id, suggestion_id=b.id, stopped=True, values={"loss": 0.9, "mem": 1.0})
    c.observe(exp.id, suggestion_id=c.suggest(exp.id).id, failed=True)
    c.close_suggestion(exp.id, c.suggest(exp.id).id)
    c.observe(exp.id, assignments={"x": 0.25, "act": "tanh"}, values={"loss": 0.1, "mem": 9.0})
    c.suggest(exp.id, tag="still-running")
    return exp.id


def without_ids(doc: dict[str, Any]) -> dict[str, Any]:
    """The document with what an import changes (the id, the owner) taken out."""
    out = json.loads(json.dumps(doc))
    out["experiment"].pop("id")
    out["experiment"].pop("owner", None)
    for key in ("suggestions", "observations"):
        for d in out[key]:
            d.pop("experiment_id")
    return out


def test_export_then_import_into_a_sqlite_file_is_an_exact_round_trip(tmp_path: Path) -> None:
    with Client(driver="local") as memory:
        source = history(memory)
        exported = memory.export_experiment(source)
    assert exported["format"] == "tauopt.experiment" and len(exported["suggestions"]) == 5
    assert [r["step"] for r in exported["reports"]] == [1, 1] and exported["observations"][0]["metrics"]["mem"] == 2.0
    with Client(driver="local", store=str(tmp_path / "copy.db")) as local:
        copy = local.import_experiment(json.loads(json.dumps(exported)))  # through JSON, as a file carries it
    with Client(driver="local", store=str(tmp_path / "copy.db")) as reopened:  # what was stored, read back
        again = reopened.export_experiment(copy.id)
        assert reopened.experiment(copy.id).open_suggestions == 1
    assert copy.id != source
    assert without_ids(again) == without_ids(exported)


def test_an_imported_history_warm_starts_the_strategy_like_observed_points() -> None:
    grid = {"name": "g", "parameters": [{"name": "k", "type": "int", "bounds": [1, 4]}], "metric": {"name": "y"}, "strategy": "grid"}
    with Client(driver="local") as c:
        exp = c.create_experiment(**grid)
        for _ in range(3):
            c.observe(exp.id, suggestion_id=c.suggest(exp.id).id, value=1.0)
        copy = c.import_experiment(c.export_experiment(exp.id))
        last = c.suggest(copy.id)  # the three imported points are used: only the fourth is left
        seen = {o.assignments["k"] for o in c.observations(copy.id)}
        assert last.assignments["k"] not in seen and len(seen) == 3
        with pytest.raises(ApiError) as used_up:
            c.suggest(copy.id)
        assert used_up.value.error_type in ("space_exhausted", "bandwidth_full")


def test_import_refuses_what_is_not_an_export_saying_what_to_give() -> None:
    with Client(driver="local") as c:
        exp = c.create_experiment(**SPEC)
        doc = c.export_experiment(exp.id)
        for bad, says in (
            ({"name": "x"}, "export_experiment"),
            (dict(doc, version=99), "version 99"),
            (dict(doc, experiment=dict(doc["experiment"], parallel_bandwidth=0)), "parallel_bandwidth"),
            (dict(doc, observations=[{"id": "1"}]), "export it again"),
        ):
            with pytest.raises(ApiError) as refused:
                c.import_experiment(bad)
            assert refused.value.error_type == "invalid_request" and says in refused.value.message, refused.value.message
        assert [e.id for e in c.experiments()] == [exp.id]  # nothing half-imported


def test_delete_is_refused_while_suggestions_are_open_unless_forced_and_removes_everything() -> None:
    with Client(driver="local") as c:
        exp = c.create_experiment(**SPEC)
        keep = c.create_experiment(**SPEC)
        c.observe(exp.id, suggestion_id=c.suggest(exp.id).id, values={"loss": 1.0, "mem": 1.0})
        c.suggest(exp.id)
        with pytest.raises(ApiError) as refused:
            c.delete_experiment(exp.id)
        assert (refused.value.status_code, refused.value.error_type) == (409, "suggestions_open")
        assert "close_all_suggestions" in refused.value.message and "force" in refused.value.message
        assert c.delete_experiment(exp.id, force=True).id == exp.id
        with pytest.raises(ApiError) as gone:
            c.suggest(exp.id)
        assert gone.value.error_type == "not_found"
        assert [e.id for e in c.experiments()] == [keep.id]


def test_unarchive_reverses_an_archive() -> None:
    with Client(driver="local") as c:
        exp = c.create_experiment(**dict(SPEC, observation_budget=1))
        c.archive_experiment(exp.id)
        assert c.unarchive_experiment(exp.id).state == "active"
        c.observe(exp.id, suggestion_id=c.suggest(exp.id).id, values={"loss": 1.0, "mem": 1.0})
        c.archive_experiment(exp.id)
        assert c.unarchive_experiment(exp.id).state == "completed"  # its budget is used up


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, str]]:
    with served_with_token("mover") as running:
        yield running


def test_the_same_over_http(server: tuple[str, str], tmp_path: Path) -> None:
    url, token = server
    with Client(driver="http", base_url=url, token=token) as c:
        source = history(c)
        exported = c.export_experiment(source)
        copy = c.import_experiment(exported)
        assert without_ids(c.export_experiment(copy.id)) == without_ids(exported)
        with pytest.raises(ApiError) as refused:
            c.delete_experiment(copy.id)
        assert (refused.value.status_code, refused.value.error_type) == (409, "suggestions_open")
        assert c.delete_experiment(copy.id, force=True).id == copy.id
        assert copy.id not in [e.id for e in c.experiments()]
        c.archive_experiment(source)
        assert c.unarchive_experiment(source).state == "active"
    # and a daemon's experiment moves to a file through the CLI
    env_out = tmp_path / "moved.json"
    code = main(["experiments", "export", source, "--url", url, "--token-file", _token_file(tmp_path, token), "--out", str(env_out)])
    assert code == 0
    assert without_ids(json.loads(env_out.read_text())) == without_ids(exported)
    with Client(driver="http", base_url=url, token=token) as c:
        # update_experiment(parameters=) is not in-process only: it adds a parameter over HTTP too
        wider = c.update_experiment(source, parameters=[*SPEC["parameters"], {"name": "k", "type": "int", "bounds": [1, 2], "default": 1}])
        assert [p.name for p in wider.parameters] == ["x", "act", "k"]


def _token_file(tmp_path: Path, token: str) -> str:
    path = tmp_path / "token"
    path.write_text(token)
    return str(path)


def test_cli_export_import_delete_on_files(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    src, dst = tmp_path / "src.db", tmp_path / "dst.db"
    with Client(driver="local", store=str(src)) as c:
        source = history(c)
        exported = c.export_experiment(source)
    with Client(driver="local", store=str(dst)):
        pass
    assert main(["experiments", "export", source, "--db", str(src), "--out", str(tmp_path / "e.json")]) == 0
    assert main(["experiments", "import", str(tmp_path / "e.json"), "--db", str(dst)]) == 0
    copy = capsys.readouterr().out.strip()
    assert main(["experiments", "export", copy, "--db", str(dst)]) == 0
    assert without_ids(json.loads(capsys.readouterr().out)) == without_ids(exported)

    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    assert main(["experiments", "delete", copy, "--db", str(dst), "--force"]) == 1
    assert "nothing deleted" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    assert main(["experiments", "delete", copy, "--db", str(dst)]) == 1  # the question says yes, the engine no
    assert "suggestions_open" in capsys.readouterr().err
    assert main(["experiments", "delete", copy, "--db", str(dst), "--yes", "--force"]) == 0
    assert capsys.readouterr().out.strip() == copy
    with Client(driver="local", store=str(dst)) as c:
        assert c.experiments() == []
