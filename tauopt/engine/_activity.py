"""Activity: what the dashboard reads about one experiment, kept up to date
as the actor works, so a page refresh never re-scans the history.

The actor calls `opened`, `left` and `observed` at the three places its state
changes; `summary()` and `workers(after)` then answer in time proportional to
what changed (`after` is a cursor into the log of suggestion changes), not to
the experiment's size.
"""

from __future__ import annotations

import functools
import math
from array import array
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ..models import Experiment, Observation, Suggestion
from ..pareto import is_feasible

__all__ = ["Activity", "SPARKLINE_POINTS", "Timeline"]

SPARKLINE_POINTS = 40
_STATES = ("open", "observed", "closed", "expired")


_KINDS = (*_STATES, "failed")
# suggestion ids -> {id: (suggestion, when it left "open" or None)} for the ids known
Timeline = Callable[[list[str]], dict[str, tuple[Suggestion, float | None]]]  # what is counted per tag: suggestions by state, and failed runs


def _tag_row(tag: str | None, counts: dict[str, int]) -> dict[str, Any]:
    return {"tag": tag, **counts}


class IdLog:
    """Suggestion ids in order of change, a plain number as 8 bytes (not a string object
    each); the latest few wait as strings and are packed a batch at a time."""

    __slots__ = ("_ids", "_other", "_tail")

    def __init__(self) -> None:
        self._ids = array("q")
        self._other: dict[int, str] = {}  # position -> an id that is not a plain number
        self._tail: list[str] = []

    def append(self, sid: str) -> None:
        tail = self._tail
        tail.append(sid)
        if len(tail) >= _LOG_TAIL:
            self._pack()

    def _pack(self) -> None:
        ids, other = self._ids, self._other
        for sid in self._tail:
            if sid.isdigit() and sid.isascii() and (sid[0] != "0" or len(sid) == 1) and len(sid) < 19:
                ids.append(int(sid))
            else:
                other[len(ids)] = sid
                ids.append(-1)
        self._tail = []

    def __len__(self) -> int:
        return len(self._ids) + len(self._tail)

    def since(self, after: int) -> list[str]:
        self._pack()
        other = self._other
        return [other[i] if n < 0 else str(n) for i, n in enumerate(self._ids[after:], after)]


_LOG_TAIL = 1024  # ids appended before they are packed


