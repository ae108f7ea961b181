"""What /openapi.json says beyond the pydantic models: the request schemas the
engine's validation enforces (so a fuzzer's "valid" data mostly is), and the
OpenAPI links that chain operations (so stateful testing reaches every one).

    PARAMETER_SCHEMA     one variant per parameter type (bounds pairs, scales, values)
    METRIC_SCHEMA, STRATEGY_OPTIONS_SCHEMA, _NAME, _TAG, ...   the smaller rules
    add_links(schema)    create -> every /{id} operation; suggest -> get, close, observe

Only the document: validation stays in `tauopt.models` and `engine._validate`,
whose messages users see. Keep the two in step (tests/test_http_fuzz.py).
"""

from __future__ import annotations

from typing import Any

from ...models import OBJECTIVES, SCALES, STRATEGIES

__all__ = ["PARAMETER_SCHEMA", "METRIC_SCHEMA", "METRICS_SCHEMA", "STRATEGY_OPTIONS_SCHEMA", "STRATEGIES", "add_links"]

_NAME: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 256, "pattern": r"\S"}
_PARAM_NAME: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 256, "pattern": r"\S"}
# check_tag: 1-128 printable characters (str.isprintable); printable ASCII is the portable core of it
_TAG: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 128, "pattern": r"^[\x20-\x7e]+$"}
_POSITIVE: dict[str, Any] = {"type": "number", "exclusiveMinimum": 0}
_AT_LEAST_1: dict[str, Any] = {"type": "integer", "minimum": 1}
_VALUE: dict[str, Any] = {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}]}


def _numeric(kind: str, number: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": f"{kind}: bounds [lo, hi], lo < hi (finite; log and reverse_log need lo > 0); "
        "step > 0 and at most hi - lo. Also accepted: default (within bounds) and conditions, "
        "left out of this schema because their rules span fields",
        "properties": {
            "name": _PARAM_NAME,
            "type": {"const": kind},
            "bounds": {"type": "array", "minItems": 2, "maxItems": 2, "items": {"type": number}},
            "scale": {"enum": list(SCALES)},
            "step": {"type": number, "exclusiveMinimum": 0},
        },
        "required": ["name", "type", "bounds"],
        "additionalProperties": False,
    }


def _variant(kind: str, required: list[str], **properties: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"name": _PARAM_NAME, "type": {"const": kind}, **properties},
        "required": ["name", "type", *required],
        "additionalProperties": False,
    }


PARAMETER_SCHEMA: dict[str, Any] = {
    "description": "a parameter; names are unique within an experiment. Optional on every type: "
    "conditions, [{parent, values}], all must hold (the parent is another parameter)",
    "oneOf": [
        _numeric("double", "number"),
        _numeric("int", "integer"),
        _variant(
            "categorical", ["values"],
            values={"type": "array", "minItems": 1, "uniqueItems": True, "items": _VALUE},
        ),
        _variant("boolean", [], default={"type": "boolean"}),
        _variant("fixed", ["value"], value=_VALUE),
    ],
}

METRIC_SCHEMA: dict[str, Any] = {
    "properties": {"name": _NAME, "objective": {"enum": list(OBJECTIVES)}},
    "required": ["name"],
    "additionalProperties": False,
}

# metrics=[...]: objectives ({name, objective}) and constraint metrics ({name, constraint: {"<=" | ">=": x}})
METRICS_SCHEMA: dict[str, Any] = {  # array keywords only: the field may also be null
    "minItems": 1,
    "items": {
        "type": "object",
        "properties": {
            "name": _NAME,
            "objective": {"enum": list(OBJECTIVES)},
            "constraint": {
                "type": "object",
                "minProperties": 1,
                "maxProperties": 1,
                "properties": {"<=": {"type": "number"}, ">=": {"type": "number"}},
                "additionalProperties": False,
            },
        },
        "required": ["name"],
        "additionalProperties": False,
    },
}

STRATEGY_OPTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "grid_size": {"type": "integer", "minimum": 2},
        "initial_points": {"type": "integer", "minimum": 1},
        "seed": {"type": "integer", "minimum": 0},
    },
    "additionalProperties": False,
}

# (method, path) of the operations a created experiment's id feeds
_BY_EXPERIMENT = [
    ("get", "/v1/experiments/{id}"),
    ("patch", "/v1/experiments/{id}"),
    ("post", "/v1/experiments/{id}/archive"),
    ("post", "/v1/experiments/{id}/suggestions"),
    ("get", "/v1/experiments/{id}/suggestions"),
    ("delete", "/v1/experiments/{id}/suggestions"),
    ("post", "/v1/experiments/{id}/observations"),
    ("get", "/v1/experiments/{id}/observations"),
    ("get", "/v1/experiments/{id}/best"),
    ("get", "/v1/experiments/{id}/summary"),
    ("get", "/v1/experiments/{id}/workers"),
    ("get", "/v1/experiments/{id}/importance"),
]
_BY_SUGGESTION = [
    ("get", "/v1/experiments/{id}/suggestions/{sid}"),
    ("delete", "/v1/experiments/{id}/suggestions/{sid}"),
]


def add_links(schema: dict[str, Any]) -> None:
    """Declare which response fields feed which operations (OpenAPI 3 `links`)."""
    paths = schema.get("paths", {})

    def op_id(method: str, path: str) -> str | None:
        return paths.get(path, {}).get(method, {}).get("operationId")

    def link(method: str, path: str, status: str, links: dict[str, Any]) -> None:
        response = paths.get(path, {}).get(method, {}).get("responses", {}).get(status)
        if response is not None:
            response.setdefault("links", {}).update({k: v for k, v in links.items() if v["operationId"]})

    from_create = {
        f"{m.upper()} {p}": {"operationId": op_id(m, p), "parameters": {"path.id": "$response.body#/id"}}
        for m, p in _BY_EXPERIMENT
    }
    link("post", "/v1/experiments", "201", from_create)
    ids = {"path.id": "$response.body#/experiment_id", "path.sid": "$response.body#/id"}
    from_suggest: dict[str, Any] = {f"{m.upper()} {p}": {"operationId": op_id(m, p), "parameters": ids} for m, p in _BY_SUGGESTION}
    from_suggest["observe"] = {
        "operationId": op_id("post", "/v1/experiments/{id}/observations"),
        "parameters": {"path.id": "$response.body#/experiment_id"},
        "requestBody": {"suggestion_id": "$response.body#/id"},
    }
    link("post", "/v1/experiments/{id}/suggestions", "201", from_suggest)
