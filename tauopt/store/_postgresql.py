"""PostgresStore: the durable Store on a PostgreSQL server, through asyncpg.

Write path: the shared GroupCommitWriter (`_group_commit.py`) batches
concurrent writes; `_rows.py` turns a group into rows (a batch whose objects
cannot be stored fails alone, before the transaction); this module runs them
as ONE transaction on the writer's own connection: one statement per table,
each taking its rows as arrays (`INSERT ... SELECT * FROM unnest($1::text[],
...) ON CONFLICT ... DO UPDATE`), so a group of any size is a handful of round
trips. Every connection runs with `synchronous_commit = on`: a write is
acknowledged after the server has it on its disk.

Read path: a pool of `pool_size` connections (per store, so per daemon, not
per experiment); `load` reads in one REPEATABLE READ, read-only transaction, so
an experiment, its suggestions, observations and reports come from one snapshot.

Failures, each a StoreError with a message that says what to do:
- the server cannot be reached, or the connection is lost: StoreUnavailable
  (HTTP 503 `store_unavailable`). A connection found dead before COMMIT was
  sent is replaced and the transaction run again, once; one lost while
  committing fails its group (the outcome is unknown, so the engine reloads
  the experiment from the database). The next group reconnects by itself.
- a statement over `statement_timeout_s`, a full disk, a constraint: the
  transaction rolls back and fails its group; nothing of it is kept.

Schema (`_postgresql_schema.py`): MIGRATIONS has the SQLite store's version
numbers; `start` applies what is missing in one transaction, once however many
daemons start together, and refuses a newer or a foreign schema untouched.
Tables live in the connection's current schema (the URL's `?search_path=...`
chooses another).

One engine per database (per schema): an engine's store holds a session advisory
lock on its writer connection (`exclusive=True`, the default), so a second engine
is refused with `store_in_use`, as on a SQLite file; the admin commands open
without it. A writer that reconnects takes the lock again, or refuses writes if
another engine took it meanwhile.

asyncio only: asyncpg has no trio support, so `start` refuses under trio.

Adding a store operation: a read is one method with its SQL; a write type is
one statement in `_plan` (its rows from `_rows.py`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence, TypeVar
from urllib.parse import urlsplit, urlunsplit

import anyio
from anyio.abc import TaskGroup

from ..errors import ApiError, api_error
from ..models import Experiment
from ._base import CredentialRecord, Done, ExperimentGauges, IndexRow, Sharing, Snapshot, Store, StoreError, Write
from ._filewatch import StoreUnavailable, read_error
from ._group_commit import GroupCommitWriter, GroupWritten
from ._leases import SECTION_LOCK, Leases
from ._postgresql_schema import MIGRATION_LOCK, MIGRATIONS, SCHEMA_VERSION, TABLES, migrate
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
    experiments_query,
    experiment_row,
    observation_row,
    prepare,
    record_row,
    report_row,
    snapshot_of,
    suggestion_row,
    text,
)

__all__ = ["PostgresStore", "SCHEMA_VERSION", "MIGRATIONS", "TABLES"]

log = logging.getLogger("tauopt.store")
T = TypeVar("T")

# Ownership of the database by one engine: an advisory lock keyed by the schema the tables live in.
_OWNER_LOCK = "SELECT pg_try_advisory_lock(1952544112, hashtext(current_schema()))"


def _upsert(table: str, key: str, columns: Sequence[tuple[str, str]], update: bool = True) -> str:
    """INSERT of many rows given as one array per column; on a key conflict, the new values win."""
    names = ", ".join(c for c, _ in columns)
    arrays = ", ".join(f"${i}::{t}[]" for i, (_, t) in enumerate(columns, 1))
    keys = {k.strip() for k in key.split(",")}
    sets = ", ".join(f"{c} = excluded.{c}" for c, _ in columns if c not in keys)
    action = f"ON CONFLICT ({key}) DO UPDATE SET {sets}" if update else ""
    return f"INSERT INTO {table} ({names}) SELECT * FROM unnest({arrays}) {action}"


_T, _F, _I = "text", "float8", "int8"
_UPSERT_EXPERIMENT = _upsert("experiments", "id", [
    ("id", _T), ("owner", _T), ("state", _T), ("name", _T), ("created_at", _F), ("open_suggestions", _I),
    ("observations", _I), ("drawn", _I), ("body", _T),
])  # fmt: skip
_UPSERT_SUGGESTION = _upsert("suggestions", "experiment_id, id", [
    ("experiment_id", _T), ("id", _T), ("state", _T), ("tag", _T), ("created_at", _F), ("assignments", _T),
    ("attempts", _I), ("released", _I),
])  # fmt: skip
_UPSERT_OBSERVATION = _upsert("observations", "experiment_id, id", [
    ("experiment_id", _T), ("id", _T), ("suggestion_id", _T), ("value", _F), ("failed", _I), ("created_at", _F),
    ("assignments", _T), ("metrics", _T), ("stopped_at_step", _I),
])  # fmt: skip
_UPSERT_CREDENTIAL = _upsert("credentials", "id", [
    ("id", _T), ("name", _T), ("token_hash", _T), ("created_at", _F), ("revoked_at", _F),
    ("suggestions_per_day", _I), ("max_active_experiments", _I),
])  # fmt: skip
_INSERT_REPORT = _upsert("reports", "experiment_id, suggestion_id, step", [
    ("experiment_id", _T), ("suggestion_id", _T), ("step", _I), ("value", _F), ("created_at", _F),
], update=False)  # fmt: skip
_UPSERT_RECORD = _upsert("records", "experiment_id, key", [("experiment_id", _T), ("key", _T), ("body", _T)])
_UPDATE_COUNTERS = (
    "UPDATE experiments SET open_suggestions = v.o, observations = v.n, drawn = v.d "
    "FROM unnest($1::text[], $2::int8[], $3::int8[], $4::int8[]) AS v(id, o, n, d) WHERE experiments.id = v.id"
)
# An experiment deleted: its rows of every table, in one statement each for the group's deletes.
_DELETE_EXPERIMENT = tuple(
    f"DELETE FROM {table} WHERE {key} = ANY($1::text[])"
    for table, key in (("records", "experiment_id"), ("reports", "experiment_id"), ("observations", "experiment_id"),
                       ("suggestions", "experiment_id"), ("experiments", "id"))
)  # fmt: skip
# Revocations are rare and may name one credential twice in a group: one statement per row, in order.
_REVOKE_CREDENTIAL = "UPDATE credentials SET revoked_at = $1 WHERE id = $2"



@dataclass(frozen=True)
class Plan:
    """A group's statements: (sql, one array per column, True) or (sql, [row, ...], False) for
    executemany; and the experiments it writes (fenced when daemons share the database)."""

    statements: list[tuple[str, list[Any], bool]]
    experiment_ids: list[str]
    deleted: list[str]

    def __bool__(self) -> bool:
        return bool(self.statements)


def _columns(rows: list[tuple[Any, ...]]) -> list[list[Any]]:
    """Rows as one list per column; text may not hold NUL in PostgreSQL (SQLite allows it),
    so such a value fails its batch here rather than the group's transaction."""
    columns = [list(c) for c in zip(*rows)]
    for column in columns:
        for v in column:
            if type(v) is str and "\x00" in v:
                raise ValueError("text with a NUL character (\\x00) cannot be stored in PostgreSQL")
    return columns


