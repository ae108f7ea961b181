"""ExperimentActor: the one owner of an experiment's state.

Messages are handled one at a time (see tauopt.actors.serve), so asks,
observations, closes and listings are serialized without locks. Every
mutation is handed to the store as one batch; the reply is sent from the
store's commit callback, so nothing is acknowledged before it is durable.
A reply that changes nothing still waits behind this actor's uncommitted
writes, so no caller sees state that could vanish in a crash.

Strategies that run inline (random, sobol, grid) answer within the message.
Pooled strategies (gp) never block the mailbox: a job task asks the pool and
sends the result back as a `ProposalReady` message; asks that find no point
computed ahead are parked and answered in arrival order when it lands.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

import anyio
import numpy as np
from anyio.abc import TaskGroup, TaskStatus

from ..actors import ActorRef, Request, fail, mailbox, reply, serve
from ..errors import ApiError, api_error, invalid
from ..models import Experiment, Observation, Parameter, Suggestion, Value
from ..space import Key, Space
from ..strategies import INLINE, SuggestRequest, propose, resolve_for
from ._messages import (
    ArchiveExperiment,
    Best,
    CloseAllSuggestions,
    CloseSuggestion,
    GetExperiment,
    GetSuggestion,
    Inspect,
    ListObservations,
    ListSuggestions,
    Msg,
    Observe,
    ProposalReady,
    Suggest,
    Summary,
    UpdateExperiment,
    Workers,
)
from ._activity import Activity, observations_after
from ._filewatch import commit_error
from ._store import PutExperiment, PutObservation, PutSuggestion, Snapshot, Store, Write
from ._validate import check_tag, check_update, check_value_and_metrics

log = logging.getLogger("tauopt.engine")

# A point computed ahead against history version v is served while at most
# max(STALENESS_BOUND, parallel_bandwidth) observations arrived since; past that it
# is dropped and recomputed. With N workers, N observations land per round of
# evaluations, so a smaller bound would discard every batch before it is used.
STALENESS_BOUND = 2
# Points kept computed ahead: one per parallel slot, up to this many.
MAX_AHEAD = 8
_DUP_RETRIES = 8
_UNUSED_RNG = np.random.default_rng(0)  # for strategies that draw no random numbers (sobol)


@dataclass
class ActorStats:
    max_open_seen: int = 0
    proposals: int = 0
    fallbacks: int = 0
    last_fallback_reason: str | None = None


class ExperimentActor:
    def __init__(
        self,
        snapshot: Snapshot,
        store: Store,
        *,
        clock: Callable[[], float] = time.time,
        pool: Any = None,
        passivate_after_s: float | None = 600.0,
        mailbox_size: int = 1024,
        ahead: int | None = None,
        fit_deadline_s: float | None = 30.0,
    ) -> None:
        exp = snapshot.experiment
        self.id = exp.id
        self._exp = exp
        self._space = Space(exp.parameters)
        self._store = store
        self._clock = clock
        self._pool = pool
        self._passivate_after_s = passivate_after_s
        self._mailbox_size = mailbox_size
        self._ahead_setting = ahead
        self._fit_deadline_s = fit_deadline_s
        self._drawn = snapshot.drawn
        # the experiment's seed: given, or derived from its id (neither can change)
        seed = exp.strategy_options.seed
        self._seed = seed if seed is not None else int.from_bytes(exp.id.encode()[-8:].rjust(8, b"\0"), "big") % (2**32)
        self._suggestions: dict[str, Suggestion] = {}
        self._open: dict[str, Suggestion] = {}
        self._observations: list[Observation] = list(snapshot.observations)
        self._observed_keys: set[Key] = set()
        self._open_keys: dict[Key, str] = {}
        for s in snapshot.suggestions:
            self._suggestions[s.id] = s
            if s.state == "open":
                self._open[s.id] = s
                self._open_keys[self._space.key(s.assignments)] = s.id
        for o in self._observations:
            self._observed_keys.add(self._space.key(o.assignments))
        self._next_sid = 1 + max((int(s) for s in self._suggestions if s.isdigit()), default=0)
        self._next_oid = 1 + max((int(o.id) for o in self._observations if o.id.isdigit()), default=0)
        self._uncommitted = 0
        self._poisoned: BaseException | None = None
        # pooled strategies
        self._version = 0  # bumps on every observation
        self._ahead: list[tuple[int, dict[str, Value]]] = []  # (version computed at, point)
        self._waiters: deque[tuple[Request[Any], Suggest]] = deque()
        self._job_running = False
        self._tg: TaskGroup | None = None
        self._self_ref: ActorRef | None = None
        self._receive: Any = None
        self._grid_size_cache: tuple[Space, int | None] | None = None
        self.stats = ActorStats(max_open_seen=len(self._open))
        self._activity = Activity.of(exp.metric.sign, self._suggestions.values(), self._observations)

    # -- lifetime ----------------------------------------------------------

    async def run(self, registry: dict[str, ActorRef], *, task_status: TaskStatus[ActorRef] = anyio.TASK_STATUS_IGNORED) -> None:
        send, receive = mailbox(self._mailbox_size)
        ref = ActorRef(send)
        self._receive = receive
        self._self_ref = ActorRef(send.clone())
        self._registry = registry
        registry[self.id] = ref
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                task_status.started(ref)
                with receive:
                    await serve(receive, self._handle, self._passivate_after_s, self._on_idle)
                tg.cancel_scope.cancel()
        finally:
            if registry.get(self.id) is ref:
                del registry[self.id]
            send.close()
            self._self_ref.close()
            forget = getattr(self._pool, "forget", None)
            if forget is not None:
                forget(self.id)  # the pool's warm start for this experiment goes with its actor
            for request, _ in self._waiters:
                fail(request, api_error("unavailable", "the engine is shutting down; retry against the restarted service"))

    async def _on_idle(self) -> bool:
        """Passivate: stop when idle with nothing in flight. The final check and the
        unregistering happen without an await between them, so no message can slip in."""
        if self._job_running or self._waiters:
            return False
        while self._uncommitted:
            await self._store.write(())  # a barrier: after every write this actor queued
        if self._receive.statistics().current_buffer_used or self._job_running or self._waiters:
            return False
        if self._registry.get(self.id) is not None:
            del self._registry[self.id]
        return True

    # -- replies after commit ---------------------------------------------

    def _commit(self, request: Request[Any] | None, writes: list[Write], outcome: Any) -> None:
        """Queue writes (possibly none) and answer `request` once they, and every
        earlier write of this actor, are committed. `outcome` is a value or an ApiError."""
        if not writes and not self._uncommitted:
            if request is not None:
                self._answer(request, outcome)
            return
        if writes and not any(isinstance(w, PutExperiment) for w in writes):
            writes.append(PutExperiment(self._header(), self._drawn))
        self._uncommitted += 1

        def done(exc: BaseException | None) -> None:
            self._uncommitted -= 1
            if exc is not None:
                # memory is ahead of the store now: answer with an error and rebuild from the store
                self._poisoned = exc
                log.error("store commit failed for experiment %s: %r", self.id, exc)
                if request is not None:
                    fail(request, commit_error(exc, "nothing of this request was kept, retry it"))
                return
            if request is not None:
                self._answer(request, outcome)

        self._store.submit(writes, done)

    @staticmethod
    def _answer(request: Request[Any], outcome: Any) -> None:
        if isinstance(outcome, BaseException):
            fail(request, outcome)
        else:
            reply(request, outcome)

    def _header(self) -> Experiment:
        return self._exp.evolve(open_suggestions=len(self._open), observations=len(self._observations))

    # -- dispatch ------------------------------------------------------------

    async def _handle(self, request: Request[Any]) -> None:
        if self._poisoned is not None:
            # Stop; the engine rebuilds this experiment from the store on the next message.
            fail(request, api_error("internal", "the experiment is reloading after a storage failure; retry"))
            self._receive.close()
            return
        msg = request.message
        if isinstance(msg, ProposalReady):
            reply(request, None)
            self._on_proposal(msg)
            return
        # an unowned experiment (made in process, e.g. by the KerasTuner chief) is open to every credential
        if msg.owner is not None and self._exp.owner is not None and msg.owner != self._exp.owner:
            raise api_error("not_found", f"experiment {self.id!r} not found")
        handler = getattr(self, "_on_" + type(msg).__name__)
        handler(request, msg)

    # -- experiment ---------------------------------------------------------

    def _on_GetExperiment(self, request: Request[Any], msg: GetExperiment) -> None:
        self._commit(request, [], self._header())

    def _on_UpdateExperiment(self, request: Request[Any], msg: UpdateExperiment) -> None:
        changes = check_update(msg.changes)
        if "parameters" in changes:
            space = _extended_space(self._space, changes.pop("parameters"))
            changes["parameters"] = space.parameters
            self._space = space
            self._ahead.clear()
        exp = self._exp.evolve(**changes)
        self._exp = exp.evolve(state=self._state_for(exp))
        self._commit(request, [PutExperiment(self._header(), self._drawn)], self._header())

    def _on_ArchiveExperiment(self, request: Request[Any], msg: ArchiveExperiment) -> None:
        self._exp = self._exp.evolve(state="archived")
        self._commit(request, [PutExperiment(self._header(), self._drawn)], self._header())

    def _state_for(self, exp: Experiment) -> str:
        if exp.state == "archived":
            return "archived"
        budget = exp.observation_budget
        return "completed" if budget is not None and len(self._observations) >= budget else "active"

    # -- suggestions --------------------------------------------------------

    def _expire(self, now: float) -> list[Write]:
        ttl = self._exp.suggestion_ttl_s
        if ttl is None:
            return []
        writes: list[Write] = []
        for s in list(self._open.values()):
            if now - s.created_at > ttl:
                writes.append(PutSuggestion(self._leave_open(s, "expired")))
        return writes

    def _leave_open(self, s: Suggestion, state: str) -> Suggestion:
        s = s.evolve(state=state)
        self._suggestions[s.id] = s
        del self._open[s.id]
        self._activity.left(s, self._clock())
        key = self._space.key(s.assignments)
        if self._open_keys.get(key) == s.id:
            del self._open_keys[key]
        return s

    def _on_Suggest(self, request: Request[Any], msg: Suggest) -> None:
        tag = check_tag(msg.tag)
        writes = self._expire(self._clock())
        try:
            self._check_can_suggest()
            strategy = resolve_for(
                self._exp.strategy, self._space, len(self._observations) + len(self._open), self._exp.strategy_options
            )
            if strategy in INLINE:
                point = self._inline_point(strategy)
            else:
                point = self._take_ahead()
                if point is None:
                    self._commit(None, writes, None)
                    self._waiters.append((request, msg))
                    self._ensure_job()
                    return
                self._ensure_job()  # keep a point computed ahead
        except ApiError as exc:
            self._commit(request, writes, exc)
            return
        suggestion = self._open_suggestion(point, tag)
        writes.append(PutSuggestion(suggestion))
        self._commit(request, writes, suggestion)

    def _check_can_suggest(self) -> None:
        state = self._exp.state
        if state == "archived":
            raise api_error("experiment_archived", f"experiment {self.id!r} is archived; create a new experiment to keep searching")
        if state == "completed":
            raise api_error(
                "experiment_completed",
                f"experiment {self.id!r} reached its observation_budget={self._exp.observation_budget}; "
                "raise observation_budget to continue",
            )
        size = self._finite_size()
        if size is not None and self._used_count() >= size:
            raise api_error(
                "space_exhausted",
                f"all {size} points of this finite space are observed or open; close a suggestion or widen the space",
            )
        n, bw = len(self._open) + len(self._waiters), self._exp.parallel_bandwidth
        if n >= bw:
            raise api_error("bandwidth_full", f"{n} open suggestions >= parallel_bandwidth={bw}; observe or close one first")

    @property
    def _grid_size(self) -> int | None:
        """Points per continuous dimension: only `grid` makes continuous spaces finite."""
        return self._exp.strategy_options.grid_size if self._exp.strategy == "grid" else None

    def _finite_size(self) -> int | None:
        """Points in the space (grid points for `grid`), None when unbounded."""
        if self._grid_size is None:
            return self._space.finite_size
        if self._grid_size_cache is None or self._grid_size_cache[0] is not self._space:
            self._grid_size_cache = (self._space, self._space.size(self._grid_size))
        return self._grid_size_cache[1]

    def _used_count(self) -> int:
        """Distinct points observed or open (an open point may also be observed, unsolicited)."""
        return len(self._observed_keys) + sum(1 for k in self._open_keys if k not in self._observed_keys)

    def _is_used(self, key: Key) -> bool:
        return key in self._observed_keys or key in self._open_keys

    def _open_suggestion(self, point: dict[str, Value], tag: str | None) -> Suggestion:
        sid = str(self._next_sid)
        self._next_sid += 1
        s = Suggestion(sid, self.id, point, "open", tag, self._clock())
        self._suggestions[sid] = s
        self._open[sid] = s
        self._open_keys[self._space.key(point)] = sid
        self.stats.max_open_seen = max(self.stats.max_open_seen, len(self._open))
        self._activity.opened(s)
        return s

    def _request(self, n: int, extra_pending: tuple[dict[str, Value], ...] = (), state: bool = True) -> SuggestRequest:
        """state=False leaves history and pending out, for strategies that read neither."""
        return SuggestRequest(
            space=self._space,
            metric=self._exp.metric,
            history=tuple(self._observations) if state else (),
            pending=tuple(s.assignments for s in self._open.values()) + extra_pending if state else (),
            n=n,
            seed=self._seed,
            drawn=self._drawn,
            options=self._exp.strategy_options,
        )

    def _inline_point(self, strategy: str) -> dict[str, Value]:
        """A fresh point from an inline strategy; duplicates are redrawn, then a finite
        space is searched exhaustively; space_exhausted only when nothing is left."""
        n = 1
        strategy = strategy if strategy in INLINE else "sobol"
        for _ in range(_DUP_RETRIES):
            # random and sobol look at neither history nor pending: skip copying them per ask
            request = self._request(n, state=strategy == "grid")
            rng = self._rng() if strategy == "random" else _UNUSED_RNG
            candidates = propose(strategy, request, rng)
            self._drawn += n
            for c in candidates:
                if not self._is_used(self._space.key(c)):
                    return c
            n *= 4
        return self._leftover_point()

    def _rng(self) -> np.random.Generator:
        """Reproducible from (seed, drawn), so a restarted experiment draws what it would have."""
        return np.random.default_rng([self._seed, self._drawn])

    def _leftover_point(self) -> dict[str, Value]:
        if self._finite_size() is not None:
            free = [p for p in self._space.grid(self._grid_size) if not self._is_used(self._space.key(p))]
            if free:
                return free[int(self._rng().integers(len(free)))]
        raise api_error(
            "space_exhausted",
            "no unused point left in this space; close a suggestion, widen the space or create a new experiment",
        )

    # -- pooled strategies: compute ahead, park, answer in order -------------

    @property
    def _stale_bound(self) -> int:
        return max(STALENESS_BOUND, self._exp.parallel_bandwidth)

    @property
    def _ahead_target(self) -> int:
        if self._ahead_setting is not None:
            return self._ahead_setting
        return min(self._exp.parallel_bandwidth, MAX_AHEAD)

    def _take_ahead(self) -> dict[str, Value] | None:
        while self._ahead:
            version, point = self._ahead.pop(0)
            if self._version - version <= self._stale_bound and not self._is_used(self._space.key(point)):
                return point
        return None

    def _ensure_job(self) -> None:
        if self._job_running or self._tg is None:
            return
        fresh = [p for v, p in self._ahead if self._version - v <= self._stale_bound]
        # the waiters, plus a few points ahead for the asks to come (also when the
        # bandwidth is full: they serve the ask that follows the next observation)
        want = len(self._waiters) + self._ahead_target - len(fresh)
        if want <= 0:
            return
        self._job_running = True
        request = self._request(want, extra_pending=tuple(fresh))
        self._tg.start_soon(self._job, request, self._version)

    async def _job(self, request: SuggestRequest, version: int) -> None:
        result, error = None, None
        try:
            if self._pool is not None:
                result = await self._pool.propose(self.id, "gp", request, deadline_s=self._fit_deadline_s)
            else:  # Engine(pool=None): in a thread here, torch pinned like the thread pool's
                from ..strategies._pool import propose_here

                result = await anyio.to_thread.run_sync(propose_here, "gp", request, self._fit_deadline_s)
        except Exception as exc:  # the fallback below answers the asks anyway
            error = exc
        assert self._self_ref is not None
        try:
            await self._self_ref.ask(ProposalReady(version=version, result=result, error=error))
        except Exception:
            pass  # the actor is stopping

    def _on_proposal(self, msg: ProposalReady) -> None:
        self._job_running = False
        self.stats.proposals += 1
        reason = None
        if msg.error is not None:
            reason = f"strategy failed: {msg.error!r}"
        elif msg.result is not None and msg.result.fallback_reason:
            reason = msg.result.fallback_reason
        if reason:
            self.stats.fallbacks += 1
            self.stats.last_fallback_reason = reason
            log.warning("experiment %s: GP fell back to Sobol: %s", self.id, reason)
        landed: list[dict[str, Value]] = []
        if msg.result is not None:
            landed = [dict(c) for c in msg.result.candidates]
        while self._waiters:
            request, ask = self._waiters.popleft()
            try:
                # parked asks take what just landed (the newest model there is), then the buffer
                point = self._pop_unused(landed) or self._take_ahead() or self._inline_point("sobol")
            except ApiError as exc:
                fail(request, exc)
                continue
            suggestion = self._open_suggestion(point, check_tag(ask.tag))
            self._commit(request, [PutSuggestion(suggestion)], suggestion)
        self._ahead.extend((msg.version, p) for p in landed)
        self._ensure_job()

    def _pop_unused(self, points: list[dict[str, Value]]) -> dict[str, Value] | None:
        while points:
            point = points.pop(0)
            if not self._is_used(self._space.key(point)):
                return point
        return None

    # -- observations ---------------------------------------------------------

    def _on_Observe(self, request: Request[Any], msg: Observe) -> None:
        value, failed, metrics = check_value_and_metrics(msg.value, msg.failed, msg.metrics)
        writes: list[Write] = []
        if msg.suggestion_id is not None and msg.assignments is not None:
            raise invalid("give suggestion_id or assignments, not both")
        if msg.suggestion_id is not None:
            s = self._suggestion(msg.suggestion_id)
            # Expiry happens only at the experiment's next ask (_on_Suggest): a late
            # observe of a row still open keeps the link to its suggestion.
            if s.state != "open":
                self._commit(request, writes, _not_open_error(s))
                return
            s = self._leave_open(s, "observed")
            writes.append(PutSuggestion(s))
            assignments, sid = s.assignments, s.id
        elif msg.assignments is not None:
            assignments, sid = self._space.validate(msg.assignments), None
        else:
            raise invalid("give suggestion_id (an open suggestion) or assignments (an unsolicited observation)")
        obs = Observation(str(self._next_oid), self.id, sid, assignments, value, failed, self._clock(), metrics)
        self._next_oid += 1
        self._observations.append(obs)
        self._activity.observed(obs, None if sid is None else self._suggestions[sid].tag)
        self._observed_keys.add(self._space.key(assignments))
        self._version += 1
        state = self._state_for(self._exp)
        if state != self._exp.state:
            self._exp = self._exp.evolve(state=state)
        writes.append(PutObservation(obs))
        self._commit(request, writes, obs)
        if self._ahead and self._version - self._ahead[0][0] > self._stale_bound:
            self._ahead = [(v, p) for v, p in self._ahead if self._version - v <= self._stale_bound]
            self._ensure_job()

    def _suggestion(self, sid: Any) -> Suggestion:
        s = self._suggestions.get(str(sid))
        if s is None:
            raise api_error("not_found", f"suggestion {sid!r} not found in experiment {self.id!r}")
        return s

    def _on_GetSuggestion(self, request: Request[Any], msg: GetSuggestion) -> None:
        self._commit(request, [], self._suggestion(msg.suggestion_id))

    def _on_ListSuggestions(self, request: Request[Any], msg: ListSuggestions) -> None:
        if msg.state is not None and msg.state not in ("open", "observed", "closed", "expired"):
            raise invalid(f"state: {msg.state!r} is not one of ['open', 'observed', 'closed', 'expired']")
        source = self._open.values() if msg.state == "open" else self._suggestions.values()
        out = [
            s
            for s in source
            if (msg.state is None or s.state == msg.state) and (msg.tag is None or s.tag == msg.tag)
        ]
        if msg.state == "open":
            out.sort(key=lambda s: int(s.id) if s.id.isdigit() else 0)
        self._commit(request, [], out)

    def _on_CloseSuggestion(self, request: Request[Any], msg: CloseSuggestion) -> None:
        s = self._suggestion(msg.suggestion_id)
        if s.state == "closed":
            self._commit(request, [], s)
            return
        if s.state != "open":
            raise _not_open_error(s)
        s = self._leave_open(s, "closed")
        self._commit(request, [PutSuggestion(s)], s)

    def _on_CloseAllSuggestions(self, request: Request[Any], msg: CloseAllSuggestions) -> None:
        writes: list[Write] = [PutSuggestion(self._leave_open(s, "closed")) for s in list(self._open.values())]
        self._commit(request, writes, len(writes))

    def _on_ListObservations(self, request: Request[Any], msg: ListObservations) -> None:
        found = self._observations if msg.after is None else observations_after(self._observations, msg.after)
        self._commit(request, [], list(found))

    def _on_Summary(self, request: Request[Any], msg: Summary) -> None:
        self._commit(request, [], dict(self._activity.summary(), experiment=self._header()))

    def _on_Workers(self, request: Request[Any], msg: Workers) -> None:
        now = self._clock()
        out = self._activity.workers(msg.after, self._suggestions, now, self._exp.suggestion_ttl_s)
        out["open"] = [dict(s.to_dict(), age_s=now - s.created_at) for s in self._open.values()]
        self._commit(request, [], out)

    def _on_Inspect(self, request: Request[Any], msg: Inspect) -> None:
        stats = dict(vars(self.stats), open=len(self._open), waiters=len(self._waiters), ahead=len(self._ahead))
        reply(request, stats)

    def _on_Best(self, request: Request[Any], msg: Best) -> None:
        sign = self._exp.metric.sign
        scored = [o for o in self._observations if not o.failed and o.value is not None]
        best = min(scored, key=lambda o: sign * o.value, default=None)  # first of equals wins
        self._commit(request, [], best)


def _not_open_error(s: Suggestion) -> ApiError:
    if s.state == "expired":
        return api_error(
            "suggestion_expired",
            f"suggestion {s.id!r} expired (older than suggestion_ttl_s); re-post its assignments "
            "as an unsolicited observation",
            assignments=dict(s.assignments),
        )
    if s.state == "observed":
        return api_error("suggestion_observed", f"suggestion {s.id!r} already has an observation; ask for a new suggestion")
    return api_error(
        "suggestion_closed",
        f"suggestion {s.id!r} was closed; re-post its assignments as an unsolicited observation if you evaluated it",
        assignments=dict(s.assignments),
    )


def _extended_space(space: Space, raw: Any) -> Space:
    """A space with new parameters added; existing ones must stay exactly as they are."""
    new = Space.parse(raw)
    old = space.by_name
    for p in space.parameters:
        if p.name not in new.by_name:
            raise invalid(f"parameters: {p.name!r} is missing; parameters can be added, not removed")
        if new.by_name[p.name] != p:
            raise invalid(f"parameters: {p.name!r} differs from the stored definition; parameters cannot change")
    added: list[Parameter] = [p for p in new.parameters if p.name not in old]
    return Space(space.parameters + tuple(added))

