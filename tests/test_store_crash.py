"""Acknowledged means durable: SIGKILL a real engine process mid-load, restart on its file, check.

The child (tests/crash_child.py) runs an Engine on a SQLite file with 16
concurrent workers asking, observing and closing on one experiment (bandwidth
8, a finite space of 1,200 points), and reports every acknowledged reply over a
pipe. The parent kills it at different moments - during start-up, and after 3,
40, 150 and 400 acknowledged replies - each time on the same file, so every run
also recovers the previous one; after each kill it reopens the file and checks.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from tauopt.engine import Engine
from tauopt.errors import ApiError
from tauopt.store._sqlite import SqliteStore

CHILD = Path(__file__).with_name("crash_child.py")
BANDWIDTH = 8
KILL_MOMENTS: list[float | int] = [0.4, 3, 40, 150, 400]  # float: seconds after spawn; int: acknowledged replies


@dataclass
class Acked:
    """Everything the children acknowledged, over all runs."""

    experiment_id: str | None = None
    suggestions: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> tag, assignments, state
    observations: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> record

    def take(self, line: str) -> bool:
        r = json.loads(line)
        kind = r["kind"]
        if kind == "experiment":
            self.experiment_id = r["id"]
            return False
        if kind == "suggest":
            self.suggestions[r["id"]] = {"tag": r["tag"], "assignments": r["assignments"], "state": "open"}
        elif kind == "observe":
            self.suggestions.setdefault(r["suggestion_id"], {"assignments": r["assignments"]})["state"] = "observed"
            self.observations[r["id"]] = r
        elif kind == "close":
            self.suggestions[r["suggestion_id"]]["state"] = "closed"
        return kind != "exhausted"


def run_child_and_kill(db: Path, acked: Acked, moment: float | int, log: Path) -> int:
    args = [sys.executable, str(CHILD), str(db)] + ([acked.experiment_id] if acked.experiment_id else [])
    return run_and_kill(args, acked.take, moment, log)


def run_and_kill(args: list[str], take: Callable[[str], int], moment: float | int, log: Path) -> int:
    """Run a child that reports each acknowledged reply on a line, `take` each (it answers
    how many replies the line counts for), SIGKILL it at `moment` (float: seconds after
    spawn; int: acknowledged replies), take what was still in the pipe; the replies counted."""
    with log.open("ab") as err:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, text=True)
    assert proc.stdout is not None
    replies = 0
    try:
        if isinstance(moment, float):
            time.sleep(moment)
        else:
            while replies < moment:
                line = proc.stdout.readline()
                if not line:
                    pytest.fail(f"the child ended before {moment} replies (exit {proc.wait()}): {log.read_text()[-3000:]}")
                replies += take(line)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    for line in proc.stdout:  # acknowledged before the kill, still in the pipe
        replies += take(line)
    proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    return replies


def point(assignments: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(assignments.items()))


async def check(db: Path, acked: Acked) -> None:
    eid = acked.experiment_id
    async with SqliteStore(db) as store:
        snap = await store.load(eid) if eid else None
    if eid is None:
        return
    assert snap is not None, "an acknowledged experiment is missing"
    stored = {s.id: s for s in snap.suggestions}
    observations = {o.id: o for o in snap.observations}

    for sid, a in acked.suggestions.items():  # every acknowledged suggestion, with its state
        s = stored.get(sid)
        assert s is not None, f"acknowledged suggestion {sid} lost"
        assert s.assignments == a["assignments"]
        if "tag" in a:
            assert s.tag == a["tag"]
        if a["state"] == "open":  # an observe/close may have committed without its reply reaching us
            assert s.state in ("open", "observed", "closed")
        else:
            assert s.state == a["state"], (sid, s.state, a["state"])
    for oid, o in acked.observations.items():  # every acknowledged observation
        got = observations.get(oid)
        assert got is not None, f"acknowledged observation {oid} lost"
        assert (got.suggestion_id, got.value, got.assignments) == (o["suggestion_id"], o["value"], o["assignments"])

    # Nothing half-done: observation rows and suggestion states agree, the header's counters too.
    observed = {s.id for s in snap.suggestions if s.state == "observed"}
    assert {o.suggestion_id for o in snap.observations} == observed
    open_now = [s for s in snap.suggestions if s.state == "open"]
    assert snap.experiment.open_suggestions == len(open_now)
    assert snap.experiment.observations == len(snap.observations)
    assert len(open_now) <= BANDWIDTH  # the bandwidth invariant

    # No observed point was ever suggested again (suggestions are in creation order).
    seen_observed: set[tuple[tuple[str, Any], ...]] = set()
    live: set[tuple[tuple[str, Any], ...]] = set()
    for s in snap.suggestions:
        p = point(s.assignments)
        assert p not in seen_observed, f"observed point {p} suggested again as {s.id}"
        if s.state == "observed":
            seen_observed.add(p)
        if s.state in ("open", "observed"):
            assert p not in live, f"point {p} is open or observed twice"
            live.add(p)

    # The restarted engine serves the same open suggestions, tags included, and keeps the rules.
    async with Engine(store=str(db), pool=None) as engine:  # (Engine takes str paths)
        served = await engine.suggestions(eid, state="open")
        assert {(s.id, s.tag) for s in served} == {(s.id, s.tag) for s in open_now}
        if len(served) >= BANDWIDTH:
            with pytest.raises(ApiError) as info:
                await engine.suggest(eid, tag="parent")
            assert info.value.error_type == "bandwidth_full"
        else:
            s = await engine.suggest(eid, tag="parent")
            assert point(s.assignments) not in live
            await engine.close_suggestion(eid, s.id)
            acked.suggestions[s.id] = {"tag": "parent", "assignments": s.assignments, "state": "closed"}


def integrity(db: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("PRAGMA integrity_check").fetchall()
    finally:
        conn.close()


@pytest.mark.slow
def test_acknowledged_state_survives_sigkill_at_several_moments(tmp_path: Path) -> None:
    db, log = tmp_path / "crash.db", tmp_path / "child-stderr.log"
    acked = Acked()
    replies = []
    for moment in KILL_MOMENTS:
        replies.append(run_child_and_kill(db, acked, moment, log))
        if db.exists():
            assert integrity(db) == [("ok",)]
        anyio.run(check, db, acked)
    assert acked.experiment_id is not None
    assert all(r >= m for r, m in zip(replies, KILL_MOMENTS) if isinstance(m, int)), replies
    assert len(acked.observations) > 100, "the load was too light to mean anything"
    print(f"replies per run {replies}, acknowledged: {len(acked.suggestions)} suggestions, {len(acked.observations)} observations")
