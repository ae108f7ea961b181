"""The read-only /v1 routes the dashboard draws from (any client may use them):

    GET /v1/experiments/{id}/summary      counts, best value, last activity, best-so-far line
    GET /v1/experiments/{id}/workers      per-tag counts, open suggestions and their age,
                                          suggestions changed since ?after=<cursor>
    GET /v1/experiments/{id}/importance   parameter importance, with the method named

Incremental observation reads are `GET /v1/experiments/{id}/observations?after=<id>`
(in `_server.py`). Summary and workers are answered from counters the experiment's
actor keeps, so polling them costs what changed, not the history's size.
"""

from __future__ import annotations

from typing import Any, Callable

from fastapi import Depends, FastAPI, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

__all__ = ["add_insight_routes"]


class SummaryOut(BaseModel):
    experiment: dict[str, Any]
    observations: int
    failed: int
    best_value: float | None
    last_activity: float | None
    best_so_far: list[list[float]] = Field(description="[observation number, best value so far] pairs, at most 41")


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


class ImportanceRowOut(BaseModel):
    name: str
    importance: float


class ImportanceOut(BaseModel):
    method: str
    observations: int
    parameters: list[ImportanceRowOut]


def add_insight_routes(app: FastAPI, owner: Callable[..., Any], errors: dict[int | str, dict[str, Any]]) -> None:
    """`owner`: create_app's credential dependency; `errors`: its OpenAPI error responses."""

    def oid(cred: Any) -> str | None:
        return None if cred is None else cred.id

    @app.get("/v1/experiments/{id}/summary", response_model=SummaryOut, tags=["insight"], responses=errors)
    async def summary(id: str, request: Request, cred: Any = Depends(owner)) -> JSONResponse:
        out = await request.state.engine.summary(id, owner=oid(cred))
        return JSONResponse(dict(out, experiment=out["experiment"].to_dict()))

    @app.get("/v1/experiments/{id}/workers", response_model=WorkersOut, tags=["insight"], responses=errors)
    async def workers(
        id: str,
        request: Request,
        after: int = Query(0, ge=0, description="the `cursor` of a previous answer; 0 lists every suggestion"),
        cred: Any = Depends(owner),
    ) -> JSONResponse:
        return JSONResponse(await request.state.engine.workers(id, after=after, owner=oid(cred)))

    @app.get("/v1/experiments/{id}/importance", response_model=ImportanceOut, tags=["insight"], responses=errors)
    async def importance(id: str, request: Request, cred: Any = Depends(owner)) -> JSONResponse:
        if cred is not None:
            request.state.gate.heavy_read(cred)  # reads the whole history
        return JSONResponse(await request.state.engine.importance(id, owner=oid(cred)))
