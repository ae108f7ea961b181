"""SqliteStore: the durable Store, one SQLite file in WAL mode, written by one task.

Write path: the shared GroupCommitWriter (`_group_commit.py`) batches
concurrent writes; this module only turns a group into rows (`_rows.py`; a
batch whose objects cannot be turned into rows fails alone, before the
transaction) and runs them as ONE transaction (BEGIN IMMEDIATE, one multi-row
upsert per table, COMMIT; a failure rolls back and fails every batch of its
group) in ONE call to the writer thread (`_sqlite_thread.py`: a plain sqlite3
connection of its own; WAL checkpoints beside the commits, never inside one).

Read path. A second connection, query-only, on a thread of its own too, reads
committed state (WAL lets it read while the writer writes; a reply was given
after its COMMIT, so a later read sees it). `load` reads in one read
transaction, one call on that thread, so an experiment, its suggestions and its
observations come from one snapshot.

Durability: "os" (synchronous=NORMAL) survives a killed process; "fsync"
(synchronous=FULL) also survives power loss.

Opening refuses, with StoreError and without writing a byte: a file that is not
a SQLite database, a SQLite database that is not a tauopt store, and a store of
a newer schema version. A read-only location fails at `start`, not at the first
write: start writes (migration, or a no-op update) before it returns.

Import note: `tauopt.store.open_store` imports this module lazily; it needs
only the standard library's sqlite3 (no aiosqlite), on asyncio.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Literal, Sequence, Union

import anyio
from anyio.abc import TaskGroup

from ..models import Experiment
from ._base import (
    CredentialRecord,
    Done,
    ExperimentGauges,
    IndexRow,
    PutCounters,
    Snapshot,
    Store,
    StoreError,
    Write,
)
from ._filelock import FileLock
from ._filewatch import FileWatch, create_private, unavailable
from ._group_commit import GroupCommitWriter, GroupWritten
from ._rows import (
    BUSIEST_QUERY,
    STATES_QUERY,
    CREDENTIAL_COLUMNS,
    HEAD_COLUMNS,
    OBSERVATION_COLUMNS,
    REPORT_COLUMNS,
    SUGGESTION_COLUMNS,
    GroupRows,
    credential_row,
    experiment_of,
    experiment_row,
    experiments_query,
    observation_row,
    prepare,
    record_row,
    report_row,
    snapshot_of,
    suggestion_row,
    text,
)
from ._sqlite_thread import SqliteThread, SqliteWriter
from ._url import sqlite_path

__all__ = ["SqliteStore", "SCHEMA_VERSION", "MIGRATIONS"]

log = logging.getLogger("tauopt.store")

Durability = Literal["os", "fsync"]
_SYNCHRONOUS = {"os": "NORMAL", "fsync": "FULL"}
_SQLITE_MAGIC = b"SQLite format 3\x00"

# Forward migrations: MIGRATIONS[n] takes a store from version n to n+1, in one
# transaction together with the version bump. Never edit a released step; append.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 0 -> 1: experiments, suggestions, observations
    (
        # seq columns are INTEGER PRIMARY KEY (the rowid): they keep creation order,
        # survive VACUUM, and an upsert's DO UPDATE keeps them.
        """CREATE TABLE experiments (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            owner TEXT,
            state TEXT NOT NULL,
            name TEXT NOT NULL,
            created_at REAL NOT NULL,
            open_suggestions INTEGER NOT NULL,
            observations INTEGER NOT NULL,
            drawn INTEGER NOT NULL,
            body TEXT NOT NULL
        )""",
        "CREATE INDEX experiments_by_owner_state ON experiments (owner, state)",
        """CREATE TABLE suggestions (
            seq INTEGER PRIMARY KEY,
            experiment_id TEXT NOT NULL,
            id TEXT NOT NULL,
            state TEXT NOT NULL,
            tag TEXT,
            created_at REAL NOT NULL,
            assignments TEXT NOT NULL,
            UNIQUE (experiment_id, id)
        )""",
        "CREATE INDEX suggestions_by_experiment ON suggestions (experiment_id, seq)",
        "CREATE INDEX suggestions_open_by_tag ON suggestions (experiment_id, tag) WHERE state = 'open'",
        """CREATE TABLE observations (
            seq INTEGER PRIMARY KEY,
            experiment_id TEXT NOT NULL,
            id TEXT NOT NULL,
            suggestion_id TEXT,
            value REAL,
            failed INTEGER NOT NULL,
            created_at REAL NOT NULL,
            assignments TEXT NOT NULL,
            metrics TEXT NOT NULL,
            UNIQUE (experiment_id, id)
        )""",
        "CREATE INDEX observations_by_experiment ON observations (experiment_id, seq)",
    ),
    # 1 -> 2: credentials of the HTTP door (bearer tokens, by hash) and their quotas
    (
        """CREATE TABLE credentials (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            name TEXT NOT NULL,
            token_hash TEXT NOT NULL UNIQUE,
            created_at REAL NOT NULL,
            revoked_at REAL,
            suggestions_per_day INTEGER,
            max_active_experiments INTEGER
        )""",
    ),
    # 2 -> 3: leases: how often a suggestion was handed out, and whether its holder was declared dead
    (
        "ALTER TABLE suggestions ADD COLUMN attempts INTEGER NOT NULL DEFAULT 1",
        "ALTER TABLE suggestions ADD COLUMN released INTEGER NOT NULL DEFAULT 0",
    ),
    # 3 -> 4: intermediate reports (early stopping), and the step a stopped trial reached
    (
        """CREATE TABLE reports (
            seq INTEGER PRIMARY KEY,
            experiment_id TEXT NOT NULL,
            suggestion_id TEXT NOT NULL,
            step INTEGER NOT NULL,
            value REAL NOT NULL,
            created_at REAL NOT NULL,
            UNIQUE (experiment_id, suggestion_id, step)
        )""",
        "CREATE INDEX reports_by_experiment ON reports (experiment_id, seq)",
        "ALTER TABLE observations ADD COLUMN stopped_at_step INTEGER",
    ),
    # 4 -> 5: keyed JSON documents of an experiment (a trial-based door's study and trials)
    (
        """CREATE TABLE records (
            experiment_id TEXT NOT NULL,
            key TEXT NOT NULL,
            body TEXT NOT NULL,
            PRIMARY KEY (experiment_id, key)
        )""",
        "CREATE INDEX records_by_key ON records (key)",
    ),
    # 5 -> 6: experiments by exact name (a trial-based door finds its project without reading every header)
    ("CREATE INDEX experiments_by_name ON experiments (name)",),
)
SCHEMA_VERSION = len(MIGRATIONS)

@dataclass(frozen=True)
class _Upsert:
    """An INSERT ... ON CONFLICT DO UPDATE (or any statement over a VALUES list) run
    with many rows in ONE statement (`VALUES (..), (..), ...`): a transaction is then a handful of statements,
    so the writer thread gives up and takes back the GIL a handful of times, not
    once per row (each take-back can wait a switch interval on a busy loop)."""

    head: str
    row: str
    tail: str

    def chunks(self, rows: list[tuple[Any, ...]]) -> list[tuple[str, list[Any]]]:
        per = max(1, _MAX_VARIABLES // len(rows[0]))
        out = []
        for i in range(0, len(rows), per):
            chunk = rows[i : i + per]
            values = ",".join([self.row] * len(chunk))
            out.append((f"{self.head} {values} {self.tail}", [v for r in chunk for v in r]))
        return out


# Bound parameters per statement: SQLite allows 32,766 since 3.32, 999 before.
_MAX_VARIABLES = 32_000 if sqlite3.sqlite_version_info >= (3, 32) else 990
_UPSERT_EXPERIMENT = _Upsert(
    """INSERT INTO experiments (id, owner, state, name, created_at, open_suggestions, observations, drawn, body) VALUES""",
    "(?, ?, ?, ?, ?, ?, ?, ?, ?)",
    """ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, state = excluded.state, name = excluded.name,
    created_at = excluded.created_at, open_suggestions = excluded.open_suggestions,
    observations = excluded.observations, drawn = excluded.drawn, body = excluded.body""",
)
_UPSERT_SUGGESTION = _Upsert(
    """INSERT INTO suggestions (experiment_id, id, state, tag, created_at, assignments, attempts, released) VALUES""",
    "(?, ?, ?, ?, ?, ?, ?, ?)",
    """ON CONFLICT (experiment_id, id) DO UPDATE SET state = excluded.state, tag = excluded.tag,
    created_at = excluded.created_at, assignments = excluded.assignments, attempts = excluded.attempts,
    released = excluded.released""",
)
_UPSERT_OBSERVATION = _Upsert(
    """INSERT INTO observations (experiment_id, id, suggestion_id, value, failed, created_at, assignments, metrics,
    stopped_at_step) VALUES""",
    "(?, ?, ?, ?, ?, ?, ?, ?, ?)",
    """ON CONFLICT (experiment_id, id) DO UPDATE SET suggestion_id = excluded.suggestion_id, value = excluded.value,
    failed = excluded.failed, created_at = excluded.created_at, assignments = excluded.assignments,
    metrics = excluded.metrics, stopped_at_step = excluded.stopped_at_step""",
)
_INSERT_REPORT = _Upsert("INSERT INTO reports (experiment_id, suggestion_id, step, value, created_at) VALUES", "(?, ?, ?, ?, ?)", "")
_UPSERT_CREDENTIAL = _Upsert(
    """INSERT INTO credentials (id, name, token_hash, created_at, revoked_at, suggestions_per_day, max_active_experiments) VALUES""",
    "(?, ?, ?, ?, ?, ?, ?)",
    """ON CONFLICT (id) DO UPDATE SET name = excluded.name, token_hash = excluded.token_hash,
    created_at = excluded.created_at, revoked_at = excluded.revoked_at,
    suggestions_per_day = excluded.suggestions_per_day, max_active_experiments = excluded.max_active_experiments""",
)
_UPSERT_RECORD = _Upsert(
    "INSERT INTO records (experiment_id, key, body) VALUES", "(?, ?, ?)",
    "ON CONFLICT (experiment_id, key) DO UPDATE SET body = excluded.body",
)
_REVOKE_CREDENTIAL = "UPDATE credentials SET revoked_at = ? WHERE id = ?"
_DELETE_EXPERIMENT = tuple(
    f"DELETE FROM {table} WHERE {key} = ?"
    for table, key in (("records", "experiment_id"), ("reports", "experiment_id"), ("observations", "experiment_id"),
                       ("suggestions", "experiment_id"), ("experiments", "id"))
)  # fmt: skip
# Every mutation updates its experiment's counters, so a group over many experiments
# updates many rows: one UPDATE ... FROM (VALUES ...) statement (SQLite >= 3.33), not
# executemany's step per row, each of which gives up and takes back the GIL (with 100
# experiments under load that was most of a transaction's time, and the durable tail).
_UPDATE_COUNTERS: "_Upsert | str" = (
    _Upsert(
        "UPDATE experiments SET open_suggestions = v.column2, observations = v.column3, drawn = v.column4 FROM (VALUES",
        "(?, ?, ?, ?)",
        ") AS v WHERE experiments.id = v.column1",
    )
    if sqlite3.sqlite_version_info >= (3, 33)
    else "UPDATE experiments SET open_suggestions = ?, observations = ?, drawn = ? WHERE id = ?"
)
def _statements(rows: GroupRows) -> Plan:
    """The SQL and its rows; raises if an object cannot be turned into a row.
    Deletes first: the writes of the group before a delete were forgotten, the later ones stay."""
    plan: Plan = []
    if rows.deletes:
        deletes = [(text(i),) for i in rows.deletes]
        plan += [(sql, deletes) for sql in _DELETE_EXPERIMENT]
    # only the tables the group writes (a trial's change: a record and a suggestion)
    if rows.experiments:
        plan.append((_UPSERT_EXPERIMENT, [experiment_row(w) for w in rows.experiments.values()]))
    if rows.counters:
        plan.append((_UPDATE_COUNTERS, [_counters_row(c) for c in rows.counters.values()]))
    if rows.suggestions:
        plan.append((_UPSERT_SUGGESTION, [suggestion_row(x) for x in rows.suggestions.values()]))
    if rows.observations:
        plan.append((_UPSERT_OBSERVATION, [observation_row(x) for x in rows.observations.values()]))
    if rows.credentials:
        plan.append((_UPSERT_CREDENTIAL, [credential_row(x) for x in rows.credentials.values()]))
    if rows.revokes:
        plan.append((_REVOKE_CREDENTIAL, [(float(r.revoked_at), text(r.credential_id)) for r in rows.revokes]))
    if rows.reports:
        plan.append((_INSERT_REPORT, [report_row(r) for r in rows.reports]))
    if rows.records:
        plan.append((_UPSERT_RECORD, [record_row(key, body) for key, body in rows.records.items()]))
    return plan


def _counters_row(c: PutCounters) -> tuple[Any, ...]:
    if isinstance(_UPDATE_COUNTERS, _Upsert):  # UPDATE ... FROM (VALUES (id, open, observations, drawn))
        return (text(c.experiment_id), int(c.open_suggestions), int(c.observations), int(c.drawn))
    return (int(c.open_suggestions), int(c.observations), int(c.drawn), text(c.experiment_id))


def _inspect(path: Path) -> int | None:
    """Schema version of an existing store (None: no file or an empty one, to be
    created). Raises StoreError for anything we must not touch. Opens read-only."""
    if not path.exists():
        if not path.parent.is_dir():
            raise StoreError(f"{path}: directory {path.parent} does not exist; create it first")
        if Path(f"{path}-wal").exists():
            # SQLite would replay this log into a new empty file: half a store, silently.
            raise StoreError(
                f"{path} is missing but its write-ahead log {path}-wal is there: the database was deleted "
                "or moved; restore it, or remove the -wal and -shm files to start a new store"
            )
        return None
    if path.is_dir():
        raise StoreError(f"{path} is a directory; give the path of a database file (e.g. {path / 'tauopt.db'})")
    try:
        with path.open("rb") as f:
            head = f.read(len(_SQLITE_MAGIC))
    except OSError as exc:
        raise StoreError(f"{path}: cannot read it ({exc.strerror}); check its permissions") from exc
    if not head:
        return None  # an empty file is an empty database to SQLite
    if head != _SQLITE_MAGIC:
        raise StoreError(
            f"{path} is not a SQLite database (it was left untouched); give a new path or the path of a tauopt store"
        )
    try:
        conn = sqlite3.connect(_read_only_uri(path), uri=True)
        try:
            _check_pages(conn, path)
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "schema_version" not in tables:
                if tables:
                    raise StoreError(
                        f"{path} is a SQLite database but not a tauopt store (tables: {', '.join(sorted(tables))}); "
                        "it was left untouched; give a new path"
                    )
                return None
            row = conn.execute("SELECT version FROM schema_version").fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise StoreError(
            f"{path}: cannot read it as a SQLite database ({exc}); it was left untouched; "
            "restore it from a backup or give a new path"
        ) from exc
    version = 0 if row is None else int(row[0])
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path} was written by a newer tauopt (schema version {version}; this tauopt reads up to "
            f"{SCHEMA_VERSION}); it was left untouched; upgrade tauopt to open it"
        )
    return version


def _read_only_uri(path: Path) -> str:
    """Read-only, and with no -wal: immutable too, else SQLite would create -wal
    and -shm beside a file it may be about to refuse."""
    uri = f"{path.resolve().as_uri()}?mode=ro"
    return uri if Path(f"{path}-wal").exists() else uri + "&immutable=1"


def _check_pages(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a file with corrupt pages now, in one line, not at some later read.
    quick_check reads every page once: about a second per few hundred MB."""
    problems = [r[0] for r in conn.execute("PRAGMA quick_check(3)")]
    if problems != ["ok"]:
        found = "; ".join(line for p in problems for line in str(p).splitlines() if not line.startswith("***"))
        raise StoreError(
            f"{path}: the database is corrupt ({found[:300]}); it was left untouched; "
            "restore it from a backup or give a new path"
        )


