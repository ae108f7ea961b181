"""The experiment spec as typed models: a parameter (one model per `type`, a
discriminated union), a condition, a metric (an objective or a constraint), the
early-stopping rule, the strategy options, the value types they are built of, and
`ExperimentSpec`, the whole spec create_experiment takes.

/openapi.json is generated from these models (the request bodies name them; FastAPI
writes them into `components.schemas`), so a client, a code generator or a fuzzer
reads the spec's shape from one definition. A value is judged by the rules of
`_rules` (with their messages), which `ExperimentSpec`'s fields name; the types here
state for the document what JSON Schema can say of those rules. What it cannot say
(it has no keyword relating two values) is in a description: lo < hi, step <= hi -
lo, a default within the bounds or among the values, a condition's parent naming
another parameter, unique names, ASHA's max_step > min_step. `uniqueItems` on bounds
states the part of lo < hi it can.
"""

from __future__ import annotations

from typing import Annotated, Any, Callable, Literal, Mapping, Union

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, TypeAdapter, ValidationError, ValidationInfo
from pydantic.config import JsonDict

from ..limits import (
    COUNT,
    INT_MAX,
    INT_MIN,
    MAX_CATEGORICAL_VALUES,
    MAX_CONDITIONS,
    MAX_DESCRIPTION_CHARS,
    MAX_METADATA_KEYS,
    MAX_METRICS,
    MAX_NAME_CHARS,
    MAX_PARAMETERS,
    MAX_TEXT_VALUE_CHARS,
    METADATA_KEY_CHARS,
    POSITIVE_SECONDS,
    STOPPING_OPTIONS,
    STRATEGY_OPTIONS,
    TAG_CHARS,
)
from ..models import MAX_CONSTRAINTS, MAX_OBJECTIVES, Metric, StrategyOptions
from ..space import Space
from ..strategies import AUTO, names
from ._rules import (
    check_bandwidth,
    check_budget,
    check_description,
    check_early_stopping,
    check_max_failures,
    check_metadata,
    check_name,
    check_strategy,
    check_ttl,
    invalid_fields,
    parse_metrics,
    parse_strategy_options,
)

__all__ = [
    "Name", "Tag", "Description", "Float64", "Int64", "AtLeast1", "Seconds", "ParameterValue", "Condition",
    "DoubleParameter", "IntParameter", "CategoricalParameter", "BooleanParameter", "FixedParameter", "ParameterSpec",
    "MetricSpec", "ObjectiveMetric", "ConstraintMetric", "MetricsSpec", "NoEarlyStopping", "MedianStopping",
    "AshaStopping", "EarlyStoppingSpec", "StrategyOptionsSpec", "MetricNumbers", "Assignments", "Strategy",
    "ExperimentSpec", "Metadata", "documented",
]

# check_name / check_text: 1-256 characters, not only whitespace (what Python's str.strip removes, spelled out:
# JSON Schema's \s is ECMAScript's, which lacks \x1c-\x1f and \x85)
_NOT_SPACE = r"[^\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS, json_schema_extra={"pattern": _NOT_SPACE})]
# check_tag: 1-128 printable characters (str.isprintable); printable ASCII is the portable core of it
Tag = Annotated[str, Field(**TAG_CHARS.lengths(), json_schema_extra={"pattern": r"^[\x20-\x7e]+$"})]
Description = Annotated[str, Field(max_length=MAX_DESCRIPTION_CHARS)]
_FLOAT_MAX = 1.7976931348623157e308  # a JSON number past a 64-bit float is refused, not rounded to inf
Float64 = Annotated[float, Field(ge=-_FLOAT_MAX, le=_FLOAT_MAX)]
# [-2**63, 2**63): both ends survive as JSON integers (the document writes integral bounds back as integers)
Int64 = Annotated[int, Field(ge=INT_MIN, lt=INT_MAX + 1)]
AtLeast1 = Annotated[int, Field(**COUNT.keywords())]
Seconds = Annotated[float, Field(**POSITIVE_SECONDS.keywords())]
# a categorical, fixed or condition value: text, a signed 64-bit integer, a finite number, a boolean
ParameterValue = Union[
    Annotated[str, Field(max_length=MAX_TEXT_VALUE_CHARS)],
    Int64,
    Annotated[float, Field(json_schema_extra={"not": {"type": "integer"}})],
    bool,
]


