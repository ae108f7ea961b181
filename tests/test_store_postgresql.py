"""The PostgreSQL store beyond the contract suite: schema and migrations, lost
connections, a restarted server, a statement timeout, asyncio only. A real
throwaway cluster (tests/postgres_support.py); the contract itself runs in
tests/test_store_contract.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tauopt import ApiError, Engine
from tauopt.models import Experiment, Metric, Parameter, Suggestion
from tauopt.store import PutExperiment, PutSuggestion, StoreError, open_store
from tauopt.store._filewatch import StoreUnavailable
from tauopt.store._postgresql import MIGRATIONS, SCHEMA_VERSION, PostgresStore
from tauopt.schema import parse_parameter

pytestmark = pytest.mark.anyio

SPACE = [{"name": "x", "type": "double", "bounds": (0, 1)}]


def experiment(eid: str = "e1") -> Experiment:
    return Experiment(
        id=eid, name=eid, parameters=(parse_parameter({"name": "x", "type": "double", "bounds": [0, 1]}),),
        metric=Metric("y"), parallel_bandwidth=4, created_at=1.0,
    )  # fmt: skip


def suggestion(sid: str, eid: str = "e1") -> Suggestion:
    return Suggestion(sid, eid, {"x": 0.5}, "open", None, 2.0)


async def _terminate_tauopt_backends(pg_url: str) -> int:
    """Kill every server process serving a tauopt connection (as a server restart or a
    network cut would): the connections' next use finds them gone."""
    import asyncpg

    conn = await asyncpg.connect(pg_url)
    try:
        return int(await conn.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = 'tauopt' AND pid <> pg_backend_pid()"
        ))  # fmt: skip
    finally:
        await conn.close()


def test_the_schema_has_the_sqlite_stores_version_numbers() -> None:
    from tauopt.store import _sqlite

    assert SCHEMA_VERSION == _sqlite.SCHEMA_VERSION == len(MIGRATIONS)


def test_a_postgresql_url_gives_a_postgres_store_and_hides_its_password() -> None:
    store = open_store("postgresql://me:secret@db.example:5433/tauopt")
    assert isinstance(store, PostgresStore) and isinstance(open_store("postgres://db/tauopt"), PostgresStore)
    assert "secret" not in repr(store) and "me:***@db.example:5433" in repr(store)


async def test_the_engine_takes_a_postgresql_url_and_a_restart_finds_everything(pg_url: str) -> None:
    async with Engine(store=pg_url) as engine:
        exp = await engine.create_experiment("pg", SPACE, {"name": "y"}, parallel_bandwidth=2)
        s = await engine.suggest(exp.id)
        await engine.observe(exp.id, s.id, value=0.25)
        open_one = await engine.suggest(exp.id)
        await engine.update_experiment(exp.id, metadata={"team": "vision", "gpus": 8}, description="d")
    async with Engine(store=pg_url) as engine:
        again = await engine.experiment(exp.id)
        assert (again.observations, again.open_suggestions) == (1, 1)
        assert (again.metadata, again.description) == ({"team": "vision", "gpus": 8}, "d")  # an update is stored whole
        assert [o.value for o in await engine.observations(exp.id)] == [0.25]
        assert [x.id for x in await engine.suggestions(exp.id, state="open")] == [open_one.id]


async def test_migrations_run_once_when_several_stores_start_together(pg_url: str) -> None:
    stores = [PostgresStore(pg_url, pool_size=1, exclusive=False) for _ in range(3)]
    async with anyio.create_task_group() as writers:
        try:
            async with anyio.create_task_group() as starting:
                for s in stores:
                    starting.start_soon(s.start, writers)
            await stores[0].write([PutExperiment(experiment())])
            assert await stores[2].has_experiment("e1")
        finally:
            for s in stores:
                await s.aclose()


async def test_a_database_with_tauopts_table_names_but_no_version_is_refused_untouched(pg_cluster: Any) -> None:
    schema = pg_cluster.new_schema()
    pg_cluster.psql(f"CREATE TABLE {schema}.experiments (mine INT)")
    with pytest.raises(StoreError, match="not a tauopt store; it was left untouched"):
        async with PostgresStore(pg_cluster.url(search_path=schema)):
            pass
    assert pg_cluster.psql(f"SELECT count(*) FROM pg_tables WHERE schemaname = '{schema}'") == "1"


