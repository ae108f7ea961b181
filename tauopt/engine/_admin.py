"""The engine's small admin API: what `tauopt token` and `tauopt experiments` do.

Listings and "best" are computed here and by the actor with the same functions
(`list_experiments`, `best_observation`), so a CLI listing and an API answer
cannot disagree; a credential named by id or name is resolved here only.
`Admin` reads and writes through the Store's interfaces only (experiments,
credentials), never an owning Engine: `open_admin(db)` works on a database a
running daemon serves, because the daemon re-reads credentials and the reads
never touch an experiment's live state. Moving experiments between owners
(`transfer_experiments`) needs the file to itself: `open_admin(db, exclusive=True)`.
"""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence, TypeVar

import anyio

from ..errors import api_error, invalid
from ..models import Experiment, Observation, Suggestion, with_values
from ..pareto import best_feasible
from ..store import CredentialRecord, PutExperiment, Snapshot, Store, open_store
from ._activity import Activity
from ._auth import new_credential

__all__ = [
    "Admin",
    "ExperimentReport",
    "Transfer",
    "best_observation",
    "list_experiments",
    "open_admin",
    "run_admin",
]

T = TypeVar("T")


def best_observation(experiment: Experiment, observations: Iterable[Observation]) -> Observation | None:
    """The best feasible observation by the (first) objective; the first of equals wins
    (`tauopt.pareto.best_feasible`: failed, incomplete or constraint-breaking ones never are)."""
    return best_feasible(experiment, observations)


async def list_experiments(
    store: Store, state: str | None, owner: str | None, *, after: str | None = None, limit: int | None = None,
    name: str | None = None, named: str | None = None,
) -> list[Experiment]:
    """Experiments in `state` visible to `owner` (None: all), in the order they entered the
    store (created or imported), at most `limit` after the experiment `after` (its id; one
    `owner` cannot see is refused as if absent), named with `name` in it when given."""
    if after is not None:
        row = await store.index_row(after)
        if row is None or not (owner is None or row.owner in (owner, None)):
            raise invalid(
                f"after: no experiment {after!r} (deleted since the last page?); list again without after"
            )
    return await store.list_experiments(state, owner, after=after, limit=limit, name=name, named=named)


@dataclass(frozen=True)
class ExperimentReport:
    """One experiment as the operations report it: its best observation (`best`) and the
    counts of its `summary` (failed observations, suggestions by state, last activity).
    What `tauopt experiments list|show` render; `show` also carries the history."""

    experiment: Experiment
    best: Observation | None
    failed: int
    suggestions_by_state: Mapping[str, int]
    last_activity: float
    observations: tuple[Observation, ...] = ()  # with_history only
    suggestions: tuple[Suggestion, ...] = ()

    @classmethod
    def of(
        cls,
        experiment: Experiment,
        best: Observation | None,
        summary: Mapping[str, Any],
        observations: Iterable[Observation] = (),
        suggestions: Iterable[Suggestion] = (),
    ) -> "ExperimentReport":
        """From the `best` and `summary` operations' answers (a daemon's, or a stored experiment's)."""
        return cls(
            experiment, best, int(summary["failed"]), dict(summary["suggestions_by_state"]),
            summary["last_activity"] or experiment.created_at, tuple(observations), tuple(suggestions),
        )  # fmt: skip

    @classmethod
    def stored(cls, snapshot: Snapshot, *, with_history: bool = True) -> "ExperimentReport":
        """A stored experiment, summarized as an actor rebuilt from it would answer."""
        exp = snapshot.experiment
        observations = with_values(exp.metric.name, snapshot.observations)
        summary = Activity.of_experiment(exp, snapshot.suggestions, observations).summary()
        best = best_observation(exp, observations)
        if not with_history:
            return cls.of(exp, best, summary)
        return cls.of(exp, best, summary, observations, snapshot.suggestions)


@dataclass(frozen=True)
class Transfer:
    """What `transfer_experiments` did: how many experiments moved, from whom, to whom."""

    moved: int
    source: CredentialRecord
    target: CredentialRecord


def _one(found: Sequence[CredentialRecord], id_or_name: str, by_id: str) -> CredentialRecord:
    """The credential with this id, else the one credential with this name."""
    matches = [c for c in found if c.id == id_or_name] or [c for c in found if c.name == id_or_name]
    if not matches:
        raise api_error("not_found", f"no credential has that id or name: {id_or_name!r}; see `tauopt token list`")
    if len(matches) > 1:
        raise invalid(f"{len(matches)} credentials are named {id_or_name!r}; {by_id}")
    return matches[0]