def documented(spec: Any, *, or_null: bool = False) -> Any:
    """`json_schema_extra` documenting a field as `spec` without adding to its validation
    (flat specs only: no $refs). `or_null`: the spec or null, its keywords at the top where
    clients read them."""
    schema = {k: v for k, v in TypeAdapter(spec).json_schema().items() if k != "title"}
    if or_null:
        schema["type"] = [schema["type"], "null"]

    def extra(field: dict[str, Any]) -> None:
        field.pop("anyOf", None)
        field.update(schema)

    return extra


def _only(schema: dict[str, Any]) -> Any:
    """A field's document says `schema` in place of pydantic's `anyOf: [..., null]`."""

    def extra(field: dict[str, Any]) -> None:
        field.pop("anyOf", None)
        field.update(schema)

    return extra


_SPEC = ConfigDict(extra="forbid")  # each variant with exactly its fields


class Condition(BaseModel):
    """Active only while parameter `parent` (another parameter) takes one of `values`."""

    model_config = _SPEC
    parent: Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS)]
    values: Annotated[list[ParameterValue], Field(min_length=1, max_length=MAX_CATEGORICAL_VALUES)]


# a list of conditions, all must hold, or one condition on its own
Conditions = Union[Annotated[list[Condition], Field(max_length=MAX_CONDITIONS)], Condition, None]
# the fields another type uses may be sent as null, and scale as "linear" (the engine: "not used ... remove it")
_Unused = Annotated[None, Field(description="not used by this type; null or left out")]
_Linear = Annotated[Literal["linear"] | None, Field(json_schema_extra=_only({"enum": ["linear", None]}))]
_Scale = Annotated[
    Literal["linear", "log", "reverse_log"] | None, Field(json_schema_extra=_only({"enum": ["linear", "log", "reverse_log", None]}))
]
# the scale decides the sign of the bounds: one branch per case, so each says exactly what it accepts
_BY_SCALE: JsonDict = {
    "oneOf": [
        {"properties": {"scale": {"enum": ["linear", None]}}},
        {"required": ["scale"], "properties": {"scale": {"enum": ["log", "reverse_log"]},
                                               "bounds": {"items": {"exclusiveMinimum": 0}}}},
    ]
}  # fmt: skip


def _bounds(number: Any) -> Any:
    return Annotated[list[number], Field(min_length=2, max_length=2, json_schema_extra={"uniqueItems": True})]  # type: ignore[valid-type]


class _Parameter(BaseModel):
    """What every variant has: a name, conditions, and the other types' fields, unused (a
    variant redeclares the fields it uses: the `type: ignore[assignment]`s below)."""

    model_config = _SPEC
    name: Name
    bounds: _Unused = None
    scale: _Linear = None
    step: _Unused = None
    values: _Unused = None
    value: _Unused = None
    conditions: Conditions = None


class _Numeric(_Parameter):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_BY_SCALE)
    scale: _Scale = None  # type: ignore[assignment]
    default: Float64 | None = None


class DoubleParameter(_Numeric):
    """double: bounds [lo, hi] with lo < hi; log and reverse_log scales need lo > 0; step > 0 and at most
    hi - lo; default within the bounds"""

    type: Literal["double"]
    bounds: _bounds(Float64)  # type: ignore[valid-type]
    step: Annotated[float, Field(gt=0, le=_FLOAT_MAX)] | None = None  # type: ignore[assignment]


class IntParameter(_Numeric):
    """int: the same rules as double, with integer bounds and step"""

    type: Literal["int"]
    bounds: _bounds(Int64)  # type: ignore[valid-type]
    step: Annotated[int, Field(ge=1, lt=INT_MAX + 1)] | None = None  # type: ignore[assignment]


class CategoricalParameter(_Parameter):
    """categorical: values, each once (same type and equal); default among them"""

    type: Literal["categorical"]
    values: Annotated[list[ParameterValue], Field(min_length=1, max_length=MAX_CATEGORICAL_VALUES, json_schema_extra={"uniqueItems": True})]  # type: ignore[assignment]
    default: ParameterValue | None = None


