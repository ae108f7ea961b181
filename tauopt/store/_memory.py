"""MemoryStore: the Store in process memory (the local driver's default). Commits are immediate."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any, Callable, Iterable, Sequence

from ..models import Experiment, Observation, Report, Suggestion
from ._base import (
    CredentialRecord,
    DeleteExperiment,
    Done,
    IndexRow,
    PutCredential,
    PutCounters,
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

__all__ = ["MemoryStore"]


@dataclass
class _Stored:
    """One experiment. `header` as last written whole; the counters of PutCounters
    apart (what almost every mutation changes), joined into it when read."""

    header: Experiment
    drawn: int = 0
    counters: tuple[int, int] | None = None  # (open_suggestions, observations) newer than the header's
    suggestions: dict[str, Suggestion] = field(default_factory=dict)
    observations: list[Observation] = field(default_factory=list)
    reports: list[Report] = field(default_factory=list)
    records: dict[str, str] = field(default_factory=dict)

    @property
    def experiment(self) -> Experiment:
        if self.counters is not None:
            self.header = self.header.evolve(open_suggestions=self.counters[0], observations=self.counters[1])
            self.counters = None
        return self.header


class MemoryStore(Store):
    """Process memory: the local driver's default. Commits are immediate."""

    def __init__(self) -> None:
        self._data: dict[str, _Stored] = {}
        self._credentials: dict[str, CredentialRecord] = {}
        # one method per write type, looked up by exact type (every ask and observe comes here)
        self._apply: dict[type, Callable[[Any], None]] = {
            PutSuggestion: self._put_suggestion,
            PutCounters: self._put_counters,
            PutObservation: self._put_observation,
            PutExperiment: self._put_experiment,
            PutReport: self._put_report,
            PutRecord: self._put_record,
            DeleteExperiment: self._delete_experiment,
            PutCredential: self._put_credential,
            RevokeCredential: self._revoke_credential,
        }

    def submit(self, writes: Sequence[Write], done: Done) -> None:
        # each write's method, by exact type, looked up in C: the batch is checked whole
        # first (nothing applied unless all of it is), then applied
        steps: list[Any] = list(map(self._apply.get, map(type, writes)))
        if None in steps:
            done(StoreError(f"not a store write: {[w for w in writes if type(w) not in self._apply]!r}"))
            return
        if self._put_credential in steps:
            try:
                self._check_credentials(writes)
            except StoreError as exc:
                done(exc)  # nothing of the batch applied, like a rolled-back transaction
                return
        for apply, w in zip(steps, writes):
            apply(w)
        done(None)

    def _put_suggestion(self, w: PutSuggestion) -> None:
        self._data[w.suggestion.experiment_id].suggestions[w.suggestion.id] = w.suggestion

    def _put_counters(self, w: PutCounters) -> None:
        rec = self._data[w.experiment_id]
        rec.counters = (w.open_suggestions, w.observations)
        rec.drawn = w.drawn

    def _put_observation(self, w: PutObservation) -> None:
        self._data[w.observation.experiment_id].observations.append(w.observation)

    def _put_experiment(self, w: PutExperiment) -> None:
        rec = self._data.get(w.experiment.id)
        if rec is None:
            self._data[w.experiment.id] = _Stored(w.experiment, w.drawn)
        else:
            rec.header, rec.drawn, rec.counters = w.experiment, w.drawn, None

    def _put_report(self, w: PutReport) -> None:
        self._data[w.experiment_id].reports.append(w.report)

    def _put_record(self, w: PutRecord) -> None:
        self._data[w.experiment_id].records[w.key] = w.body
    def _delete_experiment(self, w: DeleteExperiment) -> None:
        self._data.pop(w.experiment_id, None)

    def _put_credential(self, w: PutCredential) -> None:
        self._credentials[w.credential.id] = w.credential

    def _revoke_credential(self, w: RevokeCredential) -> None:
        old = self._credentials.get(w.credential_id)
        if old is not None:
            self._credentials[w.credential_id] = replace(old, revoked_at=w.revoked_at)

    def _check_credentials(self, writes: Sequence[Write]) -> None:
        """token_hash is unique, as the SQLite schema enforces."""
        owners = {c.token_hash: c.id for c in self._credentials.values()}
        for w in writes:
            if isinstance(w, PutCredential):
                c = w.credential
                holder = owners.get(c.token_hash)
                if holder is not None and holder != c.id:
                    raise StoreError(f"token_hash of credential {c.id!r} is already used by {holder!r}")
                owners = {h: i for h, i in owners.items() if i != c.id}
                owners[c.token_hash] = c.id

    async def load(self, experiment_id: str) -> Snapshot | None:
        rec = self._data.get(experiment_id)
        if rec is None:
            return None
        return Snapshot(
            rec.experiment,
            tuple(rec.suggestions.values()),
            tuple(rec.observations),
            rec.drawn,
            tuple(rec.reports),
            tuple(sorted(rec.records.items())),
        )

    async def index_row(self, experiment_id: str) -> IndexRow | None:
        rec = self._data.get(experiment_id)
        return None if rec is None else IndexRow(rec.experiment.owner, rec.experiment.state)

    async def list_experiments(
        self, state: str | None = None, owner: str | None = None, *, after: str | None = None,
        limit: int | None = None, name: str | None = None, named: str | None = None,
    ) -> list[Experiment]:  # fmt: skip
        records: Iterable[_Stored] = self._data.values()
        if after is not None:
            start = list(self._data).index(after) + 1 if after in self._data else len(self._data)
            records = islice(self._data.values(), start, None)
        found = (
            r.experiment
            for r in records
            if (state is None or r.experiment.state == state)
            and (owner is None or r.experiment.owner in (owner, None))
            and (name is None or name.lower() in r.experiment.name.lower())
            and (named is None or r.experiment.name == named)
        )
        return list(islice(found, limit))

    async def count_experiments(self, owner: str | None, exclude_state: str = "archived") -> int:
        return sum(
            1
            for r in self._data.values()
            if r.experiment.state != exclude_state and (owner is None or r.experiment.owner == owner)
        )

    async def has_experiment(self, experiment_id: str) -> bool:
        return experiment_id in self._data

    async def records(self, key: str) -> list[tuple[str, str]]:
        return [(eid, r.records[key]) for eid, r in self._data.items() if key in r.records]

    async def credentials(self) -> list[CredentialRecord]:
        return list(self._credentials.values())

    async def credential_by_hash(self, token_hash: str) -> CredentialRecord | None:
        return next((c for c in self._credentials.values() if c.token_hash == token_hash), None)

    async def suggestion_times(self, owner: str | None, since: float) -> list[float]:
        return sorted(
            s.created_at
            for r in self._data.values()
            if r.experiment.owner == owner
            for s in r.suggestions.values()
            if s.created_at >= since
        )
