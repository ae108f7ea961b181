"""The REST door: `create_app(engine)` returns a FastAPI (ASGI) app.

The app only translates: JSON ↔ engine call, ApiError ↔ the catalogue's
status and `{"error": {"type", "message", "details"}}`. Auth and the
per-credential limits sit at the door (`tauopt.engine._auth.Gate`).

Error rendering has one source: `render_error(ApiError)`, fed by the
catalogue. Pydantic validation errors, malformed JSON, unknown routes and
methods, and oversized bodies are all turned into catalogue errors first, so a
client never sees a 5xx for anything it can send.
"""

from __future__ import annotations

import json
import math
import time
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Annotated, Any, AsyncIterator, Callable, Literal, Mapping

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._json import loads_body
from ..._numbers import PASS_FLOAT
from ...errors import CATALOGUE, ApiError, api_error
from ...engine._auth import Credential, Gate, Limits
from ._dashboard import add_dashboard
from ._fastpath import FastPath
from ._metrics import TOP_EXPERIMENTS, add_metrics
from ._insight_routes import add_insight_routes
from ._openapi import (
    _AT_LEAST_1,
    _NAME,
    _POSITIVE,
    _TAG,
    METRIC_SCHEMA,
    METRICS_SCHEMA,
    PARAMETER_SCHEMA,
    STRATEGIES,
    STRATEGY_OPTIONS_SCHEMA,
    add_links,
)

__all__ = ["create_app", "render_error", "MAX_BODY_BYTES"]

MAX_BODY_BYTES = 1 << 20
_TYPE_BY_STATUS: dict[int, str] = {}
for _kind in CATALOGUE.values():
    _TYPE_BY_STATUS.setdefault(_kind.http_status, _kind.error_type)


# -- wire schemas (for validation and /openapi.json) ------------------------------

_STRICT = ConfigDict(extra="forbid", strict=True)


def _integral(value: Any) -> Any:
    # JSON has one number type: 940.0 is the integer 940 (as JSON Schema's "integer" says); 1.5 stays refused.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


JsonInt = Annotated[int, BeforeValidator(_integral)]


