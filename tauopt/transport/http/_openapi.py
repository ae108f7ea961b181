"""/openapi.json from the operations' one declaration (`_server.SERVED`).

FastAPI writes the document (it is what clients and the fuzzer read, and what
FastAPI's own routes produced before): each Operation becomes a documentation
-only `APIRoute` whose signature is built from the declaration (path
parameters, optional query parameters, the body model), never served.
Validation errors are answered 400 `invalid_request`, so FastAPI's 422 is
replaced by 400 in every operation. The request schemas come from the models of
`tauopt.schema`; the links between operations from each operation's declaration.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from fastapi import Body, Depends, Path, Query
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer

from ...schema import error_responses
from ._routes import Operation

__all__ = ["openapi_document", "bearer", "documented_path"]

bearer = HTTPBearer(auto_error=False, description="a token from `tauopt token create`")
_P = inspect.Parameter


# A path parameter's documented name where the served route's short one would hide what it
# is: a client (or a fuzzer's dependency inference) reads `{suggestion_id}` as the `id` of a
# Suggestion, `{sid}` as nothing. The URL is the same; only its template's name differs.
DOCUMENTED_AS = {"sid": "suggestion_id"}


def documented_path(path: str) -> str:
    return re.sub(r"{(\w+)}", lambda m: "{" + DOCUMENTED_AS.get(m[1], m[1]) + "}", path)


def _signature(op: Operation) -> inspect.Signature:
    names = re.findall(r"{(\w+)}", documented_path(op.path))
    params = [_P(name, _P.KEYWORD_ONLY, default=Path(), annotation=str) for name in names]
    for name, kind in op.query.items():
        params.append(_P(name, _P.KEYWORD_ONLY, default=Query(None), annotation=kind | None))
    if op.body is not None:
        if op.body_required:
            params.append(_P("body", _P.KEYWORD_ONLY, default=Body(), annotation=op.body))
        else:
            # an optional body is left out, never null (the door refuses a JSON null as not an object)
            params.append(_P("body", _P.KEYWORD_ONLY, default=Body(None), annotation=op.body))
    return inspect.Signature(params)


def _doc_route(op: Operation) -> APIRoute:
    def documented(**_: Any) -> None:  # pragma: no cover - never served
        raise AssertionError("documentation only")

    documented.__signature__ = _signature(op)  # type: ignore[attr-defined]
    documented.__name__ = op.name
    documented.__doc__ = inspect.getdoc(op.handler)
    return APIRoute(
        documented_path(op.path), documented, methods=[op.method], name=op.name, status_code=op.status, response_model=op.response,
        responses=error_responses(*op.errors), tags=[op.tag], dependencies=[Depends(bearer)] if op.auth else None,
    )  # fmt: skip


def openapi_document(operations: list[Operation], *, title: str, summary: str, version: str) -> dict[str, Any]:
    schema = get_openapi(title=title, summary=summary, version=version, routes=[_doc_route(op) for op in operations])
    for path in schema.get("paths", {}).values():
        for doc in path.values():
            responses = doc.get("responses", {})
            if responses.pop("422", None) is not None and "400" not in responses:
                responses["400"] = {
                    "description": "invalid_request",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}},
                }
    _add_links(schema, operations)
    return _exact_bounds(schema)


def _path_names(op: Operation) -> set[str]:
    return set(re.findall(r"{(\w+)}", documented_path(op.path)))


def _add_links(schema: dict[str, Any], operations: list[Operation]) -> None:
    """Each operation's declared links (`Operation.links`, `body_links`) on its answer."""
    docs = {op.name: schema["paths"][documented_path(op.path)][op.method.lower()] for op in operations}
    for op in operations:
        if not (op.links or op.body_links):
            continue
        fed = {k.removeprefix("path.") for k in op.links}
        links: dict[str, Any] = {
            docs[o.name]["operationId"]: {"operationId": docs[o.name]["operationId"], "parameters": dict(op.links)}
            for o in operations if _path_names(o) == fed
        }  # fmt: skip
        for label, (target, body) in op.body_links.items():
            to = next(o for o in operations if o.name == target)
            parameters = {k: v for k, v in op.links.items() if k.removeprefix("path.") in _path_names(to)}
            links[label] = {"operationId": docs[target]["operationId"], "parameters": parameters, "requestBody": dict(body)}
        docs[op.name]["responses"][str(op.status)].setdefault("links", {}).update(links)


_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _exact_bounds(node: Any) -> Any:
    """Integral bounds as JSON integers: FastAPI's models hold them as floats, and 2**63 - 1 as a
    float is 2**63, past the range it bounds (a fuzzer then generates numbers the engine refuses)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _BOUNDS and isinstance(value, float) and value.is_integer() and abs(value) <= 2**64:
                node[key] = int(value)
            else:
                _exact_bounds(value)
    elif isinstance(node, list):
        for item in node:
            _exact_bounds(item)
    return node
