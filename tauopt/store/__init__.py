"""Stores: where acknowledged state lives.

    _base.py          the Store interface (experiments) and CredentialStore (a door's auth), the write types
    _memory.py        MemoryStore
    _sqlite.py        SqliteStore (SQLite specifics only; imported lazily)
    _postgresql.py    PostgresStore (PostgreSQL through asyncpg; imported lazily; asyncio only)
    _postgresql_schema.py  its versioned migrations
    _leases.py        several daemons on one PostgreSQL database: one owner per experiment by lease rows
    _copy.py          copy_store: one store into another, verified (`tauopt db copy`)
    _rows.py          writes as rows and rows as a Snapshot: what both SQL stores share
    _sqlite_thread.py a sqlite3 connection on a thread of its own: the reader, and the writer (which checkpoints)
    _group_commit.py  the store-independent group-commit writer any durable store reuses
    _url.py           open_store: a URL or path -> a Store, the only place that reads one

Adding a store: one module here + one scheme in `_url.py`; run the contract suite on it.
"""

from __future__ import annotations

from ._base import (
    CredentialRecord,
    CredentialStore,
    DeleteExperiment,
    Done,
    IndexRow,
    PutCounters,
    PutCredential,
    PutExperiment,
    PutObservation,
    PutRecord,
    PutReport,
    PutSuggestion,
    RevokeCredential,
    Snapshot,
    Store,
    StoreError,
    Write,
)
from ._group_commit import GroupCommitWriter
from ._memory import MemoryStore
from ._url import is_url_of_server, open_store

__all__ = [
    "CredentialRecord",
    "CredentialStore",
    "DeleteExperiment",
    "Done",
    "GroupCommitWriter",
    "IndexRow",
    "MemoryStore",
    "PutCounters",
    "PutCredential",
    "PutExperiment",
    "PutObservation",
    "PutRecord",
    "PutReport",
    "PutSuggestion",
    "RevokeCredential",
    "Snapshot",
    "Store",
    "StoreError",
    "Write",
    "is_url_of_server",
    "open_store",
]