def _integral_values(options: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if options is None else {k: _integral(v) for k, v in options.items()}


def _says(**schema: Any) -> Any:
    """Extra JSON-schema keywords for /openapi.json: what the engine's validation enforces.

    Only the document changes: validation stays the engine's, with its messages.
    """
    return schema


class CreateExperimentBody(BaseModel):
    model_config = _STRICT
    name: str = Field(json_schema_extra=_says(minLength=1, maxLength=256, pattern=r"\S"))
    parameters: list[dict[str, Any]] = Field(
        description="Parameters: {name, type: double|int|categorical|boolean|fixed, bounds, scale, step, values, "
        "value, conditions, default}; bounds are [lo, hi] with lo < hi (log scales: lo > 0); names are unique",
        examples=[[{"name": "lr", "type": "double", "bounds": [1e-4, 1e-1], "scale": "log"}]],
        json_schema_extra=_says(minItems=1, items=PARAMETER_SCHEMA),
    )
    metric: dict[str, Any] | None = Field(
        default=None, description="one objective; or give metrics",
        examples=[{"name": "loss", "objective": "minimize"}], json_schema_extra=_says(**METRIC_SCHEMA),
    )
    metrics: list[dict[str, Any]] | None = Field(
        default=None,
        description="instead of metric: 1-4 objectives {name, objective} and constraint metrics {name, constraint: {'<=' or '>=': number}}",
        examples=[[{"name": "acc", "objective": "maximize"}, {"name": "mem_mb", "constraint": {"<=": 512}}]],
        json_schema_extra=_says(**METRICS_SCHEMA),
    )
    parallel_bandwidth: JsonInt = Field(default=1, json_schema_extra=_says(minimum=1))
    suggestion_ttl_s: float | None = Field(default=None, json_schema_extra=_says(anyOf=[_POSITIVE, {"type": "null"}]))
    observation_budget: JsonInt | None = Field(default=None, json_schema_extra=_says(anyOf=[_AT_LEAST_1, {"type": "null"}]))
    strategy: str = Field(default="auto", json_schema_extra=_says(enum=list(STRATEGIES)))
    strategy_options: dict[str, Any] | None = Field(
        default=None, json_schema_extra=_says(anyOf=[STRATEGY_OPTIONS_SCHEMA, {"type": "null"}])
    )
    early_stopping: dict[str, Any] | None = Field(
        default=None,
        description='{"rule": "none"} (default), {"rule": "median", "min_trials": 5, "grace_steps": 0} or '
        '{"rule": "asha", "max_step": N, "min_step": 1, "reduction_factor": 3}',
        examples=[{"rule": "asha", "max_step": 81}],
    )


class UpdateExperimentBody(BaseModel):
    """Keys left out are unchanged; null unsets suggestion_ttl_s or observation_budget."""

    model_config = _STRICT
    name: str | None = Field(default=None, json_schema_extra=_says(anyOf=[_NAME, {"type": "null"}]))
    parallel_bandwidth: JsonInt | None = Field(default=None, json_schema_extra=_says(anyOf=[_AT_LEAST_1, {"type": "null"}]))
    suggestion_ttl_s: float | None = Field(default=None, json_schema_extra=_says(anyOf=[_POSITIVE, {"type": "null"}]))
    observation_budget: JsonInt | None = Field(default=None, json_schema_extra=_says(anyOf=[_AT_LEAST_1, {"type": "null"}]))
    early_stopping: dict[str, Any] | None = Field(
        default=None,
        description='{"rule": "none"} (default), {"rule": "median", "min_trials": 5, "grace_steps": 0} or '
        '{"rule": "asha", "max_step": N, "min_step": 1, "reduction_factor": 3}',
        examples=[{"rule": "asha", "max_step": 81}],
    )


class SuggestBody(BaseModel):
    model_config = _STRICT
    tag: str | None = Field(
        default=None, description="1-128 printable characters, e.g. job-17-worker-3",
        json_schema_extra=_says(anyOf=[_TAG, {"type": "null"}]),
    )


class ObserveBody(BaseModel):
    # the engine's rules: exactly one of suggestion_id or assignments; a finite value unless failed
    model_config = ConfigDict(
        extra="forbid", strict=True,
        json_schema_extra=_says(
            oneOf=[{"required": ["suggestion_id"], "not": {"required": ["assignments"]}},
                   {"required": ["assignments"], "not": {"required": ["suggestion_id"]}}],
            anyOf=[{"required": ["value"], "properties": {"value": {"type": "number"}}},
                   {"required": ["values"], "properties": {"values": {"type": "object"}}},
                   {"required": ["failed"], "properties": {"failed": {"const": True}}}],
        ),
    )
    suggestion_id: str | None = None
    assignments: dict[str, Any] | None = Field(default=None, description="for an unsolicited observation")
    value: float | None = None
    failed: bool = False
    metrics: dict[str, float] | None = None
    values: dict[str, float] | None = Field(
        default=None, description="every objective and constraint metric of the experiment, by name"
    )
    stopped: bool = Field(default=False, description="true: the trial was stopped early (its last reported value)")


class ReportBody(BaseModel):
    model_config = _STRICT
    step: JsonInt = Field(description="increases per suggestion (epoch, iteration)", json_schema_extra=_says(minimum=0))
    value: float = Field(description="the objective's intermediate value (finite)")


class ReportOut(BaseModel):
    should_stop: bool
    reason: str | None


class ReportItemOut(BaseModel):
    suggestion_id: str
    step: int
    value: float
    created_at: float


class MetricOut(BaseModel):
    name: str
    objective: Literal["minimize", "maximize"]


class MetricsItemOut(BaseModel):
    name: str
    objective: Literal["minimize", "maximize"] | None = None
    constraint: dict[str, float] | None = None


class ExperimentOut(BaseModel):
    id: str
    name: str
    parameters: list[dict[str, Any]]
    metric: MetricOut
    metrics: list[MetricsItemOut]
    parallel_bandwidth: int
    suggestion_ttl_s: float | None
    observation_budget: int | None
    strategy: str
    strategy_options: dict[str, Any]
    state: Literal["active", "completed", "archived"]
    created_at: float
    open_suggestions: int
    observations: int
    early_stopping: dict[str, Any]


class SuggestionOut(BaseModel):
    id: str
    experiment_id: str
    assignments: dict[str, Any]
    state: Literal["open", "observed", "closed", "expired"]
    tag: str | None
    created_at: float


class ObservationOut(BaseModel):
    id: str
    experiment_id: str
    suggestion_id: str | None
    assignments: dict[str, Any]
    value: float | None
    failed: bool
    created_at: float
    metrics: dict[str, float]
    stopped_at_step: int | None


class ClosedOut(BaseModel):
    closed: int


class HealthOut(BaseModel):
    status: str


class ErrorBody(BaseModel):
    type: str
    message: str
    details: dict[str, Any]


class ErrorOut(BaseModel):
    error: ErrorBody


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {s: {"model": ErrorOut, "description": ", ".join(k.error_type for k in CATALOGUE.values() if k.http_status == s)} for s in statuses}


_COMMON = (400, 401, 404, 413)


# -- errors ------------------------------------------------------------------------


def render_error(e: ApiError) -> JSONResponse:
    """The one place an ApiError becomes an HTTP response."""
    kind = CATALOGUE.get(e.error_type)
    status = kind.http_status if kind is not None else e.status_code
    headers: dict[str, str] = {}
    if e.error_type == "bandwidth_full":
        headers["Retry-After"] = "1"
    elif e.retry_after is not None and e.error_type != "active_experiment_cap":
        headers["Retry-After"] = str(max(1, math.ceil(e.retry_after)))
    if e.error_type == "unauthorized":
        headers["WWW-Authenticate"] = 'Bearer realm="tauopt"'
    body = {"error": {"type": e.error_type, "message": e.message, "details": _jsonable(e.details)}}
    return JSONResponse(body, status_code=status, headers=headers)


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value, allow_nan=False)
        return value
    except (TypeError, ValueError):
        return json.loads(json.dumps(value, default=repr, allow_nan=True).replace("NaN", "null"))


