"""The KerasTuner door keeps no retry state of its own: a trial queued for a retry
is a released suggestion in the engine, so a chief restart keeps it queued and
keeps its run count."""

from __future__ import annotations

from pathlib import Path

import anyio

from tauopt.transport.grpc._generated import keras_tuner_pb2 as kt
from tauopt.transport.grpc._generated import service_pb2 as pb

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
