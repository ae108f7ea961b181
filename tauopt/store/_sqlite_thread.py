"""A plain sqlite3 connection on a thread of its own: the SQLite store's reader
(SqliteThread) and writer (SqliteWriter, which also checkpoints the WAL).

    writer = SqliteWriter(path)
    await writer.open()          # starts the thread; it connects
    await writer.call(fn)        # fn(conn) runs on that thread: ONE thread hop
    await writer.close()

Why not aiosqlite: a transaction (a group's BEGIN IMMEDIATE ... COMMIT, or a
load's four SELECTs in one snapshot) is one callable, so one hop to the thread
and one wake-up of the event loop, instead of one hop per statement, each of
which a busy event loop delays.

WAL checkpoints off the commit path: the connection runs with
`wal_autocheckpoint = 0`, so no COMMIT copies the WAL back into the database.
Between jobs, this thread runs a PASSIVE checkpoint itself, after the job's
reply is on its way: when the WAL file has grown past `checkpoint_bytes`, or
when no job has come for `idle_s` seconds. A writer-thread checkpoint has no
concurrent writer of ours, so it can backfill the whole WAL and the next
transaction starts the WAL over; `journal_size_limit` then truncates the file
back to `checkpoint_bytes`. The WAL stays bounded: about `checkpoint_bytes`
plus one group, unless a reader in another process pins an old snapshot (the
next size check waits for another `checkpoint_bytes` of growth, not retrying
after every job).
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable, TypeVar

import anyio

from ._base import StoreError

__all__ = ["SqliteThread", "SqliteWriter"]

log = logging.getLogger("tauopt.store")

T = TypeVar("T")
_Job = tuple[Callable[[sqlite3.Connection], Any], "asyncio.Future[Any]", asyncio.AbstractEventLoop]
_STOP = None


class SqliteThread:
    """One connection, used only on its own thread; jobs run one at a time, in order."""

    role = "reader"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._jobs: "queue.SimpleQueue[_Job | None]" = queue.SimpleQueue()
        self._conn: sqlite3.Connection | None = None
        self._thread = threading.Thread(target=self._main, name=f"tauopt-sqlite-{self.role}:{path.name}", daemon=True)

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run fn(conn) on this connection's thread. Shielded: a cancelled caller still waits
        for fn to finish, so what it is told matches what the file holds (a COMMIT
        is never left running behind a reply, nor a reply given before it)."""
        if not self._thread.is_alive():
            raise StoreError(f"{self.path}: the SQLite {self.role} thread is not running")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((fn, future, loop))
        with anyio.CancelScope(shield=True):
            return await future

    async def open(self) -> None:
        """Start the thread and connect (there: the connection never leaves it)."""
        self._thread.start()
        await self.call(self._connect)

    def _connect(self, _: sqlite3.Connection | None) -> None:
        self._conn = _open_connection(self.path)

    async def close(self) -> None:
        """Close the connection (SQLite checkpoints and removes the WAL when it is the
        last one) and end the thread."""
        if not self._thread.is_alive():
            return
        try:
            await self.call(self._disconnect)
        finally:
            self._jobs.put(_STOP)

    def _disconnect(self, _: sqlite3.Connection | None) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    # -- the thread ---------------------------------------------------------------

    def _main(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=self._idle_timeout())
            except queue.Empty:
                self._on_idle()
                continue
            if job is _STOP:
                return
            fn, future, loop = job
            try:
                result, error = fn(self._conn), None  # type: ignore[arg-type]
            except BaseException as exc:  # handed to the awaiting task, as it is
                result, error = None, exc
            try:
                loop.call_soon_threadsafe(_settle, future, result, error)
            except RuntimeError:  # the loop is closed: nobody is waiting any more
                pass
            self._after_job()  # the reply is on its way: what comes next delays no one

    def _idle_timeout(self) -> float | None:
        return None

    def _on_idle(self) -> None:
        pass

    def _after_job(self) -> None:
        pass


class SqliteWriter(SqliteThread):
    """The writer's connection; it checkpoints the WAL between jobs (see the module docstring)."""

    role = "writer"

    def __init__(self, path: Path, *, checkpoint_bytes: int = 8 << 20, idle_s: float = 0.5) -> None:
        if checkpoint_bytes <= 0 or idle_s <= 0:
            raise ValueError("checkpoint_bytes and idle_s must be positive")
        super().__init__(path)
        self.checkpoint_bytes = checkpoint_bytes
        self.idle_s = idle_s
        self._wal = f"{path}-wal"
        self._changes = 0  # conn.total_changes at the last checkpoint: anything written since?
        self._next_at = checkpoint_bytes  # WAL size that triggers the next size checkpoint
        # Counters, for tests and benchmarks.
        self.checkpoints = 0

    def _idle_timeout(self) -> float | None:
        return self.idle_s if self._dirty() else None

    def _on_idle(self) -> None:
        self._checkpoint("idle")

    def _after_job(self) -> None:
        if self._dirty() and self._wal_size() > self._next_at:
            self._checkpoint("size")

    def _dirty(self) -> bool:
        conn = self._conn
        return conn is not None and conn.total_changes != self._changes

    def _wal_size(self) -> int:
        try:
            return os.stat(self._wal).st_size
        except OSError:
            return 0

    def _checkpoint(self, why: str) -> None:
        conn = self._conn
        if conn is None:
            return
        self._changes = conn.total_changes
        try:
            busy, frames, done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:  # the next write reports a real problem; this one is logged
            log.warning("store %s: %s checkpoint failed: %r", self.path, why, exc)
            return
        self.checkpoints += 1
        # Whole WAL backfilled: the next transaction starts it over (and journal_size_limit
        # trims the file). Not whole (another process reads an old snapshot): wait for
        # another checkpoint_bytes of growth rather than retrying after every job.
        whole = not busy and frames >= 0 and done == frames
        self._next_at = self.checkpoint_bytes if whole else self._wal_size() + self.checkpoint_bytes


def _open_connection(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)  # transactions are ours: BEGIN IMMEDIATE ... COMMIT


def _settle(future: "asyncio.Future[Any]", result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