def _pass_float(loc: str, err: Mapping[str, Any]) -> str:
    """The local door's advice for a value that is not a number: the same words everywhere."""
    measured = loc.split(".", 1)[0] in ("value", "metrics", "assignments")
    return f"; {PASS_FLOAT}" if measured and str(err.get("type", "")).startswith(("float_", "int_")) else ""


def _validation_error(exc: RequestValidationError) -> ApiError:
    problems = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()) if p not in ("body",)) or "body"
        problems.append({"field": loc, "problem": str(err.get("msg", "invalid")) + _pass_float(loc, err)})
    bad_json = [err for err in exc.errors() if err.get("type") == "json_invalid"]
    if bad_json:
        why = (bad_json[0].get("ctx") or {}).get("error", "JSON decode error")
        message = f"the body is not valid JSON ({why}); send a JSON object (NaN and Infinity are not JSON)"
        problems = [{"field": "body", "problem": str(why)}]
    else:
        message = "; ".join(f"{p['field']}: {p['problem']}" for p in problems[:5]) or "invalid request"
    return api_error("invalid_request", message, errors=problems)


def _http_error(exc: StarletteHTTPException) -> ApiError:
    if exc.status_code == 404:
        return api_error("not_found", "no such route; the API lives under /v1 (see /docs)")
    if exc.status_code == 405:
        return api_error("method_not_allowed", "this path does not accept this method (see /docs)")
    if exc.status_code == 413:
        return api_error("payload_too_large", f"request body over {MAX_BODY_BYTES} bytes; send less")
    error_type = _TYPE_BY_STATUS.get(exc.status_code, "invalid_request" if exc.status_code < 500 else "internal")
    return ApiError(exc.status_code, error_type, str(exc.detail))


class _BodyTooLarge(StarletteHTTPException):
    """Raised from `receive`: an HTTPException, so the framework's body reader re-raises it."""

    def __init__(self) -> None:
        super().__init__(413)


