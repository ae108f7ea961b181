"""The REST door's wire schemas: request bodies and answers, for validation and /openapi.json."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from ...errors import CATALOGUE
from ...limits import MAX_DESCRIPTION_CHARS, MAX_WAIT_S
from ._openapi_rules import (
    _AT_LEAST_1,
    _FLOAT,
    _NAME,
    _POSITIVE,
    _TAG,
    ASSIGNMENTS_SCHEMA,
    EARLY_STOPPING_SCHEMA,
    METRIC_SCHEMA,
    METRICS_RULE,
    METRICS_SCHEMA,
    NUMBERS_SCHEMA,
    OBSERVE_RULES,
    PARAMETERS_SCHEMA,
    STRATEGIES,
    STRATEGY_OPTIONS_SCHEMA,
)

__all__ = [
    "CreateExperimentBody", "UpdateExperimentBody", "SuggestBody", "ObserveBody", "ExperimentOut",
    "SuggestionOut", "ObservationOut", "ClosedOut", "HealthOut", "ErrorOut", "error_responses",
    "ExperimentStateQ", "SuggestionStateQ", "NonNegative", "Positive", "integral_values", "ReportBody", "ReportOut", "ReportItemOut",
    "ExperimentDocument",
]

ExperimentStateQ = Literal["active", "completed", "archived"]
SuggestionStateQ = Literal["open", "observed", "closed", "expired"]
NonNegative = Annotated[int, Field(ge=0)]  # a cursor in a query: the last id you have
Positive = Annotated[int, Field(ge=1)]  # a count in a query

_STRICT = ConfigDict(extra="forbid", strict=True)


def _integral(value: Any) -> Any:
    # JSON has one number type: 940.0 is the integer 940 (as JSON Schema's "integer" says); 1.5 stays refused.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


JsonInt = Annotated[int, BeforeValidator(_integral)]


def integral_values(options: Any) -> Any:
    """A dict's integral floats as ints; anything else as it is (the engine refuses it, saying why)."""
    return {k: _integral(v) for k, v in options.items()} if isinstance(options, dict) else options


def _says(**schema: Any) -> Any:
    """Extra JSON-schema keywords for /openapi.json: what the engine's validation enforces.

    Only the document changes: validation stays the engine's, with its messages.
    """
    return schema


def _instead(schema: dict[str, Any]) -> Any:
    """`schema` in place of pydantic's `anyOf: [{...}, null]` for an optional field
    whose null the engine refuses (or reads as left out, with `_or_null`)."""

    def extra(field: dict[str, Any]) -> None:
        field.pop("anyOf", None)
        field.update(schema)

    return extra


def _or_null(schema: dict[str, Any]) -> Any:
    """`schema` or null, its keywords kept at the top where clients read them."""
    return _instead({**schema, "type": [schema["type"], "null"]})


_EARLY_STOPPING_DOC = (
    '{"rule": "none"} (default), {"rule": "median", "min_trials": 5, "grace_steps": 0} or '
    '{"rule": "asha", "max_step": N, "min_step": 1, "reduction_factor": 3}'
)


def _failure_cap() -> Any:
    """The failure cap, in both the create and the PATCH body."""
    return Field(
        default=None,
        description="stop handing out suggestions (409 too_many_failures) after this many failed runs in a row "
        "(failed observations, suggestions out of lease attempts); null: no cap. Setting it with PATCH, even to "
        "its value, lifts a stop and counts from zero",
        json_schema_extra=_says(anyOf=[_AT_LEAST_1, {"type": "null"}]),
    )


class CreateExperimentBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=_says(oneOf=METRICS_RULE))
    name: str = Field(json_schema_extra=_says(**_NAME))
    parameters: list[dict[str, Any]] = Field(
        description="Parameters: {name, type: double|int|categorical|boolean|fixed, bounds, scale, step, values, "
        "value, conditions, default}; bounds are [lo, hi] with lo < hi (log scales: lo > 0); names are unique",
        examples=[[{"name": "lr", "type": "double", "bounds": [1e-4, 1e-1], "scale": "log"}]],
        json_schema_extra=_says(**PARAMETERS_SCHEMA),
    )
    metric: dict[str, Any] | None = Field(
        default=None, description="one objective; or give metrics",
        examples=[{"name": "loss", "objective": "minimize"}], json_schema_extra=_or_null(METRIC_SCHEMA),
    )
    metrics: list[dict[str, Any]] | None = Field(
        default=None,
        description="instead of metric: 1-4 objectives {name, objective} and constraint metrics {name, constraint: {'<=' or '>=': number}}",
        examples=[[{"name": "acc", "objective": "maximize"}, {"name": "mem_mb", "constraint": {"<=": 512}}]],
        json_schema_extra=_or_null(METRICS_SCHEMA),
    )
    parallel_bandwidth: JsonInt = Field(default=1, json_schema_extra=_says(minimum=1))
    suggestion_ttl_s: float | None = Field(default=None, json_schema_extra=_says(anyOf=[_POSITIVE, {"type": "null"}]))
    observation_budget: JsonInt | None = Field(default=None, json_schema_extra=_says(anyOf=[_AT_LEAST_1, {"type": "null"}]))
    strategy: str = Field(default="auto", json_schema_extra=_says(enum=list(STRATEGIES)))
    strategy_options: dict[str, Any] | None = Field(
        default=None, json_schema_extra=_says(anyOf=[STRATEGY_OPTIONS_SCHEMA, {"type": "null"}])
    )
    # Any: the engine checks it, so every door refuses a bad rule with the same message and example
    early_stopping: Any = Field(
        default=None, description=_EARLY_STOPPING_DOC, examples=[{"rule": "asha", "max_step": 81}],
        json_schema_extra=_says(anyOf=[EARLY_STOPPING_SCHEMA, {"type": "null"}]),
    )
    max_consecutive_failures: JsonInt | None = _failure_cap()
    description: str | None = Field(
        default=None, description=f"free text for people: what the search is for (at most {MAX_DESCRIPTION_CHARS} characters)",
        examples=["learning rate and depth of the ResNet-18 baseline"],
        json_schema_extra=_says(anyOf=[{"type": "string", "maxLength": MAX_DESCRIPTION_CHARS}, {"type": "null"}]),
    )


class UpdateExperimentBody(BaseModel):
    """Keys left out are unchanged; null unsets suggestion_ttl_s, observation_budget or
    max_consecutive_failures (and early_stopping, to none); name, parallel_bandwidth and
    parameters are never null."""

    model_config = _STRICT
    name: str | None = Field(default=None, json_schema_extra=_instead(_NAME))
    parallel_bandwidth: JsonInt | None = Field(default=None, json_schema_extra=_instead(_AT_LEAST_1))
    suggestion_ttl_s: float | None = Field(default=None, json_schema_extra=_says(anyOf=[_POSITIVE, {"type": "null"}]))
    observation_budget: JsonInt | None = Field(default=None, json_schema_extra=_says(anyOf=[_AT_LEAST_1, {"type": "null"}]))
    parameters: list[dict[str, Any]] | None = Field(
        default=None, description="the full list: the stored parameters unchanged, plus any new ones",
        json_schema_extra=_instead(PARAMETERS_SCHEMA),
    )
    # Any: the engine checks it, so every door refuses a bad rule with the same message and example
    early_stopping: Any = Field(
        default=None, description=_EARLY_STOPPING_DOC, examples=[{"rule": "asha", "max_step": 81}],
        json_schema_extra=_says(anyOf=[EARLY_STOPPING_SCHEMA, {"type": "null"}]),
    )
    max_consecutive_failures: JsonInt | None = _failure_cap()


class SuggestBody(BaseModel):
    model_config = _STRICT
    tag: str | None = Field(
        default=None, description="1-128 printable characters, e.g. job-17-worker-3",
        json_schema_extra=_says(anyOf=[_TAG, {"type": "null"}]),
    )
    wait_s: float | None = Field(
        default=None,
        description="when parallel_bandwidth suggestions are open, wait up to this many seconds for one to be "
        "observed or closed before answering 429 bandwidth_full (long-poll); null or 0: answer at once",
        json_schema_extra=_says(anyOf=[{"type": "number", "minimum": 0, "maximum": MAX_WAIT_S}, {"type": "null"}]),
    )


