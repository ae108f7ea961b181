"""An ask may wait for a free slot (`wait_s`) instead of answering bandwidth_full
at once: parked asks are answered in arrival order as slots return, a wait that
runs out answers bandwidth_full, and a caller that gave up takes no slot."""

from __future__ import annotations

import anyio
import pytest

from tauopt import ApiError, Engine

pytestmark = pytest.mark.anyio

X = [{"name": "x", "type": "double", "bounds": (0.0, 1.0)}]
M = {"name": "loss", "objective": "minimize"}


async def _parked(engine: Engine, exp_id: str, n: int) -> None:
    while (await engine.inspect(exp_id))["slot_waiters"] < n:
        await anyio.sleep(0.01)


async def test_waiting_asks_get_freed_slots_in_arrival_order() -> None:
    async with Engine() as engine:
        exp = await engine.create_experiment("lp", X, M, strategy="sobol", parallel_bandwidth=1)
        held = await engine.suggest(exp.id, tag="first")
        got: list[str] = []

        async def ask(tag: str) -> None:
            s = await engine.suggest(exp.id, tag=tag, wait_s=60)
            got.append(s.tag)
            await engine.observe(exp.id, suggestion_id=s.id, value=1.0)  # frees the slot for the next one

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask, "w1")
                await _parked(engine, exp.id, 1)
                tg.start_soon(ask, "w2")
                await _parked(engine, exp.id, 2)
                assert got == []  # both wait; neither was refused
                await engine.observe(exp.id, suggestion_id=held.id, value=0.5)
        assert got == ["w1", "w2"]
        assert (await engine.inspect(exp.id))["max_open_seen"] == 1  # the bandwidth was never exceeded


async def test_a_wait_that_runs_out_answers_bandwidth_full() -> None:
    async with Engine() as engine:
        exp = await engine.create_experiment("lp", X, M, strategy="random", parallel_bandwidth=1)
        await engine.suggest(exp.id)
        with pytest.raises(ApiError) as err:
            await engine.suggest(exp.id, wait_s=0.05)
        assert err.value.error_type == "bandwidth_full" and "waited" in err.value.message
        with pytest.raises(ApiError) as now:
            await engine.suggest(exp.id)  # without wait_s: refused at once, as before
        assert now.value.error_type == "bandwidth_full"
        assert (await engine.inspect(exp.id))["slot_waiters"] == 0


async def test_a_caller_that_gave_up_takes_no_slot() -> None:
    async with Engine() as engine:
        exp = await engine.create_experiment("lp", X, M, strategy="random", parallel_bandwidth=1)
        held = await engine.suggest(exp.id)
        with anyio.move_on_after(0.05):  # the caller's own timeout, shorter than its wait_s
            await engine.suggest(exp.id, wait_s=60)
        await engine.close_suggestion(exp.id, held.id)
        open_ = await engine.suggestions(exp.id, state="open")
        assert open_ == []  # nobody holds the freed slot
        assert (await engine.suggest(exp.id)).id == "2"


@pytest.mark.parametrize("bad", [-1, float("nan"), 301, "5", True])
async def test_a_bad_wait_is_refused(bad: object) -> None:
    async with Engine() as engine:
        exp = await engine.create_experiment("lp", X, M, strategy="random")
        with pytest.raises(ApiError) as err:
            await engine.suggest(exp.id, wait_s=bad)  # type: ignore[arg-type]
    assert err.value.error_type == "invalid_request" and "wait_s" in err.value.message
