"""The store's file, watched: is the database we write still the one at its path?

SQLite writes through the file descriptors it opened. If someone deletes the
file (`rm tauopt.db`), replaces it (`mv other.db tauopt.db`) or truncates it
(`: > tauopt.db`), SQLite keeps committing into the old inode, every write is
acknowledged, and the next start finds an empty store. `FileWatch.problem()`
notices, cheaply enough to run before every transaction (an fstat, a stat and
a 16-byte pread: a few microseconds against a commit's hundreds), and the store
then refuses writes with `StoreUnavailable` (HTTP 503 `store_unavailable`).

Also here: creating the database file owner-only (0600) before SQLite does,
since SQLite would create it with the process umask (usually 0644).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ApiError, api_error
from ._base import StoreError

__all__ = ["FileWatch", "StoreUnavailable", "create_private", "commit_error", "read_error"]

_SQLITE_MAGIC = b"SQLite format 3\x00"


class StoreUnavailable(StoreError):
    """The database file was deleted, replaced or truncated under a running store."""


class FileWatch:
    """Holds a read-only descriptor on the database file, so the inode it names
    can be compared with what the path names now."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        st = os.fstat(self._fd)
        self._identity = (st.st_dev, st.st_ino)  # compared before every transaction

    def problem(self) -> str | None:
        """None while the path still names the open file, else what happened."""
        st = os.fstat(self._fd)
        if st.st_nlink == 0:
            return f"{self.path} was deleted while the store was open"
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            return f"{self.path} was moved away while the store was open"
        except OSError as exc:
            return f"{self.path} cannot be checked ({exc.strerror})"
        if (now.st_dev, now.st_ino) != self._identity:
            return f"{self.path} was replaced by another file while the store was open"
        if os.pread(self._fd, len(_SQLITE_MAGIC), 0) != _SQLITE_MAGIC:
            return f"{self.path} was truncated or overwritten while the store was open"
        return None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def unavailable(problem: str) -> StoreUnavailable:
    return StoreUnavailable(
        f"{problem}; writes are refused so nothing is acknowledged that a restart would lose. "
        "Stop the daemon, restore the database file (from a backup or the moved file) and start it again"
    )


def create_private(path: Path) -> None:
    """Create an empty database file with mode 0600 if there is none (an empty
    file is an empty database to SQLite; its -wal and -shm get the same mode)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return
    except OSError as exc:
        raise StoreError(
            f"{path}: cannot write the store ({exc.strerror}); the file or its directory is read-only "
            "(SQLite also needs to create -wal and -shm files next to it); choose a writable location"
        ) from exc
    os.close(fd)


def commit_error(exc: BaseException, what: str) -> ApiError:
    """The ApiError for a failed commit: 503 when the file is gone, else 500."""
    if isinstance(exc, StoreUnavailable):
        return api_error("store_unavailable", str(exc))
    return api_error("internal", f"the store failed to commit ({exc}); {what}")


def read_error(exc: BaseException) -> ApiError:
    """The ApiError for a failed read: 503 when the database cannot be reached (retry), else 500."""
    if isinstance(exc, StoreUnavailable):
        return api_error("store_unavailable", str(exc))
    return api_error("internal", f"the store failed to read ({exc}); nothing was changed, retry")