class SqliteStore(GroupWritten, Store):
    """The durable store: `SqliteStore("tauopt.db", durability="os"|"fsync")`.

    `await store.start(task_group)` opens (or creates and migrates) the file and
    starts the writer task in `task_group`, which must outlive the store's
    users; `await store.aclose()` commits what is queued (within
    `close_timeout` seconds, shielded), stops the writer and closes. `async
    with SqliteStore(path) as store:` does both in a task group of its own. `submit` must be called from the
    event loop the store was started in.
    """

    durable = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        durability: Durability = "os",
        *,
        close_timeout: float = 10.0,
        gather_turns: int = 16,
        exclusive: bool = True,
        checkpoint_bytes: int = 8 << 20,
        checkpoint_idle_s: float = 0.5,
    ) -> None:
        if durability not in _SYNCHRONOUS:
            raise ValueError(f"durability must be 'os' or 'fsync', not {durability!r}")
        if not (isinstance(checkpoint_bytes, int) and checkpoint_bytes > 0) or not checkpoint_idle_s > 0:
            raise ValueError(
                f"checkpoint_bytes must be a positive int and checkpoint_idle_s a positive number of seconds, "
                f"not {checkpoint_bytes!r} and {checkpoint_idle_s!r}"
            )
        text = os.fspath(path)
        self.path = Path(sqlite_path(text))
        self.durability: Durability = durability
        # exclusive=False is for the CLI's short token/experiments edits beside a running
        # engine: SQLite's own locking keeps those safe; an engine must own its file.
        self._lock = FileLock(self.path) if exclusive else None
        self.close_timeout = close_timeout
        # WAL checkpoints (off the commit path): past this WAL size, or when the writer is idle this long
        self.checkpoint_bytes = checkpoint_bytes
        self.checkpoint_idle_s = checkpoint_idle_s
        self._writer: SqliteWriter | None = None
        self._reader: SqliteThread | None = None
        self._loaders: list[SqliteThread] = []  # snapshot loads, apart from the reader's short reads
        self._loading: dict[int, int] = {}  # loads queued per loader (by index)
        self._state: Literal["new", "open", "closing", "closed"] = "new"
        self._watch: FileWatch | None = None
        self._gone: BaseException | None = None  # set once the file is found gone: sticky
        self._group = GroupCommitWriter(
            _prepare, self._apply, name=repr(self), explain=self._explain_error, gather_turns=gather_turns
        )
        self._group.on_commit = self._committed

    @property
    def gather_turns(self) -> int:
        return self._group.gather_turns

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r}, durability={self.durability!r})"

    # -- lifecycle -----------------------------------------------------------

    async def start(self, task_group: TaskGroup | None = None) -> None:
        if task_group is None:
            raise TypeError(
                "SqliteStore.start(task_group): give the task group that owns the writer task "
                "(one that outlives the store's users), or use `async with SqliteStore(path) as store`"
            )
        if self._state != "new":
            raise StoreError(f"{self!r} was already started")
        version = await anyio.to_thread.run_sync(_inspect, self.path)  # read-only checks
        if self._lock is not None:
            try:
                self._lock.acquire()  # before any write: a refused open touches nothing
            except OSError as exc:
                raise StoreError(_explain(self.path, sqlite3.OperationalError(f"read-only: {exc}"))) from exc
        try:
            create_private(self.path)
            self._writer = SqliteWriter(
                self.path,
                synchronous=_SYNCHRONOUS[self.durability],
                checkpoint_bytes=self.checkpoint_bytes,
                idle_s=self.checkpoint_idle_s,
            )
            await self._writer.open()
            await self._writer.call(lambda conn: self._set_up_writer(conn, version or 0))
            self._reader = SqliteThread(self.path)
            await self._reader.open()
            await self._reader.call(_set_up_reader)
            for _ in range(_LOADERS):
                loader = SqliteThread(self.path)
                self._loaders.append(loader)
                await loader.open()
                await loader.call(_set_up_loader)
            self._watch = FileWatch(self.path)
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await self._close_connections()
            self._release_lock()
            if isinstance(exc, sqlite3.Error):
                raise StoreError(_explain(self.path, exc)) from exc
            raise
        self._state = "open"
        await task_group.start(self._group.run)

    def _set_up_writer(self, conn: sqlite3.Connection, version: int) -> None:
        """On the writer thread: pragmas, then migrate (which writes, so a read-only
        location fails here and not at the first ask)."""
        conn.execute("PRAGMA busy_timeout = 5000")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"{self.path}: cannot use WAL mode (journal_mode is {mode}); put the store on a local disk")
        conn.execute(f"PRAGMA synchronous = {_SYNCHRONOUS[self.durability]}")
        # No COMMIT pays for a checkpoint: the writer thread has them run beside its commits.
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        conn.execute(f"PRAGMA journal_size_limit = {int(self.checkpoint_bytes)}")
        _migrate(conn, version)

    async def aclose(self) -> None:
        if self._state in ("closing", "closed"):
            return
        if self._state == "new":
            self._state = "closed"
            return
        self._state = "closing"
        await self._group.close(self.close_timeout)
        with anyio.move_on_after(self.close_timeout, shield=True):
            await self._close_connections()
        self._release_lock()
        if self._watch is not None:
            self._watch.close()
        self._state = "closed"

    def _release_lock(self) -> None:
        if self._lock is not None:
            self._lock.release()

    async def _close_connections(self) -> None:
        # The readers first: the writer's connection, closed last, checkpoints and removes the WAL.
        conns = [*self._loaders, self._reader, self._writer]
        self._loaders, self._reader, self._writer = [], None, None
        for conn in conns:
            if conn is not None:
                try:
                    await conn.close()
                except sqlite3.Error as exc:  # closing must not hide the caller's error
                    log.warning("store %s: closing a connection failed: %r", self.path, exc)

    @property
    def checkpoints(self) -> int:
        """WAL checkpoints the writer thread ran (for tests and benchmarks)."""
        return 0 if self._writer is None else self._writer.checkpoints

    # -- writes ----------------------------------------------------------------

    def submit(self, writes: Sequence[Write], done: Done) -> None:
        self._group.submit(writes, done)

    async def _apply(self, plan: Plan) -> bool:
        if not plan:
            return False
        if self._file_gone():
            raise self._gone  # type: ignore[misc]  # StoreUnavailable: every batch of the group fails with it
        writer = self._writer
        assert writer is not None
        await writer.commit(lambda conn: _transact(conn, plan))  # the whole transaction: one call
        return True

    def _file_gone(self) -> bool:
        """Before committing: was the file deleted, replaced or truncated? (logged once)"""
        if self._gone is None and self._watch is not None:
            problem = self._watch.problem()
            if problem is not None:
                self._gone = unavailable(problem)
                log.error("store %s: %s", self.path, self._gone)
        return self._gone is not None

    def _explain_error(self, exc: Exception) -> str:
        return _explain(self.path, exc) if isinstance(exc, sqlite3.Error) else f"{self.path}: {exc!r}"

    # -- reads ------------------------------------------------------------------

    def _conn(self) -> SqliteThread:
        if self._reader is None:
            raise StoreError(f"{self!r} is not open; call start() first")
        return self._reader

    async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return await self._conn().call(lambda conn: conn.execute(sql, params).fetchall())

    async def load(self, experiment_id: str) -> Snapshot | None:
        # One snapshot, read and decoded on the least busy loader connection's thread: a
        # long history takes a second or more, and neither the event loop, nor the
        # reader's short reads (index rows, credentials), nor a load on the other
        # loader waits for it.
        self._conn()  # refused when the store is not open
        i = min(range(len(self._loaders)), key=lambda k: self._loading.get(k, 0))
        self._loading[i] = self._loading.get(i, 0) + 1
        try:
            return await self._loaders[i].call(lambda conn: _load_snapshot(conn, experiment_id))
        finally:
            self._loading[i] -= 1

    async def list_experiments(
        self, state: str | None = None, owner: str | None = None, *, after: str | None = None,
        limit: int | None = None, name: str | None = None, named: str | None = None,
    ) -> list[Experiment]:  # fmt: skip
        sql, params = experiments_query(lambda n: f"?{n}", state, owner, after, limit, name, not_indexed="+", named=named)

        def read(conn: sqlite3.Connection) -> list[Experiment]:
            # decoded on the reader's thread: a page of 1,000 takes ~100 ms to parse, which
            # the event loop (every worker's ask) should not wait for
            return [experiment_of(body, o, n_open, n_obs) for o, body, n_open, n_obs in conn.execute(sql, params)]

        return await self._conn().call(read)

    async def active_strategies(self, after: str | None = None, limit: int = 100) -> tuple[list[str], str | None]:
        # the strategy read out of each body by SQLite (C, no Python object per experiment);
        # "+state": by the primary key, not the (owner, state) index and a sort
        cursor = " AND seq > (SELECT seq FROM experiments WHERE id = ?2)" if after is not None else ""
        rows = await self._all(
            "SELECT id, coalesce(json_extract(body, '$.strategy'), 'auto') FROM experiments "
            f"WHERE +state = 'active'{cursor} ORDER BY seq LIMIT ?1",
            (int(limit), after) if after is not None else (int(limit),),
        )
        return [str(r[1]) for r in rows], (rows[-1][0] if rows else None)

    async def count_experiments(self, owner: str | None, exclude_state: str = "archived") -> int:
        rows = await self._all(
            "SELECT count(*) FROM experiments WHERE state IS NOT ?1 AND (?2 IS NULL OR owner = ?2)",
            (exclude_state, owner),
        )
        return int(rows[0][0])

    async def experiment_gauges(self, top: int) -> ExperimentGauges:
        states = await self._all(STATES_QUERY)
        busiest = await self._all(BUSIEST_QUERY.format(top=int(top))) if top > 0 else []
        return ExperimentGauges(dict(states), tuple((e, int(o), int(n)) for e, o, n in busiest))

    async def has_experiment(self, experiment_id: str) -> bool:
        return bool(await self._all("SELECT 1 FROM experiments WHERE id = ?", (experiment_id,)))

    async def index_row(self, experiment_id: str) -> IndexRow | None:
        rows = await self._all("SELECT owner, state FROM experiments WHERE id = ?", (experiment_id,))
        return IndexRow(rows[0][0], rows[0][1]) if rows else None
    async def records(self, key: str) -> list[tuple[str, str]]:
        rows = await self._all("SELECT experiment_id, body FROM records WHERE key = ?", (key,))
        return [(e, b) for e, b in rows]

    async def credentials(self) -> list[CredentialRecord]:
        rows = await self._all(f"SELECT {CREDENTIAL_COLUMNS} FROM credentials ORDER BY seq")
        return [CredentialRecord(*r) for r in rows]

    async def credential_by_hash(self, token_hash: str) -> CredentialRecord | None:
        rows = await self._all(f"SELECT {CREDENTIAL_COLUMNS} FROM credentials WHERE token_hash = ?", (token_hash,))
        return CredentialRecord(*rows[0]) if rows else None

    async def suggestion_times(self, owner: str | None, since: float) -> list[float]:
        rows = await self._all(
            "SELECT s.created_at FROM experiments e JOIN suggestions s ON s.experiment_id = e.id "
            "WHERE e.owner IS ? AND s.created_at >= ? ORDER BY s.created_at",
            (owner, since),
        )
        return [r[0] for r in rows]


