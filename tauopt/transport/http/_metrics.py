"""Prometheus metrics at GET /metrics (prometheus_client, text format).

Counted at the door, by an ASGI middleware outside everything else (so the
fast path, the framework routes and the body limit are all seen):

    tauopt_asks_total{door,outcome}            outcome: ok or the error_type
    tauopt_observations_total{door,outcome}
    tauopt_ask_seconds{door}                   histogram
    tauopt_rejections_429_total{type}          bandwidth_full, rate_limited, ...

Read at scrape time from the engine (nothing kept per experiment here):

    tauopt_experiments{state}
    tauopt_experiment_open_suggestions{experiment}   top N experiments only
    tauopt_experiment_observations{experiment}       (bounded label cardinality)
    tauopt_gp_fits_total, tauopt_gp_fallbacks_total{reason}, tauopt_pool_queue_depth,
    tauopt_dask_scheduler_lost_total, tauopt_dask_reconnects_total (with --pool dask)

Fed by the store after each commit: tauopt_store_commit_seconds and
tauopt_store_commit_batches (histograms).

Each app has its own registry, so two apps in one process do not collide.
"""

from __future__ import annotations

import hmac
import json
import time
from typing import Any, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ...errors import api_error

__all__ = ["Metrics", "MetricsMiddleware", "TOP_EXPERIMENTS", "add_metrics"]

TOP_EXPERIMENTS = 10
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class Metrics:
    """One app's metrics; `bind(engine)` once the engine runs (the app's lifespan)."""

    def __init__(self, top_experiments: int = TOP_EXPERIMENTS) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.top_experiments = top_experiments
        r = self.registry
        self.asks = Counter("tauopt_asks", "Asks for a suggestion, by door and outcome", ["door", "outcome"], registry=r)
        self.observations = Counter("tauopt_observations", "Observations posted, by door and outcome", ["door", "outcome"], registry=r)
        self.ask_seconds = Histogram("tauopt_ask_seconds", "Ask latency at the door", ["door"], buckets=_LATENCY_BUCKETS, registry=r)
        self.rejections = Counter("tauopt_rejections_429", "429 answers, by error type", ["type"], registry=r)
        self.commit_seconds = Histogram("tauopt_store_commit_seconds", "Store transaction time", buckets=_LATENCY_BUCKETS, registry=r)
        self.commit_batches = Histogram("tauopt_store_commit_batches", "Batches per store transaction", buckets=_BATCH_BUCKETS, registry=r)
        self._engine: Any = None
        r.register(_EngineCollector(self))

    def bind(self, engine: Any) -> None:
        self._engine = engine
        if hasattr(engine.store, "on_commit"):
            engine.store.on_commit = self._on_commit

    def _on_commit(self, batches: int, seconds: float) -> None:
        self.commit_seconds.observe(seconds)
        self.commit_batches.observe(batches)

    def record(self, kind: str, door: str, outcome: str, seconds: float) -> None:
        if kind == "ask":
            self.asks.labels(door, outcome).inc()
            self.ask_seconds.labels(door).observe(seconds)
        else:
            self.observations.labels(door, outcome).inc()

    async def render(self, request: Request, token: str | None) -> Response:
        if token is not None:
            given = request.headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                raise api_error("unauthorized", "GET /metrics needs `Authorization: Bearer <the --metrics-token value>`")
        if self._engine is not None:
            self._snapshot = await _engine_snapshot(self._engine, self.top_experiments)
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


async def _engine_snapshot(engine: Any, top: int) -> dict[str, Any]:
    found = await engine.experiments()
    states: dict[str, int] = {"active": 0, "completed": 0, "archived": 0}
    for e in found:
        states[e.state] = states.get(e.state, 0) + 1
    live = [e for e in found if e.state != "archived"]
    live.sort(key=lambda e: (-e.open_suggestions, -e.observations, e.id))
    pool = engine.pool
    return {
        "states": states,
        "top": [(e.id, e.open_suggestions, e.observations) for e in live[:top]],
        "fits": 0 if pool is None else pool.stats.jobs,
        "fallbacks": {} if pool is None else dict(pool.stats.fallback_kinds),
        "queue": 0 if pool is None else getattr(pool, "queue_depth", 0),
        "cluster": _cluster_counts(pool),
    }


