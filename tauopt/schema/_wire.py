"""Each HTTP operation's request and answer, as models; /openapi.json is generated from them.

The create request is `ExperimentSpec` itself (`_spec`): the route hands the JSON object
to the engine, which judges it through that model (a huge space in a worker thread).
The other bodies are read loosely here (strict JSON types, no unknown keys) and judged
by the engine, which every door shares, so a bad value gets the same message in process
and over HTTP; the document states the spec's rules through `described_as`: the field
is documented as the spec type (`_spec`) it must be.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, create_model
from pydantic.config import JsonDict

from .._numbers import integral as _integral
from ..errors import CATALOGUE
from ..limits import REPORT_STEP, WAIT_S
from ._spec import (
    EARLY_STOPPING_DOC,
    FAILURE_CAP_DOC,
    Assignments,
    AtLeast1,
    Description,
    EarlyStoppingSpec,
    Float64,
    Metadata,
    MetricNumbers,
    Name,
    ParameterSpec,
    Seconds,
    Tag,
    answered_as_given,
    documented,
)

__all__ = [
    "UpdateExperimentBody", "SuggestBody", "ObserveBody", "ExperimentOut",
    "SuggestionOut", "ObservationOut", "ClosedOut", "HealthOut", "ErrorOut", "error_responses", "COMMON_ERRORS",
    "ExperimentStateQ", "SuggestionStateQ", "NonNegative", "Positive", "IdQ", "TextQ", "ReportBody",
    "ReportOut", "ReportItemOut",
    "ExperimentDocument",
]

ExperimentStateQ = Literal["active", "completed", "archived"]
SuggestionStateQ = Literal["open", "observed", "closed", "expired"]
NonNegative = Annotated[int, Field(ge=0)]  # a cursor in a query: the last id you have
Positive = Annotated[int, Field(ge=1)]  # a count in a query
IdQ = Annotated[str, Field(min_length=1, max_length=256)]  # a cursor in a query: the id of the last one you have
TextQ = Annotated[str, Field(min_length=1, max_length=256)]  # text to find

_STRICT = ConfigDict(extra="forbid", strict=True)


def _as_given(value: Any) -> Any:
    return value


def described_as(spec: Any, *, integral: bool = False) -> Any:
    """A field documented as `spec` and validated as its annotation says (the engine judges the
    rest, with its messages); `integral`: 940.0 is read as 940 first."""
    return BeforeValidator(_integral if integral else _as_given, json_schema_input_type=spec)


EarlyStopping = Annotated[Any, described_as(EarlyStoppingSpec | None)]
FailureCap = Annotated[int | None, described_as(AtLeast1 | None, integral=True)]
Budget = Annotated[int | None, described_as(AtLeast1 | None, integral=True)]
Ttl = Annotated[float | None, described_as(Seconds | None)]


class UpdateExperimentBody(BaseModel):
    """Keys left out are unchanged; null unsets suggestion_ttl_s, observation_budget,
    max_consecutive_failures or description (and early_stopping, to none; metadata, to {});
    name, parallel_bandwidth and parameters are never null. metadata replaces the whole
    object."""

    model_config = _STRICT
    # null is refused by the engine: documented as the value alone
    name: Annotated[str | None, described_as(Name)] = None
    parallel_bandwidth: Annotated[int | None, described_as(AtLeast1, integral=True)] = None
    suggestion_ttl_s: Ttl = None
    observation_budget: Budget = None
    parameters: Annotated[list[dict[str, Any]] | None, described_as(Annotated[list[ParameterSpec], Field(min_length=1)])] = Field(
        default=None, description="the full list: the stored parameters unchanged, plus any new ones"
    )
    early_stopping: EarlyStopping = Field(default=None, description=EARLY_STOPPING_DOC, examples=[{"rule": "asha", "max_step": 81}])
    max_consecutive_failures: FailureCap = Field(default=None, description=FAILURE_CAP_DOC)
    description: Annotated[Any, described_as(Description | None)] = Field(default=None, description="free text for people")
    metadata: Annotated[Any, described_as(Metadata | None)] = Field(
        default=None, description="the whole object: keys left out are removed", examples=[{"team": "vision", "gpus": 8}]
    )


class SuggestBody(BaseModel):
    model_config = _STRICT
    tag: str | None = Field(
        default=None, description="1-128 printable characters, e.g. job-17-worker-3", json_schema_extra=documented(Tag | None)
    )
    wait_s: float | None = Field(
        default=None, json_schema_extra=documented(Annotated[float, Field(**WAIT_S.keywords())] | None),
        description="when parallel_bandwidth suggestions are open, wait up to this many seconds for one to be "
        "observed or closed before answering 429 bandwidth_full (long-poll); null or 0: answer at once",
    )


_NULL: dict[str, Any] = {"type": "null"}
_FLOAT: dict[str, Any] = TypeAdapter(Float64).json_schema()
# check_observation and the actor's observe: which suggestion, what outcome, and when `stopped` may be true
_OBSERVE_RULES: JsonDict = {"allOf": [
    {"oneOf": [
        {"required": ["suggestion_id"], "properties": {"suggestion_id": {"type": "string"}, "assignments": _NULL}},
        {"required": ["assignments"], "properties": {"assignments": TypeAdapter(Assignments).json_schema(), "suggestion_id": _NULL}},
    ]},
    # exactly one outcome: value (the first objective alone), values (every metric by name) or failed=true
    {"oneOf": [
        {"required": ["failed"], "properties": {"failed": {"const": True}, "value": _NULL, "values": _NULL, "stopped": {"const": False}}},
        {"required": ["value"], "properties": {"failed": {"const": False}, "value": _FLOAT, "values": _NULL}},
        {"required": ["values"], "properties": {"failed": {"const": False}, "value": _NULL, "values": {"type": "object", "minProperties": 1}}},
    ]},
    {"anyOf": [{"properties": {"stopped": {"const": False}}},
               {"required": ["suggestion_id"], "properties": {"suggestion_id": {"type": "string"}}}]},
]}  # fmt: skip


class ObserveBody(BaseModel):
    # the engine's rules: exactly one of suggestion_id or assignments; exactly one of value, values or failed=true
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=_OBSERVE_RULES)
    # an integer too: ids are sequence numbers, and the engine takes 3 as "3" in every door
    suggestion_id: str | int | None = Field(default=None, description="the suggestion's id, as text or an integer")
    assignments: dict[str, Any] | None = Field(
        default=None, description="for an unsolicited observation: a value for every active parameter",
        json_schema_extra=documented(Assignments, or_null=True),
    )
    value: float | None = Field(
        default=None, description="the first objective's value, enough for one objective without constraints; "
        "not with values or failed", json_schema_extra=documented(Float64, or_null=True),
    )
    failed: bool = Field(default=False, description="true: the evaluation failed (give neither value nor values)")
    metrics: dict[str, float] | None = Field(
        default=None, description="anything else measured, by name (a failed evaluation's too)",
        json_schema_extra=documented(MetricNumbers, or_null=True),
    )
    values: dict[str, float] | None = Field(
        default=None, description="every objective and constraint metric of the experiment, by name, the first "
        "objective too; not with value or failed", json_schema_extra=documented(MetricNumbers, or_null=True),
    )
    stopped: bool = Field(
        default=False, description="true: the trial was stopped early (its last reported value); only with a suggestion_id"
    )


class ReportBody(BaseModel):
    model_config = _STRICT
    step: Annotated[int, described_as(Annotated[int, Field(**REPORT_STEP.keywords())], integral=True)] = Field(
        description="increases per suggestion (epoch, iteration)"
    )
    value: float = Field(description="the objective's intermediate value (finite)", json_schema_extra=documented(Float64))


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


class _ExperimentState(BaseModel):
    """What an experiment's answer states itself: its id, the spec's fields in their stored
    form, and its state; the spec's other fields follow as given (`ExperimentOut`). Every
    field is sent, those with a default too (so each is required in the document)."""

    model_config = ConfigDict(json_schema_serialization_defaults_required=True)
    id: str
    name: str
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
    metadata: Metadata = Field(default_factory=dict, description="labels for people and tools; {} when none were given")


ExperimentOut = create_model(  # type: ignore[call-overload]
    "ExperimentOut", __base__=_ExperimentState, __doc__=None, **answered_as_given(set(_ExperimentState.model_fields))
)


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