Plan = list[tuple[Union["_Upsert", str], list[tuple[Any, ...]]]]


_LOADERS = 2  # connections that load experiments' snapshots, each on its own thread


def _set_up_loader(conn: sqlite3.Connection) -> None:
    """A reader that reads once now: it joins the WAL (opens -wal and -shm) at start, as the
    reader does with its first reads, so a database file deleted later is still read from."""
    _set_up_reader(conn)
    conn.execute("SELECT count(*) FROM experiments").fetchone()


def _set_up_reader(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute("PRAGMA query_only = 1")


def _load_snapshot(conn: sqlite3.Connection, experiment_id: str) -> Snapshot | None:
    """On the reader thread: an experiment's rows, all from one read transaction, decoded
    as they are read (cursors, not fetchall): a long history's rows never all sit in
    memory at once beside the objects made from them, which would leave the heap
    fragmented at several times the history's size."""
    conn.execute("BEGIN")
    try:
        head = conn.execute(
            f"SELECT {HEAD_COLUMNS} FROM experiments WHERE id = ?", (experiment_id,)
        ).fetchone()
        if head is None:
            return None
        by_seq = "WHERE experiment_id = ? ORDER BY seq"
        return snapshot_of(
            experiment_id,
            head,
            conn.execute(f"SELECT {SUGGESTION_COLUMNS} FROM suggestions {by_seq}", (experiment_id,)),
            conn.execute(f"SELECT {OBSERVATION_COLUMNS} FROM observations {by_seq}", (experiment_id,)),
            conn.execute(f"SELECT {REPORT_COLUMNS} FROM reports {by_seq}", (experiment_id,)),
            conn.execute("SELECT key, body FROM records WHERE experiment_id = ? ORDER BY key", (experiment_id,)),
        )
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")


def _prepare(batches: Sequence[Sequence[Write]]) -> tuple[Plan, list[BaseException | None]]:
    """One plan for the group; a batch that cannot be turned into rows fails alone."""
    return prepare(batches, _statements)


def _transact(conn: sqlite3.Connection, plan: Plan) -> None:
    """One transaction, run on the writer thread: BEGIN IMMEDIATE, one multi-row
    upsert per table (chunked at the bound-parameter limit), COMMIT. A group is a
    handful of statements however many batches it holds."""
    with _write_transaction(conn):
        for statement, rows in plan:
            if isinstance(statement, _Upsert):
                for sql, params in statement.chunks(rows):
                    conn.execute(sql, params)
            else:
                conn.executemany(statement, rows)


@contextmanager
def _write_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """BEGIN IMMEDIATE ... COMMIT; on any failure (a failing COMMIT included) a ROLLBACK."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _migrate(conn: sqlite3.Connection, version: int, target: int = SCHEMA_VERSION) -> None:
    """Run MIGRATIONS[version:target] in one transaction. With nothing to migrate,
    still write (a no-op update) so a read-only file or directory fails now."""
    with _write_transaction(conn):
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = conn.execute("SELECT count(*) FROM schema_version").fetchone()
        if row is None or row[0] == 0:
            conn.execute("INSERT INTO schema_version (version) VALUES (0)")
        for step in range(version, target):
            for sql in MIGRATIONS[step]:
                conn.execute(sql)
        conn.execute("UPDATE schema_version SET version = ?", (max(version, target),))


def _explain(path: Path, exc: sqlite3.Error) -> str:
    text = str(exc)
    if "readonly" in text or "read-only" in text or "unable to open" in text:
        return (
            f"{path}: cannot write the store ({text}); the file or its directory is read-only "
            "(SQLite also needs to create -wal and -shm files next to it); choose a writable location"
        )
    return f"{path}: {text}"

