"""SqliteStore specifics: restart round trip, group commit, failures, bad files, start time."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tauopt.store._sqlite import MIGRATIONS, SCHEMA_VERSION, Durability, SqliteStore, _migrate
from tauopt.store import (
    CredentialRecord,
    PutCredential,
    PutExperiment,
    PutObservation,
    PutSuggestion,
    Snapshot,
    StoreError,
)
from tauopt.models import Condition, Experiment, Metric, Observation, Parameter, StrategyOptions, Suggestion
from tauopt.schema import parse_parameter

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent


def experiment(eid: str = "e1", owner: str | None = "alice") -> Experiment:
    return Experiment(
        id=eid,
        name="exp",
        parameters=(parse_parameter({"name": "x", "type": "double", "bounds": [0, 1]}),),
        metric=Metric("loss"),
        parallel_bandwidth=8,
        created_at=1.0,
        owner=owner,
    )


def suggestion(sid: str, eid: str = "e1", **kw: Any) -> Suggestion:
    return Suggestion(sid, eid, {"x": 0.5}, created_at=2.0, **kw)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- restart round trip (property) ------------------------------------------

text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)  # no lone surrogates
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
names = text.filter(str.strip)  # models refuse blank names
values = st.one_of(text, st.integers(-(2**53), 2**53), finite, st.booleans())
conditions = st.lists(st.builds(Condition, text, st.lists(values, min_size=1, max_size=3).map(tuple)), max_size=2)


@st.composite
def parameters(draw: st.DrawFn, name: str) -> Parameter:
    kind = draw(st.sampled_from(["double", "int", "categorical", "boolean", "fixed"]))
    raw: dict[str, Any] = {"name": name, "type": kind, "conditions": [c.to_dict() for c in draw(conditions)]}
    if kind == "double":
        lo = draw(st.floats(1e-6, 1e6))
        raw.update(bounds=[lo, lo * draw(st.floats(1.5, 100.0))], scale=draw(st.sampled_from(["linear", "log", "reverse_log"])))
        if draw(st.booleans()):
            raw["step"] = (raw["bounds"][1] - lo) / draw(st.integers(1, 10))
    elif kind == "int":
        lo = draw(st.integers(1, 1000))
        raw.update(bounds=[lo, lo + draw(st.integers(1, 1000))], step=draw(st.none() | st.integers(1, 1)))
    elif kind == "categorical":
        raw["values"] = draw(st.lists(values, min_size=1, max_size=5, unique_by=lambda v: (type(v), v)))
        raw["default"] = draw(st.none() | st.sampled_from(raw["values"]))
    elif kind == "fixed":
        raw["value"] = draw(values)
    return parse_parameter(raw)


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    eid = draw(text)
    pnames = draw(st.lists(names, min_size=1, max_size=4, unique=True))
    exp = Experiment(
        id=eid,
        name=draw(text),
        parameters=tuple(draw(parameters(n)) for n in pnames),
        metric=Metric(draw(names), draw(st.sampled_from(["minimize", "maximize"]))),
        parallel_bandwidth=draw(st.integers(1, 1000)),
        suggestion_ttl_s=draw(st.none() | st.floats(0.001, 1e6)),
        observation_budget=draw(st.none() | st.integers(1, 10**6)),
        strategy=draw(st.sampled_from(["auto", "random", "sobol", "grid", "gp"])),
        state=draw(st.sampled_from(["active", "completed", "archived"])),
        created_at=draw(finite),
        open_suggestions=draw(st.integers(0, 10**6)),
        observations=draw(st.integers(0, 10**6)),
        strategy_options=StrategyOptions(
            draw(st.none() | st.integers(2, 100)), draw(st.none() | st.integers(1, 100)), draw(st.none() | st.integers(0, 2**62))
        ),
        owner=draw(st.none() | text),
    )
    assignments = st.dictionaries(st.sampled_from(pnames), values, max_size=len(pnames))
    sids = draw(st.lists(text, max_size=6, unique=True))
    suggestions = tuple(
        Suggestion(
            sid, eid, draw(assignments), draw(st.sampled_from(["open", "observed", "closed", "expired"])), draw(st.none() | text), draw(finite)
        )
        for sid in sids
    )
    observations = tuple(
        Observation(
            oid,
            eid,
            draw(st.none() | st.sampled_from(sids or ["none"])),
            draw(assignments),
            draw(st.none() | finite),
            draw(st.booleans()),
            draw(finite),
            draw(st.dictionaries(text, finite, max_size=3)),
        )
        for oid in draw(st.lists(text, max_size=6, unique=True))
    )
    return Snapshot(exp, suggestions, observations, draw(st.integers(0, 2**62)))


credentials = st.builds(
    CredentialRecord, text, text, text, finite, st.none() | st.integers(1, 10**6), st.none() | st.integers(1, 10**6), st.none() | finite
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=snapshots(), cred=credentials)
def test_every_field_survives_close_and_reopen(snap: Snapshot, cred: CredentialRecord) -> None:
    async def main(path: Path) -> None:
        async with SqliteStore(path) as store:
            await store.write([PutExperiment(snap.experiment, snap.drawn), *map(PutSuggestion, snap.suggestions)])
            for o in snap.observations:  # observations arrive one by one
                store.submit([PutObservation(o)], lambda exc: None)
            await store.write([PutCredential(cred)])
        async with SqliteStore(path) as store:
            loaded = await store.load(snap.experiment.id)
            assert loaded == snap
            for a, b in zip(loaded.suggestions + loaded.observations, snap.suggestions + snap.observations):  # type: ignore[operator,union-attr]
                assert [type(v) for v in a.assignments.values()] == [type(v) for v in b.assignments.values()]
            assert await store.list_experiments() == [snap.experiment]
            assert await store.credentials() == [cred]
            assert await store.credential_by_hash(cred.token_hash) == cred

    with tempfile.TemporaryDirectory() as d:
        anyio.run(main, Path(d) / "roundtrip.db")


# -- group commit -------------------------------------------------------------------


async def test_concurrent_submits_share_few_transactions(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "g.db") as store:
        await store.write([PutExperiment(experiment())])
        before = store.transactions

        async def producer(n: int) -> None:
            for i in range(25):
                await store.write([PutSuggestion(suggestion(f"{n}-{i}")), PutExperiment(experiment())])

        async with anyio.create_task_group() as tg:
            for n in range(64):
                tg.start_soon(producer, n)
        transactions = store.transactions - before
        snap = await store.load("e1")
    assert snap is not None and len(snap.suggestions) == 64 * 25
    # 1600 acknowledged batches; each round of 64 producers lands in about one commit.
    assert transactions <= 1600 // 8, transactions


async def test_batches_queued_in_one_moment_commit_as_one_transaction(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "g.db") as store:
        await store.write([PutExperiment(experiment())])
        before = store.transactions
        acked: list[BaseException | None] = []
        for i in range(500):
            store.submit([PutSuggestion(suggestion(f"s{i}"))], acked.append)
        await store.write([])
        assert store.transactions - before == 1
        assert acked == [None] * 500


# -- failures ------------------------------------------------------------------------


async def test_failed_transaction_fails_every_batch_of_its_group_and_keeps_none(
    tmp_path: Path, durability: Durability = "os"
) -> None:
    path = tmp_path / "f.db"
    async with SqliteStore(path, durability) as store:
        await store.write([PutExperiment(experiment())])
    with sqlite3.connect(path) as conn:  # a real SQL failure in the middle of a transaction
        conn.execute("CREATE TRIGGER boom BEFORE INSERT ON observations WHEN NEW.id = 'boom' BEGIN SELECT RAISE(ABORT, 'boom'); END")
    conn.close()
    async with SqliteStore(path, durability) as store:
        outcomes: list[BaseException | None] = []
        store.submit([PutSuggestion(suggestion("s1"))], outcomes.append)
        store.submit([PutObservation(Observation("boom", "e1", None, {"x": 0.1}, 1.0))], outcomes.append)
        store.submit([PutSuggestion(suggestion("s2"))], outcomes.append)
        await store.write([])  # a barrier carries no writes: it is answered None either way
        assert len(outcomes) == 3 and all(isinstance(e, StoreError) and "boom" in str(e) for e in outcomes)
        snap = await store.load("e1")
        assert snap is not None and snap.suggestions == () and snap.observations == ()
        await store.write([PutSuggestion(suggestion("s3"))])  # the store goes on
        snap = await store.load("e1")
        assert snap is not None and [s.id for s in snap.suggestions] == ["s3"]


@pytest.mark.parametrize("durability", ["os", "fsync"])
async def test_a_group_transaction_is_one_call_and_commits_and_rolls_back_alike(
    tmp_path: Path, monkeypatch, durability: Durability
) -> None:
    """Without an fsync (os) a commit runs on the event loop's thread (no hop); with one
    (fsync), on the writer's thread, so the loop never waits for the disk."""
    from tauopt.store import _sqlite

    real = _sqlite._transact
    threads: list[str] = []

    def counted(conn: sqlite3.Connection, plan: Any) -> None:
        threads.append(threading.current_thread().name)
        real(conn, plan)

    monkeypatch.setattr(_sqlite, "_transact", counted)
    await test_failed_transaction_fails_every_batch_of_its_group_and_keeps_none(tmp_path, durability)
    # setup write, the failed group, the store going on: one call each
    where = threading.current_thread().name if durability == "os" else "tauopt-sqlite-writer"
    assert len(threads) == 3 and all(t.startswith(where) for t in threads), threads


