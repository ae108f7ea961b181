"""The REST door's wire schemas: request bodies and answers, for validation and /openapi.json."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ...errors import CATALOGUE

__all__ = [
    "CreateExperimentBody", "UpdateExperimentBody", "SuggestBody", "ObserveBody", "ExperimentOut",
    "SuggestionOut", "ObservationOut", "ClosedOut", "HealthOut", "ErrorOut", "error_responses",
    "ExperimentStateQ", "SuggestionStateQ",
]

ExperimentStateQ = Literal["active", "completed", "archived"]
SuggestionStateQ = Literal["open", "observed", "closed", "expired"]

_STRICT = ConfigDict(extra="forbid", strict=True)


class CreateExperimentBody(BaseModel):
    model_config = _STRICT
    name: str
    parameters: list[dict[str, Any]] = Field(
        description="Parameters: {name, type: double|int|categorical|boolean|fixed, bounds, scale, step, values, "
        "value, conditions, default}",
        examples=[[{"name": "lr", "type": "double", "bounds": [1e-4, 1e-1], "scale": "log"}]],
    )
    metric: dict[str, Any] = Field(examples=[{"name": "loss", "objective": "minimize"}])
    parallel_bandwidth: int = 1
    suggestion_ttl_s: float | None = None
    observation_budget: int | None = None
    strategy: str = "auto"
    strategy_options: dict[str, Any] | None = None


class UpdateExperimentBody(BaseModel):
    """Keys left out are unchanged; null unsets suggestion_ttl_s or observation_budget."""

    model_config = _STRICT
    name: str | None = None
    parallel_bandwidth: int | None = None
    suggestion_ttl_s: float | None = None
    observation_budget: int | None = None
    parameters: list[dict[str, Any]] | None = Field(
        default=None, description="the full list: the stored parameters unchanged, plus any new ones"
    )


class SuggestBody(BaseModel):
    model_config = _STRICT
    tag: str | None = Field(default=None, description="1-128 printable characters, e.g. job-17/rank-3")


class ObserveBody(BaseModel):
    model_config = _STRICT
    suggestion_id: str | None = None
    assignments: dict[str, Any] | None = Field(default=None, description="for an unsolicited observation")
    value: float | None = None
    failed: bool = False
    metrics: dict[str, float] | None = None


class MetricOut(BaseModel):
    name: str
    objective: Literal["minimize", "maximize"]


class ExperimentOut(BaseModel):
    id: str
    name: str
    parameters: list[dict[str, Any]]
    metric: MetricOut
    parallel_bandwidth: int
    suggestion_ttl_s: float | None
    observation_budget: int | None
    strategy: str
    strategy_options: dict[str, Any]
    state: Literal["active", "completed", "archived"]
    created_at: float
    open_suggestions: int
    observations: int


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
    value: float | None
    failed: bool
    created_at: float
    metrics: dict[str, float]


class ClosedOut(BaseModel):
    closed: int


class HealthOut(BaseModel):
    status: str


class ErrorBody(BaseModel):
    type: str
    message: str
    details: dict[str, Any]


class ErrorOut(BaseModel):
    error: ErrorBody


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {s: {"model": ErrorOut, "description": ", ".join(k.error_type for k in CATALOGUE.values() if k.http_status == s)} for s in statuses}



COMMON_ERRORS = (400, 401, 404, 413)
