"""The read-only /v1 routes the dashboard draws from (any client may use them):

    GET /v1/experiments/{id}/summary      counts, best value, last activity, best-so-far line
    GET /v1/experiments/{id}/workers      per-tag counts, open suggestions and their age,
                                          suggestions changed since ?after=<cursor>
    GET /v1/experiments/{id}/importance   parameter importance, with the method named
    GET /v1/experiments/{id}/observations/columns   the observations (?after=<id>) as one
                                          array per field: the dashboard's compact read
    GET /v1/experiments/{id}/observations/sample    at most ?limit= of them to plot (the
                                          best, the latest, a stratified rest) and
                                          the exact best-so-far trace
    GET /v1/experiments/{id}/reports      every intermediate report since ?after=<cursor>
                                          (the learning curves)

Incremental observation reads are `GET /v1/experiments/{id}/observations?after=<id>`
(in `_routes.py`). Summary and workers are answered from counters the experiment's
actor keeps, so polling them costs what changed, not the history's size.

Declared like every operation (`_routes.operation`: one function each, its route
and its /openapi.json entry from the one declaration, the same auth and error
path), in this module's own list `INSIGHT`, which the app serves beside the rest.
"""

from __future__ import annotations

from typing import Any, Sequence

from pydantic import BaseModel, Field
from starlette.responses import Response

from ...models import Observation
from .._columns import observation_columns as to_columns
from ._pages import page_limit
from ._render import json_bytes, render_built
from ._routes import Call, Operation, operation
from ...schema import COMMON_ERRORS, NonNegative, Positive

__all__ = ["INSIGHT"]


class SummaryOut(BaseModel):
    experiment: dict[str, Any]
    observations: int
    failed: int
    best_value: float | None
    last_activity: float | None
    best_so_far: list[list[float]] = Field(description="[observation number, best value so far] pairs, at most 41")
    suggestions_by_state: dict[str, int] = Field(description="how many suggestions are open, observed, closed, expired")
    served_by: str = Field(description="the id of the daemon that owns the experiment and answered")


class TagCountsOut(BaseModel):
    tag: str | None
    open: int
    observed: int
    closed: int
    expired: int
    failed: int


class TimelineRowOut(BaseModel):
    id: str
    tag: str | None
    state: str
    created_at: float
    ended_at: float | None


class WorkersOut(BaseModel):
    now: float
    suggestion_ttl_s: float | None
    cursor: int
    tags: list[TagCountsOut]
    open: list[dict[str, Any]]
    changes: list[TimelineRowOut]


class ReportLogItemOut(BaseModel):
    suggestion_id: str
    step: int
    value: float
    created_at: float


class ReportLogOut(BaseModel):
    cursor: int = Field(description="pass as ?after= next time to read only newer reports (or the next page)")
    reports: list[ReportLogItemOut]
    more: bool = Field(description="true when `limit` cut this page short: ask again with ?after=cursor")


class ObservationColumnsOut(BaseModel):
    count: int
    id: list[str]
    suggestion_id: list[str | None]
    value: list[float | None]
    failed: list[bool]
    created_at: list[float]
    stopped_at_step: list[int | None]
    assignments: dict[str, list[Any]] = Field(description="one array per parameter; null where inactive")
    metrics: dict[str, list[float | None]] = Field(description="one array per metric; null where not carried")


class BestTraceOut(BaseModel):
    position: list[int]
    id: list[str]
    value: list[float]
    created_at: list[float]


class ObservationSampleOut(ObservationColumnsOut):
    total: int = Field(description="observations in the history; `count` of them are here")
    position: list[int] = Field(description="1-based place of each row in the history")
    best_trace: BestTraceOut = Field(description="every improvement of the best value: the exact best-so-far line")


class ImportanceRowOut(BaseModel):
    name: str
    importance: float


class ImportanceOut(BaseModel):
    method: str
    observations: int
    parameters: list[ImportanceRowOut]


INSIGHT: list[Operation] = []
_EXP = "/v1/experiments/{id}"
_ERRORS = COMMON_ERRORS + (429,)


@operation("GET", _EXP + "/summary", into=INSIGHT, response=SummaryOut, errors=_ERRORS, tag="insight")
async def summary(call: Call) -> Any:
    out = await call.engine.summary(call.path["id"])
    # answered by the owner (another daemon's experiment is forwarded there), so its id is the owner's
    return dict(out, experiment=out["experiment"].to_dict(), served_by=call.engine.daemon_id)


