"""The messages an ExperimentActor takes. Every one names the credential asking
(`owner`, None = no check) so ownership is checked where the state lives."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..strategies._pool_types import ProposeResult


@dataclass(frozen=True)
class Msg:
    owner: str | None = None


@dataclass(frozen=True)
class GetExperiment(Msg):
    pass


@dataclass(frozen=True)
class UpdateExperiment(Msg):
    changes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ArchiveExperiment(Msg):
    pass


@dataclass(frozen=True)
class Suggest(Msg):
    tag: str | None = None


@dataclass(frozen=True)
class Observe(Msg):
    suggestion_id: str | None = None
    assignments: Mapping[str, Any] | None = None
    value: Any = None
    failed: bool = False
    metrics: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ListSuggestions(Msg):
    state: str | None = None
    tag: str | None = None


@dataclass(frozen=True)
class GetSuggestion(Msg):
    suggestion_id: str = ""


@dataclass(frozen=True)
class CloseSuggestion(Msg):
    suggestion_id: str = ""


@dataclass(frozen=True)
class CloseAllSuggestions(Msg):
    pass


@dataclass(frozen=True)
class ListObservations(Msg):
    after: int | None = None  # only observations with a numeric id above this


@dataclass(frozen=True)
class Best(Msg):
    pass


@dataclass(frozen=True)
class Summary(Msg):
    """Counts, best value, last activity and a thinned best-so-far line (the dashboard's list)."""


@dataclass(frozen=True)
class Workers(Msg):
    """Per-tag counts and the suggestions changed since cursor `after` (the workers' view)."""

    after: int = 0


@dataclass(frozen=True)
class ProposalReady(Msg):
    """A background proposal (GP fit) finished; sent by the actor's own job task."""

    version: int = 0
    result: ProposeResult | None = None
    error: BaseException | None = None


@dataclass(frozen=True)
class Inspect(Msg):
    """Internal counters (max open ever seen, proposals, fallbacks), for tests and benchmarks."""