class BooleanParameter(_Parameter):
    """boolean: true or false"""

    type: Literal["boolean"]
    default: bool | None = None


class FixedParameter(_Parameter):
    """fixed: one value"""

    type: Literal["fixed"]
    value: ParameterValue  # type: ignore[assignment]
    default: ParameterValue | None = None


ParameterSpec = Annotated[
    Union[DoubleParameter, IntParameter, CategoricalParameter, BooleanParameter, FixedParameter],
    Field(discriminator="type"),
]


class MetricSpec(BaseModel):
    """`metric=`: the one objective (minimize by default)."""

    model_config = _SPEC
    name: Name
    objective: Literal["minimize", "maximize"] = "minimize"
    constraint: None = None


class ObjectiveMetric(BaseModel):
    model_config = _SPEC
    name: Name
    objective: Literal["minimize", "maximize"]
    constraint: None = None


class ConstraintMetric(BaseModel):
    model_config = _SPEC
    name: Name
    constraint: dict[str, Float64] = Field(
        description="exactly one bound: {'<=': x} or {'>=': x}",
        json_schema_extra=_only({"type": "object", "description": "exactly one bound: {'<=': x} or {'>=': x}", "oneOf": [
            {"required": [op], "properties": {op: {"type": "number", "minimum": -_FLOAT_MAX, "maximum": _FLOAT_MAX}},
             "additionalProperties": False} for op in ("<=", ">=")]}),
    )  # fmt: skip
    objective: None = None


def _contains(model: type[BaseModel], most: int, least: int) -> dict[str, Any]:
    return {"contains": model.model_json_schema(), "minContains": least, "maxContains": most}


# metrics=[...]: 1-4 objectives and at most 16 constraint metrics, names unique (the engine checks that)
MetricsSpec = Annotated[
    list[Union[ObjectiveMetric, ConstraintMetric]],
    Field(min_length=1, max_length=MAX_OBJECTIVES + MAX_CONSTRAINTS,
          json_schema_extra={"allOf": [_contains(ObjectiveMetric, MAX_OBJECTIVES, 1), _contains(ConstraintMetric, MAX_CONSTRAINTS, 0)]}),
]  # fmt: skip

def _option(name: str) -> Any:
    return Annotated[int, Field(**STOPPING_OPTIONS[name].keywords())]


class NoEarlyStopping(BaseModel):
    model_config = ConfigDict(extra="forbid", title="none")
    rule: Literal["none"] = "none"


class MedianStopping(BaseModel):
    model_config = ConfigDict(extra="forbid", title="median")
    rule: Literal["median"]
    min_trials: _option("min_trials") = 5  # type: ignore[valid-type]
    grace_steps: _option("grace_steps") = 0  # type: ignore[valid-type]


class AshaStopping(BaseModel):
    """asha: max_step > min_step"""

    model_config = ConfigDict(extra="forbid", title="asha")
    rule: Literal["asha"]
    max_step: _option("max_step")  # type: ignore[valid-type]
    min_step: _option("min_step") = 1  # type: ignore[valid-type]
    reduction_factor: _option("reduction_factor") = 3  # type: ignore[valid-type]


EarlyStoppingSpec = Annotated[
    Union[NoEarlyStopping, MedianStopping, AshaStopping],
    Field(description="the rule and its options; rule left out is none. asha: max_step > min_step"),
]


class StrategyOptionsSpec(BaseModel):
    """`grid_size`: points per continuous dimension for `grid`; `initial_points`: Sobol points before
    the GP takes over under `auto`; `seed`: makes an experiment's suggestions reproducible."""

    model_config = _SPEC
    grid_size: Annotated[int, Field(**STRATEGY_OPTIONS["grid_size"].keywords())] | None = None
    initial_points: Annotated[int, Field(**STRATEGY_OPTIONS["initial_points"].keywords())] | None = None
    seed: Annotated[int, Field(**STRATEGY_OPTIONS["seed"].keywords())] | None = None


