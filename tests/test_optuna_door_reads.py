"""The Optuna door's reads: a study's reads are answered outside the actor's mailbox
only when the mailbox would answer the same at once (never a write still waiting for
its commit), GetTrials' incremental read by id, and the trials' wire bytes encoded once
per version and joined into replies that are exactly what protobuf would write."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from tauopt.actors import NOT_NOW
from tauopt.engine import Engine, NewTrial, ReadTrial, ReadTrials, SetParam, SetState, Study, Trial
from tauopt.engine._trials import TRIAL_ID_BITS, TrialBook

pytest.importorskip("grpc")

from tauopt.transport._rpc import length_delimited  # noqa: E402
from tauopt.transport.optuna._generated import api_pb2 as pb  # noqa: E402
from tauopt.transport.optuna._servicer import EncodedTrials, trial_to_proto  # noqa: E402

FLOAT = json.dumps({"name": "FloatDistribution", "attributes": {"low": 0.0, "high": 1.0, "log": False, "step": None}})


@pytest.mark.anyio
async def test_a_read_waits_behind_a_write_whose_commit_is_pending_and_is_answered_at_once_otherwise(tmp_path: Path) -> None:
    path = tmp_path / "tauopt.db"
    async with Engine(str(path), pool=None) as engine:
        sid = await engine.create_study("reads", ["MINIMIZE"])
        tid = await engine.study_call(sid, NewTrial())
        ref = engine._actors[engine._studies.experiment_of(None, sid)]
        read = ReadTrial(tid)
        from tauopt.engine._messages import TrialOp

        idle = ref._peek(TrialOp(None, read))  # nothing waits for a commit: answered without the mailbox
        assert isinstance(idle, Trial) and idle.trial_id == tid and idle.params == {}
        assert ref._peek(TrialOp(None, SetParam(tid, "x", 0.5, FLOAT))) is NOT_NOW  # a write never is

        other = sqlite3.connect(path, isolation_level=None, timeout=0)  # another writer holds the file
        other.execute("BEGIN IMMEDIATE")
        try:
            results: dict[str, object] = {}

            async def call(name: str, change: object) -> None:
                results[name] = await engine.trial_call(tid, change)  # type: ignore[arg-type]

            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "write", SetParam(tid, "x", 0.5, FLOAT))
                while ref._peek(TrialOp(None, read)) is not NOT_NOW:  # until the actor applied the write
                    await anyio.lowlevel.checkpoint()
                tg.start_soon(call, "read", read)
                await anyio.wait_all_tasks_blocked()
                assert results == {}  # the read did not show the value a crash could still undo
                other.execute("ROLLBACK")
        finally:
            other.close()
        trial = results["read"]
        assert isinstance(trial, Trial) and trial.params == {"x": 0.5}
        assert ref._peek(TrialOp(None, read)).params == {"x": 0.5}  # type: ignore[union-attr]


def test_get_trials_reads_the_ids_above_the_last_finished_one_and_the_included_ones_by_number() -> None:
    study = Study(3, "s", ("MINIMIZE",))
    book = TrialBook([])
    book.start(study)
    ids = [book.apply(NewTrial(), 0.0)[0] for _ in range(6)]
    for tid in ids[:4]:
        book.apply(SetState(tid, "COMPLETE", (1.0,)), 0.0)
    base = 3 << TRIAL_ID_BITS

    def numbers(greater_than: int, included: set[int] = set()) -> list[int]:
        found = book.apply(ReadTrials(greater_than, frozenset(included)), 0.0)[0]
        reference = [t for t in (r.door for r in book.records.numbered) if t.trial_id > greater_than or t.trial_id in included]
        assert found == reference
        return [t.number for t in found]

    assert numbers(-1) == [0, 1, 2, 3, 4, 5]
    assert numbers(ids[3], {ids[1], ids[0], ids[3]}) == [0, 1, 3, 4, 5]
    assert numbers(ids[5]) == []
    assert numbers(base - 1) == [0, 1, 2, 3, 4, 5]  # below the study's ids: all of them
    assert numbers((2 << TRIAL_ID_BITS) + 10**6, {(2 << TRIAL_ID_BITS) + 1}) == [0, 1, 2, 3, 4, 5]  # another study's ids
    assert numbers((4 << TRIAL_ID_BITS) | 1, {(4 << TRIAL_ID_BITS) | 0, base + 7, ids[2]}) == [2]


def test_replies_joined_from_encoded_trials_are_what_protobuf_writes() -> None:
    long = "v" * 20_000  # a trial past 16 KiB: a three-byte length
    trials = [
        Trial(7, 0, "RUNNING", params={"x": 0.5}, distributions={"x": FLOAT}),
        Trial(8, 1, "COMPLETE", values=(1.5, -2.0), user_attrs={"k": json.dumps(long)}, intermediate={0: 1.0}),
        Trial(9, 2, "WAITING"),
    ]
    encoded = EncodedTrials(size=2)
    joined = b"".join(map(encoded, trials))
    assert joined == pb.GetTrialsReply(trials=[trial_to_proto(t) for t in trials]).SerializeToString()
    for t in trials:
        assert encoded(t) == pb.GetTrialReply(trial=trial_to_proto(t)).SerializeToString()
    assert length_delimited(1, b"") == pb.GetTrialReply(trial=pb.Trial()).SerializeToString()

    changed = Trial(9, 2, "RUNNING", datetime_start="2024-01-31 12:00:00.000000")  # a new version of trial 9
    assert pb.GetTrialReply.FromString(encoded(changed)).trial.state == pb.RUNNING
    assert encoded(changed) is encoded(changed)  # encoded once per version
    assert len(encoded._by_id) == 2  # the oldest entries go past the size
