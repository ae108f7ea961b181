"""ExperimentActor: the one owner of an experiment's state.

Messages are handled one at a time (see tauopt.actors.serve), so asks,
observations, closes and listings are serialized without locks. The actor
dispatches each message type to its handler (`_dispatch`, one `match`) and
leans on three collaborators, each with one job:

- `Ledger` (_ledger.py): suggestions, observations, the dedup sets;
- `CommitThenReply` (_replies.py): a reply leaves only after its writes are durable;
- `ComputeAhead` (_ahead.py): pooled strategies (gp) computed ahead, asks
  parked until a proposal lands, never blocking the mailbox;
- `SlotWaiters` (_slots.py): asks waiting (`wait_s`) for a free slot;
- `release` (_leases.py): a suggestion whose holder is declared dead;
- `count_failure` (_failures.py): the cap on consecutive failed runs;
- `TrialBook` (_trials.py): the study and trials of a trial-based door (Optuna's model);
  `_served.py`: the WAITING trials a study that asks for them is served (tauopt's points);
- door state (`DoorState`): a door's own JSON state per key (a bracket schedule), a record
  of the experiment like the study's.

Inline strategies (random, sobol, grid: the registry says which) answer within
the message. An ask that finds the bandwidth full may wait (`wait_s`) for a
slot: it is parked and retried, in arrival order, whenever a slot returns.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

import anyio
import numpy as np
from anyio.abc import TaskGroup, TaskStatus

from ..actors import NOT_NOW, ActorRef, Request, close_mailbox, fail, mailbox, reply, serve
from ..errors import ApiError, api_error, invalid
from ..models import Experiment, Parameter, Suggestion, Value
from ..schema import check_early_stopping, check_observation, check_report, check_tag, check_update
from ..space import Space
from ..store import DeleteExperiment as DeleteWrite
from ..store import PutCounters, PutExperiment, PutObservation, PutRecord, PutReport, PutSuggestion, Snapshot, Store, Write
from ..strategies import Draws, Strategy, SuggestRequest, design, grids, resolve_for
from ..strategies import get as get_strategy
from ._admin import best_observation
from ._ahead import MAX_AHEAD, STALENESS_BOUND, ComputeAhead
from ._curves import Curves
from ._failures import count_failure, count_success, reset_changes, stopped_error
from ._history import INLINE_ROWS, RowsLater
from ._ledger import Ledger
from ._messages import (
    ArchiveExperiment,
    Best,
    CloseAllSuggestions,
    CloseSuggestion,
    DeleteExperiment,
    DoorState,
    ExportExperiment,
    GetExperiment,
    GetSuggestion,
    Inspect,
    ListObservations,
    ListReports,
    ListSuggestions,
    Msg,
    Observe,
    ProposalReady,
    ReleaseSuggestion,
    Report,
    RoundWaitOver,
    SlotWaitOver,
    Suggest,
    Summary,
    TrialOp,
    UnarchiveExperiment,
    UpdateExperiment,
    ReportLog,
    Workers,
)
from ._export import export_document
from ._leases import not_open_error, release
from ._replies import CommitThenReply
from ._slots import SlotWaiters, wait_over_error, wake_after
from ._served import SERVE_KEY, check_serve_attr, refreshed_attrs, served_strategy, served_trial, to_serve
from ._trials import (
    READS, SHOULD_STOP_KEY, STOPPING_KEY, CommittedTrials, NewTrial, ReadTrials, SetIntermediate, SetParam, SetState,
    SetStudyAttr, Trial, TrialBook, assignments_of, check_attr, mirrored, parameter_of,
)  # fmt: skip

__all__ = ["ExperimentActor", "ActorStats", "STALENESS_BOUND", "MAX_AHEAD"]

log = logging.getLogger("tauopt.engine")

_DUP_RETRIES = 8
_TRIAL_TAG = "trial"  # the suggestions that are a trial-based door's trials
_DOOR_PREFIX = "door/"  # the records of a door's own state (DoorState), beside the study's
_UNUSED_RNG = np.random.default_rng(0)  # for strategies that draw no random numbers (registry: draws_random=False)


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
        self._clock = clock
        self._passivate_after_s = passivate_after_s
        self._mailbox_size = mailbox_size
        self._drawn = snapshot.drawn
        # the experiment's seed: given, or derived from its id (neither can change)
        seed = exp.strategy_options.seed
        self._seed = seed if seed is not None else int.from_bytes(exp.id.encode()[-8:].rjust(8, b"\0"), "big") % (2**32)
        self._draws = Draws(self._seed)
        self._ledger = Ledger(snapshot, self._space)
        self._curves = Curves(snapshot)
        self._trials = TrialBook(snapshot.records)
        self._committed = CommittedTrials(self._trials.study, self._trials.doors())  # what reads show
        self._door_state = {k[len(_DOOR_PREFIX):]: b for k, b in snapshot.records if k.startswith(_DOOR_PREFIX)}
        # the counters and `drawn` of this actor's last queued write (None: none yet), see _add_header
        self._counters_written: tuple[int, int, int] | None = None
        self._replies = CommitThenReply(store, self.id, self._add_header)
        # commit(request, writes, outcome): the replies' own method, no frame of the actor's around it
        self._commit = self._replies.commit
        self._ahead = ComputeAhead(self.id, pool, fit_deadline_s, ahead)
        self._slot_waiters = SlotWaiters()
        self._tg: TaskGroup | None = None
        self._self_ref: ActorRef | None = None
        self._receive: Any = None
        self._grid_size_cache: tuple[Space, int | None] | None = None
        self._deleted = False  # deleted from the store: every later message answers not_found
        self.stats = ActorStats(max_open_seen=len(self._ledger.open))

    @staticmethod
    def check_snapshot(snapshot: Snapshot) -> None:
        """Raise if the actor could not be rebuilt from `snapshot` (an import's history):
        every point keyed in the space, every report a known suggestion's."""
        space = Space(snapshot.experiment.parameters)
        known = {s.id for s in snapshot.suggestions}
        unknown = sorted({r.suggestion_id for r in snapshot.reports} - known)
        if unknown:
            raise invalid(f"import: reports of suggestions the document does not hold: {unknown[:5]}")
        Ledger(snapshot, space)
        Curves(snapshot)

    # -- lifetime ----------------------------------------------------------

    async def run(self, registry: dict[str, ActorRef], *, task_status: TaskStatus[ActorRef] = anyio.TASK_STATUS_IGNORED) -> None:
        send, receive = mailbox(self._mailbox_size)
        ref = ActorRef(send, self._peek)
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
            self._ahead.forget_pool_state()
            for request, _ in [*self._ahead.waiters, *self._slot_waiters]:
                fail(request, api_error("unavailable", "the engine is shutting down; retry against the restarted service"))

    def _busy(self) -> bool:
        return self._ahead.job_running or bool(self._ahead.waiters) or bool(self._slot_waiters)

    async def _on_idle(self) -> bool:
        """Passivate: stop when idle with nothing in flight. The final check and the
        unregistering happen without an await between them, so no message can slip in."""
        if self._busy():
            return False
        await self._replies.drain()
        if self._receive.pending or self._busy():
            return False
        if self._registry.get(self.id) is not None:
            del self._registry[self.id]
        return True

    # -- commits -------------------------------------------------------------

    def _add_header(self, writes: list[Write]) -> None:
        """A mutation that changed the experiment's counters or `drawn` carries them: just
        those (PutCounters), after whatever header it rewrites. One that left them as this
        actor last queued them (a trial's parameter, an attribute) writes no counters: this
        actor's writes commit in order, and a failed one poisons it, so the stored counters
        are those last queued. A header built before the counters moved (a parameter added
        as a trial is observed) is followed by the counters it lacks."""
        written = self._counters_written
        for w in writes:
            t = type(w)  # by exact type (no write type is subclassed)
            if t is PutExperiment:
                e = w.experiment  # type: ignore[union-attr]
                written = (e.open_suggestions, e.observations, w.drawn)  # type: ignore[union-attr]
            elif t is DeleteWrite:
                return
        ledger = self._ledger
        now = (len(ledger.open), len(ledger.observations), self._drawn)
        if now != written:
            writes.append(PutCounters(self.id, *now))
        self._counters_written = now

    def _header(self) -> Experiment:
        return self._exp.evolve(open_suggestions=len(self._ledger.open), observations=len(self._ledger.observations))

    # -- dispatch ------------------------------------------------------------

    async def _handle(self, request: Request[Any]) -> None:
        if self._replies.poisoned is not None:
            # Stop; the engine rebuilds this experiment from the store on the next message. Unregister
            # before closing (after the writes still in flight are settled, so the rebuild reads them):
            # a closed mailbox left in the registry would send every later message back to it.
            def reloading() -> ApiError:
                return api_error("internal", "the experiment is reloading after a storage failure; retry")

            fail(request, reloading())
            await self._replies.drain()
            if self._registry.get(self.id) is not None:
                del self._registry[self.id]
            close_mailbox(self._receive, reloading)  # with the requests that came meanwhile
            return
        msg = request.message
        if isinstance(msg, (ProposalReady, SlotWaitOver, RoundWaitOver)):  # the actor's own messages
            reply(request, None)
            if self._deleted:
                return  # a fit or a timer that outlived the experiment: nothing to do
        elif self._deleted:
            raise api_error("not_found", f"experiment {self.id!r} not found (it was deleted)")
        # an unowned experiment (made in process, e.g. by the KerasTuner chief) is open to every credential
        elif msg.owner is not None and self._exp.owner is not None and msg.owner != self._exp.owner:
            raise api_error("not_found", f"experiment {self.id!r} not found")
        self._dispatch(request, msg)

    def _dispatch(self, request: Request[Any], msg: Msg) -> None:
        ledger = self._ledger
        match msg:
            case Suggest():
                self._on_suggest(request, msg)
            case Observe():
                self._on_observe(request, msg)
            case Report():
                self._on_report(request, msg)
            case ListReports():
                self._commit(request, [], self._curves.listing(msg.suggestion_id))
            case GetExperiment():
                self._commit(request, [], self._header())
            case UpdateExperiment():
                self._on_update(request, msg)
            case ArchiveExperiment():
                self._exp = self._exp.evolve(state="archived")
                self._commit(request, [PutExperiment(self._header(), self._drawn)], self._header())
            case UnarchiveExperiment():
                self._exp = self._exp.evolve(state=self._state_for(self._exp.evolve(state="active")))
                self._commit(request, [PutExperiment(self._header(), self._drawn)], self._header())
            case DeleteExperiment():
                self._on_delete(request, msg)
            case ExportExperiment():
                snapshot = Snapshot(
                    self._header(), tuple(ledger.suggestions.values()), tuple(ledger.observations), self._drawn,
                    tuple(self._curves.reports),
                )  # fmt: skip
                self._commit(request, [], export_document(snapshot))
            case GetSuggestion():
                self._commit(request, [], ledger.suggestion(msg.suggestion_id))
            case ListSuggestions():
                self._on_list_suggestions(request, msg)
            case CloseSuggestion():
                self._on_close(request, msg)
            case ReleaseSuggestion():
                self._on_release(request, msg)
            case CloseAllSuggestions():
                writes: list[Write] = [PutSuggestion(ledger.leave_open(s, "closed", self._clock())) for s in list(ledger.open.values())]
                self._commit(request, writes, len(writes))
                self._retry_slot_waiters()
            case ListObservations():
                history = ledger.observations
                start = 0 if msg.after is None else history.after(msg.after)
                count = len(history) - start if msg.limit is None else min(msg.limit, len(history) - start)
                if count <= INLINE_ROWS:
                    self._commit(request, [], history.rows(start, msg.failed, msg.limit))
                else:
                    self._commit(request, [], RowsLater(history.view(), start, msg.failed, msg.limit))
            case Summary():
                self._commit(request, [], dict(ledger.activity.summary(), experiment=self._header()))
            case Workers():
                self._on_workers(request, msg)
            case ReportLog():
                self._commit(request, [], self._curves.log_after(msg.after, msg.limit))
            case Best():
                self._on_best(request)
            case TrialOp():
                self._on_trial_op(request, msg)
            case DoorState():
                self._on_door_state(request, msg)
            case Inspect():
                self._on_inspect(request)
            case ProposalReady():
                self._on_proposal(msg)
            case SlotWaitOver():
                self._on_slot_wait_over(msg)
            case RoundWaitOver():
                self._ahead.wake_set = False
                self._ensure_job()
            case _:
                raise invalid(f"unknown message {type(msg).__name__}")

    def _on_workers(self, request: Request[Any], msg: Workers) -> None:
        ledger, now = self._ledger, self._clock()
        out = ledger.activity.workers(msg.after, ledger.timeline, now, self._exp.suggestion_ttl_s, msg.limit)
        out["open"] = [dict(s.to_dict(), age_s=now - s.created_at) for s in ledger.open.values()]
        self._commit(request, [], out)

    # -- experiment ---------------------------------------------------------

    def _on_update(self, request: Request[Any], msg: UpdateExperiment) -> None:
        changes = check_update(msg.changes)
        if "parameters" in changes:
            space = _extended_space(self._space, changes.pop("parameters"))
            changes["parameters"] = space.parameters
            self._space = self._ledger.space = space
            self._ahead.points.clear()
        if "early_stopping" in changes:
            self._curves.set_rule(changes["early_stopping"])
        if "max_consecutive_failures" in changes:
            changes.update(reset_changes(changes["max_consecutive_failures"]))  # the user's "fixed it, try again"
        exp = self._exp.evolve(**changes)
        self._exp = exp.evolve(state=self._state_for(exp))
        self._commit(request, [PutExperiment(self._header(), self._drawn)], self._header())
        self._retry_slot_waiters()  # a wider bandwidth frees slots

    def _on_delete(self, request: Request[Any], msg: DeleteExperiment) -> None:
        """Remove it from the store; refused while suggestions are open (a worker is
        evaluating one) unless forced. Waiting asks are refused; later messages answer
        not_found, and the actor passivates like any idle one."""
        n_open = len(self._ledger.open)
        if n_open and msg.force is not True:
            raise api_error(
                "suggestions_open",
                f"experiment {self.id!r} has {n_open} open suggestion(s); close them first "
                "(close_all_suggestions, or `tauopt experiments close-all ID`) or delete with force=True (--force)",
                open_suggestions=n_open,
            )
        header = self._header()
        self._deleted = True
        self._commit(request, [DeleteWrite(self.id)], header)
        gone = api_error("not_found", f"experiment {self.id!r} was deleted while this ask waited")
        while self._ahead.waiters:
            self._commit(self._ahead.waiters.popleft()[0], [], gone)  # after the delete is durable
        for waiting, _ in self._slot_waiters.ready(lambda: True):
            self._commit(waiting, [], gone)

    def _state_for(self, exp: Experiment) -> str:
        if exp.state == "archived":
            return "archived"
        budget = exp.observation_budget
        return "completed" if budget is not None and len(self._ledger.observations) >= budget else "active"

    # -- suggestions --------------------------------------------------------

    def _expire(self) -> list[Write]:
        ttl = self._exp.suggestion_ttl_s
        if ttl is None:  # no TTL: nothing to scan, no clock to read
            return []
        return [PutSuggestion(s) for s in self._ledger.expired(self._clock(), ttl)]

    def _on_suggest(self, request: Request[Any], msg: Suggest) -> None:
        tag = check_tag(msg.tag)
        writes = self._expire()
        if self._ledger.released and self._exp.state == "active" and self._exp.stopped_reason is None:
            # a suggestion whose holder died goes first: its slot is already counted
            s = self._ledger.rehand(tag, self._clock())
            if s is not None:
                writes.append(PutSuggestion(s))
                self._commit(request, writes, s)
                return
        try:
            self._check_can_suggest()
            strategy = resolve_for(
                self._exp.strategy, self._space, len(self._ledger.observations) + len(self._ledger.open), self._exp.strategy_options,
                self._exp.observation_budget,
            )
            spec = get_strategy(strategy)
            point: dict[str, Value] | None
            if not spec.pooled:
                point = self._inline_point(spec)
            else:
                self._ahead.strategy = spec.name
                point = self._ahead.take(self._exp.parallel_bandwidth, self._ledger.is_used)
                if point is None:
                    self._commit(None, writes, None)
                    self._ahead.waiters.append((request, msg))
                    self._ensure_job()
                    return
                self._ensure_job()  # keep a point computed ahead
        except ApiError as exc:
            if exc.error_type == "bandwidth_full" and msg.wait_s:
                self._commit(None, writes, None)
                self._park_for_slot(request, msg)
                return
            self._commit(request, writes, exc)
            return
        suggestion = self._open_suggestion(point, tag)
        writes.append(PutSuggestion(suggestion))
        self._commit(request, writes, suggestion)

    def _check_can_suggest(self) -> None:
        self._check_not_done()
        if self._exp.stopped_reason is not None:
            raise stopped_error(self._exp)
        size = self._finite_size()
        if size is not None and self._ledger.used_count() >= size:
            raise api_error(
                "space_exhausted",
                f"all {size} points of this finite space are observed or open; close a suggestion or widen the space",
            )
        n, bw = len(self._ledger.open) + len(self._ahead.waiters), self._exp.parallel_bandwidth
        if n >= bw:
            raise api_error("bandwidth_full", f"{n} open suggestions >= parallel_bandwidth={bw}; observe or close one first")

    def _check_not_done(self) -> None:
        """Archived or completed: no new points (an ask, an unsolicited observation)."""
        state = self._exp.state
        if state == "archived":
            raise api_error("experiment_archived", f"experiment {self.id!r} is archived; create a new experiment to keep searching")
        if state == "completed":
            raise api_error(
                "experiment_completed",
                f"experiment {self.id!r} reached its observation_budget={self._exp.observation_budget}; "
                "raise observation_budget to continue",
            )

    @property
    def _grid_size(self) -> int | None:
        """Points per continuous dimension: only `grid` makes continuous spaces finite."""
        return self._exp.strategy_options.grid_size if grids(self._exp.strategy) else None

    def _finite_size(self) -> int | None:
        """Points in the space (grid points for `grid`), None when unbounded."""
        if not grids(self._exp.strategy):  # _grid_size is None: the usual ask, without the property's frame
            return self._space.finite_size
        if self._grid_size_cache is None or self._grid_size_cache[0] is not self._space:
            self._grid_size_cache = (self._space, self._space.size(self._grid_size))
        return self._grid_size_cache[1]

    def _open_suggestion(self, point: dict[str, Value], tag: str | None) -> Suggestion:
        s = self._ledger.open_suggestion(point, tag, self._clock())
        if len(self._ledger.open) > self.stats.max_open_seen:
            self.stats.max_open_seen = len(self._ledger.open)
        return s

    def _request(self, n: int, extra_pending: tuple[dict[str, Value], ...] = (), state: bool = True) -> SuggestRequest:
        """state=False leaves history and pending out, for strategies that read neither."""
        ledger = self._ledger
        return SuggestRequest(
            space=self._space,
            metric=self._exp.metric,
            history=ledger.observations.view() if state else (),
            pending=tuple(s.assignments for s in ledger.open.values()) + extra_pending if state else (),
            n=n,
            seed=self._seed,
            drawn=self._drawn,
            options=self._exp.strategy_options,
            metrics=self._exp.metrics,
            budget=self._exp.observation_budget,
        )

    def _inline_point(self, spec: Strategy) -> dict[str, Value]:
        """A fresh point from an inline strategy; duplicates are redrawn, then a finite
        space is searched exhaustively; space_exhausted only when nothing is left."""
        n = 1
        for _ in range(_DUP_RETRIES):
            # strategies that read neither history nor pending skip copying them per ask
            request = self._request(n, state=spec.reads_history)
            rng = self._rng() if spec.draws_random else _UNUSED_RNG
            candidates = spec.propose(request, rng)
            self._drawn += n
            for c in candidates:
                if not self._ledger.is_used(c):
                    return c
            n *= 4
        return self._leftover_point()

    def _rng(self) -> np.random.Generator:
        """Reproducible from (seed, drawn), so a restarted experiment draws what it would have."""
        return self._draws.at(self._drawn)

    def _leftover_point(self) -> dict[str, Value]:
        if self._finite_size() is not None:
            free = [p for p in self._space.grid(self._grid_size) if not self._ledger.is_used(p)]
            if free:
                return free[int(self._rng().integers(len(free)))]
        raise api_error(
            "space_exhausted",
            "no unused point left in this space; close a suggestion, widen the space or create a new experiment",
        )

    # -- asks waiting for a slot (long-poll): the queue is SlotWaiters ------------

    def _park_for_slot(self, request: Request[Any], msg: Suggest) -> None:
        assert self._tg is not None and self._self_ref is not None
        self._slot_waiters.park(request, msg, self._tg, self._self_ref)

    def _has_room(self) -> bool:
        if self._exp.stopped_reason is not None:
            return True  # every waiting ask is answered at once (too_many_failures)
        full = len(self._ledger.open) + len(self._ahead.waiters) >= self._exp.parallel_bandwidth
        return not full or bool(self._ledger.released)

    def _retry_slot_waiters(self) -> None:
        """A slot may have returned: answer parked asks in arrival order while there is room."""
        if not self._slot_waiters:
            return  # the usual case: nobody waits (no generator to build per observe)
        for request, msg in self._slot_waiters.ready(self._has_room):
            self._on_suggest(request, msg)

    def _on_slot_wait_over(self, msg: SlotWaitOver) -> None:
        ask = self._slot_waiters.timed_out(msg.request)
        if ask is not None:
            assert ask.wait_s is not None, "only an ask that waits is parked for a slot"
            n, bw = len(self._ledger.open) + len(self._ahead.waiters), self._exp.parallel_bandwidth
            fail(msg.request, wait_over_error(n, bw, ask.wait_s))

    # -- pooled strategies: compute ahead, park, answer in order -------------

    def _ensure_job(self, bandwidth: int | None = None) -> None:
        """Keep points computed ahead for `bandwidth` workers (default: the experiment's)."""
        if self._ahead.job_running or self._tg is None:
            return
        out = [s.created_at for s in self._ledger.open.values() if not s.released]
        wait = self._ahead.round_wait(out, self._clock())
        if wait > 0:
            if not self._ahead.wake_set:
                assert self._self_ref is not None
                self._ahead.wake_set = True
                self._tg.start_soon(wake_after, wait, self._self_ref, RoundWaitOver())
            return
        want, fresh = self._ahead.want(bandwidth or self._exp.parallel_bandwidth, len(out))
        if want <= 0:
            return
        assert self._self_ref is not None
        self._ahead.start(self._tg, self._request(want, extra_pending=fresh), self._self_ref)

    def _on_proposal(self, msg: ProposalReady) -> None:
        self.stats.proposals += 1
        landed, reason = self._ahead.land(msg)
        if reason:
            self.stats.fallbacks += 1
            self.stats.last_fallback_reason = reason
            log.warning("experiment %s: %s fell back to Sobol: %s", self.id, (self._ahead.strategy or "").upper(), reason)
        # Parked asks take what just landed (the newest model there is), then the buffer.
        # One that finds neither waits for the next job (`parks_leftovers`) when this one
        # answered someone with the strategy's points, so every job makes progress;
        # otherwise it takes a Sobol point.
        leftover: list[tuple[Request[Any], Suggest]] = []
        progressed = False
        while self._ahead.waiters:
            request, ask = self._ahead.waiters.popleft()
            if self._exp.stopped_reason is not None:
                fail(request, stopped_error(self._exp))
                continue
            point = self._pop_unused(landed)
            if point is not None:
                self._ahead.count_served(msg.version, point, bool(reason))
                progressed = progressed or not reason
            else:
                point = self._ahead.take(self._exp.parallel_bandwidth, self._ledger.is_used)
            if point is None and self._ahead.parks_leftovers():
                leftover.append((request, ask))
                continue
            self._answer_waiter(request, ask, point)
        if progressed:
            self._ahead.waiters.extend(leftover)
        else:
            for request, ask in leftover:
                self._answer_waiter(request, ask, None)
        self._ahead.keep(msg.version, landed)
        self._ensure_job()

    def _answer_waiter(self, request: Request[Any], ask: Suggest, point: dict[str, Value] | None) -> None:
        """Open a suggestion at `point` (None: the next Sobol point) for a parked ask."""
        try:
            if point is None:
                point = self._inline_point(design())
                self._ahead.count_served(self._ahead.version, None, True)
        except ApiError as exc:
            fail(request, exc)
            return
        suggestion = self._open_suggestion(point, check_tag(ask.tag))
        self._commit(request, [PutSuggestion(suggestion)], suggestion)

    def _pop_unused(self, points: list[dict[str, Value]]) -> dict[str, Value] | None:
        while points:
            point = points.pop(0)
            if not self._ledger.is_used(point):
                return point
        return None

    # -- observations ---------------------------------------------------------

    def _on_observe(self, request: Request[Any], msg: Observe) -> None:
        value, failed, metrics = check_observation(self._exp, msg.value, msg.failed, msg.metrics, msg.values)
        now = self._clock()  # the suggestion leaves open when the observation arrives
        writes: list[Write] = []
        if msg.suggestion_id is not None and msg.assignments is not None:
            raise invalid("give suggestion_id or assignments, not both")
        ledger = self._ledger
        if msg.stopped is not False and (msg.stopped is not True or failed or msg.suggestion_id is None):
            raise invalid("stopped: give true only with a suggestion_id and a value (the last one reported), else false")
        stopped_at = None
        if msg.suggestion_id is not None:
            s = ledger.suggestion(msg.suggestion_id)
            # Expiry happens only at the experiment's next ask (_on_suggest): a late
            # observe of a row still open keeps the link to its suggestion.
            if s.state != "open":
                self._commit(request, writes, not_open_error(s))
                return
            stopped_at = self._curves.observed(s.id, msg.stopped)
            self._ahead.evaluated(now - s.created_at)
            s = ledger.leave_open(s, "observed", now)
            writes.append(PutSuggestion(s))
            assignments, sid = s.assignments, s.id
        elif msg.assignments is not None:
            self._check_not_done()  # an unsolicited result is a new point: refused like an ask
            assignments, sid = self._space.validate(msg.assignments), None
        else:
            raise invalid("give suggestion_id (an open suggestion) or assignments (an unsolicited observation)")
        obs = ledger.observe(assignments, sid, value, failed, now, metrics)
        if stopped_at is not None:
            obs = ledger.set_last(replace(obs, stopped_at_step=stopped_at))
        state = self._state_for(self._exp)
        writes.append(PutObservation(obs))
        counted = count_failure(self._exp, f"observation {obs.id} failed") if failed else count_success(self._exp)
        exp = counted or self._exp
        stops = exp.stopped_reason is not None and self._exp.stopped_reason is None
        if state != exp.state or counted is not None:
            self._exp = exp.evolve(state=state)
            writes.append(PutExperiment(self._header(), self._drawn))
        self._commit(request, writes, obs)
        if stops:
            self._refuse_waiters()
        if self._ahead.observed(self._exp.parallel_bandwidth) or self._ahead.waiters:
            self._ensure_job()  # a refill, or the job the parked asks wait for (round_wait)
        if sid is not None:
            self._retry_slot_waiters()

    def _on_report(self, request: Request[Any], msg: Report) -> None:
        """An intermediate value of an open suggestion: recorded durably, answered
        with the stopping rule's decision. Same 409s as observe when not open."""
        step, value = check_report(msg.step, msg.value)
        s = self._ledger.suggestion(msg.suggestion_id)
        if s.state != "open":
            self._commit(request, [], not_open_error(s))
            return
        report, decision = self._curves.report(s.id, step, value, self._clock())
        self._commit(request, [PutReport(self.id, report)], decision)

    def _on_list_suggestions(self, request: Request[Any], msg: ListSuggestions) -> None:
        if msg.state is not None and msg.state not in ("open", "observed", "closed", "expired"):
            raise invalid(f"state: {msg.state!r} is not one of ['open', 'observed', 'closed', 'expired']")
        ledger = self._ledger
        source = ledger.open.values() if msg.state == "open" else ledger.suggestions.values()
        out = [
            s
            for s in source
            if (msg.state is None or s.state == msg.state) and (msg.tag is None or s.tag == msg.tag)
        ]
        if msg.state == "open":
            out.sort(key=lambda s: int(s.id) if s.id.isdigit() else 0)
        self._commit(request, [], out)

    def _on_close(self, request: Request[Any], msg: CloseSuggestion) -> None:
        s = self._ledger.suggestion(msg.suggestion_id)
        if s.state == "closed":
            self._commit(request, [], s)
            return
        if s.state != "open":
            raise not_open_error(s)
        s = self._ledger.leave_open(s, "closed", self._clock())
        self._commit(request, [PutSuggestion(s)], s)
        self._retry_slot_waiters()

    def _on_release(self, request: Request[Any], msg: ReleaseSuggestion) -> None:
        out = release(self._ledger, msg.suggestion_id, msg.max_attempts, self._clock())
        writes: list[Write] = [PutSuggestion(out.suggestion)] if out.changed else []
        counted = None
        if out.changed and out.suggestion.state == "closed":  # its attempts are used up: a failed run
            what = f"suggestion {out.suggestion.id} used up its {out.suggestion.attempts} attempt(s)"
            counted = count_failure(self._exp, what)
        stops = counted is not None and counted.stopped_reason is not None and self._exp.stopped_reason is None
        if counted is not None:
            self._exp = counted
            writes.append(PutExperiment(self._header(), self._drawn))
        self._commit(request, writes, out.suggestion)
        if stops:
            self._refuse_waiters()
        if out.changed:
            self._retry_slot_waiters()  # a waiting ask can take it, or the freed slot

    def _refuse_waiters(self) -> None:
        """The failure cap was just reached: every waiting ask hears it now."""
        while self._ahead.waiters:
            request, _ = self._ahead.waiters.popleft()
            self._commit(request, [], stopped_error(self._exp))  # after the stop is durable
        self._retry_slot_waiters()  # _has_room is True while stopped: each retry answers too_many_failures

    # -- studies and trials (a trial-based door's model) ------------------------------

    def _on_trial_op(self, request: Request[Any], msg: TrialOp) -> None:
        now = self._clock()
        change = msg.change
        rule = None
        if isinstance(change, SetStudyAttr) and not change.system and change.key == SERVE_KEY:
            check_serve_attr(check_attr("value", change.value))
        if isinstance(change, SetStudyAttr) and not change.system and change.key == STOPPING_KEY:
            raw = json.loads(check_attr("value", change.value))
            rule = check_early_stopping({"rule": "none"} if raw is None else raw)
        # a worker about to claim reads the trials: the served ones are there for it
        writes: list[Write] = self._serve(now) if isinstance(change, ReadTrials) else []
        result, records = self._trials.apply(change, now)
        writes += [PutRecord(self.id, key, body) for key, body in records]
        if rule is not None:  # the study asks for tauopt's early-stopping rule: the experiment's, for every door
            self._curves.set_rule(rule)
            self._exp = self._exp.evolve(early_stopping=rule)
            writes.append(PutExperiment(self._header(), self._drawn))
        trial = self._trials.touched(change, result)
        if trial is not None:
            writes += self._follow(trial, change, now)
        if isinstance(change, SetState):  # a claim or an end: the number of workers may have changed
            writes += self._serve(now)
        study, changed = self._trials.study, self._trials.take_changes()
        if changed or study is not self._committed.study:
            self._commit(request, writes, result, lambda: self._committed.publish(study, changed))
        else:
            self._commit(request, writes, result)

    def _on_door_state(self, request: Request[Any], msg: DoorState) -> None:
        if msg.body is None:
            self._commit(request, [], self._door_state.get(msg.key))
            return
        self._door_state[msg.key] = msg.body
        self._commit(request, [PutRecord(self.id, _DOOR_PREFIX + msg.key, msg.body)], None)

    def _peek(self, msg: Any) -> Any:
        """A study's read answered outside the mailbox (`ActorRef.peek`), from the state
        as of the last commit (`CommittedTrials`): it shows every acknowledged write and
        none a crash could undo, whatever is in flight. Not for a read that changes
        something (a read of the trials refills the WAITING trials of a study served
        suggestions), nor once a commit failed (the actor is rebuilt from the store).
        Safe on any thread: it reads references only, which the loop's thread replaces."""
        if type(msg) is not TrialOp or not isinstance(msg.change, READS):
            return NOT_NOW
        if self._replies.poisoned is not None or self._deleted:
            return NOT_NOW
        if msg.owner is not None and self._exp.owner is not None and msg.owner != self._exp.owner:
            return NOT_NOW  # the mailbox answers it as not found
        committed = self._committed
        study = committed.study
        if isinstance(msg.change, ReadTrials) and study is not None and served_strategy(study.user_attrs) is not None:
            return NOT_NOW
        return committed.read(msg.change)

    def _serve(self, now: float) -> list[Write]:
        """Keep the study's served WAITING trials (`_served.py`) filled and fresh."""
        study = self._trials.study
        strategy = served_strategy(study.user_attrs) if study is not None and not study.deleted else None
        if strategy is None or not self._space.parameters:
            return []
        seen = len(self._ledger.observations)
        add, stale, workers = to_serve(self._trials.live(), now, seen)
        writes: list[Write] = []
        for t in stale:
            point = self._served_point(strategy, workers)
            if point is None:
                return writes
            s = self._ledger.suggestions.get(t.suggestion_id) if t.suggestion_id is not None else None
            if s is not None and s.state == "open":
                writes.append(PutSuggestion(self._ledger.reassign(s, point)))
                key, body = self._trials.link(replace(t, system_attrs=refreshed_attrs(t, point, now, seen)), s.id)
                writes.append(PutRecord(self.id, key, body))
        for _ in range(add):
            point = self._served_point(strategy, workers)
            if point is None:
                break
            change = NewTrial(served_trial(point, now, seen))
            trial_id, records = self._trials.apply(change, now)
            trial = self._trials.touched(change, trial_id)
            assert trial is not None
            s = self._open_suggestion(point, _TRIAL_TAG)
            key, body = self._trials.link(trial, s.id)
            writes += [PutRecord(self.id, k, b) for k, b in records] + [PutSuggestion(s), PutRecord(self.id, key, body)]
        return writes

    def _served_point(self, strategy: str, workers: int) -> dict[str, Value] | None:
        """A point of `strategy` now, or None (none is ready: a pooled strategy's are
        computed ahead, for the `workers` observed, and a served trial never waits for a fit)."""
        try:
            self._check_can_suggest()
            ledger = self._ledger
            name = resolve_for(
                strategy, self._space, len(ledger.observations) + len(ledger.open), self._exp.strategy_options, self._exp.observation_budget
            )
            spec = get_strategy(name)
            if not spec.pooled:
                return self._inline_point(spec)
            self._ahead.strategy = spec.name
            point = self._ahead.take(workers, ledger.is_used)
            self._ensure_job(workers)
            return point
        except ApiError:
            return None

    def _follow(self, trial: Trial, change: Any, now: float) -> list[Write]:
        """What the other doors see of a trial: an open suggestion (tag `trial`) while it
        waits or runs, its parameters as they are set, its intermediate values as reports,
        and its observation once finished."""
        ledger = self._ledger
        writes: list[Write] = []
        s = ledger.suggestions.get(trial.suggestion_id) if trial.suggestion_id is not None else None
        if s is None:
            s = ledger.open_suggestion(assignments_of(trial), _TRIAL_TAG, now)
            key, body = self._trials.link(trial, s.id)
            writes += [PutSuggestion(s), PutRecord(self.id, key, body)]
        elif s.state == "open" and isinstance(change, SetParam):
            s = ledger.reassign(s, assignments_of(trial))
            writes.append(PutSuggestion(s))
        if isinstance(change, SetIntermediate) and s.state == "open":
            try:  # the trial keeps every value; reports take finite values in increasing steps
                report, decision = self._curves.report(s.id, *check_report(change.step, change.value), now)
                writes.append(PutReport(self.id, report))
            except ApiError:
                decision = None
            if decision is not None and decision.should_stop and SHOULD_STOP_KEY not in trial.system_attrs:
                # the rule's decision, where a pruner reads it (tauopt.integrations.optuna.TauoptPruner)
                stop = json.dumps({"step": change.step, "reason": decision.reason})
                key, body = self._trials.mark(trial, SHOULD_STOP_KEY, stop)
                writes.append(PutRecord(self.id, key, body))
        if trial.finished and s.state == "open":
            writes += self._mirror(trial, s, now)
        return writes

    def _mirror(self, trial: Trial, s: Suggestion, now: float) -> list[Write]:
        """A finished trial's suggestion is observed, so every other door (observations,
        best, dashboard, metrics) sees it; its parameters join the space as first seen."""
        m = mirrored(trial, [x.name for x in self._exp.metrics])
        writes: list[Write] = []
        added = [p for name, d in trial.distributions.items() if name not in self._space.by_name
                 for p in [parameter_of(name, d)] if p is not None]  # fmt: skip
        if added:
            try:
                space = _extended_space(self._space, [*(p.to_dict() for p in self._space.parameters), *added])
            except ApiError:  # not a tauopt parameter: the value is kept in the observation all the same
                space = self._space
            if space is not self._space:
                self._space = self._ledger.space = space
                self._ahead.points.clear()  # computed for the old space
                self._exp = self._exp.evolve(parameters=space.parameters)
                writes.append(PutExperiment(self._header(), self._drawn))
        # a pruned trial's curve is a stopped one (as a restart reads it): the median leaves it out
        self._curves.stats.complete(s.id, stopped=m.stopped_at_step is not None)
        writes.append(PutSuggestion(self._ledger.leave_open(s, "observed", now)))
        obs = self._ledger.observe(m.assignments, s.id, m.value, m.failed, now, m.metrics)
        if m.stopped_at_step is not None:
            obs = self._ledger.set_last(replace(obs, stopped_at_step=m.stopped_at_step))
        writes.append(PutObservation(obs))
        return writes

    def _on_inspect(self, request: Request[Any]) -> None:
        stats = dict(
            vars(self.stats),
            **self._ahead.served,
            open=len(self._ledger.open),
            waiters=len(self._ahead.waiters),
            ahead=len(self._ahead.points),
            slot_waiters=len(self._slot_waiters),
            job_running=self._ahead.job_running,
        )
        reply(request, stats)

    def _on_best(self, request: Request[Any]) -> None:
        exp = self._exp
        best = False if exp.metrics != (exp.metric,) or exp.metric.constraint is not None else self._ledger.observations.best(exp.metric.sign)
        self._commit(request, [], best_observation(exp, self._ledger.observations) if best is False else best)


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
