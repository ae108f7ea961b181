"""Leases in the engine: a suggestion whose holder is declared dead is handed to
the next ask (same id, attempts + 1), closed once its attempts are used up, and
all of it survives a restart of the engine on a SQLite store."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tauopt import ApiError, Engine

pytestmark = pytest.mark.anyio

X = [{"name": "x", "type": "double", "bounds": (0.0, 1.0)}]
M = {"name": "loss", "objective": "minimize"}


async def test_a_released_suggestion_goes_to_the_next_ask_with_its_count() -> None:
    async with Engine() as engine:
        exp = await engine.create_experiment("l", X, M, strategy="sobol", parallel_bandwidth=2)
        a = await engine.suggest(exp.id, tag="w1")
        b = await engine.suggest(exp.id, tag="w2")
        released = await engine.release_suggestion(exp.id, a.id)
        assert released.released and released.state == "open" and released.attempts == 1
        again = await engine.suggest(exp.id, tag="w3")  # the bandwidth is full, yet the released one is handed out
        assert (again.id, again.tag, again.attempts, again.assignments) == (a.id, "w3", 2, a.assignments)
        with pytest.raises(ApiError) as full:
            await engine.suggest(exp.id)
        assert full.value.error_type == "bandwidth_full"
        assert [s.id for s in await engine.suggestions(exp.id, state="open")] == [a.id, b.id]


async def test_a_suggestion_out_of_attempts_is_closed_and_frees_its_place() -> None:
    async with Engine() as engine:
        exp = await engine.create_experiment("l", X, M, strategy="sobol", parallel_bandwidth=1)
        a = await engine.suggest(exp.id)
        await engine.release_suggestion(exp.id, a.id, max_attempts=2)
        assert (await engine.suggest(exp.id)).attempts == 2
        closed = await engine.release_suggestion(exp.id, a.id, max_attempts=2)
        assert closed.state == "closed"
        fresh = await engine.suggest(exp.id)
        assert fresh.id != a.id and fresh.attempts == 1
        with pytest.raises(ApiError) as err:
            await engine.release_suggestion(exp.id, a.id)
        assert err.value.error_type == "suggestion_closed"


async def test_a_waiting_ask_takes_a_released_suggestion() -> None:
    async with Engine() as engine:
        exp = await engine.create_experiment("l", X, M, strategy="sobol", parallel_bandwidth=1)
        a = await engine.suggest(exp.id, tag="dead")
        got = {}

        async def ask() -> None:
            got["s"] = await engine.suggest(exp.id, tag="alive", wait_s=60)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask)
                while (await engine.inspect(exp.id))["slot_waiters"] == 0:
                    await anyio.sleep(0.01)
                await engine.release_suggestion(exp.id, a.id)
        assert (got["s"].id, got["s"].tag, got["s"].attempts) == (a.id, "alive", 2)


async def test_released_suggestions_and_attempts_survive_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "leases.db"
    async with Engine(store=db) as engine:
        exp = await engine.create_experiment("l", X, M, strategy="sobol", parallel_bandwidth=2, suggestion_ttl_s=3600)
        a = await engine.suggest(exp.id, tag="w1")
        await engine.release_suggestion(exp.id, a.id)
        assert (await engine.suggest(exp.id, tag="w2")).attempts == 2
        await engine.release_suggestion(exp.id, a.id)  # released again, then the engine stops
    async with Engine(store=db) as engine:
        listed = await engine.suggestions(exp.id, state="open")
        assert [(s.id, s.released, s.attempts) for s in listed] == [(a.id, True, 2)]
        again = await engine.suggest(exp.id, tag="w3")
        assert (again.id, again.attempts, again.tag) == (a.id, 3, "w3")
        closed = await engine.release_suggestion(exp.id, a.id, max_attempts=3)
        assert closed.state == "closed"
    async with Engine(store=db) as engine:
        assert (await engine.suggestion(exp.id, a.id)).attempts == 3


async def test_a_bad_max_attempts_is_refused() -> None:
    async with Engine() as engine:
        exp = await engine.create_experiment("l", X, M, strategy="sobol")
        a = await engine.suggest(exp.id)
        with pytest.raises(ApiError) as err:
            await engine.release_suggestion(exp.id, a.id, max_attempts=0)
    assert err.value.error_type == "invalid_request" and "max_attempts" in err.value.message
