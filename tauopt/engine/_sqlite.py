"""Transitional re-export: the SQLite store moved to `tauopt.store._sqlite`. Kept
only while branches in flight still import it from here; import it from tauopt.store."""

from ..store._sqlite import *  # noqa: F401,F403
from ..store._sqlite import MIGRATIONS, SCHEMA_VERSION, SqliteStore, _migrate  # noqa: F401
