"""The engine's small admin API: what `tauopt token` and `tauopt experiments` do.

Listings and "best" are computed here and by the actor with the same functions
(`list_experiments`, `best_observation`), so a CLI listing and an API answer
cannot disagree. `Admin` reads and writes through the Store's interfaces only
(experiments, credentials), never an owning Engine: it works on a database a
running daemon serves, because the daemon re-reads credentials and the CLI
never touches an experiment's live state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from ..errors import api_error
from ..models import Experiment, Observation
from ..pareto import best_feasible
from ._auth import new_credential
from ..store import CredentialRecord, Store

__all__ = ["Admin", "ExperimentReport", "best_observation", "list_experiments"]


def best_observation(experiment: Experiment, observations: Iterable[Observation]) -> Observation | None:
    """The best feasible observation by the (first) objective; the first of equals wins
    (`tauopt.pareto.best_feasible`: failed, incomplete or constraint-breaking ones never are)."""
    return best_feasible(experiment, observations)


async def list_experiments(store: Store, state: str | None, owner: str | None) -> list[Experiment]:
    """Experiments in `state` visible to `owner` (None: all), oldest first."""
    found = await store.list_experiments(state, owner)
    return sorted(found, key=lambda e: (e.created_at, e.id))


@dataclass(frozen=True)
class ExperimentReport:
    experiment: Experiment
    best: Observation | None


class Admin:
    """Credentials and read-only experiment reports over a Store (`Engine.admin`, or the CLI's)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def experiments(self, state: str | None = None, owner: str | None = None) -> list[Experiment]:
        return await list_experiments(self.store, state, owner)

    async def report(self, experiment_id: str) -> ExperimentReport:
        """One experiment as stored, with its best observation; `not_found` if absent."""
        snapshot = await self.store.load(experiment_id)
        if snapshot is None:
            raise api_error("not_found", f"no experiment {experiment_id!r}; see `tauopt experiments list`")
        return ExperimentReport(snapshot.experiment, best_observation(snapshot.experiment, snapshot.observations))

    async def credentials(self) -> list[CredentialRecord]:
        return await self.store.credentials()

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
        if write_token is not None:
            write_token(token)
        return await self.store.put_credential(cred), token

    async def revoke_credential(self, id_or_name: str) -> CredentialRecord:
        """Revoke by id, or by a name only one credential has."""
        found = await self.store.credentials()
        matches: Sequence[CredentialRecord] = [c for c in found if c.id == id_or_name] or [
            c for c in found if c.name == id_or_name
        ]
        if not matches:
            raise api_error("not_found", f"no credential {id_or_name!r}; see `tauopt token list`")
        if len(matches) > 1:
            raise api_error("invalid_request", f"{len(matches)} credentials are named {id_or_name!r}; revoke by id")
        await self.store.revoke_credential(matches[0].id)
        return matches[0]
