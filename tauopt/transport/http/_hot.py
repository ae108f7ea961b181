"""The worker loop's two calls, served whole at the app's entrance.

POST /v1/experiments/{id}/suggestions and .../observations are nearly all of a
busy daemon's requests. `HotCalls` serves them before Starlette's stack: counted
into the metrics, the body held to the limit, forwarded to the owning daemon when
daemons share a database, and answered by their route's endpoint, the same
function the Starlette route calls (authenticate, parse, validate, call the
engine, render: written once, in `_routes.Operation`). Everything else, and these
two under a root_path, goes through the stack (the metrics and body-limit
middleware, the router, the exception handlers).

Why: every layer of the stack (ServerErrorMiddleware, the metrics and body-limit
middleware, each wrapping `send` or `receive`) and the router cost each of these
requests time that nothing in them needed; what those layers do for these two
calls is done here inline: the status and error type are read from the
endpoint's answer, not from watched messages, and an unexpected exception is
answered 500 from the catalogue and re-raised for the server's log, as the
stack's catch-all does.
"""

from __future__ import annotations

import time
from typing import Awaitable, Callable

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ...errors import api_error
from ._metrics import KIND, Metrics, count_answer
from ._render import internal_error, render_error
from ._routes import HOT_OPERATIONS, hot_call

__all__ = ["HotCalls", "BodyTooLarge", "too_large", "limited", "declared_length"]


class BodyTooLarge(HTTPException):
    """Raised from `receive`: an HTTPException, so the framework's body reader re-raises it."""

    def __init__(self) -> None:
        super().__init__(413)


def too_large(limit: int) -> Response:
    # built only when needed: a response per request would cost every request a JSON encode
    return render_error(api_error("payload_too_large", f"request body over {limit} bytes; send less"))


def limited(receive: Receive, limit: int) -> Receive:
    """`receive`, raising BodyTooLarge once the request's body passes `limit` bytes."""
    seen = 0

    async def counted() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise BodyTooLarge()
        return message

    return counted


def declared_length(scope: Scope) -> int:
    """The request's content-length (0 when absent or not a number)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


class _HotRequest(Request):
    """Starlette's Request, its body read by a plain loop over `receive`: Starlette's
    `body()` goes through an async generator (created, registered with the loop's
    async-generator hooks, closed) per request, a few percent of a busy daemon's CPU
    for a body that is one message. Same outcome: the body, ClientDisconnect on a
    hang-up, the stream then consumed."""

    async def body(self) -> bytes:
        if not hasattr(self, "_body"):
            if self._stream_consumed:
                raise RuntimeError("Stream consumed")
            chunks: list[bytes] = []
            while not self._stream_consumed:
                message = await self._receive()
                if message["type"] == "http.request":
                    chunks.append(message.get("body", b""))
                    self._stream_consumed = not message.get("more_body", False)
                elif message["type"] == "http.disconnect":
                    self._is_disconnected = True
                    raise ClientDisconnect()
            self._body = b"".join(chunks)
        return self._body


class HotCalls:
    """The two hot operations' endpoints (from `routes`), with what the stack would
    have done around them; `serve` answers whether the request was one of them."""

    def __init__(
        self, routes: list[Route], metrics: Metrics, limit: int, forward: Callable[[ASGIApp], ASGIApp] | None = None
    ) -> None:
        self.metrics = metrics
        self.limit = limit
        self.endpoints: dict[str, Callable[[Request], Awaitable[Response]]] = {
            r.name: r.endpoint for r in routes if r.name in HOT_OPERATIONS
        }
        self.answer: ASGIApp = forward(self._answer) if forward is not None else self._answer

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> bool:
        hot = None if scope.get("root_path") else hot_call(scope)
        if hot is None or not hot[1]:  # no id: the router's 404
            return False
        t0 = time.perf_counter()
        sent: list[Message] = []

        async def counted_send(message: Message) -> None:
            sent.append(message)
            await send(message)

        try:
            if declared_length(scope) > self.limit:
                raise BodyTooLarge()
            scope["path_params"] = {"id": hot[1]}
            await self.answer(scope, limited(receive, self.limit), counted_send)
        except BodyTooLarge:
            if sent:
                raise
            await too_large(self.limit)(scope, receive, counted_send)
        finally:
            status = sent[0]["status"] if sent else 0
            body = sent[1].get("body", b"") if len(sent) > 1 and status >= 400 else b""
            count_answer(self.metrics, KIND[hot[0]], status, body, t0)
        return True

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        name, _ = hot_call(scope) or ("", "")
        try:
            response = await self.endpoints[name](_HotRequest(scope, receive, send))
        except BodyTooLarge:
            raise
        except ClientDisconnect:
            # hung up before its body arrived (an overloaded daemon's timed-out workers):
            # nobody to answer, and nothing to log; a traceback each would add to the load
            return
        except Exception as exc:
            await render_error(internal_error(exc))(scope, receive, send)
            raise  # for the server's log, as the stack's catch-all does
        await send({"type": "http.response.start", "status": response.status_code, "headers": response.raw_headers})
        await send({"type": "http.response.body", "body": response.body})
