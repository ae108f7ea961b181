"""The SQLite store's file: created 0600, corrupt files refused at start without
leaving -wal/-shm behind, and a file deleted, replaced or truncated under a
running store refuses writes (StoreUnavailable) instead of acknowledging them."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
from pathlib import Path

import anyio
import pytest

from tauopt.store._filewatch import StoreUnavailable
from tauopt.store._sqlite import SqliteStore
from tauopt.store import PutExperiment, StoreError
from tauopt.models import Experiment, Metric, Parameter
from tauopt.schema import parse_parameter

pytestmark = pytest.mark.anyio


def experiment(eid: str, name: str = "exp") -> Experiment:
    return Experiment(
        id=eid,
        name=name,
        parameters=(parse_parameter({"name": "x", "type": "double", "bounds": [0, 1]}),),
        metric=Metric("loss"),
        created_at=1.0,
    )


def sidecars(db: Path) -> list[str]:
    return sorted(p.name for p in db.parent.iterdir() if p.name.startswith(db.name + "-"))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def test_a_new_database_and_its_wal_are_readable_by_the_owner_only(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    os.umask(old := os.umask(0o022))  # the usual umask would give 0644
    async with SqliteStore(db) as store:
        await store.write([PutExperiment(experiment("e1"))])
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert old is not None
    assert modes["new.db"] == 0o600
    assert modes.get("new.db-wal", 0o600) == 0o600 and modes.get("new.db-shm", 0o600) == 0o600


async def _store_with_pages(db: Path, n: int = 400) -> None:
    async with SqliteStore(db) as store:
        await store.write([PutExperiment(experiment(f"e{i}", "n" * 400)) for i in range(n)])


async def test_a_database_with_corrupt_pages_is_refused_at_start_in_one_line_and_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "corrupt.db"
    await _store_with_pages(db)
    assert sidecars(db) == []  # a clean close checkpoints and removes them
    with db.open("r+b") as f:  # page 1 (the schema) intact; a page of rows overwritten
        f.seek(4096 * 3)
        f.write(b"\xa5" * 4096)
    before = sha256(db)
    with pytest.raises(StoreError) as info:
        async with SqliteStore(db):
            pass
    message = str(info.value)
    assert "corrupt" in message and "\n" not in message and "backup" in message
    assert sha256(db) == before
    assert sidecars(db) == []


async def test_refusing_a_wal_mode_database_that_is_not_a_store_leaves_no_wal_or_shm(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE notes (x)")
    conn.commit()
    conn.close()
    assert sidecars(db) == []
    with pytest.raises(StoreError, match="not a tauopt store"):
        async with SqliteStore(db):
            pass
    assert sidecars(db) == []


async def _write(store: SqliteStore, eid: str) -> None:
    with anyio.fail_after(10):
        await store.write([PutExperiment(experiment(eid))])


def _delete(db: Path) -> None:
    db.unlink()


def _replace(db: Path) -> None:
    other = db.with_name("other.db")
    sqlite3.connect(other).close()
    other.write_bytes(db.read_bytes())  # even a byte-identical copy is another file
    os.replace(other, db)


def _truncate(db: Path) -> None:
    os.truncate(db, 0)


def _move_away(db: Path) -> None:
    db.rename(db.with_name("moved.db"))


@pytest.mark.parametrize("damage", [_delete, _replace, _truncate, _move_away])
async def test_writes_are_refused_once_the_file_is_deleted_replaced_truncated_or_moved(
    tmp_path: Path, damage, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "watched.db"
    async with SqliteStore(db) as store:
        await _write(store, "before")
        damage(db)
        with pytest.raises(StoreUnavailable) as first:
            await _write(store, "after")
        with pytest.raises(StoreUnavailable):
            await _write(store, "again")  # sticky: the file does not come back by itself
        await store.write([])  # a barrier has nothing to refuse
    assert "while the store was open" in str(first.value) and "restore" in str(first.value)
    errors = [r for r in caplog.records if r.levelname == "ERROR" and "while the store was open" in r.getMessage()]
    assert len(errors) == 1  # logged once, not once per refused write


async def test_a_missing_database_beside_its_leftover_wal_is_refused_not_recreated(tmp_path: Path) -> None:
    db = tmp_path / "deleted.db"
    Path(f"{db}-wal").write_bytes(b"left by a killed daemon")
    with pytest.raises(StoreError, match="is missing but its write-ahead log"):
        async with SqliteStore(db):
            pass
    assert not db.exists()
