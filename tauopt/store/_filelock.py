"""One engine per SQLite file: an OS lock held while a store is open.

Why a lock at all: an engine keeps each experiment's state in its actor and
writes whole rows; two engines on one file would hand out the same ids and
overwrite each other's rows. So the store takes `flock(LOCK_EX | LOCK_NB)` on
a dedicated file descriptor at open and drops it at close.

Why `flock` on a sidecar `<db>.lock` and not on the database itself:
- the kernel releases a flock when its descriptor closes, including on SIGKILL,
  so there is never a stale lock to delete by hand (a clean close removes the
  sidecar; after a crash it stays, and without a holder it means nothing);
- flock locks belong to the open file description, so a second `Engine` in the
  same process is refused too (POSIX `fcntl` locks would not see it);
- SQLite uses POSIX locks on the database file, and closing *any* descriptor of
  that file drops all of the process's POSIX locks on it: a refused second open
  that closed its probe descriptor would silently unlock the first engine's
  SQLite connections. A separate file avoids touching the database's locks.

The holder writes "pid host" into the sidecar so a refused opener can say who
holds the file.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

from ..errors import api_error

__all__ = ["FileLock", "lock_path"]


def lock_path(db: Path) -> Path:
    return db.with_name(db.name + ".lock")


class FileLock:
    """An exclusive, non-blocking flock on `<db>.lock`; `release()` is idempotent."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.path = lock_path(db)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise ApiError `store_in_use` naming the holder."""
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                raise _in_use(self.db, holder) from None
            except BaseException:
                os.close(fd)
                raise
            if _same_file(fd, self.path):
                break
            # The previous holder unlinked the file between our open and our lock:
            # this inode is no longer the lock, so try again on the path's current file.
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Remove the sidecar (while still holding it, so nobody locks a dead inode
        unnoticed: see the check in acquire) and drop the lock."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(fd)


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = path.stat()
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (st.st_dev, st.st_ino)


def _read_holder(fd: int) -> tuple[str, str]:
    # The holder writes its line right after locking; a reader racing that write
    # may see nothing yet, hence the placeholders.
    try:
        words = os.pread(fd, 512, 0).decode(errors="replace").split()
    except OSError:
        words = []
    return (words[0] if words else "?", words[1] if len(words) > 1 else "?")


def _in_use(db: Path, holder: tuple[str, str]):
    pid, host = holder
    return api_error(
        "store_in_use",
        f"{db} is already open in another engine (pid {pid} on host {host}); one engine owns a "
        f"SQLite file at a time. To share an experiment across processes, run `tauopt serve --db {db}` "
        f"once and connect every worker with Client(driver=\"http\", ...)",
        path=str(db),
        pid=pid,
        host=host,
    )
