"""The Store: where acknowledged state lives.

Actors own experiment state in memory and tell the store what changed as a
batch of typed writes. `submit(writes, done)` never blocks: the store commits
batches in submission order (a durable store groups every batch queued in the
same moment into one transaction) and then calls `done(None)`, or
`done(exc)` if the transaction failed. Actors send their replies from `done`,
so a reply never leaves before its writes are durable.

Reads are used to rebuild an actor (`load`) and for listings across
experiments; they see committed state only.

Lifecycle: `await store.start(task_group)` opens it (a durable store starts its
writer task in that group, so a bad file raises here); `await store.aclose()`
flushes what is queued, stops the writer and releases it; so the group must
outlive the store's users, and `aclose` comes before the group exits.
`async with store:` does both with a task group of its own.

Credentials (the HTTP door's bearer tokens) are written through the same queue
(`PutCredential`, `RevokeCredential`, or the awaitable `put_credential` /
`revoke_credential`) and read with `credentials()`, `credential_by_hash()`;
`suggestion_times(owner, since)` feeds the rolling daily quota.
"""

from __future__ import annotations

import abc
import time
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Mapping, Protocol, Sequence, Union, runtime_checkable

import anyio
from anyio.abc import TaskGroup

from ..models import Experiment, Observation, Report, Suggestion

__all__ = [
    "Store",
    "CredentialStore",
    "PutExperiment",
    "PutCounters",
    "PutSuggestion",
    "PutObservation",
    "PutReport",
    "PutRecord",
    "DeleteExperiment",
    "PutCredential",
    "RevokeCredential",
    "CredentialRecord",
    "ExperimentGauges",
    "Write",
    "Snapshot",
    "IndexRow",
    "Done",
    "StoreError",
]


@dataclass(frozen=True)
class PutExperiment:
    """Insert or replace the experiment header (counts and `drawn` included)."""

    experiment: Experiment
    drawn: int = 0


@dataclass(slots=True)  # not frozen: built on every ask and observe (see tauopt/engine/_messages.py)
class PutCounters:
    """Update only an experiment's counters and `drawn` (what most mutations change),
    not its whole header. The counters stored here win over those in the header."""

    experiment_id: str
    open_suggestions: int
    observations: int
    drawn: int


@dataclass(slots=True)  # not frozen: built on every ask and observe (see tauopt/engine/_messages.py)
class PutSuggestion:
    """Insert or replace one suggestion (new, or a state change)."""

    suggestion: Suggestion


@dataclass(slots=True)  # not frozen: built on every ask and observe (see tauopt/engine/_messages.py)
class PutObservation:
    observation: Observation


@dataclass(frozen=True)
class PutReport:
    """Append one intermediate report of an open suggestion."""

    experiment_id: str
    report: Report


@dataclass(frozen=True)
class PutRecord:
    """Insert or replace one keyed JSON document of an experiment: the state a
    trial-based door's model adds (a study's attributes, one trial each), owned by
    the experiment's actor like everything else of it. `body` is JSON text."""

    experiment_id: str
    key: str
    body: str


@dataclass(frozen=True)
class DeleteExperiment:
    """Remove an experiment and its history (suggestions, observations, reports, records).
    Applied after the other writes of its transaction; an unknown id changes nothing.
    Every store implements it: the contract suite checks a deleted experiment is gone."""

    experiment_id: str


@dataclass(frozen=True)
class CredentialRecord:
    """A bearer token as stored: only the token's hash is kept. Limits left as
    None mean the server's defaults."""

    id: str
    name: str
    token_hash: str
    created_at: float
    suggestions_per_day: int | None = None
    max_active_experiments: int | None = None
    revoked_at: float | None = None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    @classmethod
    def of(cls, credential: Any) -> "CredentialRecord":
        """Accept any credential object with these field names (e.g. the door's own)."""
        if isinstance(credential, CredentialRecord):
            return credential
        return cls(
            id=credential.id,
            name=credential.name,
            token_hash=credential.token_hash,
            created_at=float(credential.created_at),
            suggestions_per_day=getattr(credential, "suggestions_per_day", None),
            max_active_experiments=getattr(credential, "max_active_experiments", None),
            revoked_at=getattr(credential, "revoked_at", None),
        )


@dataclass(frozen=True)
class PutCredential:
    """Insert or replace a credential (by id). Its token_hash must be unique."""

    credential: CredentialRecord


@dataclass(frozen=True)
class RevokeCredential:
    """Mark a credential revoked at `revoked_at`; an unknown id changes nothing."""

    credential_id: str
    revoked_at: float


