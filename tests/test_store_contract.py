"""One contract, every Store: MemoryStore, SqliteStore and PostgresStore must answer alike
(PostgreSQL: a real throwaway cluster, tests/postgres_support.py)."""

from __future__ import annotations

from dataclasses import replace

from pathlib import Path
from typing import AsyncIterator

import anyio
import pytest

from tauopt.store import (
    CredentialRecord,
    DeleteExperiment,
    MemoryStore,
    PutCounters,
    PutCredential,
    PutExperiment,
    PutObservation,
    PutRecord,
    PutReport,
    PutSuggestion,
    RevokeCredential,
    Store,
    StoreError,
)
from tauopt.models import Experiment, Metric, Observation, Parameter, Report, Suggestion
from tauopt.schema import parse_parameter

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the SQLite store answers an asyncio loop from its connections' threads


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "memory":
        s: Store = MemoryStore()
    elif request.param == "sqlite":
        from tauopt.store._sqlite import SqliteStore

        s = SqliteStore(tmp_path / "contract.db")
    else:
        from tauopt.store._postgresql import PostgresStore

        s = PostgresStore(request.getfixturevalue("pg_url"), pool_size=2)
    async with s:
        yield s


def experiment(eid: str = "e1", owner: str | None = "alice", state: str = "active", **kw: object) -> Experiment:
    return Experiment(
        id=eid,
        name=f"name of {eid}",
        parameters=(
            parse_parameter({"name": "lr", "type": "double", "bounds": [1e-5, 1.0], "scale": "log"}),
            parse_parameter({"name": "act", "type": "categorical", "values": ["relu", "tanh", 3, True]}),
        ),
        metric=Metric("loss"),
        parallel_bandwidth=4,
        suggestion_ttl_s=30.0,
        state=state,  # type: ignore[arg-type]
        created_at=1000.5,
        owner=owner,
        **kw,  # type: ignore[arg-type]
    )


def suggestion(sid: str, eid: str = "e1", state: str = "open", tag: str | None = "w1", at: float = 1001.0) -> Suggestion:
    return Suggestion(sid, eid, {"lr": 0.01, "act": True}, state, tag, at)  # type: ignore[arg-type]


def cred(cid: str, token_hash: str, **kw: object) -> CredentialRecord:
    return CredentialRecord(cid, f"{cid} name", token_hash, 50.0, **kw)  # type: ignore[arg-type]


async def test_unknown_experiment_loads_as_none(store: Store) -> None:
    assert await store.load("nope") is None
    assert not await store.has_experiment("nope")


async def test_load_returns_what_was_written(store: Store) -> None:
    e = experiment()
    s1, s2 = suggestion("s1"), suggestion("s2", tag=None)
    o = Observation("o1", "e1", "s1", {"lr": 0.01, "act": True}, 0.25, False, 1002.0, {"acc": 0.9})
    await store.write([PutExperiment(e, drawn=7), PutSuggestion(s1), PutSuggestion(s2)])
    await store.write([PutObservation(o), PutSuggestion(s1.evolve(state="observed"))])
    snap = await store.load("e1")
    assert snap is not None
    assert snap.experiment == e and snap.drawn == 7
    assert snap.suggestions == (s1.evolve(state="observed"), s2)
    assert snap.observations == (o,)
    assert await store.has_experiment("e1")


async def test_delete_removes_an_experiment_and_its_history_and_nothing_else(store: Store) -> None:
    o = Observation("1", "e1", "s1", {"lr": 0.01, "act": True}, 0.25, False, 1002.0, {"acc": 0.9})
    await store.write([
        PutExperiment(experiment()), PutSuggestion(suggestion("s1")), PutObservation(o),
        PutReport("e1", Report("s1", 1, 0.5, 1001.5)), PutExperiment(experiment("e2")), PutSuggestion(suggestion("s1", "e2")),
    ])  # fmt: skip
    await store.write([PutSuggestion(suggestion("s2")), DeleteExperiment("e1")])  # a write before the delete, same batch
    assert await store.load("e1") is None and not await store.has_experiment("e1")
    assert [e.id for e in await store.list_experiments()] == ["e2"]
    assert await store.count_experiments("alice") == 1
    kept = await store.load("e2")
    assert kept is not None and [s.id for s in kept.suggestions] == ["s1"]
    await store.write([DeleteExperiment("nope")])  # an unknown id changes nothing
    await store.write([PutExperiment(experiment())])  # the id may be stored again, with no history left
    again = await store.load("e1")
    assert again is not None and (again.suggestions, again.observations, again.reports) == ((), (), ())