class _FailingCommit(sqlite3.Connection):
    """A real connection whose next COMMIT fails as a full disk would make it fail."""

    fail_commits = 0

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        if sql == "COMMIT" and _FailingCommit.fail_commits > 0:
            _FailingCommit.fail_commits -= 1
            raise sqlite3.OperationalError("database or disk is full")
        return super().execute(sql, *args)


async def test_a_failing_commit_replies_no_batch_as_stored_and_keeps_none(tmp_path: Path, monkeypatch) -> None:
    from tauopt.store import _sqlite_thread

    monkeypatch.setattr(
        _sqlite_thread,
        "_open_connection",
        lambda path: sqlite3.connect(path, isolation_level=None, check_same_thread=False, factory=_FailingCommit),
    )
    async with SqliteStore(tmp_path / "full.db") as store:
        await store.write([PutExperiment(experiment())])
        outcomes: list[BaseException | None] = []
        _FailingCommit.fail_commits = 1
        for i in range(3):
            store.submit([PutSuggestion(suggestion(f"s{i}"))], outcomes.append)
        await store.write([])
        assert len(outcomes) == 3
        assert all(isinstance(e, StoreError) and "disk is full" in str(e) for e in outcomes), outcomes
        snap = await store.load("e1")
        assert snap is not None and snap.suggestions == ()  # rolled back: nothing of the group is there
        await store.write([PutSuggestion(suggestion("s3"))])  # the store goes on
        snap = await store.load("e1")
        assert snap is not None and [s.id for s in snap.suggestions] == ["s3"]


