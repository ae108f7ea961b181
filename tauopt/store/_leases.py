"""Several daemons on one PostgreSQL database: one owner per experiment, by lease rows.

    daemons (id, url, expires_at, doors) one row per running daemon; the daemon renews
                                         its expiry every `renew_s`, `lease_s` ahead;
                                         `doors`: its gRPC doors' addresses (JSON), so a
                                         peer relays a call to the owner's same door
    owners  (experiment_id, daemon)      which daemon's actor serves the experiment

An experiment belongs to the daemon its `owners` row names while that daemon's
lease is live (expires_at after the server's clock: one clock, the server's, so
hosts' clocks may differ). `claim` takes an experiment for this daemon when it
has no owner or its owner's lease has lapsed, and otherwise answers the owner's
URL. So a dead daemon's experiments move, one by one as requests for them
arrive at other daemons, at most `lease_s` after its last renewal.

Why lease rows and not advisory locks: an advisory lock lives as long as its
holder's connection, and a frozen holder (SIGSTOP, a long GC pause, a VM
suspended) keeps its connection, so the lock, until a server-side idle timeout
or TCP keepalive ends it, minutes by default. A lease row expires on the
server's clock whatever the holder does.

Fencing: a holder can wake up after its lease lapsed and another daemon took
its experiments. Every transaction that writes experiments first locks their
`owners` rows (FOR SHARE) and checks they name this daemon with a live lease;
else the whole group fails and nothing is written. The share lock makes a
takeover (an UPDATE of those rows) wait for the transaction, so the new owner,
which claims before it loads, reads every write the old owner acknowledged.
A daemon that finds its own lease lapsed stays fenced (every write refused)
and says so through `on_lost`: `tauopt serve` then exits, to be restarted
fresh; its workers fail over to the other daemons meanwhile.

These are coordination tables of running daemons, not stored history: they are
created if missing (not part of the versioned schema) and `tauopt db copy`
leaves them out.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any, Callable, Sequence

import anyio

from ._base import Sharing
from ._filewatch import StoreUnavailable

__all__ = ["Leases"]

log = logging.getLogger("tauopt.store")

TABLES = (
    "CREATE TABLE IF NOT EXISTS daemons (id TEXT PRIMARY KEY, url TEXT NOT NULL, "
    "started_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(), expires_at TIMESTAMPTZ NOT NULL)",
    "CREATE TABLE IF NOT EXISTS owners (experiment_id TEXT PRIMARY KEY, daemon TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS owners_by_daemon ON owners (daemon)",
    "ALTER TABLE daemons ADD COLUMN IF NOT EXISTS doors TEXT NOT NULL DEFAULT '{}'",
)
# One daemon at a time runs a section that must see every other daemon's writes (a new
# study's id and name); a transaction-scoped advisory lock, so it ends with the connection.
SECTION_LOCK = 0x7461756F7074  # "tauopt"
_LIVE = "d.expires_at > clock_timestamp()"
# Take the experiment if it has no owner, is ours, or its owner's lease lapsed; RETURNING says we have it.
_CLAIM = f"""INSERT INTO owners (experiment_id, daemon) SELECT $1, $2 WHERE $3::boolean OR EXISTS
    (SELECT 1 FROM experiments WHERE id = $1)
    ON CONFLICT (experiment_id) DO UPDATE SET daemon = excluded.daemon
    WHERE owners.daemon = excluded.daemon
       OR NOT EXISTS (SELECT 1 FROM daemons d WHERE d.id = owners.daemon AND {_LIVE})
    RETURNING daemon"""
_OWNER_URL = "SELECT d.url FROM owners o JOIN daemons d ON d.id = o.daemon WHERE o.experiment_id = $1"
_FENCE = f"""SELECT o.experiment_id FROM owners o JOIN daemons d ON d.id = o.daemon
    WHERE o.experiment_id = ANY($1::text[]) AND o.daemon = $2 AND {_LIVE} FOR SHARE OF o"""

_STATUS = f"""SELECT EXISTS (SELECT 1 FROM daemons d WHERE d.id = $1 AND {_LIVE}),
    (SELECT count(*) FROM owners WHERE daemon = $1), (SELECT count(*) FROM daemons d WHERE {_LIVE})"""


class Leases:
    """This daemon's lease and its claims; used by PostgresStore(shared=Leases(url))."""

    def __init__(self, url: str, *, lease_s: float = 3.0, renew_s: float = 1.0) -> None:
        if not 0 < renew_s < lease_s:
            raise ValueError(f"renew_s must be positive and below lease_s, not {renew_s!r} and {lease_s!r}")
        self.url = url.rstrip("/")
        self.lease_s = float(lease_s)
        self.renew_s = float(renew_s)
        self.daemon_id = secrets.token_hex(8)
        self.lost: str | None = None  # why this daemon is fenced, once it is
        self.on_lost: Callable[[str], None] | None = None
        self.claimed = 0  # experiments taken (new or from a lapsed owner), for metrics and tests

    async def register(self, conn: Any) -> None:
        for sql in TABLES:
            await conn.execute(sql)
        await conn.execute(
            "INSERT INTO daemons (id, url, expires_at) VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3))",
            self.daemon_id, self.url, self.lease_s,
        )  # fmt: skip

    async def renew(self, conn: Any) -> bool:
        """Push the expiry `lease_s` ahead; False if it had already lapsed (then we are fenced)."""
        row = await conn.fetchval(
            f"UPDATE daemons d SET expires_at = clock_timestamp() + make_interval(secs => $2) WHERE id = $1 AND {_LIVE} "
            "RETURNING 1",
            self.daemon_id, self.lease_s,
        )  # fmt: skip
        return row is not None

    async def release(self, conn: Any) -> None:
        """A clean stop: end the lease now, so other daemons take the experiments at once."""
        await conn.execute("UPDATE daemons SET expires_at = clock_timestamp() WHERE id = $1", self.daemon_id)

    def fence_lost(self, why: str) -> None:
        if self.lost is None:
            self.lost = why
            log.error("store: %s", why)
            if self.on_lost is not None:
                self.on_lost(why)

    async def claim(self, conn: Any, experiment_id: str, new: bool) -> str | None:
        """None if this daemon owns the experiment now (or it does not exist); else the owner's URL."""
        self.check()
        if await conn.fetchval(_CLAIM, experiment_id, self.daemon_id, new) is not None:
            self.claimed += 1
            # once per experiment and daemon (an actor's start): the log says who serves what
            log.info("store: this daemon (%s) serves experiment %s", self.url, experiment_id)
            return None
        url = await conn.fetchval(_OWNER_URL, experiment_id)
        return None if url is None else str(url)

    async def advertise(self, conn: Any, door: str, address: str) -> None:
        """Name this daemon's `door` ("optuna", "kerastuner") at `address` ("host:port") in its row."""
        await conn.execute(
            "UPDATE daemons SET doors = (doors::jsonb || jsonb_build_object($2::text, $3::text))::text WHERE id = $1",
            self.daemon_id, door, address,
        )  # fmt: skip

    async def door_of(self, conn: Any, url: str, door: str) -> str | None:
        """The address of `door` on the live daemon at `url` (an owner named by `claim`), or None."""
        found = await conn.fetchval(
            f"SELECT d.doors::jsonb ->> $2 FROM daemons d WHERE d.url = $1 AND {_LIVE} ORDER BY d.started_at DESC LIMIT 1",
            url.rstrip("/"), door,
        )  # fmt: skip
        return None if found is None else str(found)

    async def fence(self, conn: Any, experiment_ids: Sequence[str]) -> None:
        """Inside a write transaction: lock the experiments' owner rows and check they are ours and live."""
        self.check()
        if not experiment_ids:
            return
        rows = await conn.fetch(_FENCE, list(experiment_ids), self.daemon_id)
        if len(rows) != len(experiment_ids):
            mine = {r[0] for r in rows}
            gone = sorted(set(experiment_ids) - mine)[:3]
            raise StoreUnavailable(
                f"this daemon ({self.url}) no longer owns experiment(s) {', '.join(gone)}: its lease lapsed and another "
                "daemon took them; nothing of this request was kept; retry (it is served by the owner)"
            )

    async def forget(self, conn: Any, experiment_ids: Sequence[str]) -> None:
        """Inside the write transaction that deletes them (fenced: they are ours): their owner rows go too."""
        await conn.execute("DELETE FROM owners WHERE experiment_id = ANY($1::text[])", list(experiment_ids))

    async def status(self, conn: Any) -> Sharing:
        """This daemon's lease, how many experiments it owns, how many daemons are live."""
        row = await conn.fetchrow(_STATUS, self.daemon_id)
        held = bool(row[0]) and self.lost is None
        return Sharing(self.daemon_id, self.url, held, int(row[1]), int(row[2]))

    def check(self) -> None:
        if self.lost is not None:
            raise StoreUnavailable(f"{self.lost}; writes are refused here; retry against another daemon")

    async def keep(self, pool: Any, connect_timeout_s: float) -> None:
        """Renew every `renew_s` until cancelled; a lapsed lease fences this daemon for good."""
        while self.lost is None:
            await anyio.sleep(self.renew_s)
            try:
                async with pool.acquire(timeout=connect_timeout_s) as conn:
                    alive = await self.renew(conn)
            except Exception as exc:  # noqa: BLE001 - the server is away: try again; the lease tells the rest
                log.warning("store: renewing this daemon's lease failed (%r); retrying", exc)
                continue
            if not alive:
                self.fence_lost(
                    f"this daemon's lease ({self.url}) lapsed before it was renewed (frozen or cut off for over "
                    f"{self.lease_s:g} s); other daemons may have taken its experiments"
                )