def _cluster_counts(pool: Any) -> dict[str, int]:
    """A cluster executor's connection counters (the Dask pool's `lost`, `reconnects`)."""
    stats = getattr(getattr(pool, "executor", None), "stats", None)
    return {k: getattr(stats, k) for k in ("lost", "reconnects") if isinstance(getattr(stats, k, None), int)}


class _EngineCollector:
    """Gauges read from the snapshot `Metrics.render` took just before generating."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Any]:
        snap: dict[str, Any] = getattr(self.metrics, "_snapshot", None) or {
            "states": {}, "top": [], "fits": 0, "fallbacks": {}, "queue": 0, "cluster": {},
        }  # fmt: skip
        states = GaugeMetricFamily("tauopt_experiments", "Experiments by state", labels=["state"])
        for state, n in sorted(snap["states"].items()):
            states.add_metric([state], n)
        yield states
        top = self.metrics.top_experiments
        open_ = GaugeMetricFamily("tauopt_experiment_open_suggestions", f"Open suggestions (top {top} experiments)", labels=["experiment"])
        obs = GaugeMetricFamily("tauopt_experiment_observations", f"Observations (top {top} experiments)", labels=["experiment"])
        for eid, n_open, n_obs in snap["top"]:
            open_.add_metric([eid], n_open)
            obs.add_metric([eid], n_obs)
        yield open_
        yield obs
        yield CounterMetricFamily("tauopt_gp_fits", "GP proposals computed on the pool", value=snap["fits"])
        fallbacks = CounterMetricFamily("tauopt_gp_fallbacks", "GP proposals answered by Sobol instead, by reason", labels=["reason"])
        for reason, n in sorted(snap["fallbacks"].items()):
            fallbacks.add_metric([reason], n)
        yield fallbacks
        cluster = snap.get("cluster", {})
        if "lost" in cluster:
            yield CounterMetricFamily("tauopt_dask_scheduler_lost", "Times the Dask scheduler was found gone", value=cluster["lost"])
            yield CounterMetricFamily("tauopt_dask_reconnects", "Reconnections to the Dask scheduler after a loss", value=cluster["reconnects"])
        yield GaugeMetricFamily("tauopt_pool_queue_depth", "pooled strategy jobs submitted and not yet answered (queued or running)", value=snap["queue"])


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
            outcome = "ok" if 0 < status < 400 else _error_type(b"".join(error_body), status)
            if status == 429:
                self.metrics.rejections.labels(outcome).inc()
            if kind != "other":
                self.metrics.record(kind, "http", outcome, time.perf_counter() - t0)


def _kind(scope: Scope) -> str | None:
    if scope["type"] != "http" or scope["method"] != "POST":
        return None
    parts = scope["path"].split("/")
    if len(parts) == 5 and parts[1] == "v1" and parts[2] == "experiments":
        return {"suggestions": "ask", "observations": "observe"}.get(parts[4])
    return None


def _error_type(body: bytes, status: int) -> str:
    try:
        found = json.loads(body)["error"]["type"]
    except (ValueError, KeyError, TypeError):
        return "internal" if status >= 500 or status == 0 else f"http_{status}"
    # error types come from the catalogue, but a label must stay bounded whatever the body says
    return found if isinstance(found, str) and len(found) <= 40 and found.isidentifier() else f"http_{status}"


def add_metrics(app: Any, token: str | None, top_experiments: int = TOP_EXPERIMENTS) -> Metrics:
    """GET /metrics on `app` and the counting middleware (outermost); returns the Metrics
    to `bind` to the engine once it runs."""
    metrics = Metrics(top_experiments)
    app.add_middleware(MetricsMiddleware, metrics=metrics)

    @app.get("/metrics", include_in_schema=False)
    async def scrape(request: Request) -> Response:
        return await metrics.render(request, token)

    return metrics