class BodyLimit:
    """Refuse request bodies over `limit` bytes with 413, declared or streamed."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > self.limit:
                    await self._too_large()(scope, receive, send)
                    return
        seen = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _BodyTooLarge()
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except _BodyTooLarge:
            if started:
                raise
            await self._too_large()(scope, receive, send)

    def _too_large(self) -> JSONResponse:
        # built only when needed: a response per request would cost every request a JSON encode
        return render_error(api_error("payload_too_large", f"request body over {self.limit} bytes; send less"))


class _StrictJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            try:
                self._json = loads_body(await self.body())
            except ApiError as exc:  # an HTTPException: the framework's body parsing re-raises it as is
                raise StarletteHTTPException(400, exc.message) from None
        return self._json


class _StrictJSONRoute(APIRoute):
    """Parse bodies as strict JSON: NaN and Infinity are refused, as JSON says."""

    def get_route_handler(self) -> Callable[[Request], Any]:
        handler = super().get_route_handler()

        async def strict_handler(request: Request) -> Any:
            return await handler(_StrictJSONRequest(request.scope, request.receive))

        return strict_handler


# -- the app -----------------------------------------------------------------------

_bearer = HTTPBearer(auto_error=False, description="a token from `tauopt token create`")


def create_app(
    engine: Any = None,
    *,
    db: Any = "./tauopt.db",
    engine_options: dict[str, Any] | None = None,
    limits: Limits = Limits(),
    auth: bool = True,
    clock: Callable[[], float] = time.time,
    max_body_bytes: int = MAX_BODY_BYTES,
    fast_path: bool = True,
    metrics_token: str | None = None,
    metrics_top_experiments: int = TOP_EXPERIMENTS,
) -> FastAPI:
    """The REST API as an ASGI app.

    engine: an entered `tauopt.Engine` (the caller owns its lifetime), or None:
        the app opens `Engine(store=db, **engine_options)` in its lifespan.
    limits: per-credential quota and rate-limit defaults.
    auth: False serves without tokens (owner None, no quotas): for embedding
        behind your own authentication only.
    clock: the quotas' clock (wall time; injectable for tests).
    fast_path: answer well-formed asks and observes without the framework
        (`_fastpath.py`); False routes them through FastAPI like the rest.
    metrics_token: if set, GET /metrics needs `Authorization: Bearer <it>`.
    metrics_top_experiments: per-experiment gauges cover this many experiments (busiest first).
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        async with AsyncExitStack() as stack:
            eng = engine
            if eng is None:
                from ...engine._engine import Engine

                eng = await stack.enter_async_context(Engine(store=db, **(engine_options or {})))
            app.state.gate = Gate(eng.store, limits, clock=clock)
            metrics.bind(eng)
            yield {"engine": eng, "gate": app.state.gate}

    app = FastAPI(
        title="tauopt",
        summary="Coordination engine for hyperparameter search",
        version=_version(),
        lifespan=lifespan,
        redoc_url=None,
    )
    app.router.route_class = _StrictJSONRoute
    # innermost first: the fast path for asks and observes sits inside the body limit
    if fast_path:
        app.add_middleware(FastPath, auth=auth, render=render_error)
    app.add_middleware(BodyLimit, limit=max_body_bytes)
    metrics = add_metrics(app, metrics_token, metrics_top_experiments)  # outermost: sees every answer

    @app.exception_handler(ApiError)
    async def _on_api_error(request: Request, exc: ApiError) -> JSONResponse:
        return render_error(exc)

    @app.exception_handler(RequestValidationError)
    async def _on_validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return render_error(_validation_error(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _on_http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return render_error(_http_error(exc))

    @app.exception_handler(Exception)
    async def _on_bug(request: Request, exc: Exception) -> JSONResponse:
        return render_error(api_error("internal", f"internal error ({type(exc).__name__}); it was logged, retry later"))

    async def owner(request: Request, _: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> Credential | None:
        if not auth:
            return None
        gate: Gate = request.state.gate
        return await gate.authenticate(request.headers.get("authorization"))

    def oid(cred: Credential | None) -> str | None:
        return None if cred is None else cred.id

    def ok(value: Any, status: int = 200) -> JSONResponse:
        return JSONResponse(value, status_code=status)

    @app.get("/v1/health", response_model=HealthOut, tags=["meta"])
    async def health() -> JSONResponse:
        return ok({"status": "ok"})

    @app.post(
        "/v1/experiments", status_code=201, response_model=ExperimentOut, tags=["experiments"],
        responses=_errors(*_COMMON, 429),
    )
    async def create_experiment(
        body: CreateExperimentBody, request: Request, cred: Credential | None = Depends(owner)
    ) -> JSONResponse:
        engine_ = request.state.engine

        async def create() -> Any:
            return await engine_.create_experiment(
                body.name, body.parameters, body.metric, metrics=body.metrics,
                parallel_bandwidth=body.parallel_bandwidth, suggestion_ttl_s=body.suggestion_ttl_s,
                observation_budget=body.observation_budget, strategy=body.strategy,
                strategy_options=_integral_values(body.strategy_options), owner=oid(cred),
                early_stopping=_integral_values(body.early_stopping),
            )

        if cred is None:
            exp = await create()
        else:
            async with request.state.gate.experiment_creation(cred):
                exp = await create()
        return ok(exp.to_dict(), 201)

    @app.get("/v1/experiments", response_model=list[ExperimentOut], tags=["experiments"], responses=_errors(*_COMMON))
    async def list_experiments(
        request: Request,
        state: Literal["active", "completed", "archived"] | None = None,
        cred: Credential | None = Depends(owner),
    ) -> JSONResponse:
        found = await request.state.engine.experiments(state, owner=oid(cred))
        return ok([e.to_dict() for e in found])

    @app.get("/v1/experiments/{id}", response_model=ExperimentOut, tags=["experiments"], responses=_errors(*_COMMON))
    async def get_experiment(id: str, request: Request, cred: Credential | None = Depends(owner)) -> JSONResponse:
        return ok((await request.state.engine.experiment(id, owner=oid(cred))).to_dict())

    @app.patch("/v1/experiments/{id}", response_model=ExperimentOut, tags=["experiments"], responses=_errors(*_COMMON, 409))
    async def update_experiment(
        id: str, body: UpdateExperimentBody, request: Request, cred: Credential | None = Depends(owner)
    ) -> JSONResponse:
        changes = {k: getattr(body, k) for k in body.model_fields_set}
        if "early_stopping" in changes:
            changes["early_stopping"] = _integral_values(changes["early_stopping"])
        exp = await request.state.engine.update_experiment(id, owner=oid(cred), **changes)
        return ok(exp.to_dict())

    @app.post(
        "/v1/experiments/{id}/archive", response_model=ExperimentOut, tags=["experiments"],
        responses=_errors(*_COMMON),
    )
    async def archive_experiment(id: str, request: Request, cred: Credential | None = Depends(owner)) -> JSONResponse:
        return ok((await request.state.engine.archive_experiment(id, owner=oid(cred))).to_dict())

    @app.post(
        "/v1/experiments/{id}/suggestions", status_code=201, response_model=SuggestionOut, tags=["suggestions"],
        responses=_errors(*_COMMON, 409, 429),
    )
    async def suggest(
        id: str, request: Request, body: SuggestBody | None = None, cred: Credential | None = Depends(owner)
    ) -> JSONResponse:
        tag = body.tag if body is not None else None
        engine_ = request.state.engine
        if cred is None:
            s = await engine_.suggest(id, tag=tag)
        else:
            async with request.state.gate.suggestion(cred):
                s = await engine_.suggest(id, tag=tag, owner=cred.id)
        return ok(s.to_dict(), 201)

    @app.get(
        "/v1/experiments/{id}/suggestions", response_model=list[SuggestionOut], tags=["suggestions"],
        responses=_errors(*_COMMON, 429),
    )
    async def list_suggestions(
        id: str,
        request: Request,
        state: Literal["open", "observed", "closed", "expired"] | None = None,
        tag: str | None = None,
        cred: Credential | None = Depends(owner),
    ) -> JSONResponse:
        if cred is not None:
            request.state.gate.heavy_read(cred)
        found = await request.state.engine.suggestions(id, state=state, tag=tag, owner=oid(cred))
        return ok([s.to_dict() for s in found])

    @app.get(
        "/v1/experiments/{id}/suggestions/{sid}", response_model=SuggestionOut, tags=["suggestions"],
        responses=_errors(*_COMMON),
    )
    async def get_suggestion(id: str, sid: str, request: Request, cred: Credential | None = Depends(owner)) -> JSONResponse:
        return ok((await request.state.engine.suggestion(id, sid, owner=oid(cred))).to_dict())

    @app.delete(
        "/v1/experiments/{id}/suggestions/{sid}", response_model=SuggestionOut, tags=["suggestions"],
        responses=_errors(*_COMMON, 409),
    )
    async def close_suggestion(id: str, sid: str, request: Request, cred: Credential | None = Depends(owner)) -> JSONResponse:
        return ok((await request.state.engine.close_suggestion(id, sid, owner=oid(cred))).to_dict())

    @app.delete(
        "/v1/experiments/{id}/suggestions", response_model=ClosedOut, tags=["suggestions"],
        responses=_errors(*_COMMON),
    )
    async def close_all_suggestions(id: str, request: Request, cred: Credential | None = Depends(owner)) -> JSONResponse:
        return ok({"closed": await request.state.engine.close_all_suggestions(id, owner=oid(cred))})

    @app.post(
        "/v1/experiments/{id}/observations", status_code=201, response_model=ObservationOut, tags=["observations"],
        responses=_errors(*_COMMON, 409),
    )
    async def observe(id: str, body: ObserveBody, request: Request, cred: Credential | None = Depends(owner)) -> JSONResponse:
        o = await request.state.engine.observe(
            id, suggestion_id=body.suggestion_id, assignments=body.assignments, value=body.value,
            failed=body.failed, metrics=body.metrics, values=body.values, owner=oid(cred), stopped=body.stopped,
        )
        return ok(o.to_dict(), 201)

    @app.post(
        "/v1/experiments/{id}/suggestions/{sid}/reports", response_model=ReportOut, tags=["observations"],
        responses=_errors(*_COMMON, 409),
    )
    async def report(id: str, sid: str, body: ReportBody, request: Request, cred: Credential | None = Depends(owner)) -> JSONResponse:
        """An intermediate value of an open suggestion; answers whether the experiment's
        early-stopping rule says to stop it. Not counted against the suggestion quota."""
        decision = await request.state.engine.report(id, sid, body.step, body.value, owner=oid(cred))
        return ok(decision.to_dict())

    @app.get(
        "/v1/experiments/{id}/suggestions/{sid}/reports", response_model=list[ReportItemOut], tags=["observations"],
        responses=_errors(*_COMMON, 429),
    )
    async def list_reports(id: str, sid: str, request: Request, cred: Credential | None = Depends(owner)) -> JSONResponse:
        if cred is not None:
            request.state.gate.heavy_read(cred)
        return ok([r.to_dict() for r in await request.state.engine.reports(id, sid, owner=oid(cred))])

    @app.get(
        "/v1/experiments/{id}/observations", response_model=list[ObservationOut], tags=["observations"],
        responses=_errors(*_COMMON, 429),
    )
    async def list_observations(
        id: str,
        request: Request,
        after: int | None = Query(None, ge=0, description="only observations with an id above this (the last you have)"),
        cred: Credential | None = Depends(owner),
    ) -> JSONResponse:
        if cred is not None:
            request.state.gate.heavy_read(cred)
        found = await request.state.engine.observations(id, owner=oid(cred), after=after)
        return ok([o.to_dict() for o in found])

    @app.get(
        "/v1/experiments/{id}/best", response_model=ObservationOut | None, tags=["observations"],
        responses=_errors(*_COMMON),
    )
    async def best(id: str, request: Request, cred: Credential | None = Depends(owner)) -> JSONResponse:
        o = await request.state.engine.best(id, owner=oid(cred))
        return ok(None if o is None else o.to_dict())

    @app.get(
        "/v1/experiments/{id}/pareto_front", response_model=list[ObservationOut], tags=["observations"],
        responses=_errors(*_COMMON),
    )
    async def pareto_front(id: str, request: Request, cred: Credential | None = Depends(owner)) -> JSONResponse:
        return ok([o.to_dict() for o in await request.state.engine.pareto_front(id, owner=oid(cred))])

    add_insight_routes(app, owner, _errors(*_COMMON, 429))
    add_dashboard(app)
    _drop_422(app)
    return app


def _drop_422(app: FastAPI) -> None:
    """Validation errors are rendered as 400 invalid_request; say so in /openapi.json, with the links."""
    original = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = original()
            for path in schema.get("paths", {}).values():
                for op in path.values():
                    responses = op.get("responses", {})
                    if responses.pop("422", None) is not None and "400" not in responses:
                        responses["400"] = {
                            "description": "invalid_request",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}},
                        }
            add_links(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("tauopt")
    except Exception:
        return "0"
