"""The wire shapes, each defined once as a typed model (pydantic): the experiment spec
(`_spec`: parameters as a union discriminated by `type`, conditions, metrics, the
early-stopping rule, the strategy options) and each HTTP operation's request and
answer (`_wire`). /openapi.json is generated from these models, and the REST door
reads its bodies with them.

Server side: pydantic comes with the `server` extra. The engine and the clients do not
import this package, so `import tauopt` and the HTTP client load no pydantic; the
engine's checks (`tauopt.models`, `tauopt.engine._validate`) judge every value, with
the messages every door answers.
"""

from __future__ import annotations

from ._spec import (
    AshaStopping,
    BooleanParameter,
    CategoricalParameter,
    Condition,
    ConstraintMetric,
    DoubleParameter,
    EarlyStoppingSpec,
    FixedParameter,
    IntParameter,
    MedianStopping,
    MetricSpec,
    MetricsSpec,
    NoEarlyStopping,
    ObjectiveMetric,
    ParameterSpec,
    StrategyOptionsSpec,
)
from ._wire import (
    COMMON_ERRORS,
    ClosedOut,
    CreateExperimentBody,
    ErrorOut,
    ExperimentDocument,
    ExperimentOut,
    ExperimentStateQ,
    HealthOut,
    IdQ,
    NonNegative,
    ObservationOut,
    ObserveBody,
    Positive,
    ReportBody,
    ReportItemOut,
    ReportOut,
    SuggestBody,
    SuggestionOut,
    SuggestionStateQ,
    TextQ,
    UpdateExperimentBody,
    error_responses,
    integral_values,
)

__all__ = [
    "ParameterSpec", "DoubleParameter", "IntParameter", "CategoricalParameter", "BooleanParameter", "FixedParameter",
    "Condition", "MetricSpec", "MetricsSpec", "ObjectiveMetric", "ConstraintMetric", "EarlyStoppingSpec",
    "NoEarlyStopping", "MedianStopping", "AshaStopping", "StrategyOptionsSpec",
    "CreateExperimentBody", "UpdateExperimentBody", "SuggestBody", "ObserveBody", "ReportBody",
    "ExperimentOut", "SuggestionOut", "ObservationOut", "ReportOut", "ReportItemOut", "ClosedOut", "HealthOut",
    "ErrorOut", "ExperimentDocument", "ExperimentStateQ", "SuggestionStateQ", "NonNegative", "Positive", "IdQ", "TextQ",
    "COMMON_ERRORS", "error_responses", "integral_values",
]