@operation("GET", _EXP + "/workers", into=INSIGHT, query={"after": NonNegative, "limit": Positive}, response=WorkersOut,
           errors=_ERRORS, tag="insight")  # fmt: skip
async def workers(call: Call) -> Any:
    """`after`: the `cursor` of a previous answer; 0 or left out lists every suggestion.
    `limit`: at most this many changed suggestions, the latest."""
    after = call.query["after"]
    return await call.engine.workers(
        call.path["id"], after=0 if after is None else after, limit=call.query["limit"]
    )


@operation("GET", _EXP + "/observations/columns", into=INSIGHT, query={"after": NonNegative, "limit": Positive},
           response=ObservationColumnsOut, errors=_ERRORS, tag="insight")  # fmt: skip
async def observation_columns(call: Call) -> Any:
    """The observations as one array per field (a third of the JSON at scale); `after`: only
    observations with an id above this (the last you have). At most `limit` per answer
    (default and maximum 10,000), the oldest first; a cut answer has a
    `Link: <...?after=<its last id>&limit=<limit>>; rel="next"` header: read on from there."""
    if call.cred is not None:
        call.gate.heavy_read(call.cred)  # as the row listing: it may read the whole history
    eid, after, limit = call.path["id"], call.query["after"] or 0, page_limit(call.query["limit"])
    observations = await call.engine.observations(eid, after=after)
    if call.cred is not None:
        call.gate.heavy_read_rows(call.cred, min(len(observations), limit))
    if not after and len(observations) <= limit:
        # the whole history (a page opening): encoded once, then only what arrived since
        body = await call.request.state.columns.read_full(eid, observations)
        return Response(body, media_type="application/json")
    response, _ = await call.request.state.pages.answer(
        ("columns", eid, after), observations, call.request.url.path, limit, _encode_columns
    )
    return response


def _encode_columns(observations: Sequence[Observation]) -> bytes:
    return json_bytes(to_columns(observations))


@operation("GET", _EXP + "/observations/sample", into=INSIGHT, query={"limit": Positive},
           response=ObservationSampleOut, errors=_ERRORS, tag="insight")  # fmt: skip
async def observation_sample(call: Call) -> Any:
    """At most `limit` observations (default 2,000, at most 10,000) as columns, for a plot
    of any history: the best, the latest and a stratified sample of the rest, each with
    its `position` in the history; `total` says how many there are and `best_trace`
    is the exact best-so-far line. Read on with `observations/columns?after=<last id>`."""
    if call.cred is not None:
        call.gate.heavy_read(call.cred)  # reads the whole history, answers a bounded part
    limit = min(call.query["limit"] or _SAMPLE_DEFAULT, _SAMPLE_MAX)
    sample = await call.engine.plot_sample(call.path["id"], limit)
    if call.cred is not None:
        call.gate.heavy_read_rows(call.cred, len(sample.kept))
    trace = sample.best_trace
    best = {"position": [t[0] for t in trace], "id": [t[1] for t in trace], "value": [t[2] for t in trace],
            "created_at": [t[3] for t in trace]}
    body = dict(to_columns(sample.kept), total=sample.total, position=list(sample.positions), best_trace=best)
    return Response(json_bytes(body), media_type="application/json")


_SAMPLE_DEFAULT, _SAMPLE_MAX = 2000, 10_000


@operation("GET", _EXP + "/importance", into=INSIGHT, response=ImportanceOut, errors=_ERRORS, tag="insight")
async def importance(call: Call) -> Any:
    if call.cred is not None:
        call.gate.heavy_read(call.cred)  # reads the whole history
    return await call.engine.importance(call.path["id"])


@operation("GET", _EXP + "/reports", into=INSIGHT, query={"after": NonNegative, "limit": Positive}, response=ReportLogOut,
           errors=_ERRORS, tag="insight")  # fmt: skip
async def report_log(call: Call) -> Any:
    """`after`: the `cursor` of a previous answer; 0 or left out reads from the first report.
    `limit`: at most this many reports (the oldest first; default and maximum 10,000);
    `more` says whether to ask again from `cursor`."""
    after = call.query["after"]
    limit = page_limit(call.query["limit"])
    out = await call.engine.report_log(call.path["id"], after=0 if after is None else after, limit=limit)
    if call.cred is not None:
        call.gate.heavy_read_rows(call.cred, len(out["reports"]))
    reports = out["reports"]
    return await render_built(
        lambda: {"cursor": out["cursor"], "reports": [r.to_dict() for r in reports], "more": out["more"]}, len(reports)
    )
