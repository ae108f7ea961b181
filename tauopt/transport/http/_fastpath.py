"""The hot endpoints without the framework: ask and observe as plain ASGI.

Why: profiled with raw ASGI calls (memory store, auth on), FastAPI's routing
and dependency solving (`solve_dependencies` for the bearer dependency, a
match against every route, the strict-JSON request wrapper) cost ~3x the
engine's own time per ask+observe pair. A worker loop is nothing but these two
calls, so they get a direct path:

    POST /v1/experiments/{id}/suggestions    body absent, {} or {"tag": str|null}
    POST /v1/experiments/{id}/observations   {"suggestion_id", "assignments",
                                              "value", "failed", "metrics"}

The fast path only answers requests it fully understands: the exact path
shape, `Content-Type: application/json` (or no body for an ask), strict JSON
(no NaN or Infinity) and a body that the route's pydantic model would accept
as is. Anything else is replayed, body included, into the FastAPI app, so
every validation message, status and the OpenAPI document stay exactly those
of the routes in `_server.py` (which remain the reference and the schema).
Errors raised on the fast path (auth, quotas, engine) go through the same
`render_error` as the app's exception handlers.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._json import loads_body
from ...errors import ApiError, api_error

__all__ = ["FastPath"]

_OBSERVE_KEYS = frozenset({"suggestion_id", "assignments", "value", "failed", "metrics"})
_JSON_CT = b"application/json"


class _NotFast(Exception):
    """The request is not one the fast path answers as is: hand it to the app."""


class FastPath:
    """ASGI middleware answering well-formed asks and observes directly.

    `auth`: False serves without tokens (owner None, no quotas), as create_app.
    `render`: ApiError -> Starlette response (create_app's `render_error`).
    """

    def __init__(self, app: ASGIApp, *, auth: bool, render: Callable[[ApiError], Any]) -> None:
        self.app = app
        self.auth = auth
        self.render = render

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = _route(scope)
        state = scope.get("state") or {}
        engine = state.get("engine")
        if kind is None or engine is None:
            await self.app(scope, receive, send)
            return
        body, chunks = await _read_body(receive)
        try:
            parsed = _parse(scope, kind, body)
        except _NotFast:
            await self.app(scope, _replay(chunks, receive), send)
            return
        eid = kind[1]
        try:
            if kind[0] == "suggest":
                tag = parsed.get("tag")
                if not self.auth:
                    s = await engine.suggest(eid, tag=tag)
                else:
                    gate = state["gate"]
                    cred = await gate.authenticate(_header(scope, b"authorization"))
                    async with gate.suggestion(cred):
                        s = await engine.suggest(eid, tag=tag, owner=cred.id)
                payload = s.to_dict()
            else:
                owner = None
                if self.auth:
                    owner = (await state["gate"].authenticate(_header(scope, b"authorization"))).id
                o = await engine.observe(
                    eid, suggestion_id=parsed.get("suggestion_id"), assignments=parsed.get("assignments"),
                    value=parsed.get("value"), failed=parsed.get("failed", False), metrics=parsed.get("metrics"),
                    owner=owner,
                )  # fmt: skip
                payload = o.to_dict()
            data = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
        except ApiError as e:
            await self.render(e)(scope, receive, send)
            return
        except Exception as exc:  # as the app's catch-all handler: never a traceback to the client
            await self.render(api_error("internal", f"internal error ({type(exc).__name__}); it was logged, retry later"))(
                scope, receive, send
            )
            return
        await send({
            "type": "http.response.start",
            "status": 201,
            "headers": [(b"content-type", _JSON_CT), (b"content-length", str(len(data)).encode())],
        })  # fmt: skip
        await send({"type": "http.response.body", "body": data})


def _route(scope: Scope) -> tuple[str, str] | None:
    """("suggest" | "observe", experiment id) for the two hot routes, else None."""
    if scope["type"] != "http" or scope["method"] != "POST":
        return None
    path: str = scope["path"]
    root = scope.get("root_path") or ""
    if root and path.startswith(root + "/"):  # mounted: route on the path below the mount, as Starlette does
        path = path[len(root) :]
    parts = path.split("/")
    if len(parts) != 5 or parts[1] != "v1" or parts[2] != "experiments" or not parts[3]:
        return None
    if parts[4] == "suggestions":
        return "suggest", parts[3]
    if parts[4] == "observations":
        return "observe", parts[3]
    return None


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


async def _read_body(receive: Receive) -> tuple[bytes, list[Message]]:
    chunks: list[Message] = []
    parts: list[bytes] = []
    while True:
        message = await receive()
        chunks.append(message)
        if message["type"] != "http.request":
            break
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(parts), chunks


def _replay(chunks: list[Message], receive: Receive) -> Receive:
    pending = list(chunks)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


def _parse(scope: Scope, kind: tuple[str, str], body: bytes) -> dict[str, Any]:
    """The body as the route's model would accept it, or _NotFast."""
    if not body:
        if kind[0] == "suggest":
            return {}
        raise _NotFast("observe needs a body")
    content_type = _header(scope, b"content-type")
    if content_type is None or content_type.split(";", 1)[0].strip().lower() != "application/json":
        raise _NotFast("content type")
    try:
        value = loads_body(body)
    except (ValueError, ApiError):
        raise _NotFast("bad JSON") from None
    if not isinstance(value, dict):
        raise _NotFast("not an object")
    if kind[0] == "suggest":
        if value.keys() - {"tag"}:
            raise _NotFast("extra keys")
        tag = value.get("tag")
        if tag is not None and not isinstance(tag, str):
            raise _NotFast("tag")
        return value
    if value.keys() - _OBSERVE_KEYS:
        raise _NotFast("extra keys")
    sid = value.get("suggestion_id")
    assignments = value.get("assignments")
    v = value.get("value")
    failed = value.get("failed", False)
    metrics = value.get("metrics")
    if (
        (sid is not None and not isinstance(sid, str))
        or (assignments is not None and not isinstance(assignments, dict))
        or (v is not None and type(v) is not float)  # ints, bools: the model decides
        or type(failed) is not bool
        or (metrics is not None and not (isinstance(metrics, dict) and all(type(m) is float for m in metrics.values())))
    ):
        raise _NotFast("types")
    return value