# -- WAL checkpoints: the writer thread's, between groups ---------------------------------


def committed_to_the_database_file(path: Path, tmp: Path) -> int:
    """Suggestions in the database file itself, without its WAL: what checkpoints copied there."""
    copy = tmp / "main-file-only.db"
    shutil.copyfile(path, copy)
    conn = sqlite3.connect(copy)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        return conn.execute("SELECT count(*) FROM suggestions").fetchone()[0] if "suggestions" in tables else 0
    finally:
        conn.close()


async def test_the_wal_stays_bounded_under_many_writes(tmp_path: Path) -> None:
    path, limit = tmp_path / "w.db", 256 << 10
    wal = Path(f"{path}-wal")
    sizes = []
    async with SqliteStore(path, checkpoint_bytes=limit, checkpoint_idle_s=60) as store:  # only the size bound
        await store.write([PutExperiment(experiment())])
        for i in range(300):  # ~3 MB of rows, ~11 MB of WAL frames without checkpoints
            await store.write([PutSuggestion(Suggestion(f"s{i}-{j}", "e1", {"x": "v" * 1000}, created_at=2.0)) for j in range(10)])
            sizes.append(wal.stat().st_size)
        assert store.checkpoints >= 5
        snap = await store.load("e1")
    assert snap is not None and len(snap.suggestions) == 3000
    # Checkpoints run beside the commits; past 4 x the limit the writer thread runs one itself. One
    # group here is ~37 KB of WAL frames: the WAL never passes that bound by more than a few.
    bound = 4 * limit + (128 << 10)
    assert max(sizes) <= bound, max(sizes)
    assert sizes[-1] <= bound