async def test_the_failure_cap_its_count_and_stopped_reason_round_trip_in_load_and_listing(store: Store) -> None:
    capped = experiment(max_consecutive_failures=3, consecutive_failures=3, stopped_reason="stopped after 3 failed runs")
    await store.write([PutExperiment(capped), PutExperiment(experiment("e2"))])
    snap = await store.load("e1")
    assert snap is not None and snap.experiment == capped
    listed = {e.id: e for e in await store.list_experiments()}
    assert (listed["e1"].max_consecutive_failures, listed["e1"].consecutive_failures, listed["e1"].stopped_reason) == (
        3, 3, "stopped after 3 failed runs",
    )
    assert (listed["e2"].max_consecutive_failures, listed["e2"].consecutive_failures, listed["e2"].stopped_reason) == (None, 0, None)


async def test_suggestions_keep_creation_order_across_state_changes(store: Store) -> None:
    await store.write([PutExperiment(experiment())])
    for i in range(5):
        await store.write([PutSuggestion(suggestion(f"s{i}", at=1000.0 + i))])
    await store.write([PutSuggestion(suggestion("s0", state="closed")), PutSuggestion(suggestion("s3", state="expired"))])
    snap = await store.load("e1")
    assert snap is not None
    assert [s.id for s in snap.suggestions] == ["s0", "s1", "s2", "s3", "s4"]
    assert [s.state for s in snap.suggestions] == ["closed", "open", "open", "expired", "open"]


async def test_later_write_of_a_key_in_one_batch_wins(store: Store) -> None:
    e = experiment()
    await store.write([PutExperiment(e, 1), PutExperiment(e.evolve(observations=3), 2), PutSuggestion(suggestion("s1")),
                       PutSuggestion(suggestion("s1", state="observed"))])  # fmt: skip
    snap = await store.load("e1")
    assert snap is not None
    assert snap.experiment.observations == 3 and snap.drawn == 2
    assert snap.suggestions == (suggestion("s1", state="observed"),)


async def test_records_load_with_their_experiment_and_list_by_key_the_latest_body_winning(store: Store) -> None:
    await store.write([PutExperiment(experiment("e1")), PutExperiment(experiment("e2"))])
    await store.write([PutRecord("e1", "study", '{"v": 1}'), PutRecord("e1", "trial/0", "NaN"),
                       PutRecord("e2", "study", '{"v": 2}'), PutRecord("e1", "study", '{"v": 3}')])  # fmt: skip
    snap = await store.load("e1")
    assert snap is not None and dict(snap.records) == {"study": '{"v": 3}', "trial/0": "NaN"}
    assert sorted(await store.records("study")) == [("e1", '{"v": 3}'), ("e2", '{"v": 2}')]
    assert await store.records("nothing") == []


async def test_observations_keep_arrival_order(store: Store) -> None:
    await store.write([PutExperiment(experiment())])
    obs = [Observation(f"o{i}", "e1", None, {"lr": 0.1 * (i + 1), "act": "relu"}, float(10 - i), created_at=5.0) for i in range(6)]
    obs.append(Observation("ofail", "e1", "s9", {"lr": 0.5, "act": 3}, None, True, 6.0))
    for o in obs:
        store.submit([PutObservation(o)], lambda exc: None)
    await store.write([])  # barrier
    snap = await store.load("e1")
    assert snap is not None and list(snap.observations) == obs


async def test_done_fires_in_submission_order_and_barrier_waits_for_earlier_batches(store: Store) -> None:
    await store.write([PutExperiment(experiment())])
    order: list[str] = []
    for i in range(20):
        store.submit([PutSuggestion(suggestion(f"s{i}"))], lambda exc, i=i: order.append(f"s{i}" if exc is None else "err"))
    await store.write([])
    assert order == [f"s{i}" for i in range(20)]
    snap = await store.load("e1")
    assert snap is not None and len(snap.suggestions) == 20


