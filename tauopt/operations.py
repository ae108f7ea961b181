"""The Operations protocol: every operation's signature, written once.

The Engine and every client driver (local, http) implement it; the clients
(`AsyncClient`, `Client`) expose exactly these methods. A door translates a
wire to these calls and nothing else. `tests/test_operations.py` checks each
implementation against this protocol, name by name and parameter by parameter.

A door scopes calls to one credential with `Engine.as_owner(owner)`, a view
with these same operations; client drivers have no owner (their token decides
it on the server), so it is not part of the protocol.

Adding an operation: its signature here, then the Engine, each driver, each
door's one route or method (README, "where to add an operation").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Mapping, Protocol, Sequence, runtime_checkable

from .models import Experiment, Metric, Observation, Parameter, Report, ReportDecision, StrategyOptions, Suggestion, Value

if TYPE_CHECKING:
    from .schema import ExperimentSpec

__all__ = ["Operations", "OPERATIONS", "UNSET", "Unset", "ExperimentState", "SuggestionState"]

ExperimentState = Literal["active", "completed", "archived"]
SuggestionState = Literal["open", "observed", "closed", "expired"]


class Unset:
    """The type of UNSET: "leave this field as it is" in update_experiment."""

    _instance: "Unset | None" = None

    def __new__(cls) -> "Unset":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __reduce__(self) -> str:  # one UNSET across pickling, too
        return "UNSET"


UNSET: Any = Unset()


@runtime_checkable
class Operations(Protocol):
    """What a worker or a dashboard can do with experiments, whichever the driver."""

    async def create_experiment(
        self,
        name: str | None = None,
        parameters: Sequence[Parameter | Mapping[str, Any]] | None = None,
        metric: Metric | Mapping[str, Any] | None = None,
        parallel_bandwidth: int = 1,
        suggestion_ttl_s: float | None = None,
        observation_budget: int | None = None,
        strategy: str = "auto",
        strategy_options: StrategyOptions | Mapping[str, Any] | None = None,
        early_stopping: Mapping[str, Any] | None = None,
        metrics: Sequence[Metric | Mapping[str, Any]] | None = None,
        max_consecutive_failures: int | None = None,
        description: str | None = None,
        *,
        spec: ExperimentSpec | Mapping[str, Any] | None = None,
    ) -> Experiment:
        """Create an active experiment; its id is chosen by the engine. `metric`: one
        objective, or `metrics=[...]`: 1-4 objectives and constraint metrics;
        `early_stopping`: {"rule": "none"|"median"|"asha", ...options} (see `report`);
        `max_consecutive_failures`: that many failed runs in a row stop the asks
        (`too_many_failures`) until update_experiment sets it again (None: no cap);
        `description`: free text for people (at most 4,096 characters). `spec`: the whole
        spec as one value (a `tauopt.schema.ExperimentSpec` or a dict of its fields), the way
        to every field, also those without a keyword here (`metadata`: key -> text, number
        or boolean); keywords given beside it are added to it, a field given both ways is refused.
        E.g. parameters=[{"name": "lr", "type": "double", "bounds": [1e-4, 0.1], "scale": "log"}, {"name": "n",
        "type": "int", "bounds": [1, 4]}, {"name": "act", "type": "categorical", "values": ["relu", "tanh"]}],
        metric={"name": "loss"} (objective "minimize" by default), metrics=[{"name": "acc", "objective": "maximize"},
        {"name": "mem_mb", "constraint": {"<=": 512}}], early_stopping={"rule": "median", "min_trials": 5} or
        {"rule": "asha", "max_step": 81}, strategy_options={"seed": 0, "initial_points": 10, "grid_size": 5}."""
        ...

    async def experiment(self, experiment_id: str) -> Experiment:
        """One experiment with its counts; `not_found` if absent (or another credential's)."""
        ...

    async def experiments(
        self, state: ExperimentState | None = None, *, after: str | None = None, limit: int | None = None,
        name: str | None = None,
    ) -> list[Experiment]:
        """Experiments in the order they were created or imported, optionally in one state or
        with `name` in their name (case-insensitive); at most `limit` after the experiment
        `after` (the id of the last one you have): read a long list page by page."""
        ...

    async def update_experiment(
        self,
        experiment_id: str,
        *,
        name: str = UNSET,
        parallel_bandwidth: int = UNSET,
        suggestion_ttl_s: float | None = UNSET,
        observation_budget: int | None = UNSET,
        parameters: Sequence[Parameter | Mapping[str, Any]] = UNSET,
        early_stopping: Mapping[str, Any] = UNSET,
        max_consecutive_failures: int | None = UNSET,
        description: str | None = UNSET,
        metadata: Mapping[str, Value] | None = UNSET,
    ) -> Experiment:
        """Change the given fields (UNSET leaves one as it is; None unsets ttl, budget, the
        failure cap or the description). Setting max_consecutive_failures, even to its
        value, clears a `too_many_failures` stop and counts failures from zero. `metadata`
        replaces the whole dict (give every key you keep; {} or None clears it), with the
        rules and messages of create_experiment."""
        ...

    async def archive_experiment(self, experiment_id: str) -> Experiment:
        """Archive: no more asks or observations; open suggestions close."""
        ...

    async def unarchive_experiment(self, experiment_id: str) -> Experiment:
        """Undo an archive: active again (completed if its budget is used up)."""
        ...

    async def delete_experiment(self, experiment_id: str, force: bool = False) -> Experiment:
        """Remove it and its history from the store; returns it as it was. Refused with
        `suggestions_open` while suggestions are open, unless force=True."""
        ...

    async def export_experiment(self, experiment_id: str) -> dict[str, Any]:
        """The experiment and its whole history as one JSON document, for import_experiment."""
        ...

    async def import_experiment(self, data: Mapping[str, Any]) -> Experiment:
        """Recreate an exported experiment (a new id, the caller's) with the same history."""
        ...

    async def suggest(self, experiment_id: str, tag: str | None = None, wait_s: float | None = None) -> Suggestion:
        """A new open suggestion; `bandwidth_full` when parallel_bandwidth are open, or,
        with `wait_s` (0-300 s), when none returned within that wait."""
        ...

    async def observe(
        self,
        experiment_id: str,
        suggestion_id: str | None = None,
        assignments: Mapping[str, Any] | None = None,
        value: float | None = None,
        failed: bool = False,
        metrics: Mapping[str, float] | None = None,
        values: Mapping[str, float] | None = None,
        stopped: bool = False,
    ) -> Observation:
        """Record a result, of a suggestion (suggestion_id) or unsolicited (assignments).
        One of `value` (the first objective), `values` (every objective and constraint metric
        by name) or `failed=True`; `stopped=True`: the
        suggestion was stopped early (told by `report`), `value` its last reported value."""
        ...

    async def report(self, experiment_id: str, suggestion_id: str, step: int, value: float) -> ReportDecision:
        """An intermediate value of an open suggestion at `step` (increasing); answers
        whether the experiment's early-stopping rule says to stop it."""
        ...

    async def reports(self, experiment_id: str, suggestion_id: str | None = None) -> list[Report]:
        """The intermediate reports in arrival order, of one suggestion (None: all; in process only)."""
        ...

    async def suggestions(
        self, experiment_id: str, state: SuggestionState | None = None, tag: str | None = None
    ) -> list[Suggestion]:
        """The experiment's suggestions, optionally filtered by state and tag."""
        ...

    async def suggestion(self, experiment_id: str, suggestion_id: str) -> Suggestion:
        """One suggestion by id."""
        ...

    async def close_suggestion(self, experiment_id: str, suggestion_id: str) -> Suggestion:
        """Close an open suggestion without an observation (its point may be suggested again)."""
        ...

    async def close_all_suggestions(self, experiment_id: str) -> int:
        """Close every open suggestion; the number closed."""
        ...

    async def observations(
        self, experiment_id: str, after: int | None = None, *, limit: int | None = None, failed: bool | None = None
    ) -> list[Observation]:
        """Every observation, in the order recorded; with `after` (the last id you have) only the
        newer ones; at most `limit`; `failed` True or False: only the failed or the other ones."""
        ...

    async def best(self, experiment_id: str) -> Observation | None:
        """The best feasible observation by the (first) objective, or None."""
        ...

    async def pareto_front(self, experiment_id: str) -> list[Observation]:
        """The feasible observations no other feasible one dominates, in arrival order."""
        ...

    async def summary(self, experiment_id: str) -> dict[str, Any]:
        """The experiment, its counts, best value, last activity and best-so-far line."""
        ...

    async def workers(self, experiment_id: str, after: int = 0, limit: int | None = None) -> dict[str, Any]:
        """Per-tag counts, open suggestions with their age, suggestions changed since the cursor `after` (with `limit`, the latest `limit` of them)."""
        ...

    async def importance(self, experiment_id: str) -> dict[str, Any]:
        """Parameter importance over the observations, with the method named."""
        ...

    async def report_log(self, experiment_id: str, after: int = 0, limit: int | None = None) -> dict[str, Any]:
        """Every suggestion's intermediate reports since the cursor `after` (0: all), arrival order,
        at most `limit` (the oldest first): {"cursor", "reports", "more"}; pass `cursor` back while `more`."""
        ...


# The operation names, in the protocol's order (for tests and docs; never for dispatch).
OPERATIONS: tuple[str, ...] = tuple(
    name for name, value in vars(Operations).items() if not name.startswith("_") and callable(value)
)
