"""Ledger: an experiment's suggestions and observations, and the dedup sets.

Plain bookkeeping (no I/O, no anyio), owned by one ExperimentActor: it opens
and leaves suggestions, records observations, and answers "is this point
used?" (observed or open) in O(1). Rebuilt from a store Snapshot.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ..errors import api_error
from ..models import Observation, Suggestion, Value, named_values, with_values
from ..space import Key, Space
from ..store import Snapshot
from ._activity import Activity

__all__ = ["Ledger"]


class Ledger:
    def __init__(self, snapshot: Snapshot, space: Space) -> None:
        self.experiment_id = snapshot.experiment.id
        self._primary = snapshot.experiment.metric.name  # `value`'s name in each observation's `values`
        self.space = space
        self.suggestions: dict[str, Suggestion] = {}
        self.open: dict[str, Suggestion] = {}
        self.observations: list[Observation] = with_values(self._primary, snapshot.observations)
        self._observed_keys: set[Key] = set()
        self._open_keys: dict[Key, str] = {}
        self._key_of_open: dict[str, Key] = {}  # each open suggestion's key: a point is keyed once, when opened
        self.released: deque[str] = deque()  # open, holder declared dead: the next asks get them, in order
        self._last_key: tuple[dict[str, Value], Key] | None = None  # see _key
        for s in snapshot.suggestions:
            self.suggestions[s.id] = s
            if s.state == "open":
                self.open[s.id] = s
                key = self._key_of_open[s.id] = space.key(s.assignments)
                self._open_keys[key] = s.id
                if s.released:
                    self.released.append(s.id)
        for o in self.observations:
            self._observed_keys.add(space.key(o.assignments))
        self._next_sid = 1 + max((int(s) for s in self.suggestions if s.isdigit()), default=0)
        self._next_oid = 1 + max((int(o.id) for o in self.observations if o.id.isdigit()), default=0)
        # what the dashboard reads, kept current at each change (never a history re-scan)
        self.activity = Activity.of_experiment(snapshot.experiment, self.suggestions.values(), self.observations)

    # -- dedup ------------------------------------------------------------------

    def _key(self, point: dict[str, Value]) -> Key:
        """space.key, remembered for the last point: an ask keys its point twice (is it
        used? then open it), always the same dict object in a row; leaving open
        remembers the key the point was opened with, for the observation that follows.
        Points are never mutated once made (a suggestion's assignments are shared by
        every evolved copy), and the memo holds the dict, so its identity cannot be
        reused while it is remembered."""
        last = self._last_key
        if last is not None and last[0] is point:
            return last[1]
        key = self.space.key(point)
        self._last_key = (point, key)
        return key

    def is_used(self, point: dict[str, Value]) -> bool:
        key = self._key(point)
        return key in self._observed_keys or key in self._open_keys

    def used_count(self) -> int:
        """Distinct points observed or open (an open point may also be observed, unsolicited)."""
        return len(self._observed_keys) + sum(1 for k in self._open_keys if k not in self._observed_keys)

    # -- suggestions --------------------------------------------------------------

    def suggestion(self, sid: Any) -> Suggestion:
        s = self.suggestions.get(str(sid))
        if s is None:
            raise api_error("not_found", f"suggestion {sid!r} not found in experiment {self.experiment_id!r}")
        return s

    def open_suggestion(self, point: dict[str, Value], tag: str | None, now: float) -> Suggestion:
        sid = str(self._next_sid)
        self._next_sid += 1
        s = Suggestion(sid, self.experiment_id, point, "open", tag, now)
        self.suggestions[sid] = s
        self.open[sid] = s
        key = self._key_of_open[sid] = self._key(point)
        self._open_keys[key] = sid
        self.activity.opened(s)
        return s

    def reassign(self, s: Suggestion, assignments: dict[str, Value]) -> Suggestion:
        """An open suggestion whose holder chose its point (a trial-based door's trial, its
        parameters set one by one): the point changes; its dedup key stays the one it opened with."""
        s = s.evolve(assignments=assignments)
        self.suggestions[s.id] = self.open[s.id] = s
        return s

    def release(self, s: Suggestion) -> Suggestion:
        """Its holder is gone: it stays open (its point stays used) for the next ask."""
        s = s.evolve(released=True)
        self.suggestions[s.id] = self.open[s.id] = s
        self.released.append(s.id)
        return s

    def rehand(self, tag: str | None, now: float) -> Suggestion | None:
        """The oldest released suggestion, handed to a new holder (attempts + 1), or None."""
        while self.released:
            s = self.open.get(self.released.popleft())
            if s is not None and s.released:
                old = s
                s = s.evolve(released=False, tag=tag, created_at=now, attempts=s.attempts + 1)
                self.suggestions[s.id] = self.open[s.id] = s
                self.activity.rehanded(old, s)
                return s
        return None

    def leave_open(self, s: Suggestion, state: str, now: float) -> Suggestion:
        s = s.evolve(state=state, released=False)
        self.suggestions[s.id] = s
        del self.open[s.id]
        self.activity.left(s, now)
        key = self._key_of_open.pop(s.id)
        if self._open_keys.get(key) == s.id:
            del self._open_keys[key]
        self._last_key = (s.assignments, key)  # an observe of this point keys it next
        return s

    def expired(self, now: float, ttl: float | None) -> list[Suggestion]:
        """Open suggestions older than ttl, moved to `expired`."""
        if ttl is None:
            return []
        # a released suggestion has no holder whose time could run out
        return [self.leave_open(s, "expired", now) for s in list(self.open.values()) if not s.released and now - s.created_at > ttl]

    # -- observations ---------------------------------------------------------------

    def observe(
        self, assignments: dict[str, Value], sid: str | None, value: float | None, failed: bool, now: float, metrics: Any
    ) -> Observation:
        values = named_values(self._primary, value, metrics)
        obs = Observation(str(self._next_oid), self.experiment_id, sid, assignments, value, failed, now, metrics, None, values)
        self._next_oid += 1
        self.observations.append(obs)
        self._observed_keys.add(self._key(assignments))
        self.activity.observed(obs, None if sid is None else self.suggestions[sid].tag)
        return obs
