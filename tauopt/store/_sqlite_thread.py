"""A plain sqlite3 connection on a thread of its own: the SQLite store's reader
(SqliteThread) and writer (SqliteWriter, which also checkpoints the WAL).

    writer = SqliteWriter(path, synchronous="NORMAL")
    await writer.open()          # connects, on the connection's own thread
    await writer.call(fn)        # fn(conn) runs on that thread: ONE thread hop
    await writer.commit(fn)      # a transaction: on the caller's thread when it cannot stall it
    await writer.close()

Each connection lives on the one worker thread of its own
`concurrent.futures.ThreadPoolExecutor(max_workers=1)`; the event loop awaits
the job's future (`asyncio.wrap_future`).

Why not aiosqlite: a transaction (a group's BEGIN IMMEDIATE ... COMMIT, or a
load's four SELECTs in one snapshot) is one callable, so one hop to the thread
and one wake-up of the event loop, instead of one hop per statement, each of
which a busy event loop delays.

Commits without a thread hop: with synchronous=NORMAL a COMMIT in WAL mode only
writes the WAL (no fsync; tens of microseconds for a few rows), less than what
the hop costs: waking the thread, handing the GIL over and back, waking the
event loop. So `commit` runs such a transaction on the event loop's thread,
unless a job of the writer's thread (a checkpoint of its own) has not finished:
then it queues behind it, and the connection is never used by two threads at
once. Nor does it wait there for another connection's write lock (a CLI edit
beside the engine): busy, it goes to the thread, which waits as configured.
With synchronous=FULL a COMMIT waits for an fsync, which must not stall the
loop: it always goes to the thread.

WAL checkpoints off the commit path: the writer's connection runs with
`wal_autocheckpoint = 0`, so no COMMIT copies the WAL back into the database
(that copy and its fsyncs took a COMMIT from 0.2 ms to tens of ms). Instead,
after each job, the writer looks at the WAL file's size (a stat, on the
loop's thread):
- past `checkpoint_bytes`: it asks a third connection, on a thread of its
  own (`_Checkpointer`), for a PASSIVE checkpoint, which runs beside the next
  commits and delays none of them, and asks again each time the WAL has grown
  by another `checkpoint_bytes / REQUEST_STEPS` (that thread also runs one by
  itself once nothing has been written for `idle_s` seconds);
- past `bound_factor` x `checkpoint_bytes` (the checkpointer never caught up
  with a stream of commits): it runs the PASSIVE checkpoint itself, on its
  own thread, between two groups (the next commit queues behind it). With no
  commit beside it, that one backfills the whole WAL.
Once the WAL is wholly backfilled, the next transaction starts it over and
`journal_size_limit` (set by the store) truncates the file back to
`checkpoint_bytes`. So the WAL stays bounded, unless a reader in another
process pins an old snapshot: then the writer waits for another
`checkpoint_bytes` of growth before trying again, not after every job.
The checkpointing connection syncs as the writer's does (the same `synchronous`):
a checkpoint keeps the store's durability.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, TypeVar

import anyio

from ._base import StoreError

__all__ = ["SqliteThread", "SqliteWriter"]

log = logging.getLogger("tauopt.store")

# Past checkpoint_bytes, the checkpointer is asked for a pass each time the WAL has grown by
# checkpoint_bytes / REQUEST_STEPS since the last ask (or has started over).
REQUEST_STEPS = 8

T = TypeVar("T")


class SqliteThread:
    """One connection, made and used on one thread only; jobs run one at a time, in order."""

    role = "reader"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"tauopt-sqlite-{self.role}:{path.name}")
        self._closed = False

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run fn(conn) on this connection's thread. Shielded: a cancelled caller still waits
        for fn to finish, so what it is told matches what the file holds (a COMMIT
        is never left running behind a reply, nor a reply given before it)."""
        try:
            job = self._pool.submit(self._run, fn)
        except RuntimeError as exc:  # the pool is shut down
            raise StoreError(f"{self.path}: the SQLite {self.role} connection is closed") from exc
        self._submitted(job)
        with anyio.CancelScope(shield=True):
            result = await asyncio.wrap_future(job)
        return result

    def _submitted(self, job: Future[Any]) -> None:
        pass

    def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return fn(self._conn)  # type: ignore[arg-type]  # None only before open: _connect ignores it

    async def open(self) -> None:
        """Connect, on the connection's thread (it never leaves it)."""
        await self.call(self._connect)

    def _connect(self, _: sqlite3.Connection | None) -> None:
        self._conn = _open_connection(self.path)

    async def close(self) -> None:
        """Close the connection (SQLite checkpoints and removes the WAL when it is the
        last one) and let the thread end."""
        if self._closed:
            return
        self._closed = True
        try:
            await self.call(self._disconnect)
        finally:
            self._pool.shutdown(wait=False)

    def _disconnect(self, _: sqlite3.Connection | None) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


