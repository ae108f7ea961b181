"""Every REST operation, written once: one plain function per operation.

Each function receives a `Call` (the engine as the caller, the door's gate,
the caller's credential, the validated body, path and query values) and
returns what to send (a JSON value; the status is declared). The `operation` decorator
declares the HTTP side once (method, path, body and answer schemas, error
statuses), and from that one declaration come both the served Starlette
route (`routes(...)`) and the route's entry in /openapi.json (`_openapi.py`).

What the decorator does per request: authenticate (401 before anything else
the caller sent is read or judged: an unauthenticated caller cannot make the
door wait for a body) -> read the body and parse it as strict JSON (NaN and
Infinity refused; a long body in a worker thread) -> validate query and
body with the schema's pydantic model (create: the engine validates the body
through `ExperimentSpec` itself) -> call the function -> render; for an authenticated caller every answer
is the one the FastAPI routes gave. Why not FastAPI's own routing: its
dependency solving and route matching cost ~3x the engine's own time per
ask+observe (877 vs 272 us per pair; README, Performance), and a worker loop
is nothing but those two calls.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, Sequence

import anyio
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Scope

from ...errors import ApiError, api_error
from ...limits import EXPERIMENTS_PAGE, MAX_EXPERIMENTS_PAGE, check_wait
from ...models import Observation
from ...schema import (
    COMMON_ERRORS,
    ClosedOut,
    ExperimentDocument,
    ExperimentOut,
    ExperimentSpec,
    ExperimentStateQ,
    HealthOut,
    NonNegative,
    ObservationOut,
    ObserveBody,
    Positive,
    ReportBody,
    ReportItemOut,
    ReportOut,
    SuggestBody,
    SuggestionOut,
    SuggestionStateQ,
    IdQ,
    TextQ,
    UpdateExperimentBody,
)
from .._json import loads_body
from ._pages import cut, page_limit
from ._render import bad_json, invalid_fields, json_bytes, render_error, render_json, render_rows

__all__ = ["Call", "Operation", "OPERATIONS", "operation", "routes", "hot_call", "HOT_OPERATIONS"]

_NOT_AN_OBJECT = [{"loc": ("body",), "msg": "Input should be a valid dictionary or object to extract fields from"}]


@dataclass(frozen=True)
class Call:
    """One request, as an operation function sees it."""

    request: Request
    engine: Any  # an entered tauopt.Engine acting for the caller's credential (Engine.as_owner)
    gate: Any  # the door's credentials and limits (engine._auth.Gate), None without auth
    cred: Any  # the caller's credential, None without auth
    path: Mapping[str, str]
    query: Mapping[str, Any]
    body: Any


Handler = Callable[[Call], Awaitable[Any]]


@dataclass(frozen=True)
class Operation:
    """One REST operation: its HTTP declaration and its one function."""

    handler: Handler
    method: str
    path: str
    status: int = 200
    body: type[BaseModel] | None = None
    body_required: bool = True
    # the engine judges the body through the `body` model itself (create: a huge spec in a
    # worker thread, off the event loop): the handler gets the JSON object as it came
    judged_by_engine: bool = False
    query: Mapping[str, Any] = field(default_factory=dict)  # name -> type; each optional
    response: Any = None
    errors: tuple[int, ...] = COMMON_ERRORS
    tag: str = "experiments"
    auth: bool = True
    # OpenAPI links from this operation's answer (so a client or a fuzzer chains operations):
    # `links` names where each path parameter's value is in the answer, and the answer feeds
    # every operation whose path takes exactly those parameters; `body_links` feed one
    # operation's request body: label -> (operation name, {body field: value or expression})
    links: Mapping[str, str] = field(default_factory=dict)
    body_links: Mapping[str, tuple[str, Mapping[str, Any]]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.handler.__name__

    def route(self) -> Route:
        queries = {name: TypeAdapter(kind | None) for name, kind in self.query.items()}

        async def endpoint(request: Request) -> Response:
            try:
                answer = await self._answer(request, queries)
                return answer if isinstance(answer, Response) else render_json(answer, self.status)
            except ApiError as e:
                return render_error(e)

        endpoint.__name__ = self.name
        return Route(self.path, endpoint, methods=[self.method], name=self.name, include_in_schema=False)

    async def _answer(self, request: Request, queries: Mapping[str, TypeAdapter[Any]]) -> Any:
        state = request.scope["state"]  # the lifespan's (request.state wraps this dict in a new object per request)
        gate = state.get("gate") if state["auth"] else None
        # the token first: a caller without one is answered 401 before its body is read
        cred = await gate.authenticate(request.headers.get("authorization")) if gate and self.auth else None
        data = await _json_body(request) if self.body is not None else None
        query = _validate_query(request, queries)
        body: Any = None
        if self.body is not None:
            if data is _ABSENT:
                if self.body_required:
                    raise invalid_fields([{"loc": ("body",), "msg": "Field required"}])
            elif not isinstance(data, dict):
                raise invalid_fields(_NOT_AN_OBJECT)
            elif self.judged_by_engine:
                body = data
            else:
                try:
                    body = self.body.model_validate(data)
                except ValidationError as exc:
                    raise invalid_fields(exc.errors()) from None
        engine = state["engine"] if cred is None else state["engine"].as_owner(cred.id)
        call = Call(request, engine, gate, cred, request.path_params, query, body)
        return await self.handler(call)


_ABSENT: Any = object()
_PARSED_IN_A_THREAD = 64 * 1024  # bytes of a body parsed in a worker thread (~0.5 ms of json.loads)


async def _json_body(request: Request) -> Any:
    """The body as strict JSON, `_ABSENT` when empty, raw bytes when not sent as JSON."""
    raw = await request.body()
    if not raw:
        return _ABSENT
    content_type = request.headers.get("content-type")
    if content_type is not None:
        main = content_type.split(";", 1)[0].strip().lower()
        if not (main == "application/json" or (main.startswith("application/") and main.endswith("+json"))):
            return raw  # not JSON: the schema refuses it as not an object
    try:
        if len(raw) > _PARSED_IN_A_THREAD:  # under the body limit still, but long enough to stall the loop
            return await anyio.to_thread.run_sync(loads_body, raw)
        return loads_body(raw)  # strict JSON (no NaN/Infinity); nested too deep: its own invalid_request
    except json.JSONDecodeError as exc:
        raise bad_json(exc.msg) from None
    except ValueError as exc:  # undecodable bytes
        raise bad_json(str(exc)) from None


def _validate_query(request: Request, queries: Mapping[str, TypeAdapter[Any]]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    errors: list[dict[str, Any]] = []
    for name, adapter in queries.items():
        try:
            values[name] = adapter.validate_python(request.query_params.get(name))
        except ValidationError as exc:
            errors += [{"loc": ("query", name), "msg": e["msg"]} for e in exc.errors()]
    if errors:
        raise invalid_fields(errors)
    return values


OPERATIONS: list[Operation] = []


def operation(method: str, path: str, *, into: list[Operation] = OPERATIONS, **declared: Any) -> Callable[[Handler], Handler]:
    """Declare `handler` as the operation `method path`, in the registry `into`
    (a module of operations by topic keeps its own list; the app serves them all)."""

    def register(handler: Handler) -> Handler:
        into.append(Operation(handler, method, path, **declared))
        return handler

    return register


# -- the operations ----------------------------------------------------------------

EXP = "/v1/experiments/{id}"
SUGG = EXP + "/suggestions/{sid}"
_SUGGESTION_IDS = {"path.id": "$response.body#/experiment_id", "path.suggestion_id": "$response.body#/id"}
# an observe of the suggestion: its outcome generated, `assignments` null (an observation names a suggestion or a
# point, not both); and a failed run, what any experiment accepts of an open suggestion, whatever its metrics (a
# successful one must name every metric the experiment declares, which no link can supply)
_OBSERVE_IT = {
    "observe": ("observe", {"suggestion_id": "$response.body#/id", "assignments": None}),
    "observe_failed": ("observe", {"suggestion_id": "$response.body#/id", "assignments": None, "failed": True, "value": None}),
}


@operation("GET", "/v1/health", response=HealthOut, errors=(), tag="meta", auth=False)
async def health(call: Call) -> Any:
    """Unauthenticated, so counts only: no experiment's id or name."""
    now = await call.engine.status()
    sharing = now.sharing
    return {
        "status": "ok", "ready": now.ready, "daemon_id": now.daemon_id, "shared": sharing is not None,
        "owned_experiments": None if sharing is None else sharing.owned,
        "live_daemons": None if sharing is None else sharing.daemons,
    }  # fmt: skip


