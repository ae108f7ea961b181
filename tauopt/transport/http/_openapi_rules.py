"""What /openapi.json says beyond the pydantic models: the request schemas the
engine's validation enforces (so a fuzzer's "valid" data mostly is), and the
OpenAPI links that chain operations (so stateful testing reaches every one).

    PARAMETER_SCHEMA        a oneOf with a discriminator on `type`: one named variant per type, exact fields
    METRICS_RULE            metric= xor metrics=; a metric is an objective xor a constraint
    EARLY_STOPPING_SCHEMA, OBSERVE_RULES, ASSIGNMENTS_SCHEMA, _NAME, _TAG, ...   the smaller rules
    add_components(schema)  the named variants, into components.schemas
    add_links(schema)       create -> every /{id} operation; suggest -> every /{suggestion_id} one and observe

Only the document: validation stays in `tauopt.models` and `engine._validate`,
whose messages users see. Keep the two in step (tests/test_http_fuzz.py).

What JSON Schema cannot say (it has no keyword relating two values) is said in
`description` and left to the server: lo < hi, step <= hi - lo, a default
within the bounds or among the values, a condition's parent naming another
parameter, unique names, ASHA's max_step > min_step. `uniqueItems` on bounds
states the part of lo < hi it can (lo != hi), which also keeps a generator's
pairs ordered half the time rather than equal at its simplest.
"""

from __future__ import annotations

import copy
from typing import Any

from ...limits import (
    INT_MAX,
    INT_MIN,
    MAX_CATEGORICAL_VALUES,
    MAX_CONDITIONS,
    MAX_METRICS,
    MAX_NAME_CHARS,
    MAX_PARAMETERS,
    MAX_TEXT_VALUE_CHARS,
)
from ...models import MAX_CONSTRAINTS, MAX_OBJECTIVES, OBJECTIVES
from ...strategies import names

STRATEGIES = names()  # the registry's, auto first

__all__ = [
    "PARAMETER_SCHEMA", "PARAMETERS_SCHEMA", "METRIC_SCHEMA", "METRICS_SCHEMA", "METRICS_RULE", "STRATEGY_OPTIONS_SCHEMA",
    "EARLY_STOPPING_SCHEMA", "OBSERVE_RULES", "NUMBERS_SCHEMA", "ASSIGNMENTS_SCHEMA", "PARAMETER_VARIANTS", "STRATEGIES",
    "add_components", "add_links",
]

_NULL: dict[str, Any] = {"type": "null"}
# check_name / check_text: 1-256 characters, not only whitespace (what Python's str.strip removes, spelled out:
# JSON Schema's \s is ECMAScript's, which lacks \x1c-\x1f and \x85)
_NOT_SPACE = r"[^\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
_NAME: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS, "pattern": _NOT_SPACE}
_PARAM_NAME = _NAME
# check_tag: 1-128 printable characters (str.isprintable); printable ASCII is the portable core of it
_TAG: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 128, "pattern": r"^[\x20-\x7e]+$"}
_POSITIVE: dict[str, Any] = {"type": "number", "exclusiveMinimum": 0}
_AT_LEAST_1: dict[str, Any] = {"type": "integer", "minimum": 1}
# [-2**63, 2**63): both ends survive FastAPI's float bounds exactly (_openapi writes them back as integers)
_INT64: dict[str, Any] = {"type": "integer", "minimum": INT_MIN, "exclusiveMaximum": INT_MAX + 1}
_FLOAT_MAX = 1.7976931348623157e308  # a JSON number past a 64-bit float is refused, not rounded to inf
_FLOAT: dict[str, Any] = {"type": "number", "minimum": -_FLOAT_MAX, "maximum": _FLOAT_MAX}
# a categorical, fixed or condition value: text, a signed 64-bit integer, a finite number, a boolean
_VALUE: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "maxLength": MAX_TEXT_VALUE_CHARS},
        _INT64,
        {"type": "number", "not": {"type": "integer"}},
        {"type": "boolean"},
    ]
}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, _NULL]}


