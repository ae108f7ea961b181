"""TrialQueue: the engine's trial lifecycle for a door whose workers claim trials.

A door whose workers ask "what next?" and later "done" (KerasTuner's chief) keeps
no trial state of its own: it translates its wire to these calls.

- `claim(worker, wait_s)` is the next trial for a worker: its ongoing one (a
  restarted worker resumes), one queued for another run, a bracket run, the
  baseline (while no space is known) or `engine.suggest(wait_s=)`: the engine
  hands out released suggestions first and holds the call (long-poll) while the
  bandwidth is full, outside this queue's lock; the holds only this queue knows
  of (the baseline runs, every `max_trials` place is taken, the brackets idle)
  wait for the queue's next change. One lock orders claims: one worker wins a trial.
- a retry is `engine.release_suggestion(max_attempts=)`: the engine keeps the
  queue and counts the runs (`attempts`), durably, and closes a suggestion
  whose runs are used up; one budget of runs per trial covers both ways a run
  ends without a result: invalid (max_retries_per_trial + 1) and expiry
  (max(1, max_retries_per_trial) + 1);
- `end(...)` stores the result as an observation (`Observation.metrics` keeps
  every metric by name); consecutive failures are the engine's cap
  (`max_consecutive_failures`): a failed trial is a failed observation, a trial
  whose runs are used up by expiry is a suggestion closed by its lease (or, for a
  trial the engine does not hold, a failed observation), and once the engine
  says the cap is reached (`stopped_reason`, or an ask answering
  `too_many_failures`) the search ends with `SearchFailed` for every worker.

What the experiment does not store is rebuilt from it on restart: open
suggestions are trials still running on the worker named by their tag, or
waiting when the engine holds them released; observations are finished trials.
The bracket schedule and its runs are stored with the experiment (the door
state `hyperband`, saved whenever a run is handed out or ends) and continue
where they were: a run that was running is its worker's again (or expires), a
queued one is queued. A promoted run whose observation was written but not yet
its saved state (the chief stopped in between) runs again. The engine keeps the count of consecutive
failures, and a queue that finds its experiment stopped by the cap (or with
another cap) sets the cap again: that restart is the user's "fixed it, try
again", so the count starts from zero.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping

import anyio

from ..errors import ApiError, api_error, invalid
from ..limits import MAX_WAIT_S
from ..models import Experiment, Parameter, Suggestion, Value
from ..space import Space
from ..strategies import AUTO
from ..strategies.hyperband import Finished, HyperbandSchedule, Idle, Promote
from ..strategies.hyperband import NewTrial as NewRun
from ._growth import Learned, assignments_for, merge_space
from ._lifecycle import BracketRun, Brackets, SearchFailed, TrialInfo, TrialRecord, TrialSet, best_of, metrics_at

__all__ = ["TrialPolicy", "TrialQueue", "STOPPED"]

log = logging.getLogger("tauopt.trials")

STOPPED = "stopped"  # claim's answer when the search is done
_BRACKETS_KEY = "hyperband"  # the door state holding the bracket schedule and its runs


@dataclass(frozen=True)
class TrialPolicy:
    """How a trial queue searches. `objectives` are the experiment's metrics, (name,
    "min"|"max"), the first stored as the observation's value; `score` is the reported
    metric that ranks trials (the first objective's name, or another metric, e.g. a
    combination of the objectives, kept among the observation's metrics)."""

    project: str
    objectives: tuple[tuple[str, Literal["min", "max"]], ...]
    score: str
    maximize: bool
    max_trials: int
    strategy: str = AUTO
    trial_ttl_s: float = 3600.0
    max_retries_per_trial: int = 0
    max_consecutive_failures: int = 3
    parallel_bandwidth: int | None = None
    seed: int | None = None
    space: tuple[Parameter, ...] | None = None
    brackets: Brackets | None = None

    @property
    def separate_score(self) -> bool:
        return self.score != self.objectives[0][0]


class _AskEngine:
    """A claim's answer is the engine's next suggestion (asked outside the lock)."""


_ASK_ENGINE = _AskEngine()
_GONE = ("suggestion_closed", "suggestion_expired", "suggestion_observed")


class TrialQueue:
    def __init__(self, engine: Any, policy: TrialPolicy, clock: Callable[[], float] = time.monotonic) -> None:
        self.engine = engine
        self.policy = policy
        self._clock = clock
        # fast_acquire: an uncontended acquire does not yield to the loop (anyio's default
        # does, once per acquire: five loop trips a trial). Nothing here relies on that yield.
        self._lock = anyio.Lock(fast_acquire=True)
        self._changed = anyio.Event()
        self.experiment: Experiment | None = None
        self._space = Space(())
        self._space_known = False
        self._merged: tuple[Learned, Space] | None = None  # the last space learned, and the space it left
        self.trials = TrialSet()
        self.done_at: float | None = None
        self.failure: str | None = None
        self.exhausted = False
        self._schedule: HyperbandSchedule | None = policy.brackets.schedule() if policy.brackets else None

    @property
    def space(self) -> Space:
        return self._space

    @property
    def done(self) -> bool:
        return self.done_at is not None

    # -- set-up ------------------------------------------------------------------

    async def start(self) -> Experiment:
        """Create the project's experiment, or resume the active one of that name."""
        p = self.policy
        metrics = [{"name": n, "objective": "maximize" if d == "max" else "minimize"} for n, d in p.objectives]
        found = await self.engine._experiments_named(p.project, "active")
        if found:
            exp = found[-1]
            if [m.to_dict() for m in exp.objectives] != metrics:
                raise invalid(
                    f"project {p.project!r} optimizes {[m.to_dict() for m in exp.objectives]}; "
                    f"use the same --objective/--direction or another --project"
                )
            if p.space:
                merged, skipped = merge_space(Space(exp.parameters), p.space)
                if skipped:
                    raise invalid(f"--space does not extend project {p.project!r}: {'; '.join(skipped)}")
                if len(merged.parameters) > len(exp.parameters):
                    exp = await self.engine.update_experiment(exp.id, parameters=[q.to_dict() for q in merged.parameters])
            if exp.stopped_reason is not None or exp.max_consecutive_failures != p.max_consecutive_failures:
                # the restart is the user's "fixed it, try again": a fresh count under this queue's cap
                exp = await self.engine.update_experiment(exp.id, max_consecutive_failures=p.max_consecutive_failures)
        else:
            exp = await self.engine.create_experiment(
                p.project,
                [q.to_dict() for q in p.space or ()],
                metrics=metrics,
                parallel_bandwidth=p.parallel_bandwidth or p.max_trials,
                strategy=p.strategy,
                strategy_options={"seed": p.seed} if p.seed is not None else None,
                max_consecutive_failures=p.max_consecutive_failures,
            )
        self.experiment = exp
        self._space = Space(exp.parameters)
        await self._rebuild(exp)
        return exp

    async def _rebuild(self, exp: Experiment) -> None:
        p, trials = self.policy, self.trials
        observations = await self.engine.observations(exp.id)
        self._space_known = bool(exp.parameters) or bool(observations) or p.space is not None
        saved = await self.engine.door_state(exp.id, _BRACKETS_KEY) if self._schedule is not None else None
        runs = self._restore_brackets(json.loads(saved)) if saved is not None else []
        by_suggestion = {t.suggestion_id: t for t in runs if t.suggestion_id is not None}
        observed = {t.observation_id for t in runs}
        for o in observations:
            if o.id in observed:
                continue  # a bracket run's end, restored with it
            run = by_suggestion.get(o.suggestion_id) if o.suggestion_id is not None else None
            if run is not None:
                if run.state not in ("completed", "failed"):  # it ended after its state was saved
                    run.state, run.observation_id = ("failed" if o.failed else "completed"), o.id
                    if not o.failed and o.value is not None:
                        run.score = o.metrics.get(p.score, o.value) if p.separate_score else o.value
                        run.history = {p.score: {0: [run.score]}}
                        trials.completed += 1
                continue
            tid = o.suggestion_id if o.suggestion_id is not None else f"o{o.id}"
            t = TrialRecord(tid, o.suggestion_id, dict(o.assignments), "failed" if o.failed else "completed")
            if not o.failed and o.value is not None:
                t.score = o.metrics.get(p.score, o.value) if p.separate_score else o.value
                t.history = {p.score: {0: [t.score]}, exp.metric.name: {0: [o.value]}}
                for k, v in o.metrics.items():
                    t.history.setdefault(k, {0: [v]})
                trials.completed += 1
            trials.add(t)
        now = self._clock()
        for s in await self.engine.suggestions(exp.id, state="open"):
            if s.id in by_suggestion:
                continue  # a bracket run's, restored with it
            if s.released:  # waiting for a retry when the queue stopped: it still is (the engine holds it)
                trials.add(TrialRecord(s.id, s.id, dict(s.assignments), "waiting", runs=s.attempts))
                continue
            # A trial that was running when the queue stopped is still its worker's: the worker
            # may end it, or (restarted) ask for it again; if it stays silent it expires.
            trials.add(TrialRecord(s.id, s.id, dict(s.assignments), "running", worker=s.tag, claimed_at=now, runs=s.attempts))
        self._check_done()

    def _restore_brackets(self, state: dict[str, Any]) -> list[TrialRecord]:
        """The bracket schedule and its runs as saved (`_save_brackets`): the runs, added.
        A schedule saved under other brackets (--max-epochs, --factor, iterations) starts over."""
        assert self._schedule is not None and self.policy.brackets is not None
        b = self.policy.brackets
        if state.get("brackets") != [b.max_epochs, b.factor, b.iterations]:
            log.warning("hyperband: the stored schedule is for other brackets (%s); a fresh schedule starts", state.get("brackets"))
            return []
        self._schedule.restore(state["schedule"])
        trials, now, score_name = self.trials, self._clock(), self.policy.score
        trials.bracket_runs = int(state["runs"])
        runs = []
        for d in state["trials"]:
            epochs, initial, bracket, round_num, parent = d["bracket"]
            t = TrialRecord(d["id"], d["suggestion_id"], dict(d["values"]), d["state"], worker=d["worker"], runs=int(d["runs"]),
                            bracket=BracketRun(epochs, initial, bracket, round_num, parent), observation_id=d["observation"])  # fmt: skip
            if t.state == "completed":
                t.score, t.best_step = d["score"], int(d["best_step"])
                t.history = {name: {t.best_step: [v]} for name, v in {**d["metrics"], score_name: t.score}.items()}
                trials.completed += 1
            elif t.state == "running":
                t.claimed_at = now  # its worker may end it, or ask for it again; if it stays silent it expires
            elif t.state == "waiting":
                trials.retries.append(t.trial_id)
            trials.add(t)
            runs.append(t)
        return runs

    async def _save_brackets(self) -> None:
        """Store where the bracket schedule stands and its runs (a restart continues from it)."""
        if self._schedule is None or self.experiment is None:
            return
        p = self.policy
        runs = [
            {
                "id": t.trial_id, "suggestion_id": t.suggestion_id, "values": t.values,
                "state": "running" if t.state == "ending" else t.state, "worker": t.worker, "runs": t.runs,
                "score": t.score, "best_step": t.best_step, "observation": t.observation_id,
                "metrics": metrics_at(t.history, t.best_step, skip=p.score) if t.state == "completed" and t.history else {},
                "bracket": [t.bracket.epochs, t.bracket.initial_epoch, t.bracket.bracket, t.bracket.round, t.bracket.parent_id],
            }
            for t in self.trials.trials.values()
            if t.bracket is not None
        ]  # fmt: skip
        b = p.brackets
        assert b is not None
        body = json.dumps({"brackets": [b.max_epochs, b.factor, b.iterations], "schedule": self._schedule.state(),
                           "runs": self.trials.bracket_runs, "trials": runs})  # fmt: skip
        await self.engine.save_door_state(self.experiment.id, _BRACKETS_KEY, body)

    # -- bookkeeping helpers --------------------------------------------------------

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def _finish(self, failure: str | None = None) -> None:
        if self.done_at is None:
            self.done_at = self._clock()
            self.failure = failure
            if failure:
                log.error("search failed: %s", failure)
            else:
                log.info("search done: %d completed trials", self.trials.completed)
        self._notify()

    def _check_done(self) -> None:
        if self.done:
            return
        if self.trials.completed >= self.policy.max_trials:
            self._finish()
        elif self.exhausted and self.trials.in_progress() == 0:
            self._finish()

    def _hand_out(self, t: TrialRecord, worker: str) -> TrialInfo:
        """Claim a trial this queue made or queued (waiting, under the lock) for `worker`."""
        claimed = self.trials.claim(t, worker, self._clock())
        assert claimed, f"trial {t.trial_id} handed out while {t.state}"
        return t.info()

    def _trial(self, trial_id: str) -> TrialRecord:
        t = self.trials.get(trial_id)
        if t is None:
            raise api_error("not_found", f"trial {trial_id!r} is unknown to this chief; use a trial id from CreateTrial")
        return t

    def _engine_holds(self, t: TrialRecord) -> bool:
        """Whether the engine hands this trial out again (a released suggestion of the
        same id); the baseline's and the brackets' retries are this queue's own."""
        return t.suggestion_id == t.trial_id and self._schedule is None and self.experiment is not None

    # -- maintenance: expiry and exit --------------------------------------------------

    async def maintain(self) -> None:
        """Called periodically: trials whose worker went silent for trial_ttl_s are handed
        out again while their runs (the engine's attempts, durable) are within
        max(1, max_retries_per_trial), else their place returns."""
        async with self._lock:
            now = self._clock()
            ttl = self.policy.trial_ttl_s
            expired = self.trials.expired(now, ttl)
            runs = max(1, self.policy.max_retries_per_trial)
            for t in expired:
                log.warning("trial %s expired: no end from %s within %.0f s", t.trial_id, t.worker, ttl)
                if not self.done and await self._queue_retry(t, max_runs=runs + 1):
                    continue
                self.trials.finish(t, "failed")
                if not self.done:
                    await self._fail_expired(t)
                await self._close(t)
                await self._check_failures(f"trial {t.trial_id} expired without an EndTrial after {t.runs} run(s)")
            if expired:
                self._notify()
                if any(t.bracket is not None for t in expired):
                    await self._save_brackets()
            self._check_done()

    async def _fail_expired(self, t: TrialRecord) -> None:
        """A trial whose runs expired is a failed run for the engine's cap. An engine-held
        one was closed by its lease (counted there); a trial of this queue's own is closed
        as used up (one attempt) or, without a suggestion, observed as failed, as its
        failed end would have been."""
        assert self.experiment is not None
        if self._engine_holds(t):
            return
        if t.suggestion_id is None:
            await self._observe(t, {}, None, 0)
            return
        try:
            await self.engine.release_suggestion(self.experiment.id, t.suggestion_id, max_attempts=1)
        except ApiError as exc:
            if exc.error_type not in _GONE:
                raise

    async def _queue_retry(self, t: TrialRecord, max_runs: int) -> bool:
        """Queue the trial for another run unless it had `max_runs` runs; False: used up.
        An engine-held trial is released there (the engine counts its runs and closes
        it when they are used up); the others queue here."""
        if self._engine_holds(t):
            assert self.experiment is not None and t.suggestion_id is not None
            try:
                s: Suggestion = await self.engine.release_suggestion(self.experiment.id, t.suggestion_id, max_attempts=max_runs)
            except ApiError as exc:
                if exc.error_type not in _GONE:
                    raise
                return False
            if not s.released:
                return False  # its runs are used up: the engine closed it
        elif t.runs < max_runs:
            self.trials.retries.append(t.trial_id)
        else:
            return False
        self.trials.requeue(t)
        return True

    def should_exit(self, linger_s: float, workers: int | None) -> bool:
        """Exit at once when the search is done, no trial runs, every known worker was
        told and the `workers` expected have all been told; otherwise linger (answering
        stopped to late joiners) for `linger_s` after the search is done. Without
        `workers` nobody can know that no worker is still starting up, so it lingers."""
        if self.done_at is None:
            return False
        if self._clock() - self.done_at >= linger_s:
            return True
        trials = self.trials
        if trials.running() or not trials.workers_seen <= trials.workers_stopped:
            return False
        return workers is not None and len(trials.workers_stopped) >= workers

    # -- claims ---------------------------------------------------------------

    async def claim(self, worker: str, hold_s: float) -> TrialInfo | str | None:
        """A trial for `worker`, STOPPED, or None (idle) after holding the call up to
        hold_s. A hold for a free place in the bandwidth is the engine's waiting ask
        (`engine.suggest(wait_s=)`, outside this queue's lock); holds this queue alone
        knows (the baseline runs, every max_trials place is taken, the brackets idle)
        wait for the queue's next change. Raises SearchFailed once failures ended it."""
        deadline = self._clock() + hold_s
        while True:
            async with self._lock:
                self.trials.workers_seen.add(worker)
                step = await self._try_claim(worker)
                changed = self._changed
            if isinstance(step, _AskEngine) and deadline > self._clock():
                step = await self._ask_engine_until_done(worker, min(deadline - self._clock(), MAX_WAIT_S))
            if isinstance(step, (TrialInfo, str)):
                if step == STOPPED:
                    self.trials.workers_stopped.add(worker)
                return step
            remaining = deadline - self._clock()
            if remaining <= 0:
                return None
            with anyio.move_on_after(min(remaining, 1.0)):
                await changed.wait()

    async def _try_claim(self, worker: str) -> TrialInfo | str | _AskEngine | None:
        """A trial, STOPPED, _ASK_ENGINE (a suggestion decides), or None to hold the call."""
        trials = self.trials
        ongoing = trials.ongoing(worker)
        if ongoing is not None:
            return ongoing.info()  # a restarted worker resumes its trial
        if self.done:
            if self.failure:
                trials.workers_stopped.add(worker)
                raise SearchFailed(self.failure)
            return STOPPED
        if trials.retries:
            info = self._hand_out(trials.trials[trials.retries.pop()], worker)  # LIFO, like KerasTuner's chief
            if info.bracket is not None:
                await self._save_brackets()
            return info
        live = trials.live()
        if any(t.state == "waiting" and self._engine_holds(t) for t in live):
            return _ASK_ENGINE  # the engine hands out its released suggestions first
        if trials.completed + len(live) >= self.policy.max_trials:
            return None  # every place is taken; one may fail and free up
        if self._schedule is not None:
            return await self._try_bracket(worker, self._schedule)
        if not self._space_known:
            if any(t.suggestion_id is None and t.state in ("running", "waiting") for t in live):
                return None  # the baseline is running; its end brings the space
            trials.baselines += 1
            t = TrialRecord(f"b{trials.baselines}", None, {}, "waiting")
            trials.add(t)
            return self._hand_out(t, worker)
        return _ASK_ENGINE

    async def _ask_engine_until_done(self, worker: str, wait_s: float) -> TrialInfo | str | None:
        """`_ask_engine`, given up when the search ends meanwhile: an ask waiting for a fit or a
        place is then for a trial nobody wants, and its worker is to hear STOPPED now, not after
        the wait (a chief lingering less long would have gone, cancelling the call). What the
        abandoned ask leaves open is closed with the search."""
        answer: list[TrialInfo | str | None] = []
        async with anyio.create_task_group() as tg:

            async def ask() -> None:
                answer.append(await self._ask_engine(worker, wait_s))
                tg.cancel_scope.cancel()

            tg.start_soon(ask)
            while not self.done:
                await self._changed.wait()
            tg.cancel_scope.cancel()
        return answer[0] if answer else None

    async def _ask_engine(self, worker: str, wait_s: float) -> TrialInfo | str | None:
        """The engine's suggestion as a trial: a released one is its trial's next run, a
        new one a new trial. The engine waits up to `wait_s` for a free place. None:
        hold (the wait ran out, the space is used up, or every place filled meanwhile)."""
        assert self.experiment is not None
        space = self._space  # the space the engine draws in, unless it grows meanwhile
        try:
            s: Suggestion = await self.engine.suggest(self.experiment.id, tag=worker, wait_s=wait_s)
        except ApiError as exc:
            if exc.error_type == "bandwidth_full":
                return None
            if exc.error_type == "too_many_failures":
                async with self._lock:
                    await self._check_failures(None)
                return None  # the next round raises SearchFailed
            if exc.error_type in ("space_exhausted", "experiment_completed", "experiment_archived"):
                async with self._lock:
                    self.exhausted = True
                    log.info("no more trials: %s", exc.message)
                    self._check_done()  # done: the hold wakes at once to answer STOPPED
                return None
            raise
        async with self._lock:
            trials = self.trials
            t = trials.get(s.id)
            if t is not None:  # a released suggestion: its trial's next run
                if self.done:
                    await self.engine.release_suggestion(self.experiment.id, s.id)  # the search ended meanwhile
                    return None
                t.runs = s.attempts - 1  # claim counts this run
                if t.state != "waiting":
                    self.trials.requeue(t)  # the engine hands it out again: its last run is over
                return self._hand_out(t, worker)
            if self.done or trials.completed + trials.in_progress() >= self.policy.max_trials:
                await self.engine.close_suggestion(self.experiment.id, s.id)  # every place filled meanwhile
                return None
            t = TrialRecord(s.id, s.id, dict(s.assignments), "waiting", drawn_in=space)
            trials.add(t)
            return self._hand_out(t, worker)

    async def _try_bracket(self, worker: str, schedule: HyperbandSchedule) -> TrialInfo | str | None:
        """KerasTuner's HyperbandOracle.populate_space over these trials: a new run's
        values come from the engine (or are the baseline's defaults); a promoted one
        repeats its parent's values, so it is stored at its end as an observation of
        that point (the engine never suggests a point twice)."""
        trials = self.trials
        if not self._space_known and any(
            t.suggestion_id is None and not t.values and t.state in ("running", "waiting") for t in trials.live()
        ):
            return None  # the baseline is running; its end brings the space
        tid = f"hb{trials.bracket_runs + 1}"
        step = schedule.next(tid, self._loss_of, ongoing=trials.in_progress() > 0)
        if isinstance(step, Idle):
            return None
        if isinstance(step, Finished):
            self.exhausted = True
            self._check_done()
            return STOPPED if self.done else None
        trials.bracket_runs += 1
        if isinstance(step, Promote):
            parent = trials.trials[step.parent_id]
            run = BracketRun(step.epochs, step.initial_epoch, step.bracket, step.round, step.parent_id)
            t = TrialRecord(tid, None, dict(parent.values), "waiting", bracket=run)
        else:
            assert isinstance(step, NewRun)
            run = BracketRun(step.epochs, step.initial_epoch, step.bracket, step.round)
            if not self._space_known:
                t = TrialRecord(tid, None, {}, "waiting", bracket=run)
            else:
                assert self.experiment is not None
                try:
                    s: Suggestion = await self.engine.suggest(self.experiment.id, tag=worker)
                except ApiError as exc:
                    schedule.cancel(tid)
                    trials.bracket_runs -= 1
                    if exc.error_type == "bandwidth_full":
                        return None
                    if exc.error_type == "too_many_failures":
                        await self._check_failures(None)
                        return None  # the next round raises SearchFailed
                    raise
                t = TrialRecord(tid, s.id, dict(s.assignments), "waiting", bracket=run)
        trials.add(t)
        info = self._hand_out(t, worker)
        await self._save_brackets()
        return info

    def _loss_of(self, trial_id: str) -> float | None:
        t = self.trials.get(trial_id)
        if t is None or t.state != "completed" or t.score is None:
            return None
        return -t.score if self.policy.maximize else t.score

    # -- reports and ends ------------------------------------------------------------

    async def report(self, trial_id: str, metrics: Mapping[str, float], step: int) -> TrialInfo:
        """A worker's metrics at `step` of a trial not yet ended."""
        async with self._lock:
            t = self._trial(trial_id)
            if t.state not in ("running", "waiting"):
                raise api_error("invalid_request", f"trial {trial_id!r} has already ended ({t.state}); it takes no more metrics")
            for name, value in metrics.items():
                t.history.setdefault(name, {}).setdefault(int(step), []).append(float(value))
            return t.info()

    async def end(self, trial_id: str, status: Literal["COMPLETED", "INVALID", "FAILED"], values: Mapping[str, Value],
                  learned: Learned | None) -> None:  # fmt: skip
        """A run ended: COMPLETED (stored with its score), INVALID (run again while runs
        are left) or FAILED. `values` are the worker's (for a point of a grown space),
        `learned` the parameters it knows (merged into the space first)."""
        while True:
            async with self._lock:
                t = self._trial(trial_id)
                if learned is not None:
                    await self._learn(learned)
                    learned = None
                ending = t.ended
                if ending is None:
                    begun = await self._end_locked(t, status, values)
                    break
            await ending.wait()  # the same trial's other end is being written: its outcome decides
        if begun is None:
            return
        before, score, step, ended = begun
        try:
            await self._observe(t, values, score, step)  # write-before-reply all the same
        except BaseException:
            with anyio.CancelScope(shield=True):
                async with self._lock:
                    t.state, t.ended = before, None  # as it was: the worker's retry ends it again
            ended.set()
            raise
        with anyio.CancelScope(shield=True):
            async with self._lock:
                t.score, t.best_step, t.ended = score, step, None
                self.trials.finish(t, "completed")
                self._check_done()
                self._notify()
                if t.bracket is not None:
                    await self._save_brackets()
        ended.set()

    async def _end_locked(
        self, t: TrialRecord, status: str, values: Mapping[str, Value]
    ) -> tuple[Any, float | None, int, anyio.Event] | None:
        """An end's work under the lock. A COMPLETED run is only marked "ending" here and
        its observation written by the caller outside the lock (every other call would
        otherwise wait for that commit, and commits could not group across workers):
        then (state before, score, step, the event set when written). None: done here."""
        p = self.policy
        if t.state in ("completed", "failed"):
            log.info("end of trial %s, which already ended (%s): ignored", t.trial_id, t.state)
            return None
        if t.trial_id in self.trials.retries:
            self.trials.retries.remove(t.trial_id)
        score, step = best_of(t.history, p.score, p.maximize)
        if status == "COMPLETED" and (score is None or math.isnan(score)):
            log.warning("trial %s: COMPLETED without a finite %r: counted as INVALID", t.trial_id, p.score)
            status = "INVALID"
        if status == "COMPLETED":
            before, t.state, t.ended = t.state, "ending", anyio.Event()
            return before, score, step, t.ended
        if status == "INVALID" and t.runs <= p.max_retries_per_trial:
            await self._queue_retry(t, max_runs=p.max_retries_per_trial + 1)  # runs are left: it queues
            log.info("trial %s INVALID: retry %d of %d", t.trial_id, t.runs, p.max_retries_per_trial)
        else:
            await self._observe(t, values, None, 0)
            self.trials.finish(t, "failed")
            await self._check_failures(f"trial {t.trial_id} ended {status}")
        self._check_done()
        self._notify()
        if t.bracket is not None:
            await self._save_brackets()
        return None

    async def _check_failures(self, what: str | None) -> None:
        """After a failed run the engine counted (`what`; None: an ask was refused for
        it), end the search when the engine says its cap is reached."""
        assert self.experiment is not None
        exp = await self.engine.experiment(self.experiment.id)
        if exp.stopped_reason is not None and not self.done:
            self._finish(
                f"tauopt chief: the search stopped after {exp.max_consecutive_failures} consecutive failed trials "
                f"(last: {what or exp.stopped_reason}); fix the model code or the space, then restart the chief and the workers"
            )

    async def _observe(self, t: TrialRecord, values: Mapping[str, Value], score: float | None, step: int) -> None:
        assert self.experiment is not None
        p = self.policy
        exp_id = self.experiment.id
        failed = score is None
        metrics = metrics_at(t.history, step, skip=p.score) if not failed else {}
        if p.separate_score and not failed:
            # tauopt keeps every objective: the first is the observation's value, the rest and
            # the score go with the metrics (so the Pareto front is there over HTTP)
            metrics[p.score] = score  # type: ignore[assignment]
            score = metrics.pop(p.objectives[0][0], None)
            if score is None:  # the first objective was not finite at the best step
                failed, metrics = True, {}
        if t.suggestion_id is not None and t.drawn_in is self._space:
            point = t.values  # what assignments_for would make of it: drawn in today's space
        else:
            point = assignments_for(self._space, {**values, **t.values}) if self._space.parameters or values else {}
        if t.suggestion_id is not None:
            if point == t.values:
                try:
                    o = await self.engine.observe(exp_id, suggestion_id=t.suggestion_id, value=score, failed=failed, metrics=metrics)
                    t.observation_id = o.id
                    return
                except ApiError as exc:
                    if exc.error_type not in ("suggestion_expired", "suggestion_closed"):
                        raise
            else:
                # The space grew since this suggestion: store a point valid in today's space.
                await self._close(t)
        o = await self.engine.observe(exp_id, assignments=point, value=score, failed=failed, metrics=metrics)
        t.observation_id = o.id

    async def _close(self, t: TrialRecord) -> None:
        if t.suggestion_id is None or self.experiment is None:
            return
        try:
            await self.engine.close_suggestion(self.experiment.id, t.suggestion_id)
        except ApiError as exc:
            if exc.error_type not in _GONE:
                raise

    # -- space ------------------------------------------------------------------------------

    async def _learn(self, learned: Learned) -> None:
        if self._merged is not None and self._merged[0] is learned and self._merged[1] is self._space:
            return  # this very space was merged into today's space already (every end sends it)
        for reason in learned.skipped:
            log.warning("space: skipped %s", reason)
        merged, skipped = merge_space(self._space, learned.parameters)
        for reason in skipped:
            log.warning("space: skipped %s", reason)
        if len(merged.parameters) > len(self._space.parameters):
            assert self.experiment is not None
            exp = await self.engine.update_experiment(self.experiment.id, parameters=[q.to_dict() for q in merged.parameters])
            self.experiment = exp
            self._space = Space(exp.parameters)
            log.info("space: now %d parameters (%s)", len(self._space.parameters), ", ".join(q.name for q in self._space.parameters))
        if not self._space_known:
            self._space_known = True
            self._notify()
        self._merged = (learned, self._space)

    async def learn(self, learned: Learned) -> None:
        """Parameters a worker knows: those the space lacks join it."""
        async with self._lock:
            await self._learn(learned)

    # -- reads ----------------------------------------------------------------------------

    def default_values(self) -> dict[str, Value]:
        """The point a worker's defaults stand for in today's space."""
        return assignments_for(self._space, {}) if self._space.parameters else {}

    def info(self, trial_id: str) -> TrialInfo:
        return self._trial(trial_id).info()

    def best(self, n: int) -> list[TrialInfo]:
        """Completed trials by score, padded with the others (as KerasTuner's chief does)."""
        if n <= 0:
            return []
        return [t.info() for t in self.trials.ranked(self.policy.maximize)[:n]]

    def summary(self) -> dict[str, Any]:
        trials = self.trials
        return {
            "experiment": self.experiment.id if self.experiment else None,
            "completed": trials.completed,
            "trials": trials.states(),
            "workers_known": sorted(trials.workers_seen),
            "workers_stopped": sorted(trials.workers_stopped),
            "failure": self.failure,
        }