class Admin:
    """Credentials and read-only experiment reports over a Store (`Engine.admin`, or
    `open_admin` for the CLI). `offline`: no engine serves the store and the caller
    owns it, so experiments may change owner (an engine keeps live owners in memory)."""

    def __init__(self, store: Store, *, offline: bool = False) -> None:
        self.store = store
        self.offline = offline

    async def experiments(
        self, state: str | None = None, owner: str | None = None, *, after: str | None = None,
        limit: int | None = None, name: str | None = None,
    ) -> list[Experiment]:  # fmt: skip
        return await list_experiments(self.store, state, owner, after=after, limit=limit, name=name)

    async def report(self, experiment_id: str) -> ExperimentReport:
        """One experiment as stored, with its best observation, counts and history;
        `not_found` if absent."""
        snapshot = await self.store.load(experiment_id)
        if snapshot is None:
            raise api_error("not_found", f"no experiment {experiment_id!r}; see `tauopt experiments list`")
        return ExperimentReport.stored(snapshot)

    async def reports(
        self, state: str | None = None, owner: str | None = None, *, after: str | None = None,
        limit: int | None = None, name: str | None = None,
    ) -> list[ExperimentReport]:  # fmt: skip
        """Every experiment `experiments(...)` lists, in its order, with its best
        observation and counts (no history)."""
        found = []
        for exp in await self.experiments(state, owner, after=after, limit=limit, name=name):
            snapshot = await self.store.load(exp.id)
            if snapshot is not None:
                found.append(ExperimentReport.stored(snapshot, with_history=False))
        return found

    async def credentials(self) -> list[CredentialRecord]:
        return await self.store.credentials()

    async def credential(self, id_or_name: str) -> CredentialRecord:
        """A credential by id, or by a name only one credential has (`not_found`,
        or `invalid_request` for a shared name)."""
        return _one(await self.store.credentials(), id_or_name, "pass the id")

    async def create_credential(
        self,
        name: str,
        suggestions_per_day: int | None = None,
        max_active_experiments: int | None = None,
        *,
        write_token: Callable[[str], None] | None = None,
    ) -> tuple[CredentialRecord, str]:
        """A new credential and its token (shown once; only its hash is stored).

        `write_token(token)` runs before the credential is stored; if it raises,
        nothing is stored (a first start's token file must exist before its
        credential does)."""
        cred, token = new_credential(name, suggestions_per_day, max_active_experiments)
        taken = [c for c in await self.store.credentials() if c.name == cred.name]
        if taken:
            raise invalid(
                f"a credential is already named {cred.name!r} (id {taken[0].id}{', revoked' if taken[0].revoked else ''}); "
                "names pick a credential in `token revoke`, `token transfer` and --owner, so each is unique: "
                "pick another name"
            )
        if write_token is not None:
            write_token(token)
        return await self.store.put_credential(cred), token

    async def revoke_credential(self, id_or_name: str) -> CredentialRecord:
        """Revoke by id, or by a name only one credential has. Returns the credential as it
        was: one revoked already (its `revoked_at` set) is left as it is."""
        cred = _one(await self.store.credentials(), id_or_name, "revoke by id")
        if not cred.revoked:
            await self.store.revoke_credential(cred.id)
        return cred

    async def transfer_experiments(self, source: str, target: str) -> Transfer:
        """Give every experiment `source` owns (revoked or not) to `target` (not revoked),
        both by id or unique name, so revoking a leaked token does not orphan a search."""
        if not self.offline:
            raise invalid("moving experiments needs the store to itself: stop `tauopt serve`, then transfer")
        found = await self.store.credentials()
        src, dst = _one(found, source, "pass the id"), _one(found, target, "pass the id")
        if src.id == dst.id:
            raise invalid(f"{source!r} and {target!r} are the same credential ({src.id}); name another target")
        if dst.revoked:
            raise invalid(f"{target!r} is revoked; transfer to a live credential (`tauopt token create`)")
        moved = 0
        for exp in await self.experiments(None, src.id):
            snapshot = await self.store.load(exp.id)
            if snapshot is None or snapshot.experiment.owner != src.id:
                continue  # an unowned experiment: every credential sees it already
            await self.store.write([PutExperiment(replace(snapshot.experiment, owner=dst.id), snapshot.drawn)])
            moved += 1
        return Transfer(moved, src, dst)


@asynccontextmanager
async def open_admin(db: str | os.PathLike[str], *, exclusive: bool = False) -> AsyncIterator[Admin]:
    """An Admin over a database file, without an Engine. Not exclusive (the default),
    it works beside a daemon serving the file: its short transactions go through
    SQLite's own locking. `exclusive=True` owns the file (`store_in_use` while an
    engine holds it), as a first start's token and `transfer_experiments` need."""
    async with open_store(db, exclusive=exclusive) as store:
        yield Admin(store, offline=exclusive)


def run_admin(db: str | os.PathLike[str], work: Callable[[Admin], Awaitable[T]], *, exclusive: bool = False) -> T:
    """`await work(admin)` on `open_admin(db)`, from sync code (the CLI commands)."""

    async def run() -> T:
        async with open_admin(db, exclusive=exclusive) as admin:
            return await work(admin)

    try:
        return anyio.run(run)
    except BaseExceptionGroup as group:
        # The store's task group wraps what `work` raised; the commands catch the error itself.
        if len(group.exceptions) == 1 and isinstance(group.exceptions[0], Exception):
            raise group.exceptions[0] from None
        raise