@operation("POST", "/v1/experiments", status=201, body=ExperimentSpec, judged_by_engine=True, response=ExperimentOut,
           errors=COMMON_ERRORS + (429,), links={"path.id": "$response.body#/id"})  # fmt: skip
async def create_experiment(call: Call) -> Any:
    async def create() -> Any:
        return await call.engine.create_experiment(spec=call.body)

    if call.cred is None:
        return (await create()).to_dict()
    async with call.gate.experiment_creation(call.cred):
        return (await create()).to_dict()


@operation("GET", "/v1/experiments", query={"state": ExperimentStateQ, "name": TextQ, "after": IdQ, "limit": Positive},
           response=list[ExperimentOut])  # type: ignore[valid-type]  # fmt: skip
async def list_experiments(call: Call) -> Any:
    """In the order they were created or imported; `state` and `name` (text found in the
    name, case-insensitively) filter. At most `limit` per answer (default 100, at most
    1,000) after the experiment whose id is `after`; a cut answer has a
    `Link: <...?after=<its last id>&limit=<limit>&...>; rel="next"` header: read on from there."""
    q = call.query
    limit = min(q["limit"] or EXPERIMENTS_PAGE, MAX_EXPERIMENTS_PAGE)
    found = await call.engine.experiments(q["state"], after=q["after"], limit=limit + 1, name=q["name"])
    page, link = cut(found, call.request.url.path, limit, {"state": q["state"], "name": q["name"]})
    return await render_rows(page, headers=link)


