"""Two real `tauopt kerastuner chief` processes of one search sharing a PostgreSQL
database: the first owns the search, the second follows and relays; workers (our
stub, calling as a KerasTuner worker does) at either chief share one trial queue;
the owner SIGKILLed, the follower takes the search over from the database."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import grpc
import pytest

from tauopt.store import open_store
from tauopt.transport.grpc._generated import keras_tuner_pb2 as kt
from tauopt.transport.grpc._generated import service_pb2 as pb
from tauopt.transport.grpc._generated import service_pb2_grpc as pb_grpc

from test_http_support import free_port

pytestmark = pytest.mark.slow

LEASE_S = 1.5


class Chief:
    def __init__(self, pg_url: str, tmp_path: Path, max_trials: int) -> None:
        space = tmp_path / "space.json"
        space.write_text(json.dumps([{"name": "units", "type": "int", "bounds": [8, 512], "step": 8}]))
        self.port = free_port()
        self.log = tmp_path / f"chief-{self.port}.log"
        env = {**os.environ, "KERASTUNER_ORACLE_IP": "127.0.0.1", "KERASTUNER_ORACLE_PORT": str(self.port), "KERASTUNER_TUNER_ID": "chief"}
        sink = self.log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tauopt.cli", "kerastuner", "chief", "--objective", "score", "--direction", "min",
             "--max-trials", str(max_trials), "--strategy", "random", "--db", pg_url, "--project", "shared", "--space", str(space),
             "--advertise-url", f"http://127.0.0.1:{free_port()}", "--lease-s", str(LEASE_S), "--linger-s", "1"],
            env=env, stdout=subprocess.PIPE, stderr=sink, text=True,
        )  # fmt: skip
        sink.close()  # the chief has its own descriptor
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, self.log.read_text()
        self.ready = json.loads(line)

    def exit(self) -> dict[str, Any]:
        out, _ = self.proc.communicate(timeout=60)
        return json.loads(out.strip().splitlines()[-1])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


async def work(port: int, tuner: str, done: list[str], upto: int | None = None) -> None:
    """A worker's loop: CreateTrial, UpdateTrial, EndTrial until STOPPED (or `upto` trials)."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.OracleStub(channel)
        while upto is None or len(done) < upto:
            trial = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id=tuner))).trial
            if trial.status == kt.STOPPED:
                return
            assert trial.status == kt.RUNNING, trial
            units = trial.hyperparameters.values.values["units"].int_value
            await stub.UpdateTrial(pb.UpdateTrialRequest(trial_id=trial.trial_id, metrics={"score": units / 512}, step=0))
            end = kt.Trial(trial_id=trial.trial_id, status=kt.COMPLETED)
            end.hyperparameters.values.CopyFrom(trial.hyperparameters.values)
            await stub.EndTrial(pb.EndTrialRequest(trial=end))
            done.append(trial.trial_id)


def observations(pg_url: str, experiment_id: str) -> list[Any]:
    async def load() -> list[Any]:
        async with open_store(pg_url, exclusive=False) as store:
            snap = await store.load(experiment_id)
            assert snap is not None
            return list(snap.observations)

    return anyio.run(load)


def test_workers_at_either_chief_share_the_owners_trial_queue(pg_url: str, tmp_path: Path) -> None:
    a = Chief(pg_url, tmp_path, max_trials=8)
    b = Chief(pg_url, tmp_path, max_trials=8)
    try:
        assert a.ready["experiment_id"] == b.ready["experiment_id"]  # one search, one experiment
        at_a: list[str] = []
        at_b: list[str] = []

        async def both() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(work, a.port, "wa", at_a)
                tg.start_soon(work, b.port, "wb", at_b)

        anyio.run(both)
        assert at_b and len(at_a) + len(at_b) == 8 and len(set(at_a + at_b)) == 8  # one queue: no trial twice
        owner, follower = a.exit(), b.exit()
        assert owner["exit_code"] == 0 and owner["trials"]["completed"] == 8
        assert follower == {"event": "exit", "followed": True, "exit_code": 0}  # left once the owner completed it
        assert sorted(o.suggestion_id for o in observations(pg_url, a.ready["experiment_id"])) == sorted(at_a + at_b)
    finally:
        a.stop()
        b.stop()


def test_the_owning_chief_sigkilled_the_follower_takes_the_search_over(pg_url: str, tmp_path: Path) -> None:
    a = Chief(pg_url, tmp_path, max_trials=10)
    b = Chief(pg_url, tmp_path, max_trials=10)
    try:
        before: list[str] = []
        anyio.run(work, b.port, "w", before, 4)  # relayed to a
        a.proc.send_signal(signal.SIGKILL)
        a.proc.communicate(timeout=10)
        after: list[str] = []
        anyio.run(work, b.port, "w", after)  # b takes the search over once a's lease lapses
        assert len(before) == 4 and len(before) + len(after) == 10 and len(set(before + after)) == 10
        summary = b.exit()
        assert summary["exit_code"] == 0 and summary["trials"]["completed"] == 10
        stored = observations(pg_url, b.ready["experiment_id"])
        assert sorted(o.suggestion_id for o in stored) == sorted(before + after)  # every acknowledged end kept, once
    finally:
        a.stop()
        b.stop()
