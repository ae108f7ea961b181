"""An experiment's `description`: free text for people, given at create, kept by every
store, returned by every read and listing, carried by export/import, and refused with
`invalid_request` naming the field when it is not storable text — in process and over HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio

import pytest

from tauopt import ApiError, Client, Engine
from tauopt.limits import MAX_DESCRIPTION_CHARS
from tauopt.models import Experiment, Metric

from test_http_support import served_with_token

X = [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}]
M = {"name": "y", "objective": "minimize"}
TEXT = "learning rate of the baseline\nsecond line: é, 学习率"
BAD = [(42, "give a string"), ("x" * (MAX_DESCRIPTION_CHARS + 1), "over the limit"), ("a\ud800b", "lone UTF-16 surrogate")]

pytestmark = pytest.mark.anyio


async def test_it_is_kept_listed_and_read_back_after_a_restart(tmp_path: Path) -> None:
    db = str(tmp_path / "d.db")
    async with Engine(store=db, pool=None) as engine:
        exp = await engine.create_experiment("e", X, M, description=TEXT)
        plain = await engine.create_experiment("f", X, M)
        assert exp.description == TEXT and plain.description is None
    async with Engine(store=db, pool=None) as engine:
        assert (await engine.experiment(exp.id)).description == TEXT
        assert {e.id: e.description for e in await engine.experiments()} == {exp.id: TEXT, plain.id: None}
        doc = await engine.export_experiment(exp.id)
        assert doc["experiment"]["description"] == TEXT
        assert (await engine.import_experiment(json.loads(json.dumps(doc)))).description == TEXT


async def test_postgresql_keeps_it(pg_url: str) -> None:
    async with Engine(store=pg_url, pool=None) as engine:
        exp = await engine.create_experiment("e", X, M, description=TEXT)
    async with Engine(store=pg_url, pool=None) as engine:
        assert (await engine.experiment(exp.id)).description == TEXT
        assert TEXT in [e.description for e in await engine.experiments()]


def test_experiments_show_prints_it(tmp_path: Path) -> None:
    db = str(tmp_path / "d.db")

    async def make() -> str:
        async with Engine(store=db, pool=None) as engine:
            return (await engine.create_experiment("e", X, M, description="lr sweep\nsecond line")).id

    eid = anyio.run(make)
    shown = subprocess.run([sys.executable, "-m", "tauopt.cli", "experiments", "show", eid, "--db", db],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[1] == "  description  lr sweep\\nsecond line", shown.stdout  # escaped: one row


def test_an_experiment_written_before_the_field_reads_as_none() -> None:
    d = Experiment("1", "e", (), Metric("y")).to_dict()
    del d["description"]
    assert Experiment.from_dict(d).description is None


@pytest.mark.parametrize("bad,says", BAD)
async def test_a_bad_description_is_refused_naming_the_field(bad: object, says: str) -> None:
    async with Engine(pool=None) as engine:
        with pytest.raises(ApiError) as got:
            await engine.create_experiment("e", X, M, description=bad)  # type: ignore[arg-type]
        assert got.value.error_type == "invalid_request" and got.value.message.startswith("description")
        assert says in got.value.message
        assert await engine.experiments() == []  # nothing kept


def test_over_http_through_the_client_and_the_raw_api() -> None:
    with served_with_token() as (url, token), Client(driver="http", base_url=url, token=token) as client:
        exp = client.create_experiment("e", X, M, description=TEXT)
        assert exp.description == TEXT and client.experiment(exp.id).description == TEXT
        assert [e.description for e in client.experiments()] == [TEXT]
        for bad, _ in BAD:
            with pytest.raises(ApiError) as got:
                client.create_experiment("e", X, M, description=bad)  # type: ignore[arg-type]
            assert got.value.error_type == "invalid_request" and "description" in got.value.message
        too_long = "x" * (MAX_DESCRIPTION_CHARS + 1)
        with pytest.raises(ApiError) as got:
            client.create_experiment("e", X, M, description=too_long)
        # the same message as in process: the rule is the engine's, once
        assert got.value.message == f"description: {MAX_DESCRIPTION_CHARS + 1} characters is over the limit of {MAX_DESCRIPTION_CHARS}; shorten it"
