"""The KerasTuner door keeps no retry state of its own: a trial queued for a retry
is a released suggestion in the engine, so a chief restart keeps it queued and
keeps its run count."""

from __future__ import annotations

import time
from pathlib import Path

from typing import Any

import anyio
import pytest

from tauopt.transport.grpc._generated import keras_tuner_pb2 as kt
from tauopt.transport.grpc._generated import service_pb2 as pb
from tauopt.schema import parse_parameter

from test_kerastuner_servicer import chief, end


def test_a_trial_queued_for_retry_survives_a_chief_restart_with_its_run_count(tmp_path: Path) -> None:
    db = tmp_path / "chief.db"

    async def main() -> None:
        async with chief(db, max_trials=2, max_retries_per_trial=1) as (stub, _):
            t = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="a"))).trial
            await stub.EndTrial(end(t.trial_id, kt.INVALID))  # queued for its one retry; then the chief stops
        async with chief(db, max_trials=2, max_retries_per_trial=1) as (stub, oracle):
            assert oracle.summary()["trials"] == {"queued": 1}
            again = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="b"))).trial
            assert again.trial_id == t.trial_id and again.hyperparameters.values == t.hyperparameters.values
            await stub.EndTrial(end(t.trial_id, kt.INVALID))  # its second run: no retry left
            got = (await stub.GetTrial(pb.GetTrialRequest(trial_id=t.trial_id))).trial
            assert got.status == kt.FAILED
            s = await oracle.engine.suggestion(oracle.experiment.id, t.trial_id)
            assert s.attempts == 2

    anyio.run(main, backend="asyncio")


def test_consecutive_failures_survive_a_chief_restart(tmp_path: Path) -> None:
    db = tmp_path / "chief.db"

    async def main() -> None:
        async with chief(db, max_trials=5, max_consecutive_failures=3) as (stub, _):
            for tuner in ("a", "b"):  # two failures in a row, then the chief stops
                t = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id=tuner))).trial
                await stub.EndTrial(end(t.trial_id, kt.FAILED))
        async with chief(db, max_trials=5, max_consecutive_failures=3) as (stub, oracle):
            assert oracle.failure is None
            t = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="c"))).trial
            await stub.EndTrial(end(t.trial_id, kt.FAILED))  # the third in a row across the restart
            assert oracle.failure is not None and "3 consecutive failed trials" in oracle.failure

    anyio.run(main, backend="asyncio")


def test_a_restart_after_the_search_failed_starts_counting_again(tmp_path: Path) -> None:
    db = tmp_path / "chief.db"

    async def main() -> None:
        async with chief(db, max_trials=5, max_consecutive_failures=2) as (stub, oracle):
            for tuner in ("a", "b"):
                t = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id=tuner))).trial
                await stub.EndTrial(end(t.trial_id, kt.FAILED))
            assert oracle.failure is not None
        async with chief(db, max_trials=5, max_consecutive_failures=2) as (stub, oracle):
            t = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="c"))).trial
            await stub.EndTrial(end(t.trial_id, kt.FAILED))  # one failure after the fix: not yet the limit
            assert oracle.failure is None

    anyio.run(main, backend="asyncio")


def test_a_trials_expiries_count_against_its_runs_across_a_chief_restart(tmp_path: Path) -> None:
    """Expired once before a restart and once after: the second expiry uses up the
    trial's runs (max(1, 0) retries), so it fails instead of a third hand-out."""
    from tauopt import Engine
    from tauopt.models import Parameter
    from tauopt.transport.grpc._oracle import ChiefConfig, KerasTunerOracle

    from test_kerastuner_servicer import SPACE

    db = tmp_path / "chief.db"
    now = [0.0]
    config = ChiefConfig(
        objective="score", direction="min", max_trials=2, trial_ttl_s=10.0, space=tuple(parse_parameter(p) for p in SPACE)
    )

    async def main() -> None:
        async with Engine(store=str(db), pool=None) as engine:
            oracle = KerasTunerOracle(engine, config, clock=lambda: now[0])
            await oracle.start()
            t = await oracle.create_trial("a")
            now[0] += 11
            await oracle.maintain()  # a's worker went silent: one retry
            again = await oracle.create_trial("b")
            assert again.trial_id == t.trial_id and again.status == "RUNNING"
        async with Engine(store=str(db), pool=None) as engine:  # the chief restarts; b's run goes on
            oracle = KerasTunerOracle(engine, config, clock=lambda: now[0])
            exp = await oracle.start()
            now[0] += 11
            await oracle.maintain()  # b went silent too: its runs are used up
            assert (await oracle.get_trial(t.trial_id)).status == "FAILED"
            assert (await engine.suggestion(exp.id, t.trial_id)).state == "closed"
            assert oracle.summary()["trials"] == {"failed": 1}

    anyio.run(main, backend="asyncio")