@dataclass
class Activity:
    sign: float
    # which observations can be the best: the engine passes `pareto.is_feasible` for its
    # experiment, so the best-so-far line ends at the value `best` answers; None: every
    # observation that has a value (what is_feasible says when there is one metric and no constraint)
    feasible: Callable[[Observation], bool] | None = None
    # per tag, counts by kind (_KINDS): a plain dict, so a state change is one `counts[state] += 1`
    tags: dict[str | None, dict[str, int]] = field(default_factory=dict)
    log: IdLog = field(default_factory=IdLog)  # suggestion ids, in order of change
    ended: dict[str, float] = field(default_factory=dict)  # when a suggestion left "open"
    improvements: list[tuple[int, float]] = field(default_factory=list)  # (observation number, best so far)
    failed: int = 0
    observations: int = 0
    _latest: float = -math.inf  # the latest time anything happened (see last_activity)

    @property
    def last_activity(self) -> float | None:
        return None if self._latest == -math.inf else self._latest

    @classmethod
    def of(
        cls,
        sign: float,
        suggestions: Iterable[Suggestion],
        observations: Iterable[Observation],
        feasible: Callable[[Observation], bool] | None = None,
    ) -> "Activity":
        a = cls(sign, feasible)
        by_id: dict[str, Suggestion] = {}
        for s in sorted(suggestions, key=_sid_order):
            by_id[s.id] = s
            a._counts(s.tag)[s.state] += 1
            a.log.append(s.id)
            a._touch(s.created_at)
        for o in observations:
            held = by_id.get(o.suggestion_id or "")
            if held is not None:
                a.ended[held.id] = o.created_at
            a.observed(o, None if held is None else held.tag)
        return a

    @classmethod
    def of_experiment(
        cls, experiment: Experiment, suggestions: Iterable[Suggestion], observations: Iterable[Observation]
    ) -> "Activity":
        """An experiment's activity rebuilt from its stored suggestions and observations:
        what an actor starts from and what the admin API reports for a stored experiment."""
        judged = experiment.metrics != (experiment.metric,) or experiment.metric.constraint is not None
        feasible = functools.partial(is_feasible, experiment) if judged else None
        return cls.of(experiment.metric.sign, suggestions, observations, feasible)

    # -- updates (called by the actor) -------------------------------------------

    # opened, left and observed run on every ask and observe: _counts and _touch written
    # out in them (a call each saved), the same code as the helpers below

    def opened(self, s: Suggestion) -> None:
        counts = self.tags.get(s.tag)
        if counts is None:
            counts = self._counts(s.tag)
        counts["open"] += 1
        self.log.append(s.id)
        if s.created_at > self._latest:
            self._latest = s.created_at

    def left(self, s: Suggestion, now: float) -> None:
        """`s` (already in its new state) left "open"."""
        counts = self.tags[s.tag]  # it was opened under this tag
        counts["open"] -= 1
        counts[s.state] += 1
        self.ended[s.id] = now
        self.log.append(s.id)
        if now > self._latest:
            self._latest = now

    def rehanded(self, old: Suggestion, new: Suggestion) -> None:
        """A released suggestion handed to a new holder: its open slot moves to the new tag."""
        self._counts(old.tag)["open"] -= 1
        self._counts(new.tag)["open"] += 1
        self.log.append(new.id)
        self._touch(new.created_at)

    def observed(self, o: Observation, tag: str | None) -> None:
        """An observation arrived (`tag`: its suggestion's, None when unsolicited)."""
        self.observations += 1
        if o.created_at > self._latest:
            self._latest = o.created_at
        if o.failed or o.value is None:
            self.failed += 1
            if o.suggestion_id is not None:
                self._counts(tag)["failed"] += 1
            return
        if self.feasible is not None and not self.feasible(o):
            return
        if not self.improvements or self.sign * o.value < self.sign * self.improvements[-1][1]:
            self.improvements.append((self.observations, o.value))

    # -- reads ------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        return {
            "observations": self.observations,
            "failed": self.failed,
            "best_value": self.improvements[-1][1] if self.improvements else None,
            "last_activity": self.last_activity,
            "best_so_far": [[n, v] for n, v in _thin(self.improvements, self.observations)],
            "suggestions_by_state": self.by_state(),
        }

    def by_state(self) -> dict[str, int]:
        """How many suggestions are in each state (states with none left out)."""
        totals = {state: sum(c[state] for c in self.tags.values()) for state in _STATES}
        return {state: n for state, n in totals.items() if n}

    def workers(
        self, after: int, timeline: Timeline, now: float, ttl: float | None, limit: int | None = None
    ) -> dict[str, Any]:
        """`timeline(ids)`: each known suggestion of ids with when it left "open" (None: it has not;
        None too from this activity's `ended` when the caller does not know)."""
        after = min(max(0, after), len(self.log))
        changed = list(dict.fromkeys(reversed(self.log.since(after))))[::-1]  # once each, in order of their latest change
        if limit is not None:
            changed = changed[-limit:]  # a page's first read wants the recent timeline, not all of it
        found = timeline(changed)
        rows = [_timeline_row(s, self.ended.get(sid, ended)) for sid in changed if sid in found for s, ended in (found[sid],)]
        return {
            "now": now,
            "suggestion_ttl_s": ttl,
            "cursor": len(self.log),
            "tags": [_tag_row(tag, c) for tag, c in sorted(self.tags.items(), key=lambda kv: (kv[0] is None, kv[0] or ""))],
            "changes": rows,
        }

    # -- internals ----------------------------------------------------------------

    def _counts(self, tag: str | None) -> dict[str, int]:
        counts = self.tags.get(tag)
        if counts is None:
            counts = self.tags[tag] = dict.fromkeys(_KINDS, 0)
        return counts

    def _touch(self, t: float) -> None:
        if t > self._latest:
            self._latest = t


def _sid_order(s: Suggestion) -> tuple[int, str]:
    return (int(s.id), "") if s.id.isdigit() else (1 << 62, s.id)


def _timeline_row(s: Suggestion, ended: float | None) -> dict[str, Any]:
    return {"id": s.id, "tag": s.tag, "state": s.state, "created_at": s.created_at, "ended_at": ended}


def _thin(improvements: list[tuple[int, float]], total: int) -> list[tuple[int, float]]:
    """The best-so-far step line at <= SPARKLINE_POINTS points, ending at `total`."""
    if not improvements:
        return []
    points = improvements
    if len(points) > SPARKLINE_POINTS:
        step = len(points) / (SPARKLINE_POINTS - 1)
        points = [points[int(i * step)] for i in range(SPARKLINE_POINTS - 1)] + [points[-1]]
    if points[-1][0] != total:
        points = points + [(total, points[-1][1])]
    return points
