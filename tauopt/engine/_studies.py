"""Which experiment holds which study: the engine's index of a trial-based door's studies.

A study's state lives in its experiment's actor (`_trials.TrialBook`); this index
only maps study ids and (owner, name) to experiment ids, so a trial id (whose
study is read off it) reaches its actor without a store read. It is rebuilt from
the store's `study` records on first use. Study ids increase and are never given
again: a deleted study keeps its record (marked deleted), so the next id stays above it.
Reserving a name and an id happens without an await, so two creations of one
name race to one winner.

Daemons sharing a database each keep such an index; another daemon's studies reach
it by `load(fresh=True)`, which reads the records again: the engine does so on a
miss, for name lookups and listings, and inside the store's `one_at_a_time` section
before it reserves a new study's id and name, so both are unique across daemons.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from ..errors import api_error
from ..store import Store
from ._trials import STUDY_KEY, Study

__all__ = ["StudyIndex", "StudyEntry"]


@dataclass(frozen=True)
class StudyEntry:
    study_id: int
    name: str
    experiment_id: str | None  # None while its experiment is being made
    owner: str | None


class StudyIndex:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._by_id: dict[int, StudyEntry] = {}
        self._by_name: dict[tuple[str | None, str], int] = {}
        self._next_id = 0
        self._loaded = False
        self._loading = anyio.Lock()
        self.stored: dict[int, Study] = {}  # each study as the last load read it

    async def load(self, fresh: bool = False) -> None:
        """Read the index from the store once; `fresh`: again, for what other daemons wrote
        (studies they made or deleted; as stored, so `stored` has each one's last state)."""
        if self._loaded and not fresh:
            return
        async with self._loading:
            if self._loaded and not fresh:
                return
            rows = await self._store.records(STUDY_KEY)
            owners = {e.id: e.owner for e in await self._store.list_experiments()}
            making = {i: e for i, e in self._by_id.items() if e.experiment_id is None}  # reserved here, not yet stored
            self._by_id, self._by_name, self.stored = {}, {}, {}
            for experiment_id, body in rows:
                study = Study.from_json(body)
                self._next_id = max(self._next_id, study.study_id + 1)
                if not study.deleted and experiment_id in owners:
                    self._add(StudyEntry(study.study_id, study.name, experiment_id, owners[experiment_id]))
                    self.stored[study.study_id] = study
            for entry in making.values():
                self._add(entry)
            self._loaded = True

    def _add(self, entry: StudyEntry) -> None:
        self._by_id[entry.study_id] = entry
        self._by_name[(entry.owner, entry.name)] = entry.study_id

    def reserve(self, owner: str | None, name: str) -> int:
        """A new study id for `name`, or `name_taken`. Call `placed` or `release` after."""
        if (owner, name) in self._by_name:
            raise api_error("name_taken", f"a study named {name!r} exists; load it, or choose another name")
        study_id = self._next_id
        self._next_id += 1
        self._add(StudyEntry(study_id, name, None, owner))
        return study_id

    def placed(self, study_id: int, experiment_id: str) -> None:
        entry = self._by_id[study_id]
        self._by_id[study_id] = StudyEntry(study_id, entry.name, experiment_id, entry.owner)

    def release(self, study_id: int) -> None:
        entry = self._by_id.pop(study_id, None)
        if entry is not None:
            self._by_name.pop((entry.owner, entry.name), None)

    def experiment_of(self, owner: str | None, study_id: int) -> str:
        found = self.find(owner, study_id)
        if found is None:
            raise api_error("not_found", f"study {study_id} not found")
        return found

    def find(self, owner: str | None, study_id: int) -> str | None:
        """The experiment of the study `owner` sees as `study_id`; None if none (or the
        index is not loaded yet). Safe on any thread: it reads, and `load` replaces the
        maps whole."""
        entry = self._by_id.get(study_id)
        if entry is None or entry.experiment_id is None or (owner is not None and entry.owner not in (owner, None)):
            return None
        return entry.experiment_id

    def id_of(self, owner: str | None, name: str) -> int:
        study_id = self._by_name.get((owner, name))
        if study_id is None or self._by_id[study_id].experiment_id is None:
            raise api_error("not_found", f"no study named {name!r}")
        return study_id

    def ids(self, owner: str | None) -> list[int]:
        """The studies `owner` sees, in creation order."""
        return sorted(
            i
            for i, e in self._by_id.items()
            if e.experiment_id is not None and (owner is None or e.owner in (owner, None))
        )

    def count(self, owner: str | None) -> int:
        return sum(1 for e in self._by_id.values() if e.owner == owner)
