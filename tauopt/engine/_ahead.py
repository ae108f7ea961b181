"""ComputeAhead: pooled proposals for one experiment, computed ahead of the asks.

A pooled strategy (gp) never blocks the mailbox: one job at a time asks the
StrategyPool for points and its result comes back to the actor as a
`ProposalReady` message. Points land in a buffer stamped with the history
version they were computed at; an ask takes the oldest one still fresh (at
most `stale_bound` observations behind). Asks that find none are parked as
waiters and answered, in arrival order, when the next result lands.
"""

from __future__ import annotations

import math
import time
from collections import deque
from typing import Any, Callable, Iterable

from anyio.abc import TaskGroup

from ..actors import ActorRef, Request
from ..models import Value
from ..strategies import SuggestRequest
from ._messages import ProposalReady, Suggest

__all__ = ["ComputeAhead", "STALENESS_BOUND", "MAX_AHEAD", "ADAPT_AHEAD", "PARK_LEFTOVERS", "PARK_LONG", "ROUND_SHARE"]

# A point computed ahead against history version v is served while at most
# max(STALENESS_BOUND, parallel_bandwidth) observations arrived since; past that it
# is dropped and recomputed. With N workers, N observations land per round of
# evaluations, so a smaller bound would discard every batch before it is used.
STALENESS_BOUND = 2
# How far ahead a job computes ("How far ahead to compute" in the GP documentation).
# MAX_AHEAD caps the points kept computed ahead of the asks (and the slots: one per
# parallel slot at most). ADAPT_AHEAD computes only as many as asks are expected
# while one job runs: bandwidth x job seconds / evaluation seconds (both running
# means; evaluation = suggestion handed out to observed), at least one. Evaluations
# long next to a fit: one ahead, so each point comes from a model that has nearly
# every observation (8 ahead served points computed up to 8 observations back);
# evaluations that take no time: the cap, as before, so asks do not each wait for a
# fit. False: always the cap (the default before).
# PARK_LEFTOVERS: a parked ask the landing job had no point left for waits for the
# next job (started at once, sized for every ask still parked) instead of taking a
# Sobol point. Only a job that answered someone with the strategy's points can leave
# an ask waiting, so a wait is at most two jobs, each within the fit deadline. Always
# on (True) it costs throughput when evaluations take no time (the GP contention row);
# off, it still holds (with ADAPT_AHEAD) for evaluations at least PARK_LONG jobs long
# (both measured, from ROUND_MIN_EVALUATIONS evaluations on): there the wait is a small
# share of an evaluation, while a Sobol point spends one of the modelled evaluations
# at random.
# ROUND_SHARE (with ADAPT_AHEAD): evaluations shorter than this share of a job (0 s
# evaluations next to a fit of a second) come back before a job started now would
# land, so every point it computed would be served a round behind their values. Then
# nothing is computed ahead: a job waits for the observations of the suggestions still
# out (each at most ROUND_WAIT evaluation times past its hand-out, at least
# ROUND_MIN_S) and computes for every slot (asks in flight included). The round costs the
# evaluation time on top of the job's (at most ROUND_SHARE of it); 0 turns it off.
# Only below ROUND_MAX_EVAL_S: asks then wait for a fit anyway, while with longer
# evaluations a slow fit (a loaded machine) must not make every ask wait for one.
# Judged from ROUND_MIN_EVALUATIONS evaluations on.
MAX_AHEAD = 8
ADAPT_AHEAD = True
PARK_LEFTOVERS = False
PARK_LONG = 4.0
ROUND_SHARE = 0.25
ROUND_WAIT = 3.0
ROUND_MIN_S = 0.05
ROUND_MAX_EVAL_S = 0.1
ROUND_MIN_EVALUATIONS = 3

Point = dict[str, Value]


