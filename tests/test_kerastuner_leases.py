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