async def test_listing_filters_by_state_and_owner_in_creation_order(store: Store) -> None:
    await store.write([
        PutExperiment(experiment("a", owner="alice")),
        PutExperiment(experiment("b", owner="bob", state="archived")),
        PutExperiment(experiment("c", owner="alice", state="completed")),
        PutExperiment(experiment("d", owner=None)),
    ])  # fmt: skip
    await store.write([PutExperiment(experiment("a", owner="alice", state="archived"))])  # update keeps place
    ids = lambda es: [e.id for e in es]  # noqa: E731
    assert ids(await store.list_experiments()) == ["a", "b", "c", "d"]
    assert ids(await store.list_experiments(state="archived")) == ["a", "b"]
    assert ids(await store.list_experiments(owner="alice")) == ["a", "c", "d"]  # d is unowned: visible to all
    assert ids(await store.list_experiments(state="completed", owner="alice")) == ["c"]
    assert (await store.list_experiments(owner="bob"))[0] == experiment("b", owner="bob", state="archived")
    assert await store.count_experiments(None) == 2  # c, d
    assert await store.count_experiments("alice") == 1
    assert await store.count_experiments("alice", exclude_state="completed") == 1  # a (archived)
    assert await store.count_experiments("bob") == 0


async def test_listing_pages_by_cursor_with_filters_in_store_order(store: Store) -> None:
    names = {"a": "Resnet-1", "b": "resnet_2", "c": "vit", "d": "ResNet%3", "e": "resnet-4"}
    await store.write([PutExperiment(replace(experiment(i, owner="alice"), name=n)) for i, n in names.items()])
    await store.write([PutExperiment(replace(experiment("c", owner="alice", state="archived"), name="vit"))])
    ids = lambda es: [e.id for e in es]  # noqa: E731
    assert ids(await store.list_experiments(limit=2)) == ["a", "b"]
    assert ids(await store.list_experiments(after="b", limit=2)) == ["c", "d"]
    assert ids(await store.list_experiments(after="d", limit=2)) == ["e"]
    assert ids(await store.list_experiments(after="e")) == []
    assert ids(await store.list_experiments(after="absent")) == []
    assert ids(await store.list_experiments(state="active", after="a", limit=2)) == ["b", "d"]  # c is archived
    assert ids(await store.list_experiments(name="RESNET")) == ["a", "b", "d", "e"]
    assert ids(await store.list_experiments(name="resnet", after="b", limit=1)) == ["d"]
    # LIKE's wildcards in a name filter are literal characters
    assert ids(await store.list_experiments(name="%")) == ["d"]
    assert ids(await store.list_experiments(name="t_")) == ["b"]
    assert ids(await store.list_experiments(owner="bob")) == []
    # an exact name: case and every character count
    assert ids(await store.list_experiments(named="resnet_2")) == ["b"]
    assert ids(await store.list_experiments(named="Resnet")) == []
    assert ids(await store.list_experiments(state="archived", named="vit")) == ["c"]
    assert ids(await store.list_experiments(state="active", named="vit", owner="alice")) == []


