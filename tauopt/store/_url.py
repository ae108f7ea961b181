"""Choosing a store: the one place a URL (or path) becomes a Store.

    memory://  (also None and ":memory:")   MemoryStore
    sqlite:///relative/or//absolute/path    SqliteStore (durability "os" | "fsync")
    postgresql://user@host:port/database    PostgresStore (also postgres://; asyncio only)
    a plain path (str or os.PathLike)       SqliteStore
    a Store                                 itself

A new store is one module in this package plus one scheme here; the contract
suite (tests/test_store_contract.py) runs on it.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import invalid
from ._base import Store
from ._memory import MemoryStore

__all__ = ["open_store", "SCHEMES", "is_url_of_server"]

SCHEMES = ("memory://", "sqlite:///", "postgresql://")


def open_store(
    store: Store | str | os.PathLike[str] | None,
    durability: str = "os",
    *,
    exclusive: bool = True,
    shared_as: str | None = None,
    lease_s: float = 3.0,
) -> Store:
    """A Store from a Store, None / memory:// / ":memory:", a sqlite:/// URL, a path or a
    postgresql:// URL.

    `exclusive=False` opens a file without owning it (no file lock): only for the
    admin commands' short transactions beside a running engine (`tauopt.engine.open_admin`).
    On PostgreSQL the same: an engine owns the database (an advisory lock), the admin
    commands do not; `durability` does not apply (its commits are always synchronous).
    `shared_as="http://host:port"` (postgresql:// only): this daemon shares the database
    with others, reachable at that URL, owning experiments by leases of `lease_s` seconds."""
    if shared_as is not None and not is_url_of_server(store):
        raise invalid("several daemons share a PostgreSQL database only: give a postgresql:// store URL")
    if isinstance(store, Store):
        return store
    if store is None or store in (":memory:", "memory://"):
        return MemoryStore()
    if isinstance(store, os.PathLike):
        store = os.fspath(store)
    if not isinstance(store, str):
        raise invalid(f"store: give a path, a memory://, sqlite:/// or postgresql:// URL, or a Store, not {type(store).__name__}")
    scheme, sep, _ = store.partition("://")
    if scheme in ("postgresql", "postgres") and sep:
        return _postgresql(store, exclusive, shared_as, lease_s)
    if sep and scheme != "sqlite":
        raise invalid(f"store: {scheme}:// is not a store this tauopt knows; use one of {list(SCHEMES)} or a path")
    if durability not in ("os", "fsync"):
        raise invalid(f"durability: {durability!r} is not one of ['os', 'fsync']")
    return _sqlite(sqlite_path(store), durability, exclusive)


def sqlite_path(url: str) -> str:
    """The file of a sqlite:/// URL (sqlite:////abs for an absolute path), or the path itself."""
    return url[len("sqlite:///") :] if url.startswith("sqlite:///") else url


def _sqlite(path: str, durability: Any, exclusive: bool) -> Store:
    from ._sqlite import SqliteStore  # lazy: `import tauopt` opens no SQLite module

    return SqliteStore(path, durability=durability, exclusive=exclusive)


def is_url_of_server(store: object) -> bool:
    """A database server's URL (not a file): postgresql:// or postgres://."""
    return isinstance(store, str) and store.startswith(("postgresql://", "postgres://"))


def _postgresql(url: str, exclusive: bool, shared_as: str | None, lease_s: float) -> Store:
    from ._leases import Leases
    from ._postgresql import PostgresStore  # lazy: `import tauopt` loads no asyncpg

    shared = None if shared_as is None else Leases(shared_as, lease_s=lease_s, renew_s=lease_s / 3)
    return PostgresStore(url, exclusive=exclusive, shared=shared)