@operation("GET", EXP, response=ExperimentOut)
async def get_experiment(call: Call) -> Any:
    return (await call.engine.experiment(call.path["id"])).to_dict()


@operation("PATCH", EXP, body=UpdateExperimentBody, response=ExperimentOut, errors=COMMON_ERRORS + (409,))
async def update_experiment(call: Call) -> Any:
    changes = {k: getattr(call.body, k) for k in call.body.model_fields_set}
    return (await call.engine.update_experiment(call.path["id"], **changes)).to_dict()


@operation("POST", EXP + "/archive", response=ExperimentOut)
async def archive_experiment(call: Call) -> Any:
    return (await call.engine.archive_experiment(call.path["id"])).to_dict()


@operation("POST", EXP + "/unarchive", response=ExperimentOut)
async def unarchive_experiment(call: Call) -> Any:
    return (await call.engine.unarchive_experiment(call.path["id"])).to_dict()


@operation("DELETE", EXP, query={"force": bool}, response=ExperimentOut, errors=COMMON_ERRORS + (409,))
async def delete_experiment(call: Call) -> Any:
    """Removes the experiment and its history; 409 `suggestions_open` while suggestions
    are open, unless `?force=true`. Answers the experiment as it was."""
    return (await call.engine.delete_experiment(call.path["id"], bool(call.query["force"]))).to_dict()


@operation("GET", EXP + "/export", response=ExperimentDocument, errors=COMMON_ERRORS + (429,))
async def export_experiment(call: Call) -> Any:
    """The experiment and its whole history, for POST /v1/experiments/import (a heavy read)."""
    if call.cred is not None:
        call.gate.heavy_read(call.cred)
    return await call.engine.export_experiment(call.path["id"])


@operation("POST", "/v1/experiments/import", status=201, body=ExperimentDocument, response=ExperimentOut,
           errors=COMMON_ERRORS + (429,))  # fmt: skip
async def import_experiment(call: Call) -> Any:
    """A new experiment (new id, the caller's) with the exported history; counts as a create."""
    data = call.body.model_dump()
    if call.cred is None:
        return (await call.engine.import_experiment(data)).to_dict()
    async with call.gate.experiment_creation(call.cred):
        return (await call.engine.import_experiment(data)).to_dict()


@operation("POST", EXP + "/suggestions", status=201, body=SuggestBody, body_required=False, response=SuggestionOut,
           errors=COMMON_ERRORS + (409, 429), tag="suggestions", links=_SUGGESTION_IDS, body_links=_OBSERVE_IT)  # fmt: skip