class SqliteWriter(SqliteThread):
    """The writer's connection; it keeps the WAL bounded, off the commit path (see the module docstring)."""

    role = "writer"

    def __init__(
        self,
        path: Path,
        *,
        synchronous: str,
        checkpoint_bytes: int = 8 << 20,
        idle_s: float = 0.5,
        bound_factor: int = 4,
    ) -> None:
        if checkpoint_bytes <= 0 or idle_s <= 0 or bound_factor < 1:
            raise ValueError("checkpoint_bytes and idle_s must be positive, bound_factor at least 1")
        super().__init__(path)
        self.checkpoint_bytes = checkpoint_bytes
        self._wal = f"{path}-wal"
        self._checkpointer = _Checkpointer(path, synchronous, idle_s)
        self._changes = 0  # conn.total_changes after the last job: did a job write?
        self._bound = self._full_bound = bound_factor * checkpoint_bytes  # WAL size where this thread checkpoints
        self._asked_at = 0  # WAL size when the checkpointer was last asked for a pass
        self.own_checkpoints = 0  # run by this thread, for tests and benchmarks
        self._inline = synchronous.upper() == "NORMAL"  # commits without an fsync: no hop (`commit`)
        self._last: Future[Any] = Future()  # the thread's last job: the connection is its until done
        self._last.set_result(None)
        self.inline_commits = 0  # for tests and benchmarks
        self.busy_fallbacks = 0  # inline commits that met another writer's lock and went to the thread
        self._busy_ms: int | None = None  # busy_timeout, once inline commits set the connection's to 0

    @property
    def checkpoints(self) -> int:
        """Checkpoints run, beside the commits and by this thread (for tests and benchmarks)."""
        return self._checkpointer.done + self.own_checkpoints

    def _submitted(self, job: Future[Any]) -> None:
        self._last = job

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        busy_ms = self._busy_ms
        if busy_ms is not None:  # on this thread, wait for another writer's lock as configured
            fn = self._waiting_busy(fn, busy_ms)
        try:
            return await super().call(fn)
        finally:
            self._after_job()

    def _waiting_busy(self, fn: Callable[[sqlite3.Connection], T], busy_ms: int) -> Callable[[sqlite3.Connection], T]:
        def waiting(conn: sqlite3.Connection) -> T:
            conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
            try:
                return fn(conn)
            finally:
                if self._conn is not None:  # not closed by fn (`close`)
                    conn.execute("PRAGMA busy_timeout = 0")

        return waiting

    async def commit(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run the transaction fn(conn) (one that rolls back when it fails): here, on the
        caller's (the event loop's) thread, when that stalls nothing (see the module
        docstring), else as `call` does. Here it never waits for another connection's
        write lock: SQLITE_BUSY sends it to the thread, which waits as configured."""
        conn = self._conn
        if not self._inline or conn is None or not self._last.done():
            return await self.call(fn)
        if self._busy_ms is None:
            self._busy_ms = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
            conn.execute("PRAGMA busy_timeout = 0")
        try:
            return fn(conn)
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF != sqlite3.SQLITE_BUSY:
                raise
        finally:
            self.inline_commits += 1
            self._after_job()
        self.busy_fallbacks += 1
        return await self.call(fn)  # rolled back: nothing of it was written

    def _connect(self, conn: sqlite3.Connection | None) -> None:
        super()._connect(conn)
        self._checkpointer.start()

    def _disconnect(self, conn: sqlite3.Connection | None) -> None:
        self._checkpointer.stop()  # first: the writer's connection, closed last, checkpoints and removes the WAL
        super()._disconnect(conn)

    def _after_job(self) -> None:
        """After each job, on the loop's thread, with the job's reply on its way: did it
        write, and how large is the WAL now? Past the bound, a checkpoint of this
        connection is queued on the thread (later jobs and commits queue behind it)."""
        conn = self._conn
        if conn is None or not self._last.done() or conn.total_changes == self._changes:
            return  # closed, the thread still busy with it, or nothing written
        self._changes = conn.total_changes
        self._checkpointer.wrote()
        size = self._wal_size()
        if size > self._bound:
            self._last = self._pool.submit(self._checkpoint_here, size)
        elif size > self.checkpoint_bytes and not 0 <= size - self._asked_at < self.checkpoint_bytes // REQUEST_STEPS:
            # Asked again at each step of growth until the WAL starts over (a pass that ends
            # with nothing committed beside it has backfilled the whole WAL), not after every
            # write: under a stream of commits a pass rarely ends in such a gap, and a pass
            # asked for after each commit would run back to back, each with its fsyncs, for
            # as long as the WAL grows. Each pass copies what was written since the last.
            self._asked_at = size
            self._checkpointer.request()

    def _wal_size(self) -> int:
        try:
            return os.stat(self._wal).st_size
        except OSError:
            return 0

    def _checkpoint_here(self, size: int) -> None:
        """A PASSIVE checkpoint on this thread, between groups (after a pass in progress):
        nothing commits beside it, so it backfills the whole WAL."""
        conn = self._conn
        if conn is None:
            return
        with self._checkpointer.running:
            outcome = _passive_checkpoint(conn, self.path)
        if outcome is None or outcome == "busy":
            return  # another process checkpoints: try again after the next write
        self.own_checkpoints += 1
        # Whole WAL backfilled: the next transaction starts it over (and journal_size_limit
        # trims the file). Not whole (another process reads an old snapshot): wait for
        # another checkpoint_bytes of growth rather than retrying after every job.
        self._bound = self._full_bound if outcome == "whole" else size + self.checkpoint_bytes


class _Checkpointer:
    """A connection whose only work is PASSIVE checkpoints, on a thread of its own:
    when the writer thread asks, and by itself once nothing was written for `idle_s`."""

    def __init__(self, path: Path, synchronous: str, idle_s: float) -> None:
        self.path = path
        self.synchronous = synchronous
        self.idle_s = idle_s
        self.done = 0  # checkpoints run (for tests and benchmarks)
        self.running = threading.Lock()  # held during a checkpoint, by this thread or the writer's
        self._wanted = threading.Event()
        self._unsaved = False  # written since the last checkpoint?
        self._last_write = 0.0
        self._stopping = False
        self._thread = threading.Thread(target=self._main, name=f"tauopt-sqlite-checkpoint:{path.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wrote(self) -> None:
        self._unsaved, self._last_write = True, time.monotonic()

    def request(self) -> None:
        self._wanted.set()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._stopping = True
            self._wanted.set()
            self._thread.join()

    def _main(self) -> None:
        try:
            conn = _open_connection(self.path)
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")  # a checkpoint syncs as the writer does
        except sqlite3.Error as exc:  # the WAL is then bounded by the writer thread's own checkpoints
            log.warning("store %s: the checkpointing connection failed to open: %r", self.path, exc)
            return
        try:
            while True:
                asked = self._wanted.wait(timeout=self.idle_s)
                self._wanted.clear()
                if self._stopping:
                    return
                if not asked and not (self._unsaved and time.monotonic() - self._last_write >= self.idle_s):
                    continue  # neither asked nor idle after a write
                self._unsaved = False
                with self.running:
                    # A read first: a connection opened before the store turned WAL on sees it now.
                    if _passive_checkpoint(conn, self.path, look_first=True) is not None:
                        self.done += 1
        finally:
            conn.close()


def _passive_checkpoint(conn: sqlite3.Connection, path: Path, *, look_first: bool = False) -> str | None:
    """'whole' (every frame backfilled), 'part', 'busy' (another checkpoint runs), None (failed, logged)."""
    try:
        if look_first:
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        busy, frames, done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    except sqlite3.Error as exc:  # a real problem shows at the next write; this one is logged
        log.warning("store %s: a WAL checkpoint failed: %r", path, exc)
        return None
    if busy:
        return "busy"
    return "whole" if frames >= 0 and done == frames else "part"


def _open_connection(path: Path) -> sqlite3.Connection:
    # Transactions are ours (BEGIN IMMEDIATE ... COMMIT). One thread at a time uses a connection,
    # though not always the one that made it (the writer's `commit`).
    # A group of n rows a table is a statement of its own text (`_Upsert`): with dozens of
    # workers, 8 tables x up to dozens of row counts, more than the 128 texts kept by default
    # (each miss compiles the statement again).
    return sqlite3.connect(path, isolation_level=None, check_same_thread=False, cached_statements=1024)