Write = Union[
    PutExperiment, PutCounters, PutSuggestion, PutObservation, PutReport, PutRecord, DeleteExperiment, PutCredential,
    RevokeCredential,
]
Done = Callable[[BaseException | None], None]


@dataclass(frozen=True)
class Snapshot:
    """Everything an actor is rebuilt from."""

    experiment: Experiment
    suggestions: tuple[Suggestion, ...] = ()  # creation order
    observations: tuple[Observation, ...] = ()  # arrival order
    drawn: int = 0
    reports: tuple[Report, ...] = ()  # arrival order
    records: tuple[tuple[str, str], ...] = ()  # (key, body) of each PutRecord, any order


@dataclass(frozen=True)
class IndexRow:
    """An experiment's index columns: whose it is, read without loading its history."""

    owner: str | None
    state: str


@dataclass(frozen=True)
class ExperimentGauges:
    """What GET /metrics shows of the stored experiments: counts by state, and the
    busiest ones as (id, open suggestions, observations)."""

    states: Mapping[str, int]
    busiest: tuple[tuple[str, int, int], ...]


class StoreError(Exception):
    """A store cannot be opened (bad file, newer schema, read-only location)."""


@runtime_checkable
class CredentialStore(Protocol):
    """What a door's auth reads and writes: credentials, and the two quota counts
    kept per credential (suggestions since a time, experiments not archived);
    no experiment rows."""

    async def credentials(self) -> list[CredentialRecord]: ...

    async def credential_by_hash(self, token_hash: str) -> CredentialRecord | None: ...

    async def put_credential(self, credential: Any) -> CredentialRecord: ...

    async def revoke_credential(self, credential_id: str, revoked_at: float | None = None) -> None: ...

    async def suggestion_times(self, owner: str | None, since: float) -> list[float]: ...

    async def count_experiments(self, owner: str | None, exclude_state: str = "archived") -> int: ...


@dataclass(frozen=True)
class Sharing:
    """This daemon among the daemons sharing one database (`Store.sharing`)."""

    daemon_id: str
    url: str  # the URL the other daemons forward to
    lease_held: bool  # its lease is live on the server's clock (else it is fenced or cut off)
    owned: int  # experiments whose owner row names it
    daemons: int  # daemons with a live lease, this one included