async def test_a_newer_schema_version_is_refused_untouched(pg_url: str, pg_cluster: Any) -> None:
    async with PostgresStore(pg_url):
        pass
    schema = pg_url.rsplit("search_path=", 1)[1]
    pg_cluster.psql(f"UPDATE {schema}.schema_version SET version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="newer tauopt .*upgrade tauopt"):
        async with PostgresStore(pg_url):
            pass


async def test_text_with_a_nul_fails_its_batch_alone(pg_url: str) -> None:
    async with PostgresStore(pg_url) as store:
        await store.write([PutExperiment(experiment())])
        outcomes: list[BaseException | None] = []
        store.submit([PutSuggestion(suggestion("bad\x00id"))], outcomes.append)
        store.submit([PutSuggestion(suggestion("good"))], outcomes.append)
        await store.write([])
        assert isinstance(outcomes[0], StoreError) and "NUL" in str(outcomes[0]) and outcomes[1] is None
        snap = await store.load("e1")
        assert snap is not None and [s.id for s in snap.suggestions] == ["good"]


async def test_lost_connections_are_replaced_and_the_write_goes_through(pg_url: str) -> None:
    async with PostgresStore(pg_url, pool_size=2) as store:
        await store.write([PutExperiment(experiment())])
        assert await _terminate_tauopt_backends(pg_url) >= 2  # the writer's and a reader's
        await store.write([PutSuggestion(suggestion("s1"))])  # before BEGIN reached a server: run again
        snap = await store.load("e1")  # a pooled reader found dead: another one
        assert snap is not None and [s.id for s in snap.suggestions] == ["s1"]


async def test_a_stopped_server_gives_store_unavailable_and_the_store_reconnects_when_it_is_back(
    pg_url: str, pg_cluster: Any
) -> None:
    async with Engine(store=pg_url) as engine:
        exp = await engine.create_experiment("restart", SPACE, {"name": "y"}, parallel_bandwidth=4)
        first = await engine.suggest(exp.id)
        await anyio.to_thread.run_sync(pg_cluster.stop)
        try:
            with pytest.raises(ApiError) as err:
                await engine.suggest(exp.id)
            assert err.value.error_type == "store_unavailable" and err.value.status_code == 503
            assert "cannot be reached" in err.value.message and "reconnects by itself" in err.value.message
        finally:
            await anyio.to_thread.run_sync(pg_cluster.start)
        with pytest.raises(ApiError, match="reloading after a storage failure"):
            await engine.suggest(exp.id)  # the actor that saw the failure stops, as on SQLite
        second = await engine.suggest(exp.id)  # rebuilt from the database, through the reconnected store
        await engine.observe(exp.id, first.id, value=1.0)
    async with Engine(store=pg_url) as engine:
        open_ids = {s.id for s in await engine.suggestions(exp.id, state="open")}
        assert second.id in open_ids and first.id not in open_ids
        assert (await engine.experiment(exp.id)).observations == 1


async def test_reads_while_the_server_is_away_answer_store_unavailable_not_a_crash(pg_url: str, pg_cluster: Any) -> None:
    async with Engine(store=pg_url) as engine:
        exp = await engine.create_experiment("reads", SPACE, {"name": "y"})
        await anyio.to_thread.run_sync(pg_cluster.stop)
        try:
            for read in (engine.experiments, engine.admin.credentials, lambda: engine.admin.report(exp.id),
                         lambda: engine.as_owner("someone").suggest(exp.id)):
                with pytest.raises(ApiError) as err:
                    await read()
                assert err.value.error_type == "store_unavailable" and err.value.status_code == 503
                assert "cannot read" in err.value.message and "reconnects by itself" in err.value.message
        finally:
            await anyio.to_thread.run_sync(pg_cluster.start)
        assert [e.id for e in await engine.experiments()] == [exp.id]


async def test_a_statement_timeout_rolls_back_with_a_clear_error_and_the_store_goes_on(pg_url: str) -> None:
    import asyncpg

    async with PostgresStore(pg_url, statement_timeout_s=0.3) as store:
        await store.write([PutExperiment(experiment())])
        blocker = await asyncpg.connect(pg_url)
        try:
            tx = blocker.transaction()
            await tx.start()
            await blocker.execute("LOCK TABLE suggestions IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(StoreError, match="statement_timeout .*rolled back and nothing of it was kept") as err:
                await store.write([PutSuggestion(suggestion("s1")), PutExperiment(experiment().evolve(name="renamed"))])
            assert not isinstance(err.value, StoreUnavailable)
            await tx.rollback()
        finally:
            await blocker.close()
        snap = await store.load("e1")
        assert snap is not None and snap.suggestions == () and snap.experiment.name == "e1"
        await store.write([PutSuggestion(suggestion("s2"))])
        snap = await store.load("e1")
        assert snap is not None and [s.id for s in snap.suggestions] == ["s2"]


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_under_trio_the_store_refuses_to_start_and_says_why(anyio_backend: str) -> None:
    with pytest.raises(StoreError, match="asyncio only"):
        async with PostgresStore("postgresql://nobody@127.0.0.1:1/none"):
            pass


def test_tauopt_serve_on_postgresql_writes_the_first_token_where_it_starts_and_keeps_state(
    pg_url: str, tmp_path: Path
) -> None:
    from tauopt import Client

    from test_http_daemon import Daemon

    first = Daemon(pg_url, cwd=tmp_path)
    token = (tmp_path / "tauopt.token").read_text().strip()
    with Client(base_url=first.url, token=token) as c:
        exp = c.create_experiment("served", SPACE, {"name": "y"})
        s = c.suggest(exp.id)
        c.observe(exp.id, suggestion_id=s.id, value=0.5)
    assert first.stop()[0] == 0
    again = Daemon(pg_url, "--store", pg_url, cwd=tmp_path)  # --store is --db's other name
    try:
        with Client(base_url=again.url, token=token) as c:
            assert c.experiment(exp.id).observations == 1
    finally:
        again.stop()


async def test_a_second_engine_on_the_database_is_refused_but_admin_reads_work_beside_it(pg_url: str) -> None:
    async with Engine(store=pg_url) as engine:
        exp = await engine.create_experiment("owned", SPACE, {"name": "y"})
        with pytest.raises(ApiError) as err:
            async with Engine(store=pg_url):
                pass
        assert err.value.error_type == "store_in_use" and "tauopt serve --store" in err.value.message
        async with open_store(pg_url, exclusive=False) as reader:
            assert await reader.has_experiment(exp.id)
    async with Engine(store=pg_url) as engine:  # released with its owner's connection
        assert (await engine.experiment(exp.id)).name == "owned"
