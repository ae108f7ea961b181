"""The trial lifecycle both trial-based doors share: one record type, one store of
trials, one claim.

A trial (`TrialRecord`) is one run of a point: WAITING (made, enqueued, or queued
for another run, and not claimed), RUNNING (claimed by a worker, since when),
ENDING (its result is being written) and then COMPLETED, PRUNED or FAILED, never
to change again. `TrialSet` keeps the trials of one search, numbered 0..n-1 in
the order they were made, indexes the live ones (so a call costs the same after
100,000 trials as after 10), and holds the lifecycle's transitions: `claim`
(WAITING -> RUNNING, won by exactly one caller: its owner calls it under its one
serializer, the experiment's actor or a trial queue's lock), `requeue` (back to
WAITING for another run), `finish` and `expired` (running past a TTL). It is
plain state. Each door's policy sits on top: the KerasTuner door's trial queue
(`_trialqueue.py`: the bracket schedule, max_trials, retries, the failure cap,
space growth) and the Optuna door's study (`_trials.py`: attributes,
distributions, datetimes, kept as the record's `door` view).

A KerasTuner trial's point is usually one of the engine's suggestions (trial id =
suggestion id); the others are a baseline run while no space is known and the
runs of a bracket schedule (`Brackets`), whose promotions repeat a point. The
metrics a worker reports per step are kept until the trial ends; its score is
the mean at its best step (`best_of`).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

import anyio

from ..errors import invalid
from ..models import Value
from ..space import Space
from ..strategies.hyperband import HyperbandSchedule

__all__ = [
    "Brackets",
    "BracketRun",
    "TrialInfo",
    "TrialRecord",
    "TrialSet",
    "SearchFailed",
    "LifeState",
    "best_of",
    "metrics_at",
    "FINAL",
]

LifeState = Literal["waiting", "running", "ending", "completed", "pruned", "failed"]
FINAL: tuple[LifeState, ...] = ("completed", "pruned", "failed")  # a trial in one of these never changes state again
_FINAL = FINAL


class SearchFailed(Exception):
    """The search ended in failures; every worker is told this message."""


@dataclass(frozen=True)
class Brackets:
    """Hyperband's brackets (KerasTuner's schedule): runs get epochs, an initial
    epoch, a bracket and a round and, when promoted, the trial they continue."""

    max_epochs: int
    factor: int = 3
    iterations: int = 1

    def __post_init__(self) -> None:
        if self.max_epochs < 1 or self.factor < 2 or self.iterations < 1:
            raise invalid(
                f"hyperband: give --max-epochs >= 1, --factor >= 2 and --hyperband-iterations >= 1; "
                f"got {self.max_epochs}, {self.factor}, {self.iterations}"
            )

    def schedule(self) -> HyperbandSchedule:
        return HyperbandSchedule(self.max_epochs, self.factor, self.iterations)

    def total_trials(self) -> int:
        s = self.schedule()
        return self.iterations * sum(s.size(b, r) for b in range(s.num_brackets()) for r in range(b + 1))


@dataclass(frozen=True)
class BracketRun:
    """Where a run sits in the bracket schedule; `parent_id`: the trial it continues."""

    epochs: int
    initial_epoch: int
    bracket: int
    round: int
    parent_id: str | None = None


@dataclass(frozen=True)
class TrialInfo:
    """A trial as a door shows it; `history` is metric -> ((step, (values...)), ...)."""

    trial_id: str
    state: LifeState
    values: dict[str, Value] = field(default_factory=dict)
    bracket: BracketRun | None = None
    history: dict[str, tuple[tuple[int, tuple[float, ...]], ...]] = field(default_factory=dict)
    score: float | None = None
    best_step: int = 0


@dataclass
class TrialRecord:
    trial_id: str
    suggestion_id: str | None  # None: the baseline, or an unsolicited observation
    values: dict[str, Value]
    # "ending": its COMPLETED end is being written (outside the owner's lock); `ended` is set after
    state: LifeState
    worker: str | None = None
    claimed_at: float = 0.0
    runs: int = 0
    history: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    score: float | None = None
    best_step: int = 0
    bracket: BracketRun | None = None
    ended: anyio.Event | None = None  # while "ending": set once its observation is written or refused
    # The space when the engine drew `values` (taken before the ask): while it is still
    # the search's space, `values` is already the point the trial's end stores.
    drawn_in: Space | None = None
    observation_id: str | None = None  # its end's observation, once written
    number: int = -1  # its place in its TrialSet, given when added
    door: Any = None  # a door's own view of the trial (the Optuna door's `Trial`), refreshed on each change

    def info(self) -> TrialInfo:
        history = {name: tuple((step, tuple(vals)) for step, vals in sorted(h.items())) for name, h in self.history.items()}
        return TrialInfo(self.trial_id, self.state, self.values, self.bracket, history, self.score, self.best_step)


class TrialSet:
    """The trials, the live ones (what every per-call check scans, so a call costs the
    same after 100,000 trials as after 10), the local retry queue, the counters."""

    def __init__(self) -> None:
        self.trials: dict[str, TrialRecord] = {}
        self.numbered: list[TrialRecord] = []  # by number
        self._live: dict[str, TrialRecord] = {}
        # Trials to run again that the engine cannot hand out (the baseline; bracket runs,
        # whose trial ids are not suggestion ids). Every other retry is a released suggestion.
        self.retries: deque[str] = deque()
        self.completed = 0
        self.baselines = 0
        self.bracket_runs = 0
        self.workers_seen: set[str] = set()
        self.workers_stopped: set[str] = set()

    def add(self, t: TrialRecord) -> None:
        """A new trial, numbered next."""
        t.number = len(self.numbered)
        self.numbered.append(t)
        self.trials[t.trial_id] = t
        if t.state not in _FINAL:
            self._live[t.trial_id] = t

    def get(self, trial_id: str) -> TrialRecord | None:
        return self.trials.get(trial_id)

    def live(self) -> list[TrialRecord]:
        """The trials waiting, running or ending, in the order they were added."""
        live = self._live
        ended = [tid for tid, t in live.items() if t.state in _FINAL]
        for tid in ended:
            del live[tid]
        return list(live.values())

    def in_progress(self) -> int:
        return len(self.live())  # every live state counts: waiting, running, ending

    def running(self) -> int:
        return sum(1 for t in self.live() if t.state == "running")

    def ongoing(self, worker: str) -> TrialRecord | None:
        for t in self.live():
            if t.state == "running" and t.worker == worker:
                return t
        return None

    def claim(self, t: TrialRecord, worker: str | None, now: float) -> bool:
        """`worker` runs the WAITING trial `t` from now (one more run): True. False when
        it is not waiting (another caller won it, or it already runs or ended). Called
        by the set's one serializer, so of many callers exactly one wins."""
        if t.state != "waiting":
            return False
        t.state, t.worker, t.claimed_at = "running", worker, now
        t.runs += 1
        t.history = {}  # a rerun must not show the objective before it reports (the worker would skip its report)
        return True

    def requeue(self, t: TrialRecord) -> None:
        """Back to WAITING, for another run (a retry, or a door's explicit WAITING)."""
        t.state = "waiting"
        self._live[t.trial_id] = t

    def finish(self, t: TrialRecord, state: LifeState) -> None:
        """The trial ended in a final `state` (the live index drops it on its next scan)."""
        assert state in _FINAL
        t.state = state
        if state == "completed":
            self.completed += 1

    def expired(self, now: float, ttl_s: float) -> list[TrialRecord]:
        """Running trials claimed more than `ttl_s` ago."""
        return [t for t in self.live() if t.state == "running" and now - t.claimed_at > ttl_s]

    def ranked(self, maximize: bool) -> list[TrialRecord]:
        """Completed trials by score, then the others."""
        done = [t for t in self.trials.values() if t.state == "completed" and t.score is not None]
        done.sort(key=lambda t: t.score, reverse=maximize)  # type: ignore[arg-type, return-value]
        rest = [t for t in self.trials.values() if not (t.state == "completed" and t.score is not None)]
        return done + rest

    def states(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.trials.values():
            out[t.state] = out.get(t.state, 0) + 1
        return out


def best_of(history: Mapping[str, Mapping[int, list[float]]], metric: str, maximize: bool) -> tuple[float | None, int]:
    """A trial's score (the mean of `metric` at its best step) and that step; NaN when
    every step's mean is NaN, None when `metric` was never reported."""
    h = history.get(metric)
    if not h:
        return None, 0
    means = [(step, sum(v) / len(v)) for step, v in h.items() if v and not any(math.isnan(x) for x in v)]
    if not means:
        return math.nan, 0
    step, best = (max if maximize else min)(means, key=lambda sv: (sv[1], -sv[0]) if maximize else (sv[1], sv[0]))
    return best, step


def metrics_at(history: Mapping[str, Mapping[int, list[float]]], step: int, skip: str) -> dict[str, float]:
    """Every metric but `skip` at `step` (or its last step), as finite means."""
    out: dict[str, Any] = {}
    for name, h in history.items():
        if name == skip:
            continue
        vals = h.get(step) or h[max(h)]
        mean = sum(vals) / len(vals)
        if math.isfinite(mean):
            out[name] = mean
    return out
