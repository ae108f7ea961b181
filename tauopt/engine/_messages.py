"""The messages an ExperimentActor takes. Every one names the credential asking
(`owner`, None = no check) so ownership is checked where the state lives.

Slotted plain dataclasses, not frozen ones: a frozen __init__ sets each field
through object.__setattr__ (~8 bytecodes and a C call a field), and two of these
are built for every ask + observe pair. A message is made by the engine, read by
one actor and dropped, and no code assigns to a message's fields."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..strategies import StrategyOutcome


@dataclass(slots=True)
class Msg:
    owner: str | None = None


@dataclass(slots=True)
class GetExperiment(Msg):
    pass


@dataclass(slots=True)
class UpdateExperiment(Msg):
    changes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ArchiveExperiment(Msg):
    pass


@dataclass(slots=True)
class UnarchiveExperiment(Msg):
    pass


@dataclass(slots=True)
class DeleteExperiment(Msg):
    """Remove the experiment and its history; refused while suggestions are open unless `force`."""

    force: bool = False


@dataclass(slots=True)
class ExportExperiment(Msg):
    """The experiment and its whole history as one document (see _export.py)."""


@dataclass(slots=True)
class Suggest(Msg):
    """wait_s: when the bandwidth is full, wait up to this many seconds for a slot
    (long-poll) instead of answering bandwidth_full at once. None or 0: no wait."""

    tag: str | None = None
    wait_s: float | None = None


@dataclass(slots=True)
class Observe(Msg):
    suggestion_id: str | None = None
    assignments: Mapping[str, Any] | None = None
    value: Any = None
    failed: bool = False
    metrics: Mapping[str, Any] | None = None
    values: Mapping[str, Any] | None = None
    stopped: bool = False


@dataclass(slots=True)
class Report(Msg):
    suggestion_id: str = ""
    step: Any = None
    value: Any = None


@dataclass(slots=True)
class ListReports(Msg):
    suggestion_id: str | None = None


@dataclass(slots=True)
class ListSuggestions(Msg):
    state: str | None = None
    tag: str | None = None


@dataclass(slots=True)
class GetSuggestion(Msg):
    suggestion_id: str = ""


@dataclass(slots=True)
class CloseSuggestion(Msg):
    suggestion_id: str = ""


@dataclass(slots=True)
class ReleaseSuggestion(Msg):
    """The holder of an open suggestion is declared dead: hand it to the next ask
    (same id), unless it was handed out `max_attempts` times already: then close it."""

    suggestion_id: str = ""
    max_attempts: int | None = None


@dataclass(slots=True)
class CloseAllSuggestions(Msg):
    pass


@dataclass(slots=True)
class ListObservations(Msg):
    after: int | None = None  # only observations with a numeric id above this
    failed: bool | None = None  # only the failed ones (True) or only the others (False)
    limit: int | None = None  # at most this many


@dataclass(slots=True)
class Best(Msg):
    pass


@dataclass(slots=True)
class Summary(Msg):
    """Counts, best value, last activity and a thinned best-so-far line (the dashboard's list)."""


@dataclass(slots=True)
class Workers(Msg):
    """Per-tag counts and the suggestions changed since cursor `after` (the workers' view);
    with `limit`, only the latest `limit` of those."""

    after: int = 0
    limit: int | None = None


@dataclass(slots=True)
class ReportLog(Msg):
    """Every intermediate report from cursor `after` on (arrival order; the learning curves),
    at most `limit` of them."""

    after: int = 0
    limit: int | None = None


@dataclass(slots=True)
class ProposalReady(Msg):
    """A background proposal (GP fit) finished; sent by the actor's own job task."""

    version: int = 0
    result: StrategyOutcome | None = None
    error: BaseException | None = None


@dataclass(slots=True)
class SlotWaitOver(Msg):
    """The wait_s of a parked ask ran out; sent by the actor's own timer task."""

    request: Any = None


@dataclass(slots=True)
class RoundWaitOver(Msg):
    """A job that waited for the round's observations may start; sent by the actor's own timer task."""


@dataclass(slots=True)
class TrialOp(Msg):
    """A change or read of the experiment's study and trials (`_trials.TrialChange`)."""

    change: Any = None


@dataclass(slots=True)
class DoorState(Msg):
    """A door's own state of the experiment, one JSON text per key (e.g. a bracket
    schedule): `body` None reads it (None when never written), else writes it."""

    key: str = ""
    body: str | None = None


@dataclass(slots=True)
class Inspect(Msg):
    """Internal counters (max open ever seen, proposals, fallbacks), for tests and benchmarks."""