_METRIC_NAME = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS)]
# metrics= and values= of an observation: metric name -> finite number
MetricNumbers = Annotated[dict[_METRIC_NAME, Float64], Field(max_length=MAX_METRICS)]
# an unsolicited observation's point: a value for every active parameter (so at least one: a parameter
# without conditions is always active), by name; which names, the experiment's space says
Assignments = Annotated[
    dict[_METRIC_NAME, ParameterValue],
    Field(min_length=1, max_length=MAX_PARAMETERS,
          json_schema_extra={"propertyNames": {"minLength": 1, "maxLength": MAX_NAME_CHARS, "pattern": _NOT_SPACE}}),
]  # fmt: skip

Strategy = Literal[names()]  # type: ignore[valid-type]  # the registry's names, auto first
# metadata: labels for people and tools (team, dataset, git commit), key -> text, number or boolean
Metadata = Annotated[
    dict[Annotated[str, Field(**METADATA_KEY_CHARS.lengths())], ParameterValue], Field(max_length=MAX_METADATA_KEYS)
]


def _judged_by(rule: Callable[[Any], Any], spec: Any) -> Any:
    """A field validated by `rule` (one of `_rules`: its messages are the ones users read) and
    documented as `spec`; the field holds what the rule returns, the engine's value."""
    return PlainValidator(rule, json_schema_input_type=spec)


def _as_given(value: Any) -> Any:
    return value


def _metrics(metrics: Any, info: ValidationInfo) -> tuple[Metric, ...]:
    return parse_metrics(info.data.get("metric"), metrics)


def _space(parameters: Any) -> Space:
    return Space.parse(parameters)  # looked up per call (a test gates the parse of a huge space)


def _strategy(strategy: Any) -> str:
    return check_strategy(strategy, names())


def _metrics_or_null(field: dict[str, Any]) -> None:
    """metrics=: the list's keywords at the top, null allowed."""
    listed = next(x for x in field.pop("anyOf") if x.get("type") == "array")
    field.update({**listed, "type": ["array", "null"]})


EARLY_STOPPING_DOC = (
    '{"rule": "none"} (default), {"rule": "median", "min_trials": 5, "grace_steps": 0} or '
    '{"rule": "asha", "max_step": N, "min_step": 1, "reduction_factor": 3}'
)
FAILURE_CAP_DOC = (
    "stop handing out suggestions (409 too_many_failures) after this many failed runs in a row "
    "(failed observations, suggestions out of lease attempts); null: no cap. Setting it with PATCH, even to "
    "its value, lifts a stop and counts from zero"
)
_PARAMETERS_DOC = (
    "Parameters: {name, type: double|int|categorical|boolean|fixed, bounds, scale, step, values, value, conditions, "
    "default}; bounds are [lo, hi] with lo < hi (log scales: lo > 0); names are unique within an experiment; "
    "conditions, [{parent, values}], all must hold (the parent is another parameter)"
)
# parse_metrics: metric= (one objective) or metrics=[...], not both (null is left out)
_ONE_OF_METRIC_OR_METRICS: JsonDict = {
    "oneOf": [
        {"required": ["metric"], "properties": {"metric": {"type": "object"}, "metrics": {"type": "null"}}},
        {"required": ["metrics"], "properties": {"metrics": {"type": "array"}, "metric": {"type": "null"}}},
    ]
}