def _plan(rows: GroupRows) -> Plan:
    """The group's statements, in the SQLite store's order; raises if an object cannot be turned into a row."""
    counters = [(text(c.experiment_id), int(c.open_suggestions), int(c.observations), int(c.drawn))
                for c in rows.counters.values()]  # fmt: skip
    arrays = [
        (_UPSERT_EXPERIMENT, [experiment_row(w) for w in rows.experiments.values()]),
        (_UPDATE_COUNTERS, counters),
        (_UPSERT_SUGGESTION, [suggestion_row(x) for x in rows.suggestions.values()]),
        (_UPSERT_OBSERVATION, [observation_row(x) for x in rows.observations.values()]),
        (_UPSERT_CREDENTIAL, [credential_row(x) for x in rows.credentials.values()]),
    ]
    plan: list[tuple[str, list[Any], bool]] = []
    if rows.deletes:  # first: the writes of the group before a delete were forgotten, the later ones stay
        deletes = _columns([(text(i),) for i in rows.deletes])
        plan += [(sql, deletes, True) for sql in _DELETE_EXPERIMENT]
    plan += [(sql, _columns(r), True) for sql, r in arrays if r]
    if rows.revokes:
        revokes = [(float(r.revoked_at), text(r.credential_id)) for r in rows.revokes]
        _columns(revokes)
        plan.append((_REVOKE_CREDENTIAL, revokes, False))
    if rows.reports:
        plan.append((_INSERT_REPORT, _columns([report_row(r) for r in rows.reports]), True))
    if rows.records:
        plan.append((_UPSERT_RECORD, _columns([record_row(k, b) for k, b in rows.records.items()]), True))
    ids = {*rows.experiments, *rows.counters, *(k[0] for k in rows.suggestions), *(k[0] for k in rows.observations),
           *(r.experiment_id for r in rows.reports), *(k[0] for k in rows.records), *rows.deletes}  # fmt: skip
    return Plan(plan, sorted(ids), list(rows.deletes))