class ObserveBody(BaseModel):
    # the engine's rules: exactly one of suggestion_id or assignments; exactly one of value, values or failed=true
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=_says(allOf=OBSERVE_RULES))
    # an integer too: ids are sequence numbers, and the engine takes 3 as "3" in every door
    suggestion_id: str | int | None = Field(default=None, description="the suggestion's id, as text or an integer")
    assignments: dict[str, Any] | None = Field(
        default=None, description="for an unsolicited observation: a value for every active parameter",
        json_schema_extra=_or_null(ASSIGNMENTS_SCHEMA),
    )
    value: float | None = Field(
        default=None, description="the first objective's value, enough for one objective without constraints; "
        "not with values or failed", json_schema_extra=_or_null(_FLOAT),
    )
    failed: bool = Field(default=False, description="true: the evaluation failed (give neither value nor values)")
    metrics: dict[str, float] | None = Field(
        default=None, description="anything else measured, by name (a failed evaluation's too)",
        json_schema_extra=_or_null(NUMBERS_SCHEMA),
    )
    values: dict[str, float] | None = Field(
        default=None, description="every objective and constraint metric of the experiment, by name, the first "
        "objective too; not with value or failed", json_schema_extra=_or_null(NUMBERS_SCHEMA),
    )
    stopped: bool = Field(
        default=False, description="true: the trial was stopped early (its last reported value); only with a suggestion_id"
    )


class ReportBody(BaseModel):
    model_config = _STRICT
    step: JsonInt = Field(
        description="increases per suggestion (epoch, iteration)", json_schema_extra=_says(minimum=0, maximum=2**53)
    )
    value: float = Field(description="the objective's intermediate value (finite)", json_schema_extra=_says(**_FLOAT))


class ReportOut(BaseModel):
    should_stop: bool
    reason: str | None


class ReportItemOut(BaseModel):
    suggestion_id: str
    step: int
    value: float
    created_at: float


class MetricOut(BaseModel):
    name: str
    objective: Literal["minimize", "maximize"]


class MetricsItemOut(BaseModel):
    name: str
    objective: Literal["minimize", "maximize"] | None = None
    constraint: dict[str, float] | None = None


class ExperimentOut(BaseModel):
    id: str
    name: str
    description: str | None = Field(description="free text for people; null when none was given")
    parameters: list[dict[str, Any]]
    metric: MetricOut
    metrics: list[MetricsItemOut]
    parallel_bandwidth: int
    suggestion_ttl_s: float | None
    observation_budget: int | None
    strategy: str
    strategy_options: dict[str, Any]
    state: Literal["active", "completed", "archived"]
    created_at: float
    open_suggestions: int
    observations: int
    early_stopping: dict[str, Any]
    max_consecutive_failures: int | None
    consecutive_failures: int = Field(description="failed runs in a row since the last success or since the cap was set")
    stopped_reason: str | None = Field(description="why asks answer 409 too_many_failures; null while they do not")


class SuggestionOut(BaseModel):
    id: str
    experiment_id: str
    assignments: dict[str, Any]
    state: Literal["open", "observed", "closed", "expired"]
    tag: str | None
    created_at: float


class ObservationOut(BaseModel):
    id: str
    experiment_id: str
    suggestion_id: str | None
    assignments: dict[str, Any]
    value: float | None = Field(description="the first objective's value (also in `values`); null when failed")
    failed: bool
    created_at: float
    metrics: dict[str, float] = Field(description="the metrics other than the first objective")
    stopped_at_step: int | None
    values: dict[str, float] = Field(description="every metric the observation carries, by name, the first objective first")


class ExperimentDocument(BaseModel):
    """An experiment with its whole history, as export writes it and import reads it
    (the engine checks the contents as create_experiment does)."""

    model_config = ConfigDict(extra="forbid")
    format: Literal["tauopt.experiment"]
    version: int
    experiment: dict[str, Any]
    drawn: int = 0
    suggestions: list[dict[str, Any]]
    observations: list[dict[str, Any]]
    reports: list[dict[str, Any]]


class ClosedOut(BaseModel):
    closed: int


class HealthOut(BaseModel):
    status: str = Field(description="ok: the process answers")
    ready: bool = Field(description="the store is open and, when daemons share the database, this daemon's lease is live")
    daemon_id: str = Field(description="this daemon's id (in its log, /metrics and the dashboard)")
    shared: bool = Field(description="several daemons share this daemon's database")
    owned_experiments: int | None = Field(None, description="when shared: how many experiments this daemon owns")
    live_daemons: int | None = Field(None, description="when shared: daemons with a live lease, this one included")


class ErrorBody(BaseModel):
    type: str
    message: str
    details: dict[str, Any]


class ErrorOut(BaseModel):
    error: ErrorBody


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {s: {"model": ErrorOut, "description": ", ".join(k.error_type for k in CATALOGUE.values() if k.http_status == s)} for s in statuses}



COMMON_ERRORS = (400, 401, 404, 413)
