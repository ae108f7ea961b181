"""GET /metrics (text format) and the middleware that counts the HTTP door's asks,
observations and 429s into the engine's `Metrics` (tauopt/transport/_metrics.py,
which lists every metric). Counted by an ASGI middleware outside everything else,
so the routes and the body limit are all seen.

Each app has its own registry unless it is given an engine another door serves
(the KerasTuner chief's --http-port): then both doors count into that engine's.
"""

from __future__ import annotations

import hmac
import json
import time

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ...errors import api_error
from .._metrics import CONTENT_TYPE_LATEST, TOP_EXPERIMENTS, Metrics
from ._routes import hot_call

__all__ = ["Metrics", "MetricsMiddleware", "count_answer", "KIND", "TOP_EXPERIMENTS", "metrics_route"]


class MetricsMiddleware:
    """Counts asks and observations (door "http") by outcome, times asks, counts 429s by type."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = _kind(scope)
        if kind is None and scope["type"] == "http":
            kind = "other"
        if kind is None:
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status = 0
        error_body: list[bytes] = []

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and status >= 400:
                error_body.append(message.get("body", b""))  # error bodies are small
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            count_answer(self.metrics, kind, status, b"".join(error_body), t0)


def count_answer(metrics: Metrics, kind: str, status: int, body: bytes, t0: float) -> None:
    """Count one answer of `status` (body: its bytes, read only when an error) begun at
    perf_counter `t0`: an ask or observe by outcome and time, a 429 by its error type."""
    outcome = "ok" if 0 < status < 400 else _error_type(body, status)
    if status == 429:
        metrics.rejections.labels(outcome).inc()
    if kind != "other":
        metrics.record(kind, "http", outcome, time.perf_counter() - t0)


KIND = {"suggest": "ask", "observe": "observe"}  # the metrics' name of each hot operation


def _kind(scope: Scope) -> str | None:
    hot = hot_call(scope)
    return None if hot is None else KIND[hot[0]]


def _error_type(body: bytes, status: int) -> str:
    try:
        found = json.loads(body)["error"]["type"]
    except (ValueError, KeyError, TypeError):
        return "internal" if status >= 500 or status == 0 else f"http_{status}"
    # error types come from the catalogue, but a label must stay bounded whatever the body says
    return found if isinstance(found, str) and len(found) <= 40 and found.isidentifier() else f"http_{status}"


def metrics_route(metrics: Metrics, token: str | None) -> Route:
    """GET /metrics (not an API operation: not in /openapi.json). The app adds
    `MetricsMiddleware` outermost and `bind`s the metrics to the engine once it runs.

    Without a metrics token the scrape is open and aggregate only: no series names an
    experiment (its id is its owner's to know). With one, it is needed, and the
    per-experiment gauges are served to that admin credential."""

    async def scrape(request: Request) -> Response:
        if token is not None:
            given = request.headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                raise api_error("unauthorized", "GET /metrics needs `Authorization: Bearer <the --metrics-token value>`")
        return Response(await metrics.scrape(per_experiment=token is not None), media_type=CONTENT_TYPE_LATEST)

    return Route("/metrics", scrape, methods=["GET"], include_in_schema=False)