async def suggest(call: Call) -> Any:
    """With `wait_s`, an ask that finds the bandwidth full waits for a slot (long-poll)
    up to that bound; a client that hangs up meanwhile takes no slot. A credential
    with `--max-waiting-asks` asks waiting already is answered at once instead."""
    tag = call.body.tag if call.body is not None else None
    wait_s = call.body.wait_s if call.body is not None else None
    if wait_s:
        # refused out of bounds first, then cut to the daemon's --max-wait-s (auth on or off)
        wait_s = min(check_wait(wait_s) or 0.0, call.request.state.gate.limits.max_wait_s)

    async def ask() -> Any:
        if wait_s and call.cred is not None:
            with call.gate.waiting_ask(call.cred) as may_wait:  # one credential's waiting asks are capped
                if may_wait:
                    return await _unless_hung_up(call.request, call.engine.suggest(call.path["id"], tag, wait_s))
        elif wait_s:
            return await _unless_hung_up(call.request, call.engine.suggest(call.path["id"], tag, wait_s))
        return (await call.engine.suggest(call.path["id"], tag=tag)).to_dict()

    if call.cred is None:
        return await ask()
    async with call.gate.suggestion(call.cred):
        return await ask()


async def _unless_hung_up(request: Request, waiting: Awaitable[Any]) -> Any:
    """The waiting ask's suggestion, unless the client disconnects first: then the ask is
    cancelled (the engine hands a cancelled ask nothing) and its answer goes nowhere."""
    got: list[Any] = []
    refused: list[ApiError] = []
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass  # the body was read already: the next message is the hang-up
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        try:
            got.append((await waiting).to_dict())
        except ApiError as exc:
            refused.append(exc)  # raised below, outside the group (which would wrap it)
        tg.cancel_scope.cancel()
    if refused:
        raise refused[0]
    if not got:
        raise api_error("bandwidth_full", "the client hung up while its ask waited for a slot; nothing was handed out")
    return got[0]


@operation("GET", EXP + "/suggestions", query={"state": SuggestionStateQ, "tag": str}, response=list[SuggestionOut],
           errors=COMMON_ERRORS + (429,), tag="suggestions")  # fmt: skip
async def list_suggestions(call: Call) -> Any:
    if call.cred is not None:
        call.gate.heavy_read(call.cred)
    found = await call.engine.suggestions(call.path["id"], state=call.query["state"], tag=call.query["tag"])
    return await _rows_read(call, found)


async def _rows_read(call: Call, rows: Any, headers: Mapping[str, str] | None = None) -> Response:
    """A listing that grows with history: charged to the caller's heavy reads by its
    size, encoded off the event loop when long."""
    if call.cred is not None:
        call.gate.heavy_read_rows(call.cred, len(rows))
    return await render_rows(rows, headers=headers)


@operation("GET", EXP + "/suggestions/{sid}", response=SuggestionOut, tag="suggestions")
async def get_suggestion(call: Call) -> Any:
    return (await call.engine.suggestion(call.path["id"], call.path["sid"])).to_dict()


@operation("DELETE", EXP + "/suggestions/{sid}", response=SuggestionOut, errors=COMMON_ERRORS + (409,), tag="suggestions")
async def close_suggestion(call: Call) -> Any:
    return (await call.engine.close_suggestion(call.path["id"], call.path["sid"])).to_dict()


@operation("DELETE", EXP + "/suggestions", response=ClosedOut, tag="suggestions")
async def close_all_suggestions(call: Call) -> Any:
    return {"closed": await call.engine.close_all_suggestions(call.path["id"])}


@operation("POST", EXP + "/observations", status=201, body=ObserveBody, response=ObservationOut,
           errors=COMMON_ERRORS + (409,), tag="observations")  # fmt: skip
async def observe(call: Call) -> Any:
    b: ObserveBody = call.body
    o = await call.engine.observe(
        call.path["id"], suggestion_id=b.suggestion_id, assignments=b.assignments, value=b.value, failed=b.failed,
        metrics=b.metrics, values=b.values, stopped=b.stopped,
    )  # fmt: skip
    return o.to_dict()


@operation("POST", SUGG + "/reports", body=ReportBody, response=ReportOut, errors=COMMON_ERRORS + (409,), tag="observations")
async def report(call: Call) -> Any:
    """An intermediate value of an open suggestion; answers whether the experiment's
    early-stopping rule says to stop it. Not counted against the suggestion quota."""
    b: ReportBody = call.body
    return (await call.engine.report(call.path["id"], call.path["sid"], b.step, b.value)).to_dict()


@operation("GET", SUGG + "/reports", response=list[ReportItemOut], errors=COMMON_ERRORS + (429,), tag="observations")
async def list_reports(call: Call) -> Any:
    if call.cred is not None:
        call.gate.heavy_read(call.cred)
    return await _rows_read(call, await call.engine.reports(call.path["id"], call.path["sid"]))