class ComputeAhead:
    def __init__(self, experiment_id: str, pool: Any, fit_deadline_s: float | None, ahead: int | None) -> None:
        self._id = experiment_id
        self._pool = pool
        self._fit_deadline_s = fit_deadline_s
        self._ahead_setting = ahead
        self.version = 0  # bumps on every observation
        self.points: list[tuple[int, Point]] = []  # (version computed at, point)
        self.waiters: deque[tuple[Request[Any], Suggest]] = deque()
        self.job_running = False
        self.wake_set = False  # a timer will retry a job that waits for the round (round_wait)
        # running means (ADAPT_AHEAD): seconds a job takes, seconds a suggestion is evaluated
        self._job_s: float | None = None
        self._eval_s: float | None = None
        self._evaluations = 0
        self._job_t0 = 0.0
        self.strategy: str | None = None  # the pooled strategy the last ask resolved to
        # Points served (for inspect and benchmarks/quality.py): how many, how many were
        # computed before the latest observation (stale), how many were Sobol fallbacks.
        self.served = {"served_pooled": 0, "served_stale": 0, "served_fallback": 0}
        self._fallback_keys: set[tuple] = set()

    def count_served(self, version: int, point: Point | None, fallback: bool = False) -> None:
        self.served["served_pooled"] += 1
        self.served["served_stale"] += version < self.version
        self.served["served_fallback"] += fallback or (point is not None and _key(point) in self._fallback_keys)

    def target(self, bandwidth: int) -> int:
        if self._ahead_setting is not None:
            return self._ahead_setting
        cap = min(bandwidth, MAX_AHEAD)
        if not ADAPT_AHEAD or self._job_s is None or self._eval_s is None:
            return cap
        during_a_job = bandwidth * self._job_s / max(self._eval_s, 1e-6)
        return min(cap, max(1, math.ceil(during_a_job)))

    def _judged(self) -> tuple[float, float] | None:
        """(job seconds, evaluation seconds) when the adaptive rules may judge by them:
        ADAPT_AHEAD, no explicit setting, both measured, from ROUND_MIN_EVALUATIONS
        evaluations on (one quick first observation, a warm-up or a crash, says little)."""
        if not ADAPT_AHEAD or self._ahead_setting is not None or self._job_s is None or self._eval_s is None:
            return None
        return (self._job_s, self._eval_s) if self._evaluations >= ROUND_MIN_EVALUATIONS else None

    def short_evaluations(self) -> bool:
        """Evaluations come back within ROUND_SHARE of a job and ROUND_MAX_EVAL_S (both measured)."""
        judged = self._judged()
        return judged is not None and judged[1] < min(ROUND_SHARE * judged[0], ROUND_MAX_EVAL_S)

    def round_wait(self, handed_out: Iterable[float], now: float) -> float:
        """Seconds the next job should wait for the observations of the suggestions
        still out (handed out at the given times), 0 to start it now: only with asks
        parked and short evaluations, and at most ROUND_WAIT evaluations per suggestion."""
        if not self.waiters or not self.short_evaluations():
            return 0.0
        assert self._eval_s is not None
        horizon = max(ROUND_MIN_S, ROUND_WAIT * self._eval_s)
        return max(0.0, max((t + horizon - now for t in handed_out), default=0.0))

    def parks_leftovers(self) -> bool:
        """An ask the landing job had no point for waits for the next one: always with
        PARK_LEFTOVERS, else when evaluations are PARK_LONG jobs long or more."""
        judged = self._judged()
        return PARK_LEFTOVERS or (judged is not None and judged[1] >= PARK_LONG * judged[0])

    def evaluated(self, seconds: float) -> None:
        """A suggestion was observed `seconds` after it was handed out."""
        self._eval_s = _mean(self._eval_s, max(seconds, 0.0))
        self._evaluations += 1

    @staticmethod
    def stale_bound(bandwidth: int) -> int:
        return max(STALENESS_BOUND, bandwidth)

    def _bound(self, bandwidth: int) -> int:
        """Observations a point may be behind when served: none with short evaluations
        (the job that computed it saw every observation its round had)."""
        return 0 if self.short_evaluations() else self.stale_bound(bandwidth)

    def take(self, bandwidth: int, is_used: Callable[[Point], bool]) -> Point | None:
        """The oldest fresh, unused point computed ahead, or None."""
        while self.points:
            version, point = self.points.pop(0)
            if self.version - version <= self._bound(bandwidth) and not is_used(point):
                self.count_served(version, point)
                return point
        return None

    def observed(self, bandwidth: int) -> bool:
        """An observation arrived: bump the version; True if stale points were dropped
        (so a job should refill)."""
        self.version += 1
        bound = self._bound(bandwidth)
        if self.points and self.version - self.points[0][0] > bound:
            self.points = [(v, p) for v, p in self.points if self.version - v <= bound]
            return True
        return False

    def want(self, bandwidth: int, out: int = 0) -> tuple[int, tuple[Point, ...]]:
        """How many points the next job should compute (the waiters, plus a few ahead
        for the asks to come, also when the bandwidth is full), and the fresh points
        it must treat as pending. With short evaluations none ahead: a job only for
        parked asks, and then for every slot (`out`: suggestions still out)."""
        fresh = tuple(p for v, p in self.points if self.version - v <= self._bound(bandwidth))
        if self.short_evaluations():
            # every slot: asks may be in flight behind their observations, already in
            every = max(len(self.waiters) + out, min(bandwidth, MAX_AHEAD))
            return (every if self.waiters else 0) - len(fresh), fresh
        return len(self.waiters) + self.target(bandwidth) - len(fresh), fresh

    def start(self, tg: TaskGroup, request: SuggestRequest, reply_to: ActorRef) -> None:
        assert self.strategy is not None  # set by the ask that found the strategy pooled
        self.job_running = True
        self._job_t0 = time.monotonic()
        tg.start_soon(self._job, request, self.version, reply_to)

    async def _job(self, request: SuggestRequest, version: int, reply_to: ActorRef) -> None:
        result, error = None, None
        try:
            result = await self._pool.propose(self._id, self.strategy or "", request, deadline_s=self._fit_deadline_s)
        except Exception as exc:  # the fallback on landing answers the asks anyway
            error = exc
        try:
            await reply_to.ask(ProposalReady(version=version, result=result, error=error))
        except Exception:
            pass  # the actor is stopping

    def land(self, msg: ProposalReady) -> tuple[list[Point], str | None]:
        """The job's points and the fallback reason (None when the strategy ran)."""
        self.job_running = False
        self._job_s = _mean(self._job_s, time.monotonic() - self._job_t0)
        reason = None
        if msg.error is not None:
            reason = f"strategy failed: {msg.error!r}"
        elif msg.result is not None and msg.result.fallback_reason:
            reason = msg.result.fallback_reason
        landed = [dict(c) for c in msg.result.candidates] if msg.result is not None else []
        if reason:
            self._fallback_keys.update(_key(p) for p in landed)
        return landed, reason

    def keep(self, version: int, points: list[Point]) -> None:
        self.points.extend((version, p) for p in points)

    def forget_pool_state(self) -> None:
        forget = getattr(self._pool, "forget", None)
        if forget is not None:
            forget(self._id)  # the pool's warm start for this experiment goes with its actor


def _mean(old: float | None, new: float, weight: float = 0.3) -> float:
    """A running mean that follows the recent values (exponential, `weight` on the newest)."""
    return new if old is None else (1 - weight) * old + weight * new


def _key(point: Point) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in point.items()))
