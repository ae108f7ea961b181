"""Feasibility, the best feasible observation and the Pareto front: pure functions
over an experiment's metrics and its observations.

An observation's value of a metric: `value` for the first objective
(`Experiment.metric`), `metrics[name]` for every other metric. Objective vectors
are signed so that smaller is better in every coordinate (`Metric.sign`).

Rules (the README's "More than one metric" section states them for users):
- feasible: not failed, every metric present, every constraint satisfied;
- best (one objective): the feasible observation with the best first objective,
  the first of equals wins; None while nothing is feasible;
- Pareto front: the feasible observations no other feasible one dominates
  (<= in every objective, < in one); of identical vectors the first is kept,
  so each point of the front appears once, in arrival order.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from .models import Experiment, Observation

__all__ = [
    "metric_value",
    "is_feasible",
    "objective_vector",
    "dominates",
    "nondominated",
    "best_feasible",
    "pareto_front",
    "GrowingFront",
    "hypervolume",
]


def metric_value(experiment: Experiment, obs: Observation, name: str) -> float | None:
    if name == experiment.metric.name:
        return obs.value
    return obs.metrics.get(name)


def is_feasible(experiment: Experiment, obs: Observation) -> bool:
    if obs.failed or obs.value is None:
        return False
    for m in experiment.metrics:
        v = metric_value(experiment, obs, m.name)
        if v is None:
            return False
        if m.constraint is not None and not m.constraint.satisfied(v):
            return False
    return True


def objective_vector(experiment: Experiment, obs: Observation) -> tuple[float, ...]:
    """The objectives, each signed so smaller is better; call on feasible observations only."""
    return tuple(m.sign * float(metric_value(experiment, obs, m.name)) for m in experiment.objectives)  # type: ignore[arg-type]


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """a dominates b (minimizing every coordinate)."""
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def nondominated(points: np.ndarray) -> np.ndarray:
    """Indices (ascending) of the non-dominated rows of `points` (minimization), first of
    duplicates kept.

    Rows are swept in lexicographic order (ties by index): a row can only be dominated
    by, or duplicate, a row before it, and then also by one already kept. Two
    coordinates need only the running minimum of the second: O(n log n). More compare
    each row with the rows kept so far: O(n * front)."""
    pts = np.asarray(points, dtype=float)
    n = len(pts)
    if n == 0:
        return np.zeros(0, dtype=int)
    pts = pts.reshape(n, -1)
    order = np.lexsort((np.arange(n), *pts.T[::-1]))
    if pts.shape[1] <= 2:
        last = pts[order, -1]
        before = np.concatenate(([np.inf], np.minimum.accumulate(last)[:-1]))
        return np.sort(order[last < before])
    kept: list[int] = []
    front = np.empty_like(pts)  # the kept rows, front[: len(kept)]
    for i in order:
        if not np.any(np.all(front[: len(kept)] <= pts[i], axis=1)):
            front[len(kept)] = pts[i]
            kept.append(int(i))
    return np.sort(np.asarray(kept, dtype=int))


def best_feasible(experiment: Experiment, observations: Iterable[Observation]) -> Observation | None:
    sign = experiment.metric.sign
    feasible = [o for o in observations if is_feasible(experiment, o)]
    return min(feasible, key=lambda o: sign * o.value, default=None)  # type: ignore[operator]


def pareto_front(experiment: Experiment, observations: Iterable[Observation]) -> list[Observation]:
    return GrowingFront(experiment).front(list(observations))


_ONE_BY_ONE = 64  # new observations compared one at a time with the front; more are merged by a sweep


class GrowingFront:
    """The Pareto front of one experiment's history as it grows, kept between reads.

    A history only grows at its end, and a point the front dominates stays dominated, so
    the front of a longer history is the front of (the kept front + the new
    observations): each read compares what arrived since with the front, never with the
    whole history. A history that is not an extension of the one seen (another actor's
    copy after a reload) is taken afresh. Not thread-safe: one caller at a time."""

    def __init__(self, experiment: Experiment) -> None:
        self.experiment = experiment
        self._reset()

    def _reset(self) -> None:
        self.count = 0
        self._last: Observation | None = None
        self._front: list[Observation] = []
        self._vectors = np.zeros((0, len(self.experiment.objectives)))

    def extended_by(self, observations: Sequence[Observation]) -> bool:
        n = self.count
        return len(observations) >= n and (n == 0 or observations[n - 1] is self._last or observations[n - 1] == self._last)

    def front(self, observations: Sequence[Observation]) -> list[Observation]:
        """The front of `observations` (this history, grown or not), in arrival order."""
        if not self.extended_by(observations):
            self._reset()
        new = [o for o in observations[self.count :] if is_feasible(self.experiment, o)]
        if len(new) <= _ONE_BY_ONE:
            for o in new:
                self._add(o)
        else:
            candidates = self._front + new
            added = np.array([objective_vector(self.experiment, o) for o in new], dtype=float)
            vectors = np.concatenate((self._vectors, added.reshape(len(new), -1)))
            keep = nondominated(vectors)
            self._front, self._vectors = [candidates[i] for i in keep], vectors[keep]
        self.count = len(observations)
        self._last = observations[-1] if observations else None
        return list(self._front)

    def _add(self, o: Observation) -> None:
        """One new feasible observation against the front: O(front), no sort."""
        v = np.asarray(objective_vector(self.experiment, o), dtype=float)
        front = self._vectors
        if np.any(np.all(front <= v, axis=1)):
            return  # dominated by, or equal to, a point already on the front
        beaten = np.all(v <= front, axis=1)  # v differs from each of them: it dominates them
        if beaten.any():
            kept = np.flatnonzero(~beaten)
            self._front = [self._front[i] for i in kept]
            front = front[kept]
        self._front.append(o)
        self._vectors = np.vstack((front, v))


def hypervolume(points: np.ndarray, reference: Sequence[float]) -> float:
    """The volume dominated by `points` (minimization) and bounded by `reference`.

    Exact, by slicing along the last coordinate (HSO, While et al. 2006): fine for
    the fronts of a few hundred points and 2-4 objectives the benchmarks measure."""
    ref = np.asarray(reference, dtype=float)
    pts = np.asarray(points, dtype=float).reshape(-1, len(ref))
    pts = pts[np.all(pts < ref, axis=1)]
    if len(pts) == 0:
        return 0.0
    pts = pts[nondominated(pts)]
    return _hv(pts, ref)


def _hv(pts: np.ndarray, ref: np.ndarray) -> float:
    if pts.shape[1] == 1:
        return float(ref[0] - pts[:, 0].min())
    if pts.shape[1] == 2:
        order = pts[np.argsort(pts[:, 0])]
        volume, best_y = 0.0, ref[1]
        for x, y in order:
            if y < best_y:
                volume += (ref[0] - x) * (best_y - y)
                best_y = y
        return float(volume)
    order = pts[np.argsort(pts[:, -1])]
    volume = 0.0
    for i in range(len(order)):
        upper = order[i + 1, -1] if i + 1 < len(order) else ref[-1]
        depth = upper - order[i, -1]
        if depth > 0:
            slab = order[: i + 1, :-1]
            volume += depth * _hv(slab[nondominated(slab)], ref[:-1])
    return float(volume)