class Store(abc.ABC):
    """Experiment state (submit/load/list) and, through the same writer, the
    CredentialStore interface; a door's auth is typed against the latter."""

    durable: bool = False
    # called after each committed transaction with (batches, seconds); for metrics
    on_commit: Callable[[int, float], None] | None = None
    _own_group: AsyncExitStack | None = None
    daemon_id: str | None = None  # with daemons sharing the database: this daemon's id in it

    async def start(self, task_group: TaskGroup | None = None) -> None:
        """Open resources. A durable store starts its writer task in `task_group`
        (required there; it must outlive the store's users) and raises StoreError
        here if the file cannot be used."""

    async def aclose(self) -> None:
        """Flush queued writes, stop the writer task, release resources."""

    async def __aenter__(self) -> "Store":
        """`async with store:` runs it in a task group of its own."""
        stack = AsyncExitStack()
        group = await stack.enter_async_context(anyio.create_task_group())
        try:
            await self.start(group)
        except BaseException:
            group.cancel_scope.cancel()
            await stack.aclose()
            raise
        self._own_group = stack
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        stack, self._own_group = self._own_group, None
        try:
            await self.aclose()
        finally:
            if stack is not None:
                await stack.__aexit__(*exc_info)

    async def write(self, writes: Sequence[Write]) -> None:
        """Submit a batch and wait until it is committed; raises what the commit raised."""
        event = anyio.Event()
        outcome: list[BaseException | None] = []

        def done(exc: BaseException | None) -> None:
            outcome.append(exc)
            event.set()

        self.submit(writes, done)
        await event.wait()
        if outcome[0] is not None:
            raise outcome[0]

    async def put_credential(self, credential: Any) -> CredentialRecord:
        record = CredentialRecord.of(credential)
        await self.write([PutCredential(record)])
        return record

    async def revoke_credential(self, credential_id: str, revoked_at: float | None = None) -> None:
        await self.write([RevokeCredential(credential_id, time.time() if revoked_at is None else revoked_at)])

    @abc.abstractmethod
    def submit(self, writes: Sequence[Write], done: Done) -> None:
        """Queue a batch; `done` is called once it is committed (or failed). Never blocks.
        An empty batch is a barrier: done fires after every batch queued before it."""

    async def sharing(self) -> Sharing | None:
        """With daemons sharing the database: this daemon's lease and what it owns;
        None for a store one engine owns outright."""
        return None

    async def claim(self, experiment_id: str, new: bool = False) -> str | None:
        """Take the experiment for this engine before rebuilding its actor: None if it
        is this engine's now (or does not exist), else the URL of the daemon that owns
        it. `new`: an experiment being created. A store one engine owns outright (memory,
        SQLite, PostgreSQL without `shared`) answers None; daemons sharing a database
        answer by lease (`_leases.py`)."""
        return None

    async def advertise(self, door: str, host: str, port: int) -> None:
        """Daemons sharing a database: say that this daemon serves `door` ("optuna",
        "kerastuner") at host:port, so a peer relays that door's calls for an experiment
        this daemon owns here. A wildcard host (0.0.0.0, ::) is advertised as the host
        of this daemon's URL. Nothing to say for a store one engine owns outright."""

    async def door_of(self, owner_url: str, door: str) -> str | None:
        """The "host:port" where the live daemon at `owner_url` (as `claim` names it)
        serves `door`; None if it serves no such door, is gone, or nothing is shared."""
        return None

    def one_at_a_time(self) -> AbstractAsyncContextManager[None]:
        """A section one daemon of those sharing the database runs at a time, which sees
        every write the others committed in theirs (a new study's id and name are
        unique across daemons). With one engine per store: a section of its own."""
        return _alone()

    @abc.abstractmethod
    async def load(self, experiment_id: str) -> Snapshot | None: ...

    @abc.abstractmethod
    async def list_experiments(
        self, state: str | None = None, owner: str | None = None, *, after: str | None = None,
        limit: int | None = None, name: str | None = None, named: str | None = None,
    ) -> list[Experiment]:  # fmt: skip
        """Experiments in `state` visible to `owner`: its own and the unowned ones
        (created in process, e.g. by the KerasTuner chief). owner None: all. In the
        order they entered this store (created or imported); `after`: only those after
        the experiment of that id (none if it is absent); at most `limit`; `name`: only
        those whose name contains it, case-insensitively; `named`: only those of exactly
        that name (an index lookup). A page costs its own rows, not the store's size."""

    @abc.abstractmethod
    async def count_experiments(self, owner: str | None, exclude_state: str = "archived") -> int: ...

    async def experiment_gauges(self, top: int) -> ExperimentGauges:
        """How many experiments are in each state, and the `top` busiest not archived
        (most open suggestions, then most observations, then id). A database store
        aggregates its index columns (no experiment read); this fallback lists them."""
        found = await self.list_experiments()
        states: dict[str, int] = {}
        for e in found:
            states[e.state] = states.get(e.state, 0) + 1
        live = sorted((e for e in found if e.state != "archived"), key=lambda e: (-e.open_suggestions, -e.observations, e.id))
        return ExperimentGauges(states, tuple((e.id, e.open_suggestions, e.observations) for e in live[:top]))

    async def active_strategies(self, after: str | None = None, limit: int = 100) -> tuple[list[str], str | None]:
        """The strategies of up to `limit` active experiments, in store order after the
        experiment whose id is `after`, and the id of the last one read (None past the
        end). A database store reads that one field (no experiment decoded); this
        fallback lists them."""
        page = await self.list_experiments("active", after=after, limit=limit)
        return [e.strategy for e in page], (page[-1].id if page else None)

    @abc.abstractmethod
    async def has_experiment(self, experiment_id: str) -> bool: ...

    async def index_row(self, experiment_id: str) -> IndexRow | None:
        """The experiment's owner and state, None when absent; a store reads them from
        its index (this fallback loads the experiment)."""
        found = await self.load(experiment_id)
        return None if found is None else IndexRow(found.experiment.owner, found.experiment.state)

    @abc.abstractmethod
    async def records(self, key: str) -> list[tuple[str, str]]:
        """(experiment_id, body) of every record stored under `key`, across experiments."""

    @abc.abstractmethod
    async def credentials(self) -> list[CredentialRecord]:
        """Every credential, revoked ones included, in creation order."""

    @abc.abstractmethod
    async def credential_by_hash(self, token_hash: str) -> CredentialRecord | None:
        """The credential with this token hash (revoked or not), or None."""

    @abc.abstractmethod
    async def suggestion_times(self, owner: str | None, since: float) -> list[float]:
        """created_at of every suggestion (any state) made at or after `since` in
        experiments owned by `owner`, ascending."""


@asynccontextmanager
async def _alone() -> AsyncIterator[None]:
    yield