# a parameter's fields other types ignore may be sent as null, and scale as "linear" (Parameter.parse: "not
# used ... remove it" otherwise)
_UNUSED: dict[str, Any] = {"bounds": _NULL, "scale": {"enum": ["linear", None]}, "step": _NULL, "values": _NULL, "value": _NULL}
_CONDITION: dict[str, Any] = {
    "type": "object",
    "description": "active only while parameter `parent` (another parameter) takes one of `values`",
    "properties": {
        "parent": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS},
        "values": {"type": "array", "minItems": 1, "maxItems": MAX_CATEGORICAL_VALUES, "items": _VALUE},
    },
    "required": ["parent", "values"],
    "additionalProperties": False,
}
# a list of conditions, or one condition on its own
_CONDITIONS: dict[str, Any] = {
    "anyOf": [{"type": "array", "maxItems": MAX_CONDITIONS, "items": _CONDITION}, _CONDITION, _NULL]
}


def _variant(kind: str, required: list[str], description: str, **properties: Any) -> dict[str, Any]:
    unused = {k: v for k, v in _UNUSED.items() if k not in properties}
    return {
        "type": "object",
        "title": kind,
        "description": description,
        "properties": {"name": _PARAM_NAME, "type": {"const": kind}, **unused, "conditions": _CONDITIONS, **properties},
        "required": ["name", "type", *required],
        "additionalProperties": False,
    }


def _numeric(kind: str, number: dict[str, Any], step: dict[str, Any]) -> dict[str, Any]:
    bounds = {"type": "array", "minItems": 2, "maxItems": 2, "uniqueItems": True, "items": number}
    variant = _variant(
        kind, ["bounds"],
        f"{kind}: bounds [lo, hi] with lo < hi; log and reverse_log scales need lo > 0; "
        "step > 0 and at most hi - lo; default within the bounds",
        bounds=bounds, scale={"enum": ["linear", "log", "reverse_log", None]}, step=_nullable(step),
        default=_nullable(_FLOAT),
    )  # fmt: skip
    # the scale decides the sign of the bounds: one branch per case, so each says exactly what it accepts
    variant["oneOf"] = [
        {"properties": {"scale": {"enum": ["linear", None]}}},
        {"required": ["scale"], "properties": {"scale": {"enum": ["log", "reverse_log"]},
                                               "bounds": {"items": {"exclusiveMinimum": 0}}}},
    ]  # fmt: skip
    return variant


# one named schema per parameter type (in components: clients and code generators read them by name)
PARAMETER_VARIANTS: dict[str, dict[str, Any]] = {
    "DoubleParameter": _numeric("double", _FLOAT, {**_FLOAT, "exclusiveMinimum": 0}),
    "IntParameter": _numeric("int", _INT64, {**_INT64, "minimum": 1}),
    "CategoricalParameter": _variant(
        "categorical", ["values"], "categorical: values, each once (same type and equal); default among them",
        values={"type": "array", "minItems": 1, "maxItems": MAX_CATEGORICAL_VALUES, "uniqueItems": True, "items": _VALUE},
        default=_nullable(_VALUE),
    ),
    "BooleanParameter": _variant("boolean", [], "boolean: true or false", default=_nullable({"type": "boolean"})),
    "FixedParameter": _variant("fixed", ["value"], "fixed: one value", value=_VALUE, default=_nullable(_VALUE)),
}  # fmt: skip
_REF = "#/components/schemas/"
PARAMETER_SCHEMA: dict[str, Any] = {
    "description": "a parameter: one variant per type, each with exactly its fields; names are unique within "
    "an experiment; conditions, [{parent, values}], all must hold (the parent is another parameter)",
    "oneOf": [{"$ref": _REF + name} for name in PARAMETER_VARIANTS],
    "discriminator": {
        "propertyName": "type",
        "mapping": {v["properties"]["type"]["const"]: _REF + name for name, v in PARAMETER_VARIANTS.items()},
    },
}
PARAMETERS_SCHEMA: dict[str, Any] = {"type": "array", "minItems": 1, "items": PARAMETER_SCHEMA}

