"""The KerasTuner door keeps no failure count of its own: --max-consecutive-failures
is the engine's max_consecutive_failures on the chief's experiment, so failed and
expired trials count there, a stop the engine reports ends the search for every
worker, and the experiment says why to any other door."""

from __future__ import annotations

from pathlib import Path

import anyio
import grpc
import pytest

from tauopt import Engine
from tauopt.models import Parameter
from tauopt.transport.grpc._generated import keras_tuner_pb2 as kt
from tauopt.transport.grpc._generated import service_pb2 as pb
from tauopt.transport.grpc._oracle import ChiefConfig, KerasTunerOracle
from tauopt.schema import parse_parameter

from test_kerastuner_servicer import SPACE, chief, end


def test_failed_trials_are_counted_by_the_engine_and_its_stop_reaches_every_worker() -> None:
    async def main() -> None:
        async with chief(max_trials=5, max_consecutive_failures=2) as (stub, oracle):
            exp_id = oracle.experiment.id
            assert oracle.experiment.max_consecutive_failures == 2
            t = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="a"))).trial
            await stub.EndTrial(end(t.trial_id, kt.FAILED))
            assert (await oracle.engine.experiment(exp_id)).consecutive_failures == 1
            t = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="b"))).trial
            await stub.EndTrial(end(t.trial_id, kt.FAILED))
            exp = await oracle.engine.experiment(exp_id)
            assert exp.stopped_reason is not None and "2 consecutive failed runs" in exp.stopped_reason
            for tuner in ("a", "c"):
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await stub.CreateTrial(pb.CreateTrialRequest(tuner_id=tuner))
                assert err.value.code() == grpc.StatusCode.ABORTED
                assert "2 consecutive failed trials" in (err.value.details() or "")
            assert oracle.exit_code == 1

    anyio.run(main, backend="asyncio")


def test_a_stop_made_through_another_door_ends_the_search_at_the_next_create_trial() -> None:
    async def main() -> None:
        async with chief(max_trials=5, max_consecutive_failures=1) as (stub, oracle):
            exp_id = oracle.experiment.id
            # another client posts a failed evaluation of the same experiment (e.g. over HTTP)
            await oracle.engine.observe(exp_id, assignments={"units": 8, "optimizer": "adam"}, failed=True)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="a"))
            assert err.value.code() == grpc.StatusCode.ABORTED and "consecutive failed trials" in (err.value.details() or "")
            assert oracle.failure is not None and "observation 1 failed" in oracle.failure

    anyio.run(main, backend="asyncio")


def test_a_trial_expired_out_of_runs_is_a_failed_run_in_the_engine(tmp_path: Path) -> None:
    now = [0.0]
    config = ChiefConfig(
        objective="score", direction="min", max_trials=3, trial_ttl_s=10.0, max_consecutive_failures=1,
        space=tuple(parse_parameter(p) for p in SPACE),
    )  # fmt: skip

    async def main() -> None:
        async with Engine(store=str(tmp_path / "chief.db"), pool=None) as engine:
            oracle = KerasTunerOracle(engine, config, clock=lambda: now[0])
            exp = await oracle.start()
            t = await oracle.create_trial("a")
            now[0] += 11
            await oracle.maintain()  # a went silent: its one retry
            assert (await oracle.create_trial("b")).trial_id == t.trial_id
            now[0] += 11
            await oracle.maintain()  # b went silent too: its runs are used up, a failed run
            stopped = await engine.experiment(exp.id)
            assert stopped.consecutive_failures == 1 and f"suggestion {t.trial_id} used up" in (stopped.stopped_reason or "")
            assert oracle.failure is not None and "expired without an EndTrial" in oracle.failure
        async with Engine(store=str(tmp_path / "chief.db"), pool=None) as engine:  # the chief restarts: "fixed it"
            oracle = KerasTunerOracle(engine, config, clock=lambda: now[0])
            exp = await oracle.start()
            assert (exp.consecutive_failures, exp.stopped_reason, oracle.failure) == (0, None, None)
            assert (await oracle.create_trial("c")).status == "RUNNING"

    anyio.run(main, backend="asyncio")


def test_a_chief_with_another_cap_sets_it_on_the_project_it_resumes(tmp_path: Path) -> None:
    db = tmp_path / "chief.db"

    async def main() -> None:
        async with chief(db, max_trials=5, max_consecutive_failures=3) as (_, oracle):
            assert oracle.experiment.max_consecutive_failures == 3
        async with chief(db, max_trials=5, max_consecutive_failures=7) as (_, oracle):
            assert (await oracle.engine.experiment(oracle.experiment.id)).max_consecutive_failures == 7

    anyio.run(main, backend="asyncio")
