"""The HTTP door's one rendering of answers and errors.

`render_error` is the only place an ApiError becomes an HTTP response: status
and headers from the catalogue (`errors.CATALOGUE`), body
`{"error": {"type", "message", "details"}}`. Everything a client can send
wrong (bad JSON, a body the schema refuses, an unknown route or method, a body
over the limit) is turned into a catalogue error first, so a client never sees
a 5xx for anything it can send.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Mapping, Sequence

import anyio

from starlette.exceptions import HTTPException
from starlette.responses import Response

from ...errors import ApiError, api_error, error_type_for_status, kind_of
from ...schema import invalid_fields

__all__ = [
    "render_error", "json_bytes", "render_json", "render_rows", "render_built", "encode_off_loop", "bad_json", "invalid_fields", "from_http_exception", "internal_error",
    "MAX_BODY_BYTES",
]

MAX_BODY_BYTES = 1 << 20
_JSON = "application/json"


# One encoder for every answer: json.dumps with options builds a new one per call.
_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


def json_bytes(value: Any) -> bytes:
    """`value` as compact, strict JSON (NaN and Infinity are not JSON)."""
    return _ENCODE(value).encode()


def render_json(value: Any, status: int = 200) -> Response:
    """A JSON answer, compact and strict (NaN and Infinity are not JSON)."""
    return Response(json_bytes(value), status_code=status, media_type=_JSON)


# Rows encoded on the event loop at most; a longer answer is encoded on a worker thread
# (10,000 observations take ~100 ms to encode, and every other request would wait).
INLINE_ROWS = 500


async def encode_off_loop(encode: Callable[[], bytes], rows: int) -> bytes:
    """`encode()`, on a worker thread when it encodes more than INLINE_ROWS rows."""
    return encode() if rows <= INLINE_ROWS else await anyio.to_thread.run_sync(encode)


async def render_built(build: Callable[[], Any], rows: int, headers: Mapping[str, str] | None = None) -> Response:
    """The JSON answer `build()` makes from `rows` rows; built and encoded off the event loop when long."""
    body = await encode_off_loop(lambda: _ENCODE(build()).encode(), rows)
    return Response(body, headers=headers, media_type=_JSON)


async def render_rows(rows: Sequence[Any], headers: Mapping[str, str] | None = None) -> Response:
    """A JSON array of `rows` (each a model with `to_dict`), encoded off the event loop when long."""
    return await render_built(lambda: [r.to_dict() for r in rows], len(rows), headers)


def render_error(e: ApiError) -> Response:
    """The one place an ApiError becomes an HTTP response."""
    kind = kind_of(e)
    body = {"error": {"type": e.error_type, "message": e.message, "details": _jsonable(e.details)}}
    return Response(
        _ENCODE(body).encode(),
        status_code=kind.http_status, headers=kind.http_headers(e), media_type=_JSON,
    )  # fmt: skip


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value, allow_nan=False)
        return value
    except (TypeError, ValueError):
        return json.loads(json.dumps(value, default=repr, allow_nan=True).replace("NaN", "null"))


def bad_json(why: str) -> ApiError:
    return api_error(
        "invalid_request",
        f"the body is not valid JSON ({why}); send a JSON object (NaN and Infinity are not JSON)",
        errors=[{"field": "body", "problem": why}],
    )


def from_http_exception(exc: HTTPException, max_body_bytes: int = MAX_BODY_BYTES) -> ApiError:
    """The routing layer's own errors (no route, wrong method, body too large) as catalogue errors."""
    if exc.status_code == 404:
        return api_error("not_found", "no such route; the API lives under /v1 (see /docs)")
    if exc.status_code == 405:
        return api_error("method_not_allowed", "this path does not accept this method (see /docs)")
    if exc.status_code == 413:
        return api_error("payload_too_large", f"request body over {max_body_bytes} bytes; send less")
    return ApiError(exc.status_code, error_type_for_status(exc.status_code), str(exc.detail))


def internal_error(exc: BaseException) -> ApiError:
    return api_error("internal", f"internal error ({type(exc).__name__}); it was logged, retry later")
