"""The PostgreSQL store's schema: versioned migrations, applied at start.

MIGRATIONS has the SQLite store's version numbers (the same tables and columns
in PostgreSQL's types). `migrate` applies what is missing in one transaction
under an advisory transaction lock, so several daemons starting on one database
migrate it once; a newer version, or tables of these names without
schema_version, are refused untouched.
"""

from __future__ import annotations

import logging
from typing import Any

from ._base import StoreError

__all__ = ["MIGRATIONS", "MIGRATION_LOCK", "SCHEMA_VERSION", "TABLES", "migrate"]

log = logging.getLogger("tauopt.store")

# Forward migrations, numbered as the SQLite store's: MIGRATIONS[n] takes a store
# from version n to n+1, in one transaction with the version bump. Never edit a
# released step; append.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 0 -> 1: experiments, suggestions, observations
    (
        """CREATE TABLE experiments (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            owner TEXT,
            state TEXT NOT NULL,
            name TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            open_suggestions BIGINT NOT NULL,
            observations BIGINT NOT NULL,
            drawn BIGINT NOT NULL,
            body TEXT NOT NULL
        )""",
        "CREATE INDEX experiments_by_owner_state ON experiments (owner, state)",
        """CREATE TABLE suggestions (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            experiment_id TEXT NOT NULL,
            id TEXT NOT NULL,
            state TEXT NOT NULL,
            tag TEXT,
            created_at DOUBLE PRECISION NOT NULL,
            assignments TEXT NOT NULL,
            UNIQUE (experiment_id, id)
        )""",
        # load: an experiment's rows in creation order; the daily quota: an owner's suggestions since a time
        "CREATE INDEX suggestions_by_experiment ON suggestions (experiment_id, seq)",
        "CREATE INDEX suggestions_by_experiment_time ON suggestions (experiment_id, created_at)",
        """CREATE TABLE observations (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            experiment_id TEXT NOT NULL,
            id TEXT NOT NULL,
            suggestion_id TEXT,
            value DOUBLE PRECISION,
            failed BIGINT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            assignments TEXT NOT NULL,
            metrics TEXT NOT NULL,
            UNIQUE (experiment_id, id)
        )""",
        "CREATE INDEX observations_by_experiment ON observations (experiment_id, seq)",
    ),
    # 1 -> 2: credentials of the HTTP door (bearer tokens, by hash) and their quotas
    (
        """CREATE TABLE credentials (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            name TEXT NOT NULL,
            token_hash TEXT NOT NULL UNIQUE,
            created_at DOUBLE PRECISION NOT NULL,
            revoked_at DOUBLE PRECISION,
            suggestions_per_day BIGINT,
            max_active_experiments BIGINT
        )""",
    ),
    # 2 -> 3: leases: how often a suggestion was handed out, and whether its holder was declared dead
    (
        "ALTER TABLE suggestions ADD COLUMN attempts BIGINT NOT NULL DEFAULT 1",
        "ALTER TABLE suggestions ADD COLUMN released BIGINT NOT NULL DEFAULT 0",
    ),
    # 3 -> 4: intermediate reports (early stopping), and the step a stopped trial reached
    (
        """CREATE TABLE reports (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            experiment_id TEXT NOT NULL,
            suggestion_id TEXT NOT NULL,
            step BIGINT NOT NULL,
            value DOUBLE PRECISION NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            UNIQUE (experiment_id, suggestion_id, step)
        )""",
        "CREATE INDEX reports_by_experiment ON reports (experiment_id, seq)",
        "ALTER TABLE observations ADD COLUMN stopped_at_step BIGINT",
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
TABLES = ("experiments", "suggestions", "observations", "credentials", "reports", "records")
# pg_advisory_xact_lock key for migrations: a fixed number no other program of the database uses
MIGRATION_LOCK = 0x7461756F7074  # "tauopt"


async def migrate(conn: Any, name: str, target: int = SCHEMA_VERSION) -> int:
    """Bring the database to `target` in one transaction (under an advisory lock: one
    daemon migrates, the others wait and find it done). Returns the version found."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
        if await conn.fetchval("SELECT to_regclass('schema_version') IS NULL"):
            found = await conn.fetch(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename = ANY($1::text[])",
                list(TABLES),
            )
            if found:
                names = ", ".join(sorted(r[0] for r in found))
                raise StoreError(
                    f"{name}: the database has tables named as tauopt's ({names}) but no schema_version: it is not a "
                    "tauopt store; it was left untouched. Give another database, or another schema with ?search_path="
                )
            await conn.execute("CREATE TABLE schema_version (version BIGINT NOT NULL)")
            await conn.execute("INSERT INTO schema_version (version) VALUES (0)")
        version = int(await conn.fetchval("SELECT version FROM schema_version") or 0)
        if version > target:
            raise StoreError(
                f"{name} was written by a newer tauopt (schema version {version}; this tauopt reads up to "
                f"{target}); it was left untouched; upgrade tauopt to open it"
            )
        for step in range(version, target):
            for sql in MIGRATIONS[step]:
                await conn.execute(sql)
        if version < target:
            await conn.execute("UPDATE schema_version SET version = $1", target)
            log.info("store %s: migrated from schema version %d to %d", name, version, target)
    return version
