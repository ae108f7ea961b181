"""The shapes, each defined once: the experiment spec (`_spec`: parameters as a union
discriminated by `type`, conditions, metrics, the early-stopping rule, the strategy
options; `ExperimentSpec`, the spec create_experiment takes), each HTTP operation's
request and answer (`_wire`; the create request is `ExperimentSpec` itself), and the
rules every value is judged by (`_rules`: one function per shape, with the messages
users read; the simple limits they test are `tauopt.limits.Range`s the types document).

The engine validates a new experiment through `ExperimentSpec`, whose fields run the
rules and whose types /openapi.json states; the worker loop's calls (ask, observe,
report) run the same rule functions directly, without a model in between. The REST
door's create takes `ExperimentSpec` itself (the engine judges it); it reads its other
bodies with the `_wire` models.

pydantic is imported on first use of a model (module `__getattr__`), so `import tauopt`
and the thin clients load none; the rules are plain Python.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._rules import (
    UPDATABLE,
    check_bandwidth,
    check_budget,
    check_description,
    check_early_stopping,
    check_max_failures,
    check_metadata,
    check_name,
    check_observation,
    check_report,
    check_strategy,
    check_tag,
    check_ttl,
    check_update,
    check_value_and_metrics,
    check_wait,
    invalid_fields,
    parse_condition,
    parse_constraint,
    parse_metric,
    parse_metrics,
    parse_parameter,
    parse_strategy_options,
    spec_given,
)

if TYPE_CHECKING:
    from ._spec import (
        ExperimentSpec,
        Metadata,
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
    )


_SPEC = (
    "ParameterSpec", "DoubleParameter", "IntParameter", "CategoricalParameter", "BooleanParameter", "FixedParameter",
    "Condition", "MetricSpec", "MetricsSpec", "ObjectiveMetric", "ConstraintMetric", "EarlyStoppingSpec",
    "NoEarlyStopping", "MedianStopping", "AshaStopping", "StrategyOptionsSpec", "ExperimentSpec",
    "Metadata",
)
_WIRE = (
    "UpdateExperimentBody", "SuggestBody", "ObserveBody", "ReportBody",
    "ExperimentOut", "SuggestionOut", "ObservationOut", "ReportOut", "ReportItemOut", "ClosedOut", "HealthOut",
    "ErrorOut", "ExperimentDocument", "ExperimentStateQ", "SuggestionStateQ", "NonNegative", "Positive", "IdQ", "TextQ",
    "COMMON_ERRORS", "error_responses",
)
_RULES = (
    "parse_parameter", "parse_condition", "parse_metric", "parse_constraint", "parse_metrics", "parse_strategy_options",
    "check_name", "check_description", "check_tag", "check_bandwidth", "check_ttl", "check_budget", "check_max_failures",
    "check_strategy", "check_early_stopping", "check_update", "check_wait", "check_value_and_metrics", "check_observation",
    "check_report", "UPDATABLE", "check_metadata", "spec_given", "invalid_fields",
)
__all__ = [*_SPEC, *_WIRE, *_RULES]


def __getattr__(name: str) -> Any:
    """A typed model, imported (and pydantic with it) on first use."""
    if name in _SPEC:
        from . import _spec as module
    elif name in _WIRE:
        from . import _wire as module  # type: ignore[no-redef]
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value
    return value
