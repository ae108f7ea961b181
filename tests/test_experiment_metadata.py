"""An experiment's `metadata` (key -> text, number or boolean), given through
create_experiment's `spec` and replaced whole by update_experiment (with `description`,
in process, over HTTP and by `tauopt experiments update`): kept by the store across a
restart, returned by every read and listing, carried by export/import, shown by
`tauopt experiments show`, and refused with `invalid_request` naming the field when it
is not — with the same message at create and update, in process and over HTTP. Also
the rules of `spec=` itself: keywords beside it, integral floats, an `ExperimentSpec`."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx
import pytest

from tauopt import ApiError, Client, Engine
from tauopt.cli import main
from tauopt.limits import MAX_METADATA_KEYS
from tauopt.models import Experiment, Metric
from tauopt.schema import ExperimentSpec

from test_http_support import served_with_token

X = [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}]
M = {"name": "y", "objective": "minimize"}
META = {"team": "vision", "dataset": "imagenet-1k", "gpus": 8, "lr_scale": 0.5, "pinned": True, "note": "é, 学习率"}
SPEC = {"name": "e", "parameters": X, "metric": M, "metadata": META}
BAD = [
    ("tags", "metadata: give an object of key to text, number or boolean, got str"),
    ({"x": [1, 2]}, "metadata['x']: [1, 2] is a list; use a str, int, float or bool"),
    ({"x": None}, "metadata['x']: None is a NoneType; use a str, int, float or bool"),
    ({"": 1}, "metadata: a key is 1-128 characters, got ''"),
    ({"k" * 129: 1}, "metadata: a key is 1-128 characters"),
    ({"x": "v" * 1025}, "metadata['x']: 1025 characters is over the limit of 1024; shorten it"),
    ({"x": 2**63}, "metadata['x']: 9223372036854775808 is outside the signed 64-bit range"),
    ({str(i): i for i in range(MAX_METADATA_KEYS + 1)}, f"metadata: {MAX_METADATA_KEYS + 1} keys is over the limit of {MAX_METADATA_KEYS}"),
]

pytestmark = pytest.mark.anyio


async def test_it_is_kept_listed_read_back_after_a_restart_and_carried_by_export(tmp_path: Path) -> None:
    db = str(tmp_path / "d.db")
    async with Engine(store=db, pool=None) as engine:
        exp = await engine.create_experiment(spec=SPEC)
        plain = await engine.create_experiment("f", X, M)
        assert exp.metadata == META and plain.metadata == {}
    async with Engine(store=db, pool=None) as engine:
        assert (await engine.experiment(exp.id)).metadata == META
        assert {e.id: e.metadata for e in await engine.experiments()} == {exp.id: META, plain.id: {}}
        doc = json.loads(json.dumps(await engine.export_experiment(exp.id)))
        assert doc["experiment"]["metadata"] == META
        assert (await engine.import_experiment(doc)).metadata == META


def test_an_experiment_written_before_the_field_reads_as_empty() -> None:
    d = Experiment("1", "e", (), Metric("y")).to_dict()
    del d["metadata"]
    assert Experiment.from_dict(d).metadata == {}


@pytest.mark.parametrize("bad,says", BAD)
async def test_bad_metadata_is_refused_naming_the_field_and_nothing_is_kept(bad: object, says: str) -> None:
    async with Engine(pool=None) as engine:
        with pytest.raises(ApiError) as got:
            await engine.create_experiment(spec={**SPEC, "metadata": bad})
        assert got.value.error_type == "invalid_request" and got.value.message.startswith(says), got.value.message
        assert await engine.experiments() == []


async def test_spec_takes_the_keywords_beside_it_and_refuses_a_field_given_twice() -> None:
    async with Engine(pool=None) as engine:
        exp = await engine.create_experiment(spec=SPEC, parallel_bandwidth=3, description="d")
        assert (exp.parallel_bandwidth, exp.description, exp.metadata) == (3, "d", META)
        # a keyword left at its default does not override the spec
        assert (await engine.create_experiment(spec={**SPEC, "parallel_bandwidth": 4}, parallel_bandwidth=1)).parallel_bandwidth == 4
        with pytest.raises(ApiError, match=r"name: given both in spec and as a keyword; give it once$"):
            await engine.create_experiment("other", spec=SPEC)
        with pytest.raises(ApiError, match=r"metadta: Extra inputs are not permitted$"):
            await engine.create_experiment(spec={**SPEC, "metadta": {}})
        with pytest.raises(ApiError, match=r"spec: give an ExperimentSpec or a dict of its fields, got list$"):
            await engine.create_experiment(spec=[SPEC])  # type: ignore[arg-type]
        typed = ExperimentSpec.judge(SPEC)  # a typed spec, judged once already, is taken as it is
        again = await engine.create_experiment(spec=typed)
        assert (again.metadata, again.metrics, again.parameters) == (META, exp.metrics, exp.parameters)


async def test_an_integral_float_is_its_integer_in_every_integer_field_in_process() -> None:
    # JSON has one number type, so the rule is the same in process as over HTTP (below)
    async with Engine(pool=None) as engine:
        exp = await engine.create_experiment(
            "e", X, M, parallel_bandwidth=2.0, observation_budget=10.0, max_consecutive_failures=3.0,  # type: ignore[arg-type]
            strategy_options={"seed": 7.0}, early_stopping={"rule": "median", "min_trials": 4.0},
        )  # fmt: skip
        assert (exp.parallel_bandwidth, exp.observation_budget, exp.max_consecutive_failures) == (2, 10, 3)
        assert exp.strategy_options.seed == 7 and exp.early_stopping["min_trials"] == 4
        assert all(type(v) is int for v in (exp.parallel_bandwidth, exp.strategy_options.seed, exp.early_stopping["min_trials"]))
        with pytest.raises(ApiError, match=r"parallel_bandwidth: give an integer >= 1, got 2.5$"):
            await engine.create_experiment("e", X, M, parallel_bandwidth=2.5)  # type: ignore[arg-type]


def test_over_http_through_the_client_and_the_raw_api_with_the_same_messages() -> None:
    with served_with_token() as (url, token), Client(driver="http", base_url=url, token=token) as client:
        exp = client.create_experiment(spec=SPEC)
        assert exp.metadata == META and client.experiment(exp.id).metadata == META
        assert [e.metadata for e in client.experiments()] == [META]
        typed = client.create_experiment(spec=ExperimentSpec.judge({**SPEC, "name": "typed"}), description="d")
        assert (typed.name, typed.description, typed.metadata) == ("typed", "d", META)
        auth = {"authorization": f"Bearer {token}"}
        raw = httpx.post(url + "/v1/experiments", json={**SPEC, "parallel_bandwidth": 2.0, "strategy_options": {"seed": 1.0}},
                         headers=auth, timeout=30)  # fmt: skip
        assert raw.status_code == 201 and raw.json()["metadata"] == META and raw.json()["parallel_bandwidth"] == 2
        assert httpx.get(url + f"/v1/experiments/{raw.json()['id']}", headers=auth, timeout=30).json()["metadata"] == META
        for bad, says in BAD:
            with pytest.raises(ApiError) as got:
                client.create_experiment(spec={**SPEC, "metadata": bad})
            assert got.value.error_type == "invalid_request" and got.value.message.startswith(says), got.value.message
        document = httpx.get(url + "/openapi.json", timeout=30).json()["components"]["schemas"]
        assert document["ExperimentSpec"]["properties"]["metadata"]["anyOf"][0]["maxProperties"] == MAX_METADATA_KEYS
        assert "metadata" in document["ExperimentOut"]["required"]


def test_a_spec_file_carries_it_and_experiments_show_prints_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, spec = tmp_path / "d.db", tmp_path / "spec.json"
    with Client(driver="local", store=str(db)):
        pass
    spec.write_text(json.dumps({**SPEC, "metadata": {"team": "vision", "note": "two\nlines"}}))
    assert main(["experiments", "create", "--spec", str(spec), "--db", str(db)]) == 0
    made = capsys.readouterr().out.strip()
    assert main(["experiments", "show", made, "--db", str(db)]) == 0
    shown = capsys.readouterr().out
    assert shown.splitlines()[1] == '  metadata     {"team": "vision", "note": "two\\nlines"}', shown  # escaped: one row


NEW = {"team": "speech", "gpus": 4}


async def test_update_replaces_the_whole_dict_and_the_description_kept_after_a_restart(tmp_path: Path) -> None:
    db = str(tmp_path / "d.db")
    async with Engine(store=db, pool=None) as engine:
        exp = await engine.create_experiment(spec={**SPEC, "description": "d"})
        changed = await engine.update_experiment(exp.id, metadata=NEW, description="what it is for")
        assert (changed.metadata, changed.description, changed.name) == (NEW, "what it is for", "e")
        # a field left out stays as it is
        assert (await engine.update_experiment(exp.id, parallel_bandwidth=2)).metadata == NEW
        other = await engine.create_experiment(spec=SPEC)
        cleared = await engine.update_experiment(other.id, metadata=None, description=None)
        assert (cleared.metadata, cleared.description) == ({}, None)
    async with Engine(store=db, pool=None) as engine:
        again = await engine.experiment(exp.id)
        assert (again.metadata, again.description, again.parallel_bandwidth) == (NEW, "what it is for", 2)
        assert (await engine.experiment(other.id)).metadata == {}
        assert (await engine.update_experiment(other.id, metadata={})).metadata == {}


@pytest.mark.parametrize("bad,says", BAD)
async def test_a_bad_update_is_refused_with_the_rule_s_message_and_nothing_changes(bad: object, says: str) -> None:
    async with Engine(pool=None) as engine:
        exp = await engine.create_experiment(spec=SPEC)
        with pytest.raises(ApiError) as got:
            await engine.update_experiment(exp.id, metadata=bad)  # type: ignore[arg-type]
        assert got.value.error_type == "invalid_request" and got.value.message.startswith(says), got.value.message
        assert (await engine.experiment(exp.id)).metadata == META
        with pytest.raises(ApiError, match=r"description: give a string \(or null for none\), got int$"):
            await engine.update_experiment(exp.id, description=3)  # type: ignore[arg-type]


def test_update_over_http_through_the_client_and_a_raw_patch() -> None:
    with served_with_token() as (url, token), Client(driver="http", base_url=url, token=token) as client:
        exp = client.create_experiment(spec=SPEC)
        changed = client.update_experiment(exp.id, metadata=NEW, description="d")
        assert (changed.metadata, changed.description) == (NEW, "d")
        assert client.experiment(exp.id).metadata == NEW
        auth = {"authorization": f"Bearer {token}"}
        raw = httpx.patch(url + f"/v1/experiments/{exp.id}", json={"metadata": {"a": 1.0}}, headers=auth, timeout=30)
        assert raw.status_code == 200 and raw.json()["metadata"] == {"a": 1} and raw.json()["description"] == "d"
        cleared = httpx.patch(url + f"/v1/experiments/{exp.id}", json={"metadata": None, "description": None}, headers=auth, timeout=30)
        assert cleared.status_code == 200 and (cleared.json()["metadata"], cleared.json()["description"]) == ({}, None)
        for bad, says in BAD:
            with pytest.raises(ApiError) as got:
                client.update_experiment(exp.id, metadata=bad)  # type: ignore[arg-type]
            assert got.value.error_type == "invalid_request" and got.value.message.startswith(says), got.value.message
        assert client.experiment(exp.id).metadata == {}
        document = httpx.get(url + "/openapi.json", timeout=30).json()["components"]["schemas"]
        answered = document["ExperimentOut"]["properties"]["metadata"]
        assert answered["type"] == "object" and "anyOf" not in answered  # always an object, never null
        assert document["UpdateExperimentBody"]["properties"]["metadata"]["anyOf"][0]["maxProperties"] == MAX_METADATA_KEYS


def test_experiments_update_replaces_it_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "d.db")
    with Client(driver="local", store=db) as client:
        exp = client.create_experiment(spec=SPEC)
    assert main(["experiments", "update", exp.id, "--metadata", json.dumps(NEW), "--description", "d", "--db", db]) == 0
    with Client(driver="local", store=db) as client:
        assert (client.experiment(exp.id).metadata, client.experiment(exp.id).description) == (NEW, "d")
    capsys.readouterr()
    assert main(["experiments", "update", exp.id, "--metadata", '"tags"', "--db", db]) != 0
    assert "metadata: give an object of key to text, number or boolean, got str" in capsys.readouterr().err
