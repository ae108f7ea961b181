"""The Optuna door's reads: a study's reads are answered from the state as of the
actor's last commit, on any thread (a gRPC handler thread answers them without crossing
to the engine's loop): every acknowledged write shows, a write whose commit is pending
never does. GetTrials' incremental read by id, and the trials' wire bytes encoded once
per version and joined into replies that are exactly what protobuf would write."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from tauopt.actors import NOT_NOW, Reply, Request
from tauopt.engine import Engine, NewTrial, ReadStudy, ReadTrial, ReadTrials, SetParam, SetState, SetStudyAttr, Study, Trial
from tauopt.engine._messages import TrialOp
from tauopt.engine._trials import TRIAL_ID_BITS, CommittedTrials, TrialBook, TrialIdOf

pytest.importorskip("grpc")

from tauopt.transport._rpc import length_delimited  # noqa: E402
from tauopt.transport.optuna._generated import api_pb2 as pb  # noqa: E402
from tauopt.transport.optuna._servicer import EncodedTrials, trial_to_proto  # noqa: E402

FLOAT = json.dumps({"name": "FloatDistribution", "attributes": {"low": 0.0, "high": 1.0, "log": False, "step": None}})


def _on_other_thread(fn: Any) -> Any:
    """fn() run on a thread that is not the loop's (as a gRPC handler thread calls the engine)."""
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


@pytest.mark.anyio
async def test_a_read_shows_the_last_committed_state_while_a_write_waits_for_its_commit(tmp_path: Path) -> None:
    path = tmp_path / "tauopt.db"
    async with Engine(str(path), pool=None) as engine:
        sid = await engine.create_study("reads", ["MINIMIZE"])
        tid = await engine.study_call(sid, NewTrial())
        ref = engine._actors[engine._studies.experiment_of(None, sid)]
        actor = ref._peek.__self__  # type: ignore[attr-defined]
        read = ReadTrial(tid)

        idle = ref.peek(TrialOp(None, read))  # answered without the mailbox
        assert isinstance(idle, Trial) and idle.trial_id == tid and idle.params == {}
        assert ref.peek(TrialOp(None, SetParam(tid, "x", 0.5, FLOAT))) is NOT_NOW  # a write never is

        other = sqlite3.connect(path, isolation_level=None, timeout=0)  # another writer holds the file
        other.execute("BEGIN IMMEDIATE")
        try:
            written: list[object] = []

            async def write() -> None:
                written.append(await engine.trial_call(tid, SetParam(tid, "x", 0.5, FLOAT)))

            async with anyio.create_task_group() as tg:
                tg.start_soon(write)
                while "x" not in actor._trials._trial(tid).params:  # until the actor applied the write
                    await anyio.lowlevel.checkpoint()
                assert actor._replies.uncommitted  # its commit is pending
                # read meanwhile, on the loop and on another thread: the state before the write
                on_loop = await engine.trial_call(tid, read)
                elsewhere = _on_other_thread(lambda: engine.trial_read_now(tid, read))
                trials = _on_other_thread(lambda: engine.study_read_now(sid, ReadTrials()))
                assert on_loop.params == {} and elsewhere.params == {} and [t.params for t in trials] == [{}]
                assert written == []  # the write is not acknowledged either
                other.execute("ROLLBACK")
        finally:
            other.close()
        assert written == [None]
        after = await engine.trial_call(tid, read)
        assert isinstance(after, Trial) and after.params == {"x": 0.5}
        assert _on_other_thread(lambda: engine.trial_read_now(tid, read)).params == {"x": 0.5}


@pytest.mark.anyio
async def test_a_write_is_readable_from_any_thread_by_the_time_it_is_acknowledged(tmp_path: Path) -> None:
    async with Engine(str(tmp_path / "tauopt.db"), pool=None) as engine:
        sid = await engine.create_study("acks", ["MINIMIZE"])
        assert engine.study_read_now(sid, ReadStudy()) is NOT_NOW  # its actor is not running yet: the loop starts it
        await engine.study_call(sid, ReadStudy())
        ref = engine._actors[engine._studies.experiment_of(None, sid)]
        seen: dict[str, Any] = {}

        class Noting(Reply):
            """A caller's answer that reads the study, from another thread, the moment it is given."""

            def give(self, outcome: Any) -> None:
                if "at_ack" not in seen:
                    seen["at_ack"] = _on_other_thread(lambda: engine.study_read_now(sid, ReadTrials()))
                    seen["id"] = _on_other_thread(lambda: engine.study_read_now(sid, TrialIdOf(0)))
                super().give(outcome)

        answer = Noting()
        ref._send.send_nowait(Request(TrialOp(None, NewTrial()), answer))
        tid = await answer.wait()
        assert [t.trial_id for t in seen["at_ack"]] == [tid] and seen["id"] == tid

        await engine.study_call(sid, SetStudyAttr(False, "k", json.dumps("v")))  # the study's reads too
        study = _on_other_thread(lambda: engine.study_read_now(sid, ReadStudy()))
        assert study.user_attrs == {"k": json.dumps("v")}
        # what only the loop's path can answer: no live study, an unknown trial
        assert engine.study_read_now(sid + 1, ReadStudy()) is NOT_NOW
        assert engine.trial_read_now(tid + 1, ReadTrial(tid + 1)) is NOT_NOW


def test_a_committed_read_overlapping_a_publish_is_made_again_or_left_to_the_actor() -> None:
    study = Study(1, "s", ("MINIMIZE",))
    base = 1 << TRIAL_ID_BITS
    committed = CommittedTrials(study, [Trial(base, 0, "RUNNING")])
    assert [t.number for t in committed.read(ReadTrials())] == [0]
    committed.publish(study, [Trial(base, 0, "COMPLETE", values=(1.0,)), Trial(base + 1, 1, "RUNNING")])
    assert [(t.number, t.state) for t in committed.read(ReadTrials())] == [(0, "COMPLETE"), (1, "RUNNING")]

    class Moving(list):  # type: ignore[type-arg]
        """Trials that a publish changes under every read (as the loop's thread may, between two reads)."""

        def __getitem__(self, i: Any) -> Any:
            committed._version += 2
            return super().__getitem__(i)

    committed._trials = Moving(committed._trials)
    assert committed.read(ReadTrials()) is NOT_NOW
    committed._version += 1  # a publish under way
    committed._trials = list(committed._trials)
    assert committed.read(ReadTrial(base)) is NOT_NOW
    committed._version += 1
    assert committed.read(ReadTrial(base)).state == "COMPLETE"

    committed.publish(study, [Trial(base + 3, 3, "RUNNING")])  # trial 2 never published: a hole
    assert committed.read(ReadTrial(base)) is NOT_NOW  # every read goes to the actor from now on


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