@operation("GET", EXP + "/observations", query={"after": NonNegative, "limit": Positive, "failed": bool},
           response=list[ObservationOut], errors=COMMON_ERRORS + (429,), tag="observations")  # fmt: skip
async def list_observations(call: Call) -> Any:
    """With `after`: only observations with an id above it (the last you have); `failed`
    true or false: only the failed ones, or only the others. At most `limit` per answer
    (default and maximum 10,000), the oldest first; a cut answer has a
    `Link: <...?after=<its last id>&limit=<limit>>; rel="next"` header: read on from there."""
    if call.cred is not None:
        call.gate.heavy_read(call.cred)
    q = call.query
    limit = page_limit(q["limit"])
    found = await call.engine.observations(call.path["id"], after=q["after"], limit=limit + 1, failed=q["failed"])
    page, link = cut(found, call.request.url.path, limit, {"failed": q["failed"]})
    return await _rows_read(call, page, link)


@operation("GET", EXP + "/best", response=ObservationOut | None, tag="observations")
async def best(call: Call) -> Any:
    o = await call.engine.best(call.path["id"])
    return None if o is None else o.to_dict()


@operation("GET", EXP + "/pareto_front", query={"after": NonNegative, "limit": Positive}, response=list[ObservationOut],
           errors=COMMON_ERRORS + (429,), tag="observations")  # fmt: skip
async def pareto_front(call: Call) -> Any:
    """Paged like the observations: `after` (the last id you have of the front), `limit`
    (default and maximum 10,000), a cut answer's `Link: <...>; rel="next"`. A page asked
    again while the front has not changed is answered from the bytes kept."""
    if call.cred is not None:
        call.gate.heavy_read(call.cred)  # it may read the whole history
    eid, after = call.path["id"], call.query["after"] or 0
    front = await call.engine.pareto_front(eid)
    # the front is in arrival order (ids ascending); what follows the cursor, and its
    # count and last row, name the page: a new point enters only at the end of the front
    rest = front[bisect.bisect_right(front, after, key=_numeric_id) :] if after else front
    response, rows = await call.request.state.pages.answer(
        ("pareto_front", eid, after), rest, call.request.url.path, page_limit(call.query["limit"]), _encode_rows
    )
    if call.cred is not None:
        call.gate.heavy_read_rows(call.cred, rows)
    return response


def _numeric_id(o: Observation) -> int:
    return int(o.id) if o.id.isdigit() else 0


def _encode_rows(rows: Sequence[Observation]) -> bytes:
    return json_bytes([r.to_dict() for r in rows])


# The worker loop's two calls, POST EXP/suggestions and POST EXP/observations, by
# their last path segment. Starlette tries routes in order: these two first, so
# they are matched at the first or second regex, not the 7th and 12th (the paths
# do not overlap, so the order changes nothing else; /openapi.json keeps
# OPERATIONS' order); `_hot.HotCalls` serves them without the router.
_HOT = {"suggestions": "suggest", "observations": "observe"}
HOT_OPERATIONS = frozenset(_HOT.values())


def routes(operations: list[Operation]) -> list[Route]:
    """The served routes of `operations`, the worker loop's two first."""
    return [op.route() for op in sorted(operations, key=lambda op: op.name not in _HOT.values())]


_HOT_SCOPE_KEY = "tauopt.hot_call"


def hot_call(scope: Scope) -> tuple[str, str] | None:
    """(operation name, experiment id) when `scope` is one of the worker loop's
    two calls: POST /v1/experiments/{id}/suggestions or .../observations (the id
    may be empty: no route, but the metrics still count it as an ask or observe).

    Parsed once per request: the answer is kept in the scope with the path it
    was read from (`HotCalls` asks first, then its endpoint; a scope
    whose path was rewritten in between is parsed again)."""
    if scope["type"] != "http":
        return None
    path = scope["path"]
    kept = scope.get(_HOT_SCOPE_KEY)
    if kept is not None and kept[0] is path:
        return kept[1]  # type: ignore[no-any-return]
    hot = None
    if scope["method"] == "POST":
        parts = path.split("/")
        if len(parts) == 5 and parts[1] == "v1" and parts[2] == "experiments" and parts[4] in _HOT:
            hot = _HOT[parts[4]], parts[3]
    scope[_HOT_SCOPE_KEY] = (path, hot)
    return hot