def _prepare(batches: Sequence[Sequence[Write]]) -> tuple[Plan, list[BaseException | None]]:
    return prepare(batches, _plan)


def shown_url(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


class PostgresStore(GroupWritten, Store):
    """The durable store on PostgreSQL: `PostgresStore("postgresql://user@host:5432/db")`.

    `pool_size` connections serve reads (one more, the writer's, commits groups);
    `statement_timeout_s` bounds every statement on the server; `connect_timeout_s`
    each connection attempt. Lifecycle as the SQLite store's: `await
    store.start(task_group)` connects, migrates and starts the writer task;
    `await store.aclose()` commits what is queued (within `close_timeout`, shielded)
    and closes. asyncio only.
    """

    durable = True

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 4,
        statement_timeout_s: float = 30.0,
        connect_timeout_s: float = 5.0,
        close_timeout: float = 10.0,
        gather_turns: int = 16,
        exclusive: bool = True,
        shared: Leases | None = None,
    ) -> None:
        if not (isinstance(pool_size, int) and pool_size >= 1):
            raise ValueError(f"pool_size must be an int >= 1, not {pool_size!r}")
        if not statement_timeout_s > 0 or not connect_timeout_s > 0:
            raise ValueError("statement_timeout_s and connect_timeout_s must be positive numbers of seconds")
        self.url = url
        self.pool_size = pool_size
        self.statement_timeout_s = float(statement_timeout_s)
        self.connect_timeout_s = float(connect_timeout_s)
        self.close_timeout = close_timeout
        # Several daemons on the database: ownership by lease rows (`_leases.py`), no database-wide lock.
        self.shared = shared
        self.daemon_id = None if shared is None else shared.daemon_id
        self.exclusive = exclusive and shared is None
        self._renewing: anyio.CancelScope | None = None
        self._section = anyio.Lock()
        self._conn: Any = None  # the writer's connection (asyncpg.Connection), replaced when lost
        self._pool: Any = None
        self._asyncpg: Any = None
        self._state = "new"
        self._group = GroupCommitWriter(
            _prepare, self._apply, name=repr(self), explain=self._explain, gather_turns=gather_turns
        )
        self._group.on_commit = self._committed

    def __repr__(self) -> str:
        return f"PostgresStore({shown_url(self.url)!r})"


    # -- lifecycle -----------------------------------------------------------

    async def start(self, task_group: TaskGroup | None = None) -> None:
        if task_group is None:
            raise TypeError(
                "PostgresStore.start(task_group): give the task group that owns the writer task, "
                "or use `async with PostgresStore(url) as store`"
            )
        if self._state != "new":
            raise StoreError(f"{self!r} was already started")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise StoreError(
                "the PostgreSQL store runs on asyncio only (its driver, asyncpg, has no trio support); "
                "run the engine on asyncio, or use the SQLite or memory store under trio"
            ) from None
        try:
            import asyncpg
        except ImportError as exc:
            raise StoreError(f"the PostgreSQL store needs asyncpg: pip install 'tauopt[postgresql]' ({exc})") from exc
        self._asyncpg = asyncpg
        try:
            self._conn = await self._connect()
            await migrate(self._conn, repr(self))
            if self.exclusive and not await self._conn.fetchval(_OWNER_LOCK):
                raise api_error(
                    "store_in_use",
                    f"{self!r} is already open in another engine (it holds the database's tauopt lock); one "
                    "engine owns a tauopt database at a time. Run `tauopt serve --store URL` once and connect "
                    "every worker with Client(driver=\"http\", ...)",
                )
            if self.shared is not None:
                async with self._conn.transaction():
                    await self._conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
                    await self.shared.register(self._conn)
            self._pool = await asyncpg.create_pool(
                self.url, min_size=1, max_size=self.pool_size, timeout=self.connect_timeout_s,
                server_settings=self._settings(), command_timeout=None,
            )  # fmt: skip
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await self._close_connections()
            if isinstance(exc, (StoreError, ApiError)) or not isinstance(exc, Exception):
                raise
            raise self._error(exc, "cannot open the store") from exc
        self._state = "open"
        await task_group.start(self._group.run)
        if self.shared is not None:
            task_group.start_soon(self._keep_lease, self.shared)

    async def _keep_lease(self, shared: Leases) -> None:
        with anyio.CancelScope() as self._renewing:
            await shared.keep(self._pool, self.connect_timeout_s)

    async def sharing(self) -> Sharing | None:
        if self.shared is None:
            return None
        return await self._read(self.shared.status)

    async def claim(self, experiment_id: str, new: bool = False) -> str | None:
        if self.shared is None:
            return None
        shared = self.shared
        return await self._read(lambda conn: shared.claim(conn, experiment_id, new))

    async def advertise(self, door: str, host: str, port: int) -> None:
        if self.shared is None:
            return
        if host.strip("[]") in ("", "0.0.0.0", "::"):  # every interface: peers reach it at this daemon's host
            host = urlsplit(self.shared.url).hostname or "127.0.0.1"
        address = f"[{host.strip('[]')}]:{port}" if ":" in host else f"{host}:{port}"
        shared = self.shared
        await self._read(lambda conn: shared.advertise(conn, door, address))

    async def door_of(self, owner_url: str, door: str) -> str | None:
        if self.shared is None:
            return None
        shared = self.shared
        return await self._read(lambda conn: shared.door_of(conn, owner_url, door))

    @asynccontextmanager
    async def one_at_a_time(self) -> AsyncIterator[None]:
        if self.shared is None:  # one engine owns the database
            yield
            return
        async with self._section:  # one pooled connection for this daemon's sections, not one per caller
            if self._pool is None:
                raise StoreError(f"{self!r} is not open; call start() first")
            try:
                conn = await self._pool.acquire(timeout=self.connect_timeout_s)
            except Exception as exc:
                raise read_error(self._error(exc, "cannot start a section")) from exc
            try:
                transaction = conn.transaction()
                try:
                    await transaction.start()
                    # a frozen holder's transaction is ended by the server, and its lock with it
                    idle_ms = round((self.statement_timeout_s + self.shared.lease_s) * 1000)
                    await conn.execute(f"SET LOCAL idle_in_transaction_session_timeout = {idle_ms}")
                    await conn.execute("SELECT pg_advisory_xact_lock($1)", SECTION_LOCK)
                except Exception as exc:
                    raise read_error(self._error(exc, "cannot start a section")) from exc
                try:
                    yield
                finally:
                    with anyio.CancelScope(shield=True):
                        try:
                            await transaction.rollback()  # it wrote nothing: ending it releases the lock
                        except Exception as exc:  # noqa: BLE001 - a lost connection released it too
                            log.warning("store %r: ending a section failed (%r); the server ends it", self, exc)
            finally:
                with anyio.CancelScope(shield=True):
                    await self._pool.release(conn)

    def _settings(self) -> dict[str, str]:
        return {
            "synchronous_commit": "on",  # acknowledged = on the server's disk, whatever the server's default
            "statement_timeout": str(max(1, round(self.statement_timeout_s * 1000))),
            "application_name": "tauopt",
        }

    async def _connect(self) -> Any:
        try:
            return await self._asyncpg.connect(
                self.url, timeout=self.connect_timeout_s, server_settings=self._settings()
            )
        except Exception as exc:
            raise self._error(exc, "cannot connect") from exc

    async def aclose(self) -> None:
        if self._state in ("closing", "closed"):
            return
        if self._state == "new":
            self._state = "closed"
            return
        self._state = "closing"
        await self._group.close(self.close_timeout)
        if self._renewing is not None:
            self._renewing.cancel()
        with anyio.move_on_after(self.close_timeout, shield=True):
            if self.shared is not None and self.shared.lost is None:
                try:
                    await self._read(self.shared.release)
                except (StoreError, ApiError) as exc:  # the lease lapses by itself
                    log.warning("store %r: ending this daemon's lease failed: %s", self, exc)
            await self._close_connections()
        self._state = "closed"

    async def _close_connections(self) -> None:
        conn, self._conn = self._conn, None
        pool, self._pool = self._pool, None
        for closable in (pool, conn):
            if closable is None:
                continue
            try:
                with anyio.fail_after(min(5.0, self.close_timeout)):
                    await closable.close()
            except Exception as exc:  # closing must not hide the caller's error
                log.warning("store %r: closing a connection failed: %r", self, exc)
                closable.terminate()

    # -- errors ----------------------------------------------------------------

    def _lost(self, exc: BaseException) -> bool:
        """Is this a lost or unreachable server (rather than a statement's failure)?"""
        pg = self._asyncpg
        if pg is None:
            return False
        return isinstance(
            exc,
            (OSError, asyncio.TimeoutError, pg.PostgresConnectionError, pg.InterfaceError,
             pg.CannotConnectNowError, pg.AdminShutdownError, pg.CrashShutdownError),
        ) and not isinstance(exc, pg.InterfaceWarning)  # fmt: skip

    def _error(self, exc: Exception, doing: str) -> StoreError:
        return self._unavailable(exc, doing) if self._lost(exc) else StoreError(self._explain(exc))

    def _unavailable(self, exc: Exception, doing: str) -> StoreUnavailable:
        return StoreUnavailable(
            f"{self!r}: {doing}: the PostgreSQL server cannot be reached or the connection was lost "
            f"({type(exc).__name__}: {exc}); nothing of this request was acknowledged. Retry: the store "
            "reconnects by itself once the server is back; check that it runs and the URL is right"
        )

    def _explain(self, exc: Exception) -> str:
        pg = self._asyncpg
        name = type(exc).__name__
        if pg is not None and isinstance(exc, pg.QueryCanceledError):
            return (
                f"{self!r}: PostgreSQL cancelled a statement after statement_timeout "
                f"({self.statement_timeout_s:g} s) or at an administrator's request ({exc}); the transaction was "
                "rolled back and nothing of it was kept; retry, and if it keeps happening look for a long lock "
                "on tauopt's tables or raise statement_timeout_s"
            )
        if pg is not None and isinstance(exc, pg.DiskFullError):
            return (
                f"{self!r}: the PostgreSQL server's disk is full ({exc}); nothing of this transaction was kept; "
                "free space on the server, then retry"
            )
        return f"{self!r}: {name}: {exc}"

    # -- writes ----------------------------------------------------------------

    def submit(self, writes: Sequence[Write], done: Done) -> None:
        self._group.submit(writes, done)

    async def _apply(self, plan: Plan) -> bool:
        if not plan:
            return False
        # Shielded: a reply must never leave before its COMMIT, nor a COMMIT be abandoned halfway.
        with anyio.CancelScope(shield=True):
            await self._transact(plan)
        return True

    async def _writer(self) -> Any:
        if self._conn is None or self._conn.is_closed():
            self._conn = None
            conn = await self._connect()
            try:
                owned = not self.exclusive or await conn.fetchval(_OWNER_LOCK)
            except Exception as exc:
                conn.terminate()
                raise self._error(exc, "cannot reconnect") from exc
            if not owned:
                conn.terminate()
                raise StoreUnavailable(
                    f"{self!r}: while this engine's connection was lost another engine took the database; "
                    "writes are refused here so two engines never write one experiment. Stop this engine "
                    "and send its workers to the other one"
                )
            self._conn = conn
            log.warning("store %r: the writer reconnected to PostgreSQL", self)
        return self._conn

    async def _transact(self, plan: Plan) -> None:
        """BEGIN, one statement per table, COMMIT. A connection lost before COMMIT was
        sent is replaced and the transaction run again, once; one lost during COMMIT
        fails the group (the server may or may not have committed it)."""
        for attempt in (1, 2):
            conn = await self._writer()
            committing = False
            try:
                tx = conn.transaction()
                await tx.start()
                if self.shared is not None:
                    await self.shared.fence(conn, plan.experiment_ids)
                for sql, args, as_arrays in plan.statements:
                    if as_arrays:
                        await conn.execute(sql, *args)
                    else:
                        await conn.executemany(sql, args)
                if self.shared is not None and plan.deleted:
                    await self.shared.forget(conn, plan.deleted)
                committing = True
                await tx.commit()
                return
            except Exception as exc:
                # A server that ended the connection just before a statement can surface as an
                # InternalClientError of the driver's protocol state; the closed connection tells.
                if self._lost(exc) or conn.is_closed():
                    conn.terminate()
                    self._conn = None
                    if attempt == 1 and not committing:
                        continue
                    if committing:
                        raise StoreUnavailable(
                            f"{self!r}: the connection to PostgreSQL was lost while committing ({exc!r}); "
                            "the transaction may or may not be kept, so the experiment is reloaded from the "
                            "database; retry"
                        ) from exc
                    raise self._unavailable(exc, "cannot commit") from exc
                if not conn.is_closed() and conn.is_in_transaction():
                    try:
                        await tx.rollback()
                    except Exception:  # noqa: BLE001 - the connection is broken: start over with a new one
                        conn.terminate()
                        self._conn = None
                raise

    # -- reads ------------------------------------------------------------------

    async def _read(self, fn: Callable[[Any], Awaitable[T]]) -> T:
        """fn(connection) on a pooled connection; a lost connection is retried once on another.
        A read that fails raises the catalogued ApiError (503 `store_unavailable` while the
        server is away), so every door answers it as it answers a failed write."""
        if self._pool is None:
            raise StoreError(f"{self!r} is not open; call start() first")
        for attempt in (1, 2):
            conn: Any = None
            try:
                async with self._pool.acquire(timeout=self.connect_timeout_s) as conn:
                    return await fn(conn)
            except ApiError:
                raise
            except StoreUnavailable as exc:  # fn's own verdict (e.g. this daemon's lease lapsed)
                raise read_error(exc) from exc
            except Exception as exc:
                lost = self._lost(exc) or (conn is not None and conn.is_closed())
                if attempt == 1 and lost:
                    continue
                raise read_error(self._unavailable(exc, "cannot read") if lost else self._error(exc, "cannot read")) from exc
        raise AssertionError("unreachable")

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        return await self._read(lambda conn: conn.fetch(sql, *args))

    async def load(self, experiment_id: str) -> Snapshot | None:
        async def read(conn: Any) -> Snapshot | None:
            async with conn.transaction(isolation="repeatable_read", readonly=True):  # one snapshot
                head = await conn.fetchrow(f"SELECT {HEAD_COLUMNS} FROM experiments WHERE id = $1", experiment_id)
                if head is None:
                    return None
                by_experiment = "FROM {} WHERE experiment_id = $1 ORDER BY seq"
                srows = await conn.fetch(f"SELECT {SUGGESTION_COLUMNS} " + by_experiment.format("suggestions"), experiment_id)
                orows = await conn.fetch(f"SELECT {OBSERVATION_COLUMNS} " + by_experiment.format("observations"), experiment_id)
                rrows = await conn.fetch(f"SELECT {REPORT_COLUMNS} " + by_experiment.format("reports"), experiment_id)
                records = await conn.fetch("SELECT key, body FROM records WHERE experiment_id = $1 ORDER BY key", experiment_id)
            return snapshot_of(experiment_id, head, srows, orows, rrows, records)

        return await self._read(read)

    async def list_experiments(
        self, state: str | None = None, owner: str | None = None, *, after: str | None = None,
        limit: int | None = None, name: str | None = None, named: str | None = None,
    ) -> list[Experiment]:  # fmt: skip
        sql, params = experiments_query(lambda n: f"${n}::text", state, owner, after, limit, name, named=named)
        return [experiment_of(body, o, n_open, n_obs) for o, body, n_open, n_obs in await self._fetch(sql, *params)]

    async def active_strategies(self, after: str | None = None, limit: int = 100) -> tuple[list[str], str | None]:
        # the strategy read out of each body by the server (::json only checks the text,
        # no jsonb tree is built); by the primary key in seq order, the cursor found by
        # the id's unique index
        cursor = " AND seq > (SELECT seq FROM experiments WHERE id = $2::text)" if after is not None else ""
        rows = await self._fetch(
            "SELECT id, coalesce(body::json ->> 'strategy', 'auto') FROM experiments "
            f"WHERE state = 'active'{cursor} ORDER BY seq LIMIT $1",
            *((int(limit), after) if after is not None else (int(limit),)),
        )
        return [str(r[1]) for r in rows], (rows[-1][0] if rows else None)

    async def count_experiments(self, owner: str | None, exclude_state: str = "archived") -> int:
        rows = await self._fetch(
            "SELECT count(*) FROM experiments WHERE state IS DISTINCT FROM $1 AND ($2::text IS NULL OR owner = $2)",
            exclude_state, owner,
        )  # fmt: skip
        return int(rows[0][0])

    async def experiment_gauges(self, top: int) -> ExperimentGauges:
        states = await self._fetch(STATES_QUERY)
        busiest = await self._fetch(BUSIEST_QUERY.format(top=int(top))) if top > 0 else []
        return ExperimentGauges({s: int(n) for s, n in states}, tuple((e, int(o), int(n)) for e, o, n in busiest))

    async def has_experiment(self, experiment_id: str) -> bool:
        return bool(await self._fetch("SELECT 1 FROM experiments WHERE id = $1", experiment_id))

    async def index_row(self, experiment_id: str) -> IndexRow | None:
        rows = await self._fetch("SELECT owner, state FROM experiments WHERE id = $1", experiment_id)
        return IndexRow(rows[0][0], rows[0][1]) if rows else None

    async def records(self, key: str) -> list[tuple[str, str]]:
        rows = await self._fetch("SELECT experiment_id, body FROM records WHERE key = $1", key)
        return [(e, b) for e, b in rows]

    async def credentials(self) -> list[CredentialRecord]:
        rows = await self._fetch(f"SELECT {CREDENTIAL_COLUMNS} FROM credentials ORDER BY seq")
        return [CredentialRecord(*r) for r in rows]

    async def credential_by_hash(self, token_hash: str) -> CredentialRecord | None:
        rows = await self._fetch(f"SELECT {CREDENTIAL_COLUMNS} FROM credentials WHERE token_hash = $1", token_hash)
        return CredentialRecord(*rows[0]) if rows else None

    async def suggestion_times(self, owner: str | None, since: float) -> list[float]:
        rows = await self._fetch(
            "SELECT s.created_at FROM experiments e JOIN suggestions s ON s.experiment_id = e.id "
            "WHERE e.owner IS NOT DISTINCT FROM $1 AND s.created_at >= $2 ORDER BY s.created_at",
            owner, float(since),
        )  # fmt: skip
        return [r[0] for r in rows]
