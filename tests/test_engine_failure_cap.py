"""The cap on consecutive failures: `max_consecutive_failures` failed runs in a row
stop an experiment's asks with `too_many_failures`; the stop and the count survive
a restart; setting the cap again with update_experiment is what lifts it."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tauopt import ApiError, Engine

pytestmark = pytest.mark.anyio

X = [{"name": "x", "type": "double", "bounds": (0.0, 1.0)}]
M = {"name": "loss", "objective": "minimize"}


async def fail_one(engine: Engine, exp_id: str) -> None:
    s = await engine.suggest(exp_id)
    await engine.observe(exp_id, suggestion_id=s.id, failed=True)


async def refused(engine: Engine, exp_id: str) -> ApiError:
    with pytest.raises(ApiError) as got:
        await engine.suggest(exp_id)
    return got.value


async def test_the_cap_reached_refuses_asks_with_a_message_that_says_what_to_do() -> None:
    async with Engine() as engine:
        exp = await engine.create_experiment("f", X, M, strategy="random", max_consecutive_failures=3)
        assert (exp.max_consecutive_failures, exp.consecutive_failures, exp.stopped_reason) == (3, 0, None)
        await fail_one(engine, exp.id)
        s = await engine.suggest(exp.id)
        await engine.observe(exp.id, suggestion_id=s.id, value=0.5)  # a success ends the run of failures
        assert (await engine.experiment(exp.id)).consecutive_failures == 0
        await fail_one(engine, exp.id)
        await fail_one(engine, exp.id)
        assert (await engine.experiment(exp.id)).consecutive_failures == 2
        await fail_one(engine, exp.id)
        err = await refused(engine, exp.id)
        assert (err.error_type, err.status_code) == ("too_many_failures", 409)
        assert "3 consecutive failed runs" in err.message and "update_experiment" in err.message and "archive" in err.message
        assert err.details == {"consecutive_failures": 3, "max_consecutive_failures": 3}
        listed = [e for e in await engine.experiments() if e.id == exp.id][0]
        assert listed.state == "active" and listed.stopped_reason is not None
        assert "observation 5 failed" in listed.stopped_reason


async def test_without_a_cap_failures_are_not_counted() -> None:
    async with Engine() as engine:
        exp = await engine.create_experiment("f", X, M, strategy="random", parallel_bandwidth=2)
        for _ in range(5):
            await fail_one(engine, exp.id)
        got = await engine.experiment(exp.id)
        assert (got.max_consecutive_failures, got.consecutive_failures, got.stopped_reason) == (None, 0, None)
        await engine.suggest(exp.id)


async def test_a_stopped_experiment_still_takes_observations_and_a_success_does_not_lift_the_stop() -> None:
    async with Engine() as engine:
        exp = await engine.create_experiment("f", X, M, strategy="random", parallel_bandwidth=2, max_consecutive_failures=1)
        running = await engine.suggest(exp.id)
        await fail_one(engine, exp.id)
        assert (await refused(engine, exp.id)).error_type == "too_many_failures"
        await engine.observe(exp.id, suggestion_id=running.id, value=0.1)  # a worker finishing its run
        assert (await refused(engine, exp.id)).error_type == "too_many_failures"


async def test_setting_the_cap_again_lifts_the_stop_and_counts_from_zero() -> None:
    async with Engine() as engine:
        exp = await engine.create_experiment("f", X, M, strategy="random", max_consecutive_failures=2)
        await fail_one(engine, exp.id)
        await fail_one(engine, exp.id)
        assert (await refused(engine, exp.id)).error_type == "too_many_failures"
        again = await engine.update_experiment(exp.id, max_consecutive_failures=2)  # the same cap: "fixed it, try again"
        assert (again.consecutive_failures, again.stopped_reason) == (0, None)
        await fail_one(engine, exp.id)  # one failure after the fix: not yet the cap
        await fail_one(engine, exp.id)
        assert (await refused(engine, exp.id)).error_type == "too_many_failures"
        off = await engine.update_experiment(exp.id, max_consecutive_failures=None)
        assert (off.max_consecutive_failures, off.stopped_reason) == (None, None)
        await fail_one(engine, exp.id)
        await fail_one(engine, exp.id)
        await engine.suggest(exp.id)  # no cap: asks go on


async def test_other_updates_keep_the_count_and_the_stop() -> None:
    async with Engine() as engine:
        exp = await engine.create_experiment("f", X, M, strategy="random", max_consecutive_failures=2)
        await fail_one(engine, exp.id)
        kept = await engine.update_experiment(exp.id, name="renamed", parallel_bandwidth=3)
        assert kept.consecutive_failures == 1
        await fail_one(engine, exp.id)
        await engine.update_experiment(exp.id, observation_budget=100)
        assert (await refused(engine, exp.id)).error_type == "too_many_failures"


async def test_the_cap_is_validated_naming_the_field() -> None:
    async with Engine() as engine:
        for bad in (0, -1, 2.5, True, "3"):
            with pytest.raises(ApiError) as got:
                await engine.create_experiment("f", X, M, max_consecutive_failures=bad)  # type: ignore[arg-type]
            assert got.value.error_type == "invalid_request" and "max_consecutive_failures" in got.value.message
        exp = await engine.create_experiment("f", X, M)
        with pytest.raises(ApiError) as got:
            await engine.update_experiment(exp.id, max_consecutive_failures=0)
        assert got.value.status_code == 400 and "max_consecutive_failures: give an integer >= 1" in got.value.message


async def test_a_suggestion_out_of_lease_attempts_counts_as_a_failed_run() -> None:
    async with Engine() as engine:
        exp = await engine.create_experiment("f", X, M, strategy="random", max_consecutive_failures=2)
        await fail_one(engine, exp.id)
        s = await engine.suggest(exp.id)
        await engine.release_suggestion(exp.id, s.id, max_attempts=1)  # its one attempt is used up: closed
        assert (await engine.suggestion(exp.id, s.id)).state == "closed"
        err = await refused(engine, exp.id)
        assert err.error_type == "too_many_failures" and f"suggestion {s.id} used up its 1 attempt(s)" in err.message


async def test_a_released_suggestion_is_not_handed_out_while_stopped() -> None:
    async with Engine() as engine:
        exp = await engine.create_experiment("f", X, M, strategy="random", parallel_bandwidth=2, max_consecutive_failures=1)
        held = await engine.suggest(exp.id)
        await engine.release_suggestion(exp.id, held.id)  # queued for the next ask
        await engine.observe(exp.id, assignments={"x": 0.9}, failed=True)  # an unsolicited failure counts too
        assert (await refused(engine, exp.id)).error_type == "too_many_failures"
        assert (await engine.suggestion(exp.id, held.id)).released


async def test_an_ask_waiting_for_a_slot_hears_the_stop_at_once() -> None:
    async with Engine() as engine:
        exp = await engine.create_experiment("f", X, M, strategy="random", parallel_bandwidth=1, max_consecutive_failures=1)
        s = await engine.suggest(exp.id)
        got: list[ApiError] = []

        async def waiting() -> None:
            with pytest.raises(ApiError) as err:
                await engine.suggest(exp.id, wait_s=60)
            got.append(err.value)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(waiting)
                await anyio.wait_all_tasks_blocked()
                await engine.observe(exp.id, suggestion_id=s.id, failed=True)
        assert [e.error_type for e in got] == ["too_many_failures"]


async def test_the_count_and_the_stop_survive_a_restart(tmp_path: Path) -> None:
    db = str(tmp_path / "cap.db")
    async with Engine(store=db, pool=None) as engine:
        exp = await engine.create_experiment("f", X, M, strategy="random", max_consecutive_failures=3)
        other = await engine.create_experiment("g", X, M, strategy="random", max_consecutive_failures=1)
        await fail_one(engine, exp.id)
        await fail_one(engine, exp.id)
        await fail_one(engine, other.id)
    async with Engine(store=db, pool=None) as engine:
        assert (await engine.experiment(exp.id)).consecutive_failures == 2
        stopped = await engine.experiment(other.id)
        assert stopped.stopped_reason is not None and (await refused(engine, other.id)).error_type == "too_many_failures"
        await fail_one(engine, exp.id)  # the third in a row, across the restart
        assert (await refused(engine, exp.id)).error_type == "too_many_failures"
        await engine.update_experiment(other.id, max_consecutive_failures=5)
    async with Engine(store=db, pool=None) as engine:
        lifted = await engine.experiment(other.id)
        assert (lifted.max_consecutive_failures, lifted.consecutive_failures, lifted.stopped_reason) == (5, 0, None)
        await engine.suggest(other.id)
        assert (await refused(engine, exp.id)).error_type == "too_many_failures"


async def test_a_database_written_before_the_cap_existed_reads_as_no_cap_and_takes_one(tmp_path: Path) -> None:
    # tests/data/schema2_single_objective.db was written by main at 9fd124c: no cap fields in its experiments
    import shutil

    db = tmp_path / "old.db"
    shutil.copy(Path(__file__).parent / "data" / "schema2_single_objective.db", db)
    db.chmod(0o600)
    async with Engine(store=str(db), pool=None) as engine:
        old = {e.name: e for e in await engine.experiments()}["old-min"]
        assert (old.max_consecutive_failures, old.consecutive_failures, old.stopped_reason) == (None, 0, None)
        await engine.update_experiment(old.id, max_consecutive_failures=1)
        await fail_one(engine, old.id)
    async with Engine(store=str(db), pool=None) as engine:
        assert (await engine.experiment(old.id)).stopped_reason is not None


class _HeldPool:
    """A pool whose every job waits on a gate: a pooled ask stays parked until then."""

    def __init__(self) -> None:
        self.gate, self.started = anyio.Event(), anyio.Event()

    async def propose(self, key, strategy, request, deadline_s=None):  # type: ignore[no-untyped-def]
        import numpy as np

        from tauopt.strategies import StrategyOutcome, propose

        self.started.set()
        await self.gate.wait()
        return StrategyOutcome(tuple(propose("sobol", request, np.random.default_rng(0))), "gp", None, 0.0)

    async def __aenter__(self):  # type: ignore[no-untyped-def]
        return self

    async def __aexit__(self, *exc):  # type: ignore[no-untyped-def]
        return None


async def test_an_ask_parked_for_a_pooled_proposal_hears_the_stop_at_once() -> None:
    pool = _HeldPool()
    async with Engine(pool=pool) as engine:
        exp = await engine.create_experiment(
            "gp", X, M, strategy="gp", parallel_bandwidth=2, strategy_options={"initial_points": 1}, max_consecutive_failures=1
        )
        await engine.observe(exp.id, assignments={"x": 0.5}, value=1.0)
        got: list[ApiError] = []

        async def parked() -> None:
            with pytest.raises(ApiError) as err:
                await engine.suggest(exp.id)
            got.append(err.value)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(parked)
                await pool.started.wait()  # the ask waits on the held fit
                await engine.observe(exp.id, assignments={"x": 0.25}, failed=True)
        assert [e.error_type for e in got] == ["too_many_failures"]  # answered while the fit is still held
        pool.gate.set()
        with anyio.fail_after(10):
            while (await engine.inspect(exp.id))["proposals"] < 1:  # the held fit lands before the engine closes
                await anyio.sleep(0.01)