async def test_active_strategies_page_in_store_order_reading_no_experiment(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    await store.write([
        PutExperiment(experiment("a", strategy="random")), PutExperiment(experiment("b", strategy="gp", state="archived")),
        PutExperiment(experiment("c", strategy="gp")), PutExperiment(experiment("d")),
        PutExperiment(experiment("e", owner=None, strategy="sobol")), PutExperiment(experiment("f", state="completed")),
    ])  # fmt: skip
    if not isinstance(store, MemoryStore):  # a database store reads the one field, decoding no experiment

        async def decoded(*args: object, **kw: object) -> list[Experiment]:
            raise AssertionError("active_strategies decoded whole experiments")

        monkeypatch.setattr(store, "list_experiments", decoded)
    assert await store.active_strategies(limit=2) == (["random", "gp"], "c")  # b is archived
    assert await store.active_strategies("c", 2) == (["auto", "sobol"], "e")  # d: the default strategy
    assert await store.active_strategies("e", 2) == ([], None)  # f is completed
    assert await store.active_strategies() == (["random", "gp", "auto", "sobol"], "e")
    assert await store.active_strategies("absent") == ([], None)


async def test_experiment_gauges_count_by_state_and_rank_the_busiest_not_archived(store: Store) -> None:
    await store.write([
        PutExperiment(experiment("a")), PutExperiment(experiment("b", state="completed")),
        PutExperiment(experiment("c", state="archived")), PutExperiment(experiment("d", owner=None)),
        PutExperiment(experiment("e")),
    ])  # fmt: skip
    await store.write([
        PutCounters("a", 1, 5, 6), PutCounters("c", 9, 9, 9), PutCounters("d", 3, 0, 3), PutCounters("e", 1, 7, 8),
    ])  # fmt: skip
    gauges = await store.experiment_gauges(3)
    assert dict(gauges.states) == {"active": 3, "completed": 1, "archived": 1}
    assert gauges.busiest == (("d", 3, 0), ("e", 1, 7), ("a", 1, 5))  # c is archived
    assert (await store.experiment_gauges(0)).busiest == ()


async def test_credentials_put_revoke_and_lookup_by_hash(store: Store) -> None:
    a = await store.put_credential(cred("c1", "h1", suggestions_per_day=10))
    await store.put_credential(cred("c2", "h2", max_active_experiments=3))
    assert a == cred("c1", "h1", suggestions_per_day=10)
    await store.revoke_credential("c1", revoked_at=77.0)
    await store.revoke_credential("unknown", revoked_at=78.0)  # changes nothing
    assert await store.credentials() == [cred("c1", "h1", suggestions_per_day=10, revoked_at=77.0),
                                         cred("c2", "h2", max_active_experiments=3)]  # fmt: skip
    assert await store.credential_by_hash("h2") == cred("c2", "h2", max_active_experiments=3)
    assert (await store.credential_by_hash("h1")).revoked_at == 77.0  # type: ignore[union-attr]
    assert await store.credential_by_hash("h3") is None


async def test_credential_accepts_any_object_with_the_fields(store: Store) -> None:
    class DoorCredential:
        id, name, token_hash, created_at = "c9", "ci", "h9", 12.0

    rec = await store.put_credential(DoorCredential())
    assert await store.credential_by_hash("h9") == rec == CredentialRecord("c9", "ci", "h9", 12.0)


async def test_duplicate_token_hash_fails_the_batch_and_keeps_nothing_of_it(store: Store) -> None:
    await store.put_credential(cred("c1", "same"))
    with pytest.raises(StoreError):
        await store.write([PutCredential(cred("c2", "other")), PutCredential(cred("c3", "same"))])
    assert [c.id for c in await store.credentials()] == ["c1"]
    await store.write([PutCredential(cred("c1", "rotated")), RevokeCredential("c1", 5.0)])  # same id may change hash
    assert await store.credentials() == [cred("c1", "rotated", revoked_at=5.0)]


async def test_suggestion_times_counts_every_state_for_the_owner_since_a_time(store: Store) -> None:
    await store.write([PutExperiment(experiment("a", owner="alice")), PutExperiment(experiment("b", owner="bob")),
                       PutExperiment(experiment("c", owner="alice"))])  # fmt: skip
    await store.write([
        PutSuggestion(suggestion("s1", "a", at=10.0)),
        PutSuggestion(suggestion("s2", "a", state="observed", at=30.0)),
        PutSuggestion(suggestion("s3", "b", at=40.0)),
        PutSuggestion(suggestion("s4", "c", state="expired", at=20.0)),
    ])  # fmt: skip
    assert await store.suggestion_times("alice", 15.0) == [20.0, 30.0]
    assert await store.suggestion_times("alice", 0.0) == [10.0, 20.0, 30.0]
    assert await store.suggestion_times("bob", 0.0) == [40.0]
    assert await store.suggestion_times("carol", 0.0) == []


async def test_write_waits_for_commit_from_many_tasks(store: Store) -> None:
    await store.write([PutExperiment(experiment())])

    async def worker(n: int) -> None:
        for i in range(10):
            await store.write([PutSuggestion(suggestion(f"s{n}-{i}"))])

    async with anyio.create_task_group() as tg:
        for n in range(16):
            tg.start_soon(worker, n)
    snap = await store.load("e1")
    assert snap is not None and len(snap.suggestions) == 160