METRIC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": _NAME, "objective": {"enum": list(OBJECTIVES)}, "constraint": _NULL},
    "required": ["name"],
    "additionalProperties": False,
}

_CONSTRAINT: dict[str, Any] = {
    "type": "object",
    "description": "exactly one bound: {'<=': x} or {'>=': x}",
    "oneOf": [
        {"required": ["<="], "properties": {"<=": _FLOAT}, "additionalProperties": False},
        {"required": [">="], "properties": {">=": _FLOAT}, "additionalProperties": False},
    ],
}
_OBJECTIVE_ITEM: dict[str, Any] = {
    "type": "object",
    "properties": {"name": _NAME, "objective": {"enum": list(OBJECTIVES)}, "constraint": _NULL},
    "required": ["name", "objective"],
    "additionalProperties": False,
}
_CONSTRAINT_ITEM: dict[str, Any] = {
    "type": "object",
    "properties": {"name": _NAME, "constraint": _CONSTRAINT, "objective": _NULL},
    "required": ["name", "constraint"],
    "additionalProperties": False,
}
# metrics=[...]: 1-4 objectives and at most 16 constraint metrics, names unique
METRICS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "minItems": 1,
    "maxItems": MAX_OBJECTIVES + MAX_CONSTRAINTS,
    "items": {"oneOf": [_OBJECTIVE_ITEM, _CONSTRAINT_ITEM]},
    "allOf": [
        {"contains": _OBJECTIVE_ITEM, "minContains": 1, "maxContains": MAX_OBJECTIVES},
        {"contains": _CONSTRAINT_ITEM, "minContains": 0, "maxContains": MAX_CONSTRAINTS},
    ],
}
# parse_metrics: metric= (one objective) or metrics=[...], not both (null is left out)
METRICS_RULE: list[dict[str, Any]] = [
    {"required": ["metric"], "properties": {"metric": {"type": "object"}, "metrics": _NULL}},
    {"required": ["metrics"], "properties": {"metrics": {"type": "array"}, "metric": _NULL}},
]

_OPTION = {"type": "integer", "maximum": 2**31}
EARLY_STOPPING_SCHEMA: dict[str, Any] = {
    "description": "the rule and its options; rule left out is none. asha: max_step > min_step",
    "oneOf": [
        {"type": "object", "title": "none", "properties": {"rule": {"const": "none"}}, "additionalProperties": False},
        {
            "type": "object", "title": "median", "required": ["rule"], "additionalProperties": False,
            "properties": {"rule": {"const": "median"}, "min_trials": {**_OPTION, "minimum": 1},
                           "grace_steps": {**_OPTION, "minimum": 0}},
        },
        {
            "type": "object", "title": "asha", "required": ["rule", "max_step"], "additionalProperties": False,
            "properties": {"rule": {"const": "asha"}, "min_step": {**_OPTION, "minimum": 1},
                           "max_step": {**_OPTION, "minimum": 2}, "reduction_factor": {**_OPTION, "minimum": 2}},
        },
    ],
}  # fmt: skip

STRATEGY_OPTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "grid_size": _nullable({"type": "integer", "minimum": 2}),
        "initial_points": _nullable({"type": "integer", "minimum": 1}),
        "seed": _nullable({"type": "integer", "minimum": 0}),
    },
    "additionalProperties": False,
}

