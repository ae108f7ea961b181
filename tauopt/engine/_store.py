"""The Store: where acknowledged state lives.

Actors own experiment state in memory and tell the store what changed as a
batch of typed writes. `submit(writes, done)` never blocks: the store commits
batches in submission order (a durable store groups every batch queued in the
same moment into one transaction) and then calls `done(None)`, or
`done(exc)` if the transaction failed. Actors send their replies from `done`,
so a reply never leaves before its writes are durable.

Reads are used to rebuild an actor (`load`) and for listings across
experiments; they see committed state only.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Callable, Sequence, Union

from ..models import Experiment, Observation, Suggestion

__all__ = [
    "Store",
    "MemoryStore",
    "PutExperiment",
    "PutSuggestion",
    "PutObservation",
    "Write",
    "Snapshot",
    "Done",
    "StoreError",
]


@dataclass(frozen=True)
class PutExperiment:
    """Insert or replace the experiment header (counts and `drawn` included)."""

    experiment: Experiment
    drawn: int = 0


@dataclass(frozen=True)
class PutSuggestion:
    """Insert or replace one suggestion (new, or a state change)."""

    suggestion: Suggestion


@dataclass(frozen=True)
class PutObservation:
    observation: Observation


Write = Union[PutExperiment, PutSuggestion, PutObservation]
Done = Callable[[BaseException | None], None]


@dataclass(frozen=True)
class Snapshot:
    """Everything an actor is rebuilt from."""

    experiment: Experiment
    suggestions: tuple[Suggestion, ...] = ()  # creation order
    observations: tuple[Observation, ...] = ()  # arrival order
    drawn: int = 0


class StoreError(Exception):
    """A store cannot be opened (bad file, newer schema, read-only location)."""


class Store(abc.ABC):
    durable: bool = False

    async def start(self) -> None:
        """Open resources; for a durable store, start the writer task."""

    async def aclose(self) -> None:
        """Flush queued writes and release resources."""

    @abc.abstractmethod
    def submit(self, writes: Sequence[Write], done: Done) -> None:
        """Queue a batch; `done` is called once it is committed (or failed). Never blocks.
        An empty batch is a barrier: done fires after every batch queued before it."""

    @abc.abstractmethod
    async def load(self, experiment_id: str) -> Snapshot | None: ...

    @abc.abstractmethod
    async def list_experiments(self, state: str | None = None, owner: str | None = None) -> list[Experiment]: ...

    @abc.abstractmethod
    async def count_experiments(self, owner: str | None, exclude_state: str = "archived") -> int: ...

    @abc.abstractmethod
    async def has_experiment(self, experiment_id: str) -> bool: ...


@dataclass
class _Stored:
    experiment: Experiment
    drawn: int = 0
    suggestions: dict[str, Suggestion] = field(default_factory=dict)
    observations: list[Observation] = field(default_factory=list)


class MemoryStore(Store):
    """Process memory: the local driver's default. Commits are immediate."""

    def __init__(self) -> None:
        self._data: dict[str, _Stored] = {}

    def submit(self, writes: Sequence[Write], done: Done) -> None:
        for w in writes:
            if isinstance(w, PutExperiment):
                rec = self._data.get(w.experiment.id)
                if rec is None:
                    self._data[w.experiment.id] = _Stored(w.experiment, w.drawn)
                else:
                    rec.experiment, rec.drawn = w.experiment, w.drawn
            elif isinstance(w, PutSuggestion):
                self._data[w.suggestion.experiment_id].suggestions[w.suggestion.id] = w.suggestion
            else:
                self._data[w.observation.experiment_id].observations.append(w.observation)
        done(None)

    async def load(self, experiment_id: str) -> Snapshot | None:
        rec = self._data.get(experiment_id)
        if rec is None:
            return None
        return Snapshot(rec.experiment, tuple(rec.suggestions.values()), tuple(rec.observations), rec.drawn)

    async def list_experiments(self, state: str | None = None, owner: str | None = None) -> list[Experiment]:
        return [
            r.experiment
            for r in self._data.values()
            if (state is None or r.experiment.state == state) and (owner is None or r.experiment.owner == owner)
        ]

    async def count_experiments(self, owner: str | None, exclude_state: str = "archived") -> int:
        return sum(
            1
            for r in self._data.values()
            if r.experiment.state != exclude_state and (owner is None or r.experiment.owner == owner)
        )

    async def has_experiment(self, experiment_id: str) -> bool:
        return experiment_id in self._data