def test_a_create_trial_held_by_the_bandwidth_waits_in_the_engine_for_the_place_an_end_trial_frees() -> None:
    """The hold is the engine's waiting ask (one slot waiter, no loop in the door): the
    EndTrial's observe hands the freed place to the held CreateTrial as a new trial."""

    async def main() -> None:
        async with chief(max_trials=3, parallel_bandwidth=1, hold_s=20) as (stub, oracle):
            exp_id = oracle.experiment.id
            a = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="a"))).trial
            got: list[kt.Trial] = []

            async def held() -> None:
                got.append((await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="b"))).trial)

            with anyio.fail_after(15):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(held)
                    while (await oracle.engine.inspect(exp_id))["slot_waiters"] < 1:
                        await anyio.sleep(0.01)
                    assert got == []
                    await stub.UpdateTrial(pb.UpdateTrialRequest(trial_id=a.trial_id, metrics={"score": 1.0}))
                    await stub.EndTrial(end(a.trial_id, kt.COMPLETED))
            (b,) = got
            assert b.status == kt.RUNNING and b.trial_id != a.trial_id
            assert (await oracle.engine.suggestion(exp_id, b.trial_id)).tag == "b"

    anyio.run(main, backend="asyncio")


def test_a_create_trial_held_by_the_bandwidth_answers_idle_when_the_hold_runs_out() -> None:
    async def main() -> None:
        async with chief(max_trials=3, parallel_bandwidth=1, hold_s=0.5) as (stub, oracle):
            await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="a"))
            t0 = time.monotonic()
            idle = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="b"))).trial
            assert idle.status == kt.IDLE and 0.45 <= time.monotonic() - t0 < 3
            assert [s.tag for s in await oracle.engine.suggestions(oracle.experiment.id)] == ["a"]  # b took nothing

    anyio.run(main, backend="asyncio")


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_hyperband_brackets_continue_where_they_were_after_a_chief_restart(tmp_path: Path, backend: str,
                                                                           request: pytest.FixtureRequest) -> None:  # fmt: skip
    """The bracket schedule and its runs are stored with the experiment (SQLite or
    PostgreSQL): a restarted chief hands out the same runs (bracket, round, epochs,
    parent) as one that never stopped, the run left running goes back to its worker,
    and no run is lost."""
    from tauopt.transport.grpc._oracle import HyperbandConfig

    scores = [0.5, 0.2, 0.9, 0.1, 0.7, 0.3, 0.8, 0.4, 0.6, 0.05, 0.95, 0.15, 0.25, 0.35]
    keys = ("tuner/bracket", "tuner/round", "tuner/epochs", "tuner/initial_epoch", "tuner/trial_id")

    def shown(t: Any) -> tuple[Any, ...]:
        v = t.hyperparameters.values.values
        return (t.trial_id, *(getattr(v[k], v[k].WhichOneof("kind")) if k in v else None for k in keys))

    db: Any = request.getfixturevalue("pg_url") if backend == "postgresql" else tmp_path / "chief.db"

    async def run(project: str, stop_after: int | None) -> list[tuple[Any, ...]]:
        config = {"max_trials": 30, "hyperband": HyperbandConfig(max_epochs=9, factor=3), "project": project}
        runs: list[tuple[Any, ...]] = []
        async with chief(db, **config) as (stub, _):
            for i, score in enumerate(scores):
                t = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="w"))).trial
                runs.append(shown(t))
                if i == stop_after:
                    break  # the chief stops while this run is running
                await stub.UpdateTrial(pb.UpdateTrialRequest(trial_id=t.trial_id, metrics={"score": score}))
                await stub.EndTrial(end(t.trial_id, kt.COMPLETED))
        if stop_after is None:
            return runs
        async with chief(db, **config) as (stub, oracle):
            assert oracle.summary()["trials"] == {"completed": stop_after, "running": 1}
            for i, score in enumerate(scores[stop_after:], start=stop_after):
                t = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="w"))).trial
                if i == stop_after:
                    assert shown(t) == runs[-1]  # its worker resumes the run it had
                else:
                    runs.append(shown(t))
                await stub.UpdateTrial(pb.UpdateTrialRequest(trial_id=t.trial_id, metrics={"score": score}))
                await stub.EndTrial(end(t.trial_id, kt.COMPLETED))
            assert oracle.summary()["completed"] == len(scores)
        return runs

    async def main() -> None:
        straight = await run("straight", None)
        assert any(r[5] is not None for r in straight[7:])  # runs after the stop include promotions
        assert await run("restarted", 6) == straight

    anyio.run(main, backend="asyncio")


def test_a_restart_under_other_brackets_starts_a_fresh_schedule(tmp_path: Path) -> None:
    from tauopt.transport.grpc._oracle import HyperbandConfig

    db = tmp_path / "chief.db"

    def bracket_of(t: Any) -> tuple[int, int, int]:
        v = t.hyperparameters.values.values
        return v["tuner/bracket"].int_value, v["tuner/round"].int_value, v["tuner/epochs"].int_value

    async def main() -> None:
        async with chief(db, max_trials=30, hyperband=HyperbandConfig(max_epochs=9, factor=3)) as (stub, _):
            for tuner in ("a", "b"):
                t = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id=tuner))).trial
                assert bracket_of(t) == (2, 0, 1)
                await stub.UpdateTrial(pb.UpdateTrialRequest(trial_id=t.trial_id, metrics={"score": 0.5}))
                await stub.EndTrial(end(t.trial_id, kt.COMPLETED))
        async with chief(db, max_trials=30, hyperband=HyperbandConfig(max_epochs=3, factor=3)) as (stub, _):
            t = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="c"))).trial
            assert bracket_of(t) == (1, 0, 1)  # the new schedule's first bracket, not the stored one's

    anyio.run(main, backend="asyncio")