async def test_a_stream_of_small_commits_past_the_limit_asks_for_a_checkpoint_per_step_of_growth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past checkpoint_bytes the checkpointer is asked for a pass each time the WAL grew by a
    step (checkpoint_bytes / REQUEST_STEPS), not after every commit: asked after each one, its
    passes ran back to back, each with its fsyncs, for as long as the WAL grew."""
    from tauopt.store import _sqlite_thread

    asked: list[int] = []
    request = _sqlite_thread._Checkpointer.request
    monkeypatch.setattr(_sqlite_thread._Checkpointer, "request", lambda self: (asked.append(1), request(self)))
    path, limit = tmp_path / "s.db", 1 << 20
    wal = Path(f"{path}-wal")
    writes, sizes = 800, []
    async with SqliteStore(path, checkpoint_bytes=limit, checkpoint_idle_s=60) as store:  # only the size bound
        await store.write([PutExperiment(experiment())])
        for i in range(writes):  # one small row a commit: a few WAL frames each, ~8 MB in all
            await store.write([PutSuggestion(Suggestion(f"s{i}", "e1", {"x": "v" * 1000}, created_at=2.0))])
            sizes.append(wal.stat().st_size)
        passes = store.checkpoints
        snap = await store.load("e1")
    assert snap is not None and len(snap.suggestions) == writes
    past_the_limit = sum(1 for size in sizes if size > limit)
    assert past_the_limit >= 100  # enough commits past the limit to tell one ask a commit from one a step
    # ~8 MB of growth in 128 KB steps, the WAL started over twice: tens of asks, not one a commit
    assert 0 < len(asked) <= past_the_limit // 4, (len(asked), past_the_limit)
    assert 0 < passes <= len(asked) + 8, (passes, len(asked))  # the writer thread's own passes besides
    assert max(sizes) <= 4 * limit + (64 << 10)  # still bounded: the writer thread's own pass at 4 x the limit


async def test_a_commit_waits_on_the_writer_thread_behind_a_checkpoint_the_thread_runs(
    tmp_path: Path, monkeypatch
) -> None:
    """Commits run on the loop's thread (durability os) except while the writer thread runs
    a checkpoint of its own on the same connection: then they queue behind it, there."""
    from tauopt.store import _sqlite, _sqlite_thread

    gate, started = threading.Event(), threading.Event()
    real_checkpoint, real_transact = _sqlite_thread.SqliteWriter._checkpoint_here, _sqlite._transact
    threads: list[str] = []

    def held(self: Any, size: int) -> None:
        started.set()
        gate.wait(10)
        real_checkpoint(self, size)

    def counted(conn: sqlite3.Connection, plan: Any) -> None:
        threads.append(threading.current_thread().name)
        real_transact(conn, plan)

    monkeypatch.setattr(_sqlite_thread.SqliteWriter, "_checkpoint_here", held)
    monkeypatch.setattr(_sqlite, "_transact", counted)
    async with SqliteStore(tmp_path / "c.db", checkpoint_bytes=128 << 10, checkpoint_idle_s=60) as store:
        await store.write([PutExperiment(experiment())])
        assert not started.is_set()
        big = [PutSuggestion(Suggestion(f"s{j}", "e1", {"x": "v" * 1000}, created_at=2.0)) for j in range(600)]
        await store.write(big)  # past 4 x checkpoint_bytes: the writer thread checkpoints
        with anyio.fail_after(10):
            while not started.is_set():
                await anyio.sleep(0.01)
        outcomes: list[BaseException | None] = []
        store.submit([PutSuggestion(suggestion("after"))], outcomes.append)
        await anyio.sleep(0.05)
        assert outcomes == []  # not committed beside the checkpoint
        gate.set()
        await store.write([])
        assert outcomes == [None]
        snap = await store.load("e1")
    assert snap is not None and len(snap.suggestions) == 601
    loop_thread = threading.current_thread().name
    assert threads[:2] == [loop_thread, loop_thread] and threads[2].startswith("tauopt-sqlite-writer"), threads


async def test_a_commit_that_meets_another_writers_lock_waits_on_the_writer_thread_not_in_the_loop(
    tmp_path: Path,
) -> None:
    path = tmp_path / "b.db"
    async with SqliteStore(path) as store:
        await store.write([PutExperiment(experiment())])
        other = sqlite3.connect(path, isolation_level=None, timeout=0)  # e.g. a CLI edit beside the engine
        other.execute("BEGIN IMMEDIATE")
        try:
            outcomes: list[BaseException | None] = []
            store.submit([PutSuggestion(suggestion("s1"))], outcomes.append)
            t0 = time.monotonic()
            await anyio.sleep(0.2)  # the loop goes on meanwhile
            assert time.monotonic() - t0 < 2 and outcomes == []
        finally:
            other.execute("ROLLBACK")
            other.close()
        await store.write([])
        assert outcomes == [None]
        assert store._writer is not None and store._writer.busy_fallbacks == 1
        snap = await store.load("e1")
    assert snap is not None and [s.id for s in snap.suggestions] == ["s1"]


async def test_commits_do_not_checkpoint_and_an_idle_writer_does(tmp_path: Path) -> None:
    path = tmp_path / "i.db"
    async with SqliteStore(path, checkpoint_idle_s=60) as store:
        await store.write([PutExperiment(experiment())])
        await store.write([PutSuggestion(suggestion(f"s{i}")) for i in range(20)])
        assert committed_to_the_database_file(path, tmp_path) == 0  # all in the WAL: no COMMIT checkpointed
        assert store.checkpoints == 0
    async with SqliteStore(path, checkpoint_idle_s=0.05) as store:
        await store.write([PutSuggestion(suggestion(f"t{i}")) for i in range(20)])
        with anyio.fail_after(10):
            while store.checkpoints == 0:
                await anyio.sleep(0.02)
        assert committed_to_the_database_file(path, tmp_path) == 40  # the idle checkpoint copied them


async def test_a_batch_that_cannot_be_stored_fails_alone(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "f.db") as store:
        await store.write([PutExperiment(experiment())])
        outcomes: list[BaseException | None] = []
        store.submit([PutSuggestion(suggestion("s1"))], outcomes.append)
        store.submit([PutSuggestion(Suggestion("s2", "e1", {"x": object()}))], outcomes.append)  # type: ignore[dict-item]
        store.submit([PutSuggestion(suggestion("s3", tag="\ud800"))], outcomes.append)  # lone surrogate
        store.submit([PutSuggestion(suggestion("s4"))], outcomes.append)
        await store.write([])
        assert outcomes[0] is None and outcomes[3] is None
        assert isinstance(outcomes[1], StoreError) and isinstance(outcomes[2], StoreError)
        snap = await store.load("e1")
        assert snap is not None and [s.id for s in snap.suggestions] == ["s1", "s4"]


async def test_close_commits_what_is_queued_and_then_refuses(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    store = SqliteStore(path)
    outcomes: list[BaseException | None] = []
    async with store:
        await store.write([PutExperiment(experiment())])
        for i in range(300):
            store.submit([PutSuggestion(suggestion(f"s{i}"))], outcomes.append)
    assert outcomes == [None] * 300
    store.submit([PutSuggestion(suggestion("late"))], outcomes.append)
    assert isinstance(outcomes[-1], StoreError)
    async with SqliteStore(path) as again:
        snap = await again.load("e1")
    assert snap is not None and len(snap.suggestions) == 300


async def test_start_without_a_task_group_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="task group"):
        await SqliteStore(tmp_path / "x.db").start()


async def writer_pragma(store: SqliteStore, name: str) -> Any:
    assert store._writer is not None
    return await store._writer.call(lambda conn: conn.execute(f"PRAGMA {name}").fetchone()[0])


async def test_durability_levels_set_wal_and_synchronous(tmp_path: Path) -> None:
    for durability, expected in (("os", 1), ("fsync", 2)):  # NORMAL, FULL
        async with SqliteStore(tmp_path / f"{durability}.db", durability=durability) as store:  # type: ignore[arg-type]
            assert await writer_pragma(store, "synchronous") == expected
            assert await writer_pragma(store, "journal_mode") == "wal"
            assert await writer_pragma(store, "wal_autocheckpoint") == 0  # no COMMIT checkpoints: a connection of their own does, beside the commits
    with pytest.raises(ValueError):
        SqliteStore(tmp_path / "x.db", durability="never")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="checkpoint_bytes must be a positive int"):
        SqliteStore(tmp_path / "x.db", checkpoint_bytes=0)
    with pytest.raises(ValueError, match="checkpoint_idle_s"):
        SqliteStore(tmp_path / "x.db", checkpoint_idle_s=-1)


# -- bad files ---------------------------------------------------------------------------


async def open_and_close(path: Path) -> None:
    async with SqliteStore(path):
        pass


async def test_a_file_that_is_not_sqlite_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 100)
    before = sha256(path)
    with pytest.raises(StoreError, match="not a SQLite database"):
        await open_and_close(path)
    assert sha256(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


async def test_a_foreign_sqlite_database_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, amount REAL)")
        conn.execute("INSERT INTO invoices (amount) VALUES (9.5)")
    conn.close()
    before = sha256(path)
    with pytest.raises(StoreError, match="not a tauopt store"):
        await open_and_close(path)
    assert sha256(path) == before


async def test_a_store_of_a_newer_schema_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    async with SqliteStore(path) as store:
        await store.write([PutExperiment(experiment())])
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    conn.close()
    before = sha256(path)
    with pytest.raises(StoreError, match=f"schema version {SCHEMA_VERSION + 1}.*upgrade tauopt"):
        await open_and_close(path)
    assert sha256(path) == before


async def test_a_directory_or_a_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is a directory"):
        await open_and_close(tmp_path)
    with pytest.raises(StoreError, match="does not exist"):
        await open_and_close(tmp_path / "missing" / "t.db")


async def test_an_older_store_is_migrated_forward_with_its_data(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        _migrate(conn, 0, target=1)  # a store from before the credentials table
        conn.execute(
            "INSERT INTO experiments (id, owner, state, name, created_at, open_suggestions, observations, drawn, body) "
            "VALUES (?, ?, 'active', 'exp', 1.0, 0, 0, 3, ?)",
            ("e1", "alice", json.dumps(experiment().to_dict())),
        )
    finally:
        conn.close()
    async with SqliteStore(path) as store:
        snap = await store.load("e1")
        assert snap is not None and snap.experiment == experiment() and snap.drawn == 3
        await store.put_credential(CredentialRecord("c1", "ci", "h1", 1.0))
        assert [c.id for c in await store.credentials()] == ["c1"]
    conn2 = sqlite3.connect(path)
    assert conn2.execute("SELECT version FROM schema_version").fetchall() == [(len(MIGRATIONS),)]
    conn2.close()


# Root ignores permission bits (CAP_DAC_OVERRIDE), so the read-only cases run in
# a child process whose capability bounding set lacks the DAC overrides: it is
# still uid 0, but permission bits now apply to it as to any user.
READONLY_CHILD = textwrap.dedent(
    """
    import sys, anyio
    from tauopt.store._sqlite import SqliteStore
    from tauopt.store import StoreError
    async def main():
        try:
            async with SqliteStore(sys.argv[1]):
                pass
        except StoreError as exc:
            print("StoreError:", exc)
        else:
            print("opened")
    anyio.run(main)
    """
)
NO_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]


def run_without_override(db: Path) -> str:
    if os.geteuid() != 0:
        cmd = [sys.executable]  # a normal user is already bound by permission bits
    elif shutil.which("setpriv") is None:
        pytest.skip("running as root without util-linux setpriv: cannot make permission bits apply to the child")
    else:
        cmd = [*NO_OVERRIDE, sys.executable]
    proc = subprocess.run([*cmd, "-c", READONLY_CHILD, str(db)], capture_output=True, text=True, timeout=60, cwd=ROOT)
    if proc.returncode != 0 and "setpriv" in proc.stderr:
        pytest.skip(f"cannot drop capabilities here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


async def test_a_read_only_directory_fails_at_start(tmp_path: Path) -> None:
    tmp_path.chmod(0o555)
    try:
        out = run_without_override(tmp_path / "new.db")
    finally:
        tmp_path.chmod(0o755)
    assert out.startswith("StoreError:") and "read-only" in out, out
    assert list(tmp_path.iterdir()) == []


async def test_a_read_only_store_file_fails_at_start_and_is_untouched(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    async with SqliteStore(path) as store:
        await store.write([PutExperiment(experiment())])
    before = sha256(path)
    path.chmod(0o444)  # the directory is writable, the file is not
    out = run_without_override(path)
    assert out.startswith("StoreError:") and "read-only" in out, out
    assert sha256(path) == before
    path.chmod(0o644)
    tmp_path.chmod(0o555)  # the file is writable, its directory is not (WAL needs -wal and -shm files)
    try:
        out = run_without_override(path)
    finally:
        tmp_path.chmod(0o755)
    assert out.startswith("StoreError:") and "read-only" in out, out
    assert sha256(path) == before


# -- scale -------------------------------------------------------------------------------


async def test_a_store_of_100k_experiments_opens_in_under_a_second(tmp_path: Path) -> None:
    path = tmp_path / "big.db"
    exp = experiment()
    async with SqliteStore(path) as store:
        await store.write([PutExperiment(exp.evolve(id=f"e{i:06d}", owner=f"o{i % 100}")) for i in range(100_000)])
    t0 = time.perf_counter()
    async with SqliteStore(path) as store:
        opened = time.perf_counter() - t0
        assert await store.has_experiment("e099999")
        assert await store.count_experiments("o7") == 1000
        snap = await store.load("e054321")
        first_answer = time.perf_counter() - t0
    assert snap is not None and snap.experiment.id == "e054321"
    assert opened < 1.0, opened
    assert first_answer < 1.0, first_answer
    from tauopt.engine import Engine

    t0 = time.perf_counter()
    async with Engine(store=str(path), pool=None) as engine:  # an engine reads no experiment at start
        started = time.perf_counter() - t0
        assert (await engine.experiment("e012345")).owner == "o45"
        assert engine.live_actors <= 1  # memory follows the active experiments, not the stored ones
    assert started < 1.0, started


def test_importing_tauopt_does_not_import_aiosqlite() -> None:
    code = "import sys, tauopt, tauopt.engine; assert 'aiosqlite' not in sys.modules, 'aiosqlite imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


async def test_a_scrape_and_a_projects_lookup_read_only_the_experiments_they_show(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """GET /metrics' gauges are aggregated by the store, and a trial queue finds its
    project by name through the name index: neither reads every stored experiment."""
    from tauopt import Engine
    from tauopt.engine._trialqueue import TrialPolicy, TrialQueue
    from tauopt.transport._metrics import Metrics

    space = [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}]
    async with Engine(store=str(tmp_path / "t.db"), pool=None) as engine:
        for name in ("other", "proj", "another"):
            await engine.create_experiment(name, space, {"name": "loss"}, strategy="random")
        await engine.suggest((await engine.experiments(name="another"))[0].id)
        listed: list[str] = []
        real = engine.store.list_experiments

        async def watched(*args: object, **kwargs: object) -> list:
            found = await real(*args, **kwargs)  # type: ignore[arg-type]
            listed.extend(e.name for e in found)
            return found

        monkeypatch.setattr(engine.store, "list_experiments", watched)
        metrics = Metrics(2)
        metrics.bind(engine)
        text = (await metrics.scrape()).decode()
        assert 'tauopt_experiments{state="active"} 3.0' in text
        assert text.count("tauopt_experiment_open_suggestions{") == 2 and 'open_suggestions{experiment=' in text
        policy = TrialPolicy(project="proj", objectives=(("loss", "min"),), score="loss", maximize=False, max_trials=4)
        assert (await TrialQueue(engine, policy).start()).name == "proj"
        assert listed == ["proj"]
        conn = sqlite3.connect(tmp_path / "t.db")
        plan = " ".join(str(r) for r in conn.execute("EXPLAIN QUERY PLAN SELECT seq FROM experiments WHERE name = 'proj'"))
        conn.close()
        assert "experiments_by_name" in plan
