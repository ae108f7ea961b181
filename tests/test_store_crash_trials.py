"""Acknowledged means durable for a trial-based door's writes too: SIGKILL a real engine
process while 8 Optuna-like workers create trials, set their parameters and attributes
and complete them (tests/crash_trials_child.py), restart on its file, check.

A trial's parameter or attribute leaves the experiment's counters as they were, so it is
committed without them; after each kill the listing's counters must still be the
actor's: an open suggestion per running trial, an observation per completed one.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_store_crash import run_and_kill

from tauopt.engine import Engine, ReadTrials

CHILD = Path(__file__).with_name("crash_trials_child.py")
# Acknowledged calls. A trial is 5 calls and the 8 workers tend to move in step (a group
# commit answers them together), 40 calls a round: each kill lands inside a round, where
# some trials have parameters acknowledged and are not ended.
KILL_AFTER = [25, 130, 415]


@dataclass
class Acked:
    study: int | None = None
    params: dict[int, dict[str, float]] = field(default_factory=dict)
    attrs: dict[int, dict[str, str]] = field(default_factory=dict)
    ended: dict[int, float] = field(default_factory=dict)

    def take(self, line: str) -> int:
        r = json.loads(line)
        kind = r["kind"]
        if kind == "study":
            self.study = r["id"]
            return 0
        trial = r["trial"]
        if kind == "new":
            self.params.setdefault(trial, {})
        elif kind == "param":
            self.params.setdefault(trial, {})[r["name"]] = r["value"]
        elif kind == "attr":
            self.attrs.setdefault(trial, {})[r["key"]] = r["value"]
        elif kind == "end":
            self.ended[trial] = r["value"]
        return 1


def run_child_and_kill(db: Path, acked: Acked, after: int, log: Path) -> None:
    args = [sys.executable, str(CHILD), str(db)] + ([str(acked.study)] if acked.study is not None else [])
    run_and_kill(args, acked.take, after, log)


async def check(db: Path, acked: Acked) -> None:
    assert acked.study is not None
    async with Engine(store=str(db), pool=None) as engine:
        trials: list[Any] = await engine.study_call(acked.study, ReadTrials())
        (listed,) = await engine.experiments()
        got = await engine.experiment(listed.id)
    by_id = {t.trial_id: t for t in trials}
    for trial, params in acked.params.items():
        t = by_id.get(trial)
        assert t is not None, f"acknowledged trial {trial} lost"
        for name, value in params.items():
            assert t.params.get(name) == value, (trial, name, dict(t.params))
    for trial, attrs in acked.attrs.items():
        for key, text in attrs.items():
            assert by_id[trial].system_attrs.get(key) == text, (trial, key)
    for trial, value in acked.ended.items():
        assert by_id[trial].state == "COMPLETE" and by_id[trial].values == (value,), trial
    running = sum(t.state == "RUNNING" for t in trials)
    complete = sum(t.state == "COMPLETE" for t in trials)
    assert (listed.open_suggestions, listed.observations) == (running, complete)
    assert (got.open_suggestions, got.observations) == (running, complete)


@pytest.mark.slow
def test_acknowledged_trial_writes_and_the_counters_survive_sigkill(tmp_path: Path) -> None:
    db, log = tmp_path / "trials.db", tmp_path / "child-stderr.log"
    acked = Acked()
    for after in KILL_AFTER:
        run_child_and_kill(db, acked, after, log)
        anyio.run(check, db, acked)
    assert len(acked.ended) > 20, "the load was too light to mean anything"
    assert sum(len(p) for p in acked.params.values()) > 2 * len(acked.ended)