class ExperimentSpec(BaseModel):
    """An experiment's spec, as `create_experiment` takes it (`spec=`, or its keywords) and
    POST /v1/experiments reads it: each field is judged by its rule and documented as its
    type; the fields hold the engine's values (a `Space`, `Metric`s, `StrategyOptions`, the
    stopping rule's JSON form). `metric` is what was given; `metrics` is every metric, the
    first objective first (from `metric=` or `metrics=`). A field whose value is stored as
    it was given (description, metadata) is answered by GET as it is declared here."""

    # the fields in the order they are judged (the first fault found is the one reported)
    model_config = ConfigDict(
        extra="forbid", frozen=True, arbitrary_types_allowed=True, json_schema_extra=_ONE_OF_METRIC_OR_METRICS
    )
    metric: Annotated[Any, _judged_by(_as_given, MetricSpec | None)] = Field(
        default=None, description="one objective; or give metrics", examples=[{"name": "loss", "objective": "minimize"}],
        json_schema_extra=documented(MetricSpec, or_null=True),
    )  # fmt: skip
    metrics: Annotated[tuple[Metric, ...], _judged_by(_metrics, MetricsSpec | None)] = Field(
        default=None, validate_default=True,
        description="instead of metric: 1-4 objectives {name, objective} and constraint metrics {name, constraint: {'<=' or '>=': number}}",
        examples=[[{"name": "acc", "objective": "maximize"}, {"name": "mem_mb", "constraint": {"<=": 512}}]],
        json_schema_extra=_metrics_or_null,
    )  # fmt: skip
    strategy_options: Annotated[StrategyOptions, _judged_by(parse_strategy_options, StrategyOptionsSpec | None)] = Field(
        default_factory=StrategyOptions
    )
    early_stopping: Annotated[Mapping[str, Any], _judged_by(check_early_stopping, EarlyStoppingSpec | None)] = Field(
        default_factory=lambda: {"rule": "none"}, description=EARLY_STOPPING_DOC, examples=[{"rule": "asha", "max_step": 81}]
    )
    parameters: Annotated[Space, _judged_by(_space, Annotated[list[ParameterSpec], Field(min_length=1)])] = Field(
        description=_PARAMETERS_DOC, examples=[[{"name": "lr", "type": "double", "bounds": [1e-4, 1e-1], "scale": "log"}]]
    )
    strategy: Annotated[str, _judged_by(_strategy, Strategy)] = AUTO
    name: Annotated[str, _judged_by(check_name, Name)]
    parallel_bandwidth: Annotated[int, _judged_by(check_bandwidth, AtLeast1)] = 1
    suggestion_ttl_s: Annotated[float | None, _judged_by(check_ttl, Seconds | None)] = None
    observation_budget: Annotated[int | None, _judged_by(check_budget, AtLeast1 | None)] = None
    max_consecutive_failures: Annotated[int | None, _judged_by(check_max_failures, AtLeast1 | None)] = Field(
        default=None, description=FAILURE_CAP_DOC
    )
    description: Annotated[str | None, _judged_by(check_description, Description | None)] = Field(
        default=None, description="free text for people: what the search is for; null when none was given",
        examples=["learning rate and depth of the ResNet-18 baseline"],
    )  # fmt: skip
    metadata: Annotated[dict[str, Any], _judged_by(check_metadata, Metadata | None)] = Field(
        default_factory=dict, description="labels for people and tools (team, dataset, commit): key to text, number "
        f"or boolean; at most {MAX_METADATA_KEYS} keys", examples=[{"team": "vision", "dataset": "imagenet-1k", "gpus": 8}],
    )  # fmt: skip

    @classmethod
    def judge(cls, given: Mapping[str, Any]) -> "ExperimentSpec":
        """The spec from its fields, or `invalid_request` naming the first field to fix (a
        rule's own message; pydantic's for a field missing or unknown)."""
        try:
            return cls.model_validate(given)
        except ValidationError as exc:
            raise invalid_fields(exc.errors()) from None

    def to_dict(self) -> dict[str, Any]:
        """The spec's fields as JSON (what `spec=` and POST /v1/experiments take)."""
        out = {name: _JSON_FORM.get(name, _as_given)(getattr(self, name)) for name in type(self).model_fields}
        out["metric"] = None  # in metrics
        return out


_JSON_FORM: dict[str, Callable[[Any], Any]] = {
    "parameters": lambda space: [p.to_dict() for p in space.parameters],
    "metrics": lambda metrics: [m.to_dict() for m in metrics],
    "strategy_options": lambda options: options.to_dict(),
    "early_stopping": dict,
    "metadata": dict,
}


def answered_as_given(answered: set[str]) -> dict[str, Any]:
    """The spec's fields an answer (`_wire.ExperimentOut`) does not state itself, as
    `create_model` fields: each documented as its spec type, the value stored as given."""
    out: dict[str, Any] = {}
    for name, field in ExperimentSpec.model_fields.items():
        if name in answered:
            continue
        spec = next(m.json_schema_input_type for m in field.metadata if isinstance(m, PlainValidator))
        out[name] = (spec, Field(description=field.description))
    return out
