"""The engine: Engine (front door), ExperimentActor (one per experiment), the Store.

The SQLite store lives in `tauopt.engine._sqlite` and is imported only when a
path is given, so `import tauopt` never loads aiosqlite.
"""

from ._engine import UNSET, Engine, open_store
from ._store import (
    CredentialRecord,
    MemoryStore,
    PutCredential,
    PutExperiment,
    PutObservation,
    PutSuggestion,
    RevokeCredential,
    Snapshot,
    Store,
    StoreError,
)

__all__ = [
    "Engine",
    "UNSET",
    "open_store",
    "Store",
    "MemoryStore",
    "StoreError",
    "Snapshot",
    "PutExperiment",
    "PutSuggestion",
    "PutObservation",
    "PutCredential",
    "RevokeCredential",
    "CredentialRecord",
]
