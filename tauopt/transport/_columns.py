"""Observations as columns: the compact listing a dashboard reads at scale.

A list of 10,000 observation objects repeats every key 10,000 times (3 MB of
JSON for 4 parameters) and costs the server ~175 ms to encode; as one array per
field it is about a third of the size and encodes several times faster
(benchmarks/dashboard_load.py). Same data, same order, nothing dropped:

    {"count": n,
     "id": [...], "suggestion_id": [...], "value": [...], "failed": [...],
     "created_at": [...], "stopped_at_step": [...],
     "assignments": {parameter: [...]},   null where the parameter was inactive
     "metrics": {metric: [...]}}          null where the observation did not carry it

Row i of every array is observation i; `experiment_id` is the path's, and
`values` is `value` under the experiment's first objective's name, then `metrics`.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Sequence

import anyio

from ..models import Observation

__all__ = ["observation_columns", "ColumnsCache"]


def observation_columns(observations: Sequence[Observation]) -> dict[str, Any]:
    params: dict[str, None] = {}
    metrics: dict[str, None] = {}
    for o in observations:  # first-seen order, so columns do not reorder as data grows
        params.update(dict.fromkeys(o.assignments))
        if o.metrics:
            metrics.update(dict.fromkeys(o.metrics))
    return {
        "count": len(observations),
        "id": [o.id for o in observations],
        "suggestion_id": [o.suggestion_id for o in observations],
        "value": [o.value for o in observations],
        "failed": [o.failed for o in observations],
        "created_at": [o.created_at for o in observations],
        "stopped_at_step": [o.stopped_at_step for o in observations],
        "assignments": {p: [o.assignments.get(p) for o in observations] for p in params},
        "metrics": {m: [o.metrics.get(m) for o in observations] for m in metrics},
    }


class ColumnsCache:
    """The full listing (`after` = 0) of the last few experiments read, kept encoded.

    Encoding 10,000 observations as JSON costs the server ~100 ms (most of it
    float formatting), paid again by every tab that opens the experiment. The
    history only grows at its end, so a later full read encodes only the
    observations that arrived since and joins the pieces (~1 ms). A history
    that is not an extension of the cached one (another store, a reload of the
    actor with new objects, a parameter or metric first seen) is encoded afresh.
    Bytes are what `render_json(observation_columns(obs))` would give. Kept: the
    `experiments` read last, within `max_bytes` of encoded text (the one just
    read always; 10,000 observations of 4 parameters are ~1.1 MB).
    """

    def __init__(self, experiments: int = 8, max_bytes: int = 64 << 20) -> None:
        self._limit, self._max_bytes = experiments, max_bytes
        self._entries: OrderedDict[str, _Encoded] = OrderedDict()
        self._lock = anyio.Lock()

    def __contains__(self, experiment_id: object) -> bool:
        return experiment_id in self._entries

    async def read_full(self, experiment_id: str, observations: Sequence[Observation]) -> bytes:
        """`full(...)`, on a worker thread (one at a time: they share the cache) when
        more than a few hundred observations are new since the last read."""
        async with self._lock:
            entry = self._entries.get(experiment_id)
            if len(observations) - (entry.count if entry is not None else 0) <= _INLINE_ROWS:
                return self.full(experiment_id, observations)
            with anyio.CancelScope(shield=True):  # the cache stays whole if the caller hangs up
                out: bytes = await anyio.to_thread.run_sync(self.full, experiment_id, observations)
        return out

    def full(self, experiment_id: str, observations: Sequence[Observation]) -> bytes:
        entry = self._entries.pop(experiment_id, None)
        if entry is None or not entry.extended_by(observations):
            entry = _Encoded()
        entry.extend(observations[entry.count :])
        self._entries[experiment_id] = entry
        while len(self._entries) > 1 and (
            len(self._entries) > self._limit or sum(e.size for e in self._entries.values()) > self._max_bytes
        ):
            self._entries.popitem(last=False)
        return entry.render()


_INLINE_ROWS = 500  # new observations encoded on the event loop at most

_SCALARS = ("id", "suggestion_id", "value", "failed", "created_at", "stopped_at_step")


@dataclass
class _Encoded:
    """One experiment's columns as JSON array bodies, one piece per extension."""

    count: int = 0
    last: Observation | None = None
    params: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    pieces: dict[str, list[str]] = field(default_factory=dict)
    size: int = 0  # characters held in pieces

    def extended_by(self, observations: Sequence[Observation]) -> bool:
        if len(observations) < self.count or (self.count and observations[self.count - 1] != self.last):
            return False
        params, metrics = set(self.params), set(self.metrics)
        return not self.count or all(o.assignments.keys() <= params and o.metrics.keys() <= metrics for o in observations[self.count :])

    def extend(self, observations: Sequence[Observation]) -> None:
        if not observations:
            return
        cols = observation_columns(observations)
        if not self.count:
            self.params, self.metrics = tuple(cols["assignments"]), tuple(cols["metrics"])
        arrays = {name: cols[name] for name in _SCALARS}
        arrays.update({f"a:{p}": cols["assignments"].get(p, [None] * len(observations)) for p in self.params})
        arrays.update({f"m:{m}": cols["metrics"].get(m, [None] * len(observations)) for m in self.metrics})
        for key, values in arrays.items():
            piece = _dumps(values)[1:-1]
            self.pieces.setdefault(key, []).append(piece)
            self.size += len(piece)
        self.count += len(observations)
        self.last = observations[-1]

    def render(self) -> bytes:
        def array(key: str) -> str:
            return "[" + ",".join(self.pieces.get(key, ())) + "]"

        def group(prefix: str, names: tuple[str, ...]) -> str:
            return "{" + ",".join(f"{_dumps(n)}:{array(prefix + n)}" for n in names) + "}"

        scalars = "".join(f"{_dumps(name)}:{array(name)}," for name in _SCALARS)
        text = (
            f'{{"count":{self.count},{scalars}"assignments":{group("a:", self.params)},"metrics":{group("m:", self.metrics)}}}'
        )
        return text.encode()


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
