"""A bounded sample of a history for plotting: what a chart draws at any size.

A page that draws every observation of a long history spends seconds reading
and drawing points a screen cannot separate. `downsample` keeps at most
`limit` observations, chosen so a chart drawn from them still tells the truth
where it matters:

- the best-so-far line is exact: every improvement (its position, id, value and time) is returned beside the sample, whatever the limit;
- the best observation and the latest ones (a tenth of the limit) are always
  in the sample, as are the improvements while they fit in a quarter of it (the
  latest of them when there are more);
- the rest is stratified over the history: the remaining positions are cut
  into equal slices and one is kept from each (deterministic, so a redraw does
  not jump).

Positions are 1-based places in arrival order, so a sampled point is drawn at
its place in the history.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..models import Observation

__all__ = ["Downsample", "downsample"]


@dataclass(frozen=True)
class Downsample:
    total: int  # observations in the history
    positions: tuple[int, ...]  # 1-based place of each kept observation, ascending
    kept: tuple[Observation, ...]  # the kept observations, in arrival order
    best_trace: tuple[tuple[int, str, float, float], ...]  # every improvement: (position, id, value, created_at)


def _scored(o: Observation) -> bool:
    return not o.failed and o.value is not None


def _trace(observations: Sequence[Observation], minimize: bool) -> list[tuple[int, str, float, float]]:
    trace: list[tuple[int, str, float, float]] = []
    for i, o in enumerate(observations):
        if _scored(o):
            v = float(o.value)  # type: ignore[arg-type]
            if not trace or (v < trace[-1][2] if minimize else v > trace[-1][2]):
                trace.append((i + 1, o.id, v, o.created_at))
    return trace


def _trace_of_column(
    observations: Sequence[Observation], column: np.ndarray, minimize: bool
) -> list[tuple[int, str, float, float]]:
    """_trace from the objective's column (nan: not scored): only the improvements are made into objects."""
    signed = column if minimize else -column
    scored = np.flatnonzero(~np.isnan(signed))
    if scored.size == 0:
        return []
    v = signed[scored]
    improved = np.empty(v.size, dtype=bool)
    improved[0] = True
    improved[1:] = v[1:] < np.minimum.accumulate(v)[:-1]
    rows = scored[improved].tolist()
    return [(r + 1, o.id, float(o.value), o.created_at) for r, o in zip(rows, (observations[r] for r in rows))]  # type: ignore[arg-type]


def downsample(observations: Sequence[Observation], objective: str, limit: int) -> Downsample:
    """At most `limit` (>= 1) of `observations` (arrival order), with the exact best-so-far
    trace under `objective` ("minimize" or "maximize")."""
    if limit < 1:
        raise ValueError("limit: give a positive integer")
    n, minimize = len(observations), objective == "minimize"
    values = getattr(observations, "objective_values", None)  # a columnar history's view
    column = values() if values is not None else None
    trace = _trace(observations, minimize) if column is None else _trace_of_column(observations, column, minimize)
    if n <= limit:
        return Downsample(n, tuple(range(1, n + 1)), tuple(observations), tuple(trace))
    keep: set[int] = set()  # 0-based indexes
    if trace:
        keep.add(trace[-1][0] - 1)  # the best
    keep.update(range(n - max(1, limit // 10), n))  # the latest
    for pos, *_ in trace[::-1][: max(0, limit // 4 - 1)]:  # the latest improvements
        keep.add(pos - 1)
    rest = [i for i in range(n) if i not in keep] if len(keep) < limit else []
    slots = limit - len(keep)
    if slots > 0 and rest:
        step = len(rest) / slots
        keep.update(rest[int(k * step + step / 2)] for k in range(slots))
    chosen = sorted(keep)[:limit] if len(keep) > limit else sorted(keep)
    return Downsample(n, tuple(i + 1 for i in chosen), tuple(observations[i] for i in chosen), tuple(trace))
