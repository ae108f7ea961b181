"""Ledger: an experiment's suggestions and observations, and the dedup sets.

Plain bookkeeping (no I/O, no anyio), owned by one ExperimentActor: it opens
and leaves suggestions, records observations, and answers "is this point
used?" (observed or open) in O(1). Rebuilt from a store Snapshot.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Iterator, Mapping

from ..errors import api_error
from ..models import Observation, Suggestion, Value, named_values, with_values
from ..space import Key, Space
from ..store import Snapshot
from ._activity import Activity, _sid_order
from ._history import History

__all__ = ["Ledger", "Suggestions"]


class Ledger:
    def __init__(self, snapshot: Snapshot, space: Space) -> None:
        self.experiment_id = snapshot.experiment.id
        self._primary = snapshot.experiment.metric.name  # `value`'s name in each observation's `values`
        self.space = space
        # suggestions the history does not hold: open, closed, expired, and observed ones whose row
        # could not hold them; an observed suggestion otherwise lives in its observation's row
        self._live: dict[str, Suggestion] = {}
        self.suggestions = Suggestions(self)
        self.open: dict[str, Suggestion] = {}
        self.observations = History(self.experiment_id, self._primary, self._space_key)
        self._open_keys: dict[Key, str] = {}
        self._key_of_open: dict[str, Key] = {}  # each open suggestion's key: a point is keyed once, when opened
        self.released: deque[str] = deque()  # open, holder declared dead: the next asks get them, in order
        self._last_key: tuple[dict[str, Value], Key] | None = None  # see _key
        next_sid = 0
        for s in snapshot.suggestions:
            self._live[s.id] = s
            if s.id.isdigit():
                next_sid = max(next_sid, int(s.id))
            if s.state == "open":
                self.open[s.id] = s
                key = self._key_of_open[s.id] = space.key(s.assignments)
                self._open_keys[key] = s.id
                if s.released:
                    self.released.append(s.id)
        observations = with_values(self._primary, snapshot.observations)
        # what the dashboard reads, kept current at each change (never a history re-scan)
        self.activity = Activity.of_experiment(snapshot.experiment, self._live.values(), observations)
        self.observations.on_held = self._taken_over
        next_oid = 0
        offered: set[str] = set()  # a suggestion is offered to the first row that observed it
        for o in observations:
            if o.id.isdigit():
                next_oid = max(next_oid, int(o.id))
            sid = o.suggestion_id
            own = None if sid is None or sid in offered else self._live.get(sid)
            if own is not None:
                offered.add(own.id)
            self.observations.append(o, own)
        del observations, offered
        self.observations.settle()
        self._live = dict(self._live)  # a dict keeps its size after deletions: copied to the size it holds
        self.activity.ended = dict(self.activity.ended)
        self._next_sid = 1 + next_sid
        self._next_oid = 1 + next_oid

    def _space_key(self, point: dict[str, Value]) -> Key:
        return self.space.key(point)

    def _taken_over(self, sids: list[str]) -> None:
        """The history's rows now hold these observed suggestions: the ledger lets go of them."""
        for sid in sids:
            self._live.pop(sid, None)
            self.activity.ended.pop(sid, None)  # its row's time answers

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
        return key in self._open_keys or self.observations.observed(key)

    def used_count(self) -> int:
        """Distinct points observed or open (an open point may also be observed, unsolicited)."""
        history = self.observations
        return history.distinct_points() + sum(1 for k in self._open_keys if not history.observed(k))

    # -- suggestions --------------------------------------------------------------

    def suggestion(self, sid: Any) -> Suggestion:
        s = self._live.get(str(sid)) or self.suggestions.get(str(sid))
        if s is None:
            raise api_error("not_found", f"suggestion {sid!r} not found in experiment {self.experiment_id!r}")
        return s

    def open_suggestion(self, point: dict[str, Value], tag: str | None, now: float) -> Suggestion:
        sid = str(self._next_sid)
        self._next_sid += 1
        s = Suggestion(sid, self.experiment_id, point, "open", tag, now)
        self._live[sid] = s
        self.open[sid] = s
        key = self._key_of_open[sid] = self._key(point)
        self._open_keys[key] = sid
        self.activity.opened(s)
        return s

    def reassign(self, s: Suggestion, assignments: dict[str, Value]) -> Suggestion:
        """An open suggestion whose holder chose its point (a trial-based door's trial, its
        parameters set one by one): the point changes; its dedup key stays the one it opened with."""
        s = s.evolve(assignments=assignments)
        self._live[s.id] = self.open[s.id] = s
        return s

    def release(self, s: Suggestion) -> Suggestion:
        """Its holder is gone: it stays open (its point stays used) for the next ask."""
        s = s.evolve(released=True)
        self._live[s.id] = self.open[s.id] = s
        self.released.append(s.id)
        return s

    def rehand(self, tag: str | None, now: float) -> Suggestion | None:
        """The oldest released suggestion, handed to a new holder (attempts + 1), or None."""
        while self.released:
            s = self.open.get(self.released.popleft())
            if s is not None and s.released:
                old = s
                s = s.evolve(released=False, tag=tag, created_at=now, attempts=s.attempts + 1)
                self._live[s.id] = self.open[s.id] = s
                self.activity.rehanded(old, s)
                return s
        return None

    def leave_open(self, s: Suggestion, state: str, now: float) -> Suggestion:
        s = s.evolve(state=state, released=False)
        self._live[s.id] = s
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
        held = None if sid is None else self._live.get(sid)
        self.activity.observed(obs, None if held is None else held.tag)
        self.observations.append(obs, held, self._key(assignments))
        return obs

    def set_last(self, obs: Observation) -> Observation:
        """The last observation becomes `obs` (the same one with its stopped step)."""
        self.observations.set_last(obs)
        return obs

    def timeline(self, sids: list[str]) -> dict[str, tuple[Suggestion, float | None]]:
        """Each known suggestion of sids with when it left "open" (see Activity.workers)."""
        out: dict[str, tuple[Suggestion, float | None]] = {}
        rest = []
        for sid in sids:
            s = self._live.get(sid)
            if s is not None:
                out[sid] = (s, self.activity.ended.get(sid))
            else:
                rest.append(sid)
        if rest:
            out.update(self.observations.held_many(rest))
        return out


class Suggestions(Mapping[str, Suggestion]):
    """Every suggestion by id: the ledger's live ones and those the history's rows hold
    (made on read). Iterated in id order."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def __getitem__(self, sid: str) -> Suggestion:
        s = self._ledger._live.get(sid)
        if s is None:
            found = self._ledger.observations.held_suggestion(sid)
            if found is None:
                raise KeyError(sid)
            s = found[0]
        return s

    def __contains__(self, sid: object) -> bool:
        return sid in self._ledger._live or (isinstance(sid, str) and self._ledger.observations.held_suggestion(sid) is not None)

    def __len__(self) -> int:
        held = self._ledger.observations.held_count()  # first: it may take suggestions over from _live
        return len(self._ledger._live) + held

    def __iter__(self) -> Iterator[str]:
        return (s.id for s in self.values())

    def values(self) -> list[Suggestion]:  # type: ignore[override]
        held = [s for _, s in self._ledger.observations.held_suggestions()]  # first, as in __len__
        every = list(self._ledger._live.values()) + held
        every.sort(key=_sid_order)
        return every
