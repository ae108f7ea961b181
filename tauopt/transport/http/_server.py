"""The REST door: `create_app(engine)` returns the ASGI app.

Declared once, Starlette style: the routes (one per operation, `_routes.py`;
the dashboard's read-only insight operations in `_insight_routes.py`; GET
/metrics, `_metrics.py`; the dashboard's static files, `_dashboard.py`),
/openapi.json and /docs (FastAPI-generated from the same declarations,
`_openapi.py`), the worker loop's two calls served at the app's entrance (`_hot.py`),
the middleware (the metrics, the body limit), the exception handlers (every
error rendered by `_render.render_error` from the catalogue) and the lifespan
(the engine and the door's gate, read as `request.state`). The app only
translates; auth and per-credential limits sit at the door
(`tauopt.engine._auth.Gate`), read through the store's credential interface.
"""

from __future__ import annotations

import gc
import time
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from typing import Any, AsyncIterator, Callable, Sequence

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ...engine._auth import Gate, Limits
from ...errors import ApiError
from .._columns import ColumnsCache
from ._dashboard import dashboard_routes
from ._docs_page import swagger_page
from ._forward import ForwardToOwner
from ._insight_routes import INSIGHT
from ._metrics import TOP_EXPERIMENTS, Metrics, MetricsMiddleware, metrics_route
from ._openapi import openapi_document
from ._pages import EncodedPages
from ._hot import BodyTooLarge, HotCalls, declared_length, limited, too_large
from ._render import MAX_BODY_BYTES, from_http_exception, internal_error, render_error
from ._routes import OPERATIONS, Operation, routes

__all__ = ["create_app", "render_error", "MAX_BODY_BYTES", "BodyLimit", "SERVED"]

# Every operation the door serves (and /openapi.json describes), by topic module.
SERVED: list[Operation] = [*OPERATIONS, *INSIGHT]


class BodyLimit:
    """Refuse request bodies over `limit` bytes with 413, declared or streamed."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if declared_length(scope) > self.limit:
            await too_large(self.limit)(scope, receive, send)
            return
        started = False

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited(receive, self.limit), tracked_send)
        except BodyTooLarge:
            if started:
                raise
            await too_large(self.limit)(scope, receive, send)


# -- the app -----------------------------------------------------------------------


def create_app(
    engine: Any = None,
    *,
    db: Any = "./tauopt.db",
    engine_options: dict[str, Any] | None = None,
    limits: Limits = Limits(),
    auth: bool = True,
    clock: Callable[[], float] = time.time,
    max_body_bytes: int = MAX_BODY_BYTES,
    metrics_token: str | None = None,
    metrics_top_experiments: int = TOP_EXPERIMENTS,
    doors: Sequence[Any] = (),
    forward_lease_s: float | None = None,
    freeze_at_start: bool = False,
) -> Starlette:
    """The REST API as an ASGI app.

    engine: an entered `tauopt.Engine` (the caller owns its lifetime), or None:
        the app opens `Engine(store=db, **engine_options)` in its lifespan.
    limits: per-credential quota and rate-limit defaults.
    auth: False serves without tokens (owner None, no quotas): for embedding
        behind your own authentication only.
    clock: the quotas' clock (wall time; injectable for tests).
    metrics_token: if set, GET /metrics needs `Authorization: Bearer <it>`.
    metrics_top_experiments: per-experiment gauges cover this many experiments (busiest first).
    doors: other doors served on the same engine while the app runs (the CLI composes
        them, e.g. the Optuna door): each `await door(task_group, engine, host)` returns
        (what it adds to the ready line, stop).
    forward_lease_s: with several daemons on one database (the engine's store shared by
        lease of that many seconds), forward requests for experiments another daemon
        owns to it (`_forward.py`).
    freeze_at_start: once the app has started, move every object made so far (imports,
        the app, the engine) out of the garbage collector's reach (`gc.freeze`), so a
        full collection later scans only what the daemon made since; a daemon's own
        process only (`tauopt serve`), as it changes the whole process.
    """
    # an engine other doors serve (the chief's --http-port): count into its one Metrics
    metrics = Metrics(metrics_top_experiments) if engine is None else Metrics.for_engine(engine, metrics_top_experiments)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        async with AsyncExitStack() as stack:
            eng = engine
            if eng is None:
                from ...engine._engine import Engine

                eng = await stack.enter_async_context(Engine(store=db, **(engine_options or {})))
            app.state.gate = Gate(eng.store, limits, clock=clock)
            metrics.bind(eng)
            if doors:
                group = await stack.enter_async_context(anyio.create_task_group())
                for door in doors:
                    _, stop = await door(group, eng, "127.0.0.1")
                    stack.callback(stop)  # before the group's exit: the door's task ends
            if freeze_at_start:
                # tens of thousands of start-up objects, alive until the end: a full collection
                # walked them all each time (a pause of the event loop that grows with the
                # libraries loaded, in the tail of every request it falls on)
                gc.collect()
                gc.freeze()
            yield {"engine": eng, "gate": app.state.gate, "auth": auth, "columns": ColumnsCache(), "pages": EncodedPages()}

    schema: dict[str, Any] = {}

    async def openapi(request: Request) -> Response:
        if not schema:
            schema.update(openapi_document(SERVED, title="tauopt", summary=_SUMMARY, version=_version()))
        return JSONResponse(schema)

    async def docs(request: Request) -> Response:
        root = request.scope.get("root_path", "")
        return swagger_page(root + "/openapi.json", "tauopt - Swagger UI")

    served = routes(SERVED)
    forward = None if forward_lease_s is None else partial(ForwardToOwner, lease_s=forward_lease_s)
    return _Door(
        HotCalls(served, metrics, max_body_bytes, forward),
        routes=[
            *served,
            Route("/openapi.json", openapi, include_in_schema=False),
            Route("/docs", docs, include_in_schema=False),
            metrics_route(metrics, metrics_token),
            *dashboard_routes(),
        ],
        middleware=[  # outermost first: the metrics see every answer, the body limit's too
            Middleware(MetricsMiddleware, metrics=metrics),
            Middleware(BodyLimit, limit=max_body_bytes),
            *([Middleware(ForwardToOwner, lease_s=forward_lease_s)] if forward_lease_s is not None else []),
        ],
        exception_handlers={
            ApiError: _on_api_error,
            HTTPException: partial(_on_http_error, max_body_bytes),
            Exception: _on_bug,
        },
        lifespan=lifespan,
    )


class _Door(Starlette):
    """Starlette, with the worker loop's two calls served at its entrance (`_hot.HotCalls`)."""

    def __init__(self, hot: HotCalls, **options: Any) -> None:
        super().__init__(**options)
        self.hot = hot

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["app"] = self
        if not await self.hot.serve(scope, receive, send):
            await super().__call__(scope, receive, send)


_SUMMARY = "Coordination engine for hyperparameter search"


async def _on_api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return render_error(exc)


async def _on_http_error(max_body_bytes: int, request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return render_error(from_http_exception(exc, max_body_bytes))


async def _on_bug(request: Request, exc: Exception) -> Response:
    return render_error(internal_error(exc))


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("tauopt")
    except Exception:
        return "0"