# metrics= and values= of an observation: metric name -> finite number
NUMBERS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "maxProperties": MAX_METRICS,
    "propertyNames": {"minLength": 1, "maxLength": MAX_NAME_CHARS},
    "additionalProperties": _FLOAT,
}
# an unsolicited observation's point: a value for every active parameter (so at least one: a parameter
# without conditions is always active), by name; which names, the experiment's space says
ASSIGNMENTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "minProperties": 1,
    "maxProperties": MAX_PARAMETERS,
    "propertyNames": {"minLength": 1, "maxLength": MAX_NAME_CHARS, "pattern": _NOT_SPACE},
    "additionalProperties": _VALUE,
}
# check_observation and the actor's observe: which suggestion, what outcome, and when `stopped` may be true
OBSERVE_RULES: list[dict[str, Any]] = [
    {"oneOf": [
        {"required": ["suggestion_id"], "properties": {"suggestion_id": {"type": "string"}, "assignments": _NULL}},
        {"required": ["assignments"], "properties": {"assignments": ASSIGNMENTS_SCHEMA, "suggestion_id": _NULL}},
    ]},
    # exactly one outcome: value (the first objective alone), values (every metric by name) or failed=true
    {"oneOf": [
        {"required": ["failed"], "properties": {"failed": {"const": True}, "value": _NULL, "values": _NULL, "stopped": {"const": False}}},
        {"required": ["value"], "properties": {"failed": {"const": False}, "value": _FLOAT, "values": _NULL}},
        {"required": ["values"], "properties": {"failed": {"const": False}, "value": _NULL, "values": {"type": "object", "minProperties": 1}}},
    ]},
    {"anyOf": [{"properties": {"stopped": {"const": False}}},
               {"required": ["suggestion_id"], "properties": {"suggestion_id": {"type": "string"}}}]},
]  # fmt: skip

_METHODS = ("get", "put", "post", "delete", "patch")


def add_components(schema: dict[str, Any]) -> None:
    """The named schemas the rules above refer to (`#/components/schemas/...`)."""
    schema.setdefault("components", {}).setdefault("schemas", {}).update(copy.deepcopy(PARAMETER_VARIANTS))


def add_links(schema: dict[str, Any]) -> None:
    """Declare which response fields feed which operations (OpenAPI 3 `links`):
    a created experiment's id feeds every operation with `{id}` in its path; a
    suggestion's ids feed every operation with `{sid}`, and an observe of it."""
    paths = schema.get("paths", {})
    operations = [(m, p, doc) for p, item in paths.items() for m, doc in item.items() if m in _METHODS]

    def link(method: str, path: str, status: str, links: dict[str, Any]) -> None:
        response = paths.get(path, {}).get(method, {}).get("responses", {}).get(status)
        if response is not None:
            response.setdefault("links", {}).update(links)

    from_create = {
        doc["operationId"]: {"operationId": doc["operationId"], "parameters": {"path.id": "$response.body#/id"}}
        for m, p, doc in operations if "{id}" in p and "{suggestion_id}" not in p
    }  # fmt: skip
    link("post", "/v1/experiments", "201", from_create)
    ids = {"path.id": "$response.body#/experiment_id", "path.suggestion_id": "$response.body#/id"}
    from_suggest: dict[str, Any] = {
        doc["operationId"]: {"operationId": doc["operationId"], "parameters": ids}
        for m, p, doc in operations if "{suggestion_id}" in p
    }  # fmt: skip
    observe = paths.get("/v1/experiments/{id}/observations", {}).get("post")
    if observe is not None:
        from_suggest["observe"] = {
            "operationId": observe["operationId"],
            "parameters": {"path.id": "$response.body#/experiment_id"},
            # its outcome generated; `assignments` null: an observation names a suggestion or a point, not both
            "requestBody": {"suggestion_id": "$response.body#/id", "assignments": None},
        }
        # a failed run: what any experiment accepts of an open suggestion, whatever its metrics
        # (a successful one must name every metric the experiment declares, which no link can supply)
        from_suggest["observe_failed"] = {
            "operationId": observe["operationId"],
            "parameters": {"path.id": "$response.body#/experiment_id"},
            "requestBody": {"suggestion_id": "$response.body#/id", "assignments": None, "failed": True, "value": None},
        }
    link("post", "/v1/experiments/{id}/suggestions", "201", from_suggest)
