"""The chief's search logic over a tauopt Engine: KerasTuner trials as suggestions.

The engine owns the trials' state; this door maps KerasTuner's messages onto
it. A trial is a suggestion (trial id = suggestion id, tuner id = its tag), and:

- CreateTrial is `engine.suggest(wait_s=)`: the engine hands out released
  suggestions (trials to retry) first, and holds the call (long-poll) while
  the bandwidth is full, outside this door's lock;
- a retry is `engine.release_suggestion(max_attempts=)`: the engine keeps the
  queue and counts the runs (`attempts`), durably, and closes a suggestion
  whose runs are used up; one budget of runs per trial covers both ways a run
  ends without a result: INVALID (max_retries_per_trial + 1) and expiry
  (max(1, max_retries_per_trial) + 1);
- results are observations (`Observation.values` keeps every metric by name);
- consecutive failures are the engine's cap (`max_consecutive_failures`, set from
  --max-consecutive-failures): a failed trial is a failed observation, a trial
  whose runs are used up by expiry is a suggestion closed by its lease (or, for a
  trial the engine does not hold, a failed observation), and once the engine
  says the cap is reached (`stopped_reason`, or an ask answering
  `too_many_failures`) the search ends with an error every worker sees.

What stays here is KerasTuner's own: the *baseline* (while no space is known,
one worker gets a trial without values, runs its defaults, and its EndTrial
teaches us the space; its retries queue here), Hyperband's brackets (trial ids
that are not suggestion ids, promotions that repeat a point; their retries
queue here too), max_trials (completed trials; a failed one frees its place),
the metric history UpdateTrial reports until EndTrial, and which tuner runs
which trial since when (for `trial_ttl_s`). The holds only this door knows of
(the baseline runs, every max_trials place is taken, Hyperband idles) wait for
the oracle's next change. On restart all of it is rebuilt from the engine:
open suggestions are trials still running on the worker named by their tag,
or queued when the engine holds them released; the engine keeps the count of
consecutive failures, and a chief that finds its experiment stopped by the cap
(or with another cap) sets the cap again: that restart is the user's "fixed it,
try again", so the count starts from zero.

Differences from KerasTuner's reference chief: CreateTrial is held open
instead of answering IDLE (no hot loop); a trial whose worker died is handed
out again after `trial_ttl_s`; a failed or expired trial frees its place;
late workers get STOPPED while the chief lingers; consecutive failures end the
search with an error every worker sees, and the chief exits instead of hanging.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping

import anyio

from ...errors import ApiError, api_error, invalid
from ...limits import MAX_WAIT_S
from ...models import MAX_OBJECTIVES, Experiment, Parameter, Suggestion, Value
from ...space import Space
from ...strategies.hyperband import Finished, HyperbandSchedule, Idle, NewTrial, Promote
from ._convert import Learned, assignments_for, merge_space

__all__ = ["ChiefConfig", "HyperbandConfig", "TrialView", "SearchFailed", "KerasTunerOracle", "MULTI_OBJECTIVE", "multi_objective_score"]

MULTI_OBJECTIVE = "multi_objective"  # KerasTuner's name for the score of an objective list


def multi_objective_score(objectives: tuple[tuple[str, str], ...], metrics: Mapping[str, float]) -> float:
    """keras_tuner.engine.objective.MultiObjective.get_value: min objectives add, max ones subtract."""
    return sum(metrics[n] if d == "min" else -metrics[n] for n, d in objectives)

log = logging.getLogger("tauopt.kerastuner")

Status = Literal["RUNNING", "IDLE", "STOPPED", "COMPLETED", "FAILED", "INVALID"]
TrialState = Literal["running", "queued", "ending", "completed", "failed"]


@dataclass(frozen=True)
class HyperbandConfig:
    """KerasTuner's Hyperband: trials get tuner/epochs, tuner/initial_epoch,
    tuner/bracket, tuner/round and, when promoted, tuner/trial_id."""

    max_epochs: int
    factor: int = 3
    iterations: int = 1

    def __post_init__(self) -> None:
        if self.max_epochs < 1 or self.factor < 2 or self.iterations < 1:
            raise invalid(
                f"hyperband: give --max-epochs >= 1, --factor >= 2 and --hyperband-iterations >= 1; "
                f"got {self.max_epochs}, {self.factor}, {self.iterations}"
            )

    def total_trials(self) -> int:
        s = HyperbandSchedule(self.max_epochs, self.factor, self.iterations)
        return self.iterations * sum(s.size(b, r) for b in range(s.num_brackets()) for r in range(b + 1))


@dataclass(frozen=True)
class ChiefConfig:
    objective: str
    direction: Literal["min", "max"]
    max_trials: int
    project: str = "kerastuner"
    strategy: str = "auto"
    trial_ttl_s: float = 3600.0
    max_retries_per_trial: int = 0
    max_consecutive_failures: int = 3
    parallel_bandwidth: int | None = None
    workers: int | None = None
    linger_s: float = 10.0
    hold_s: float = 300.0
    seed: int | None = None
    space: tuple[Parameter, ...] | None = None
    hyperband: HyperbandConfig | None = None
    # A KerasTuner objective list, ((name, "min"|"max"), ...): the score is then
    # KerasTuner's `multi_objective` (sum of min objectives minus sum of max ones,
    # direction min) and `objective`/`direction` must be "multi_objective"/"min";
    # see `ChiefConfig.for_objectives`.
    objectives: tuple[tuple[str, Literal["min", "max"]], ...] = ()

    @classmethod
    def for_objectives(cls, objectives: tuple[tuple[str, Literal["min", "max"]], ...], **kw: Any) -> "ChiefConfig":
        """One objective: today's config; two or more: KerasTuner's MultiObjective."""
        if len(objectives) == 1:
            (name, direction), = objectives
            return cls(objective=name, direction=direction, **kw)
        return cls(objective=MULTI_OBJECTIVE, direction="min", objectives=objectives, **kw)

    def __post_init__(self) -> None:
        if self.objectives:
            names = [n for n, _ in self.objectives]
            if len(set(names)) != len(names) or MULTI_OBJECTIVE in names:
                raise invalid(f"--objective: each name once, and not {MULTI_OBJECTIVE!r}; got {names}")
            if any(d not in ("min", "max") for _, d in self.objectives):
                raise invalid(f"--objective: give NAME:min or NAME:max, got {list(self.objectives)}")
            if len(self.objectives) > MAX_OBJECTIVES:
                raise invalid(f"--objective: {len(self.objectives)} objectives; at most {MAX_OBJECTIVES}")
            if (self.objective, self.direction) != (MULTI_OBJECTIVE, "min"):
                raise invalid("objective/direction: with an objective list they are multi_objective/min")
        if self.max_trials < 1:
            raise invalid(f"max_trials: give an integer >= 1, got {self.max_trials}")
        if self.direction not in ("min", "max"):
            raise invalid(f"direction: give min or max, got {self.direction!r}")
        for name in ("trial_ttl_s", "hold_s"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise invalid(f"{name}: give a number of seconds > 0, got {v!r}")
        if self.hold_s >= 3000:
            raise invalid("hold_s: keep it well under the worker's 3600 s deadline (at most 3000)")
        if self.max_retries_per_trial < 0 or self.max_consecutive_failures < 1 or self.linger_s < 0:
            raise invalid("max_retries_per_trial >= 0, max_consecutive_failures >= 1 and linger_s >= 0 are required")


@dataclass(frozen=True)
class TrialView:
    """A trial as a worker sees it; `metrics` is name -> ((step, (values...)), ...)."""

    trial_id: str
    status: Status
    values: dict[str, Value] = field(default_factory=dict)
    metrics: dict[str, tuple[tuple[int, tuple[float, ...]], ...]] = field(default_factory=dict)
    score: float | None = None
    best_step: int = 0


class SearchFailed(Exception):
    """The search ended in failures; every worker is told this message."""


@dataclass
class _Trial:
    trial_id: str
    suggestion_id: str | None  # None: the baseline, or an unsolicited observation
    values: dict[str, Value]
    # "ending": its COMPLETED EndTrial is being written (outside the oracle's lock); `ended` is set after
    state: TrialState
    tuner_id: str | None = None
    handed_at: float = 0.0
    runs: int = 0
    history: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    score: float | None = None
    best_step: int = 0
    tuner_values: dict[str, Value] = field(default_factory=dict)  # Hyperband's tuner/* keys, never stored
    ended: anyio.Event | None = None  # while "ending": set once its observation is written or refused
    # The oracle's space when the engine drew `values` (taken before the ask): while it is
    # still the oracle's space, `values` is already the point EndTrial stores.
    drawn_in: Space | None = None


_FINAL = ("completed", "failed")  # a trial in one of these states never changes state again


class _AskEngine:
    """CreateTrial's answer is the engine's next suggestion (asked outside the lock)."""


_ASK_ENGINE = _AskEngine()


class KerasTunerOracle:
    def __init__(self, engine: Any, config: ChiefConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.engine = engine
        self.config = config
        self._clock = clock
        # fast_acquire: an uncontended acquire does not yield to the loop (anyio's default
        # does, once per acquire: five loop trips a trial). Nothing here relies on that yield.
        self._lock = anyio.Lock(fast_acquire=True)
        self._changed = anyio.Event()
        self.experiment: Experiment | None = None
        self._space = Space(())
        self._space_known = False
        self._merged: tuple[Learned, Space] | None = None  # the last space learned, and the space it left
        self._trials: dict[str, _Trial] = {}
        # The trials not yet completed or failed (both final): what every per-RPC check
        # scans, so an RPC costs the same after 100,000 trials as after 10. Kept by
        # `_add`; a trial that reaches a final state leaves it at the next `_live_trials`.
        self._live: dict[str, _Trial] = {}
        # Trials to run again that the engine cannot hand out (the baseline; Hyperband's,
        # whose trial ids are not suggestion ids). Every other retry is a released suggestion.
        self._local_retries: deque[str] = deque()
        self._completed = 0
        self._baselines = 0
        self.known: set[str] = set()
        self.stopped: set[str] = set()
        self.done_at: float | None = None
        self.failure: str | None = None
        self.exhausted = False
        hb = config.hyperband
        self._schedule = HyperbandSchedule(hb.max_epochs, hb.factor, hb.iterations) if hb else None
        self._hb_trials = 0

    # -- set-up ------------------------------------------------------------------

    @property
    def maximize(self) -> bool:
        return self.config.direction == "max"

    @property
    def space(self) -> Space:
        return self._space

    async def start(self) -> Experiment:
        """Create the project's experiment, or resume the active one of that name."""
        cfg = self.config
        metrics = self._metrics()
        found = [e for e in await self.engine.experiments(state="active") if e.name == cfg.project]
        if found:
            exp = found[-1]
            if [m.to_dict() for m in exp.objectives] != metrics:
                raise invalid(
                    f"project {cfg.project!r} optimizes {[m.to_dict() for m in exp.objectives]}; "
                    f"use the same --objective/--direction or another --project"
                )
            if cfg.space:
                merged, skipped = merge_space(Space(exp.parameters), cfg.space)
                if skipped:
                    raise invalid(f"--space does not extend project {cfg.project!r}: {'; '.join(skipped)}")
                if len(merged.parameters) > len(exp.parameters):
                    exp = await self.engine.update_experiment(exp.id, parameters=[p.to_dict() for p in merged.parameters])
            if exp.stopped_reason is not None or exp.max_consecutive_failures != cfg.max_consecutive_failures:
                # the restart is the user's "fixed it, try again": a fresh count under this chief's cap
                exp = await self.engine.update_experiment(exp.id, max_consecutive_failures=cfg.max_consecutive_failures)
        else:
            exp = await self.engine.create_experiment(
                cfg.project,
                [p.to_dict() for p in cfg.space or ()],
                metrics=metrics,
                parallel_bandwidth=cfg.parallel_bandwidth or cfg.max_trials,
                strategy=cfg.strategy,
                strategy_options={"seed": cfg.seed} if cfg.seed is not None else None,
                max_consecutive_failures=cfg.max_consecutive_failures,
            )
        self.experiment = exp
        self._space = Space(exp.parameters)
        await self._rebuild(exp)
        return exp

    def _metrics(self) -> list[dict[str, str]]:
        """The experiment's objectives: KerasTuner's one, or each of its list (tauopt keeps every one)."""
        pairs = self.config.objectives or ((self.config.objective, self.config.direction),)
        return [{"name": n, "objective": "maximize" if d == "max" else "minimize"} for n, d in pairs]

    async def _rebuild(self, exp: Experiment) -> None:
        observations = await self.engine.observations(exp.id)
        self._space_known = bool(exp.parameters) or bool(observations) or self.config.space is not None
        for o in observations:
            tid = o.suggestion_id if o.suggestion_id is not None else f"o{o.id}"
            t = _Trial(tid, o.suggestion_id, dict(o.assignments), "failed" if o.failed else "completed")
            if not o.failed and o.value is not None:
                t.score = o.metrics.get(MULTI_OBJECTIVE, o.value) if self.config.objectives else o.value
                t.history = {self.config.objective: {0: [t.score]}, exp.metric.name: {0: [o.value]}}
                for k, v in o.metrics.items():
                    t.history.setdefault(k, {0: [v]})
                self._completed += 1
            self._add(t)
        now = self._clock()
        for s in await self.engine.suggestions(exp.id, state="open"):
            if s.released:  # waiting for a retry when the chief stopped: it still is (the engine holds it)
                self._add(_Trial(s.id, s.id, dict(s.assignments), "queued", runs=s.attempts))
                continue
            # A trial that was running when the chief stopped is still its worker's: the worker
            # may end it, or (restarted) ask for it again; if it stays silent it expires.
            self._add(_Trial(s.id, s.id, dict(s.assignments), "running", tuner_id=s.tag, handed_at=now, runs=s.attempts))
        self._check_done()

    # -- bookkeeping helpers --------------------------------------------------------

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def _add(self, t: _Trial) -> None:
        self._trials[t.trial_id] = t
        if t.state not in _FINAL:
            self._live[t.trial_id] = t

    def _live_trials(self) -> list[_Trial]:
        """The trials running, queued or ending, in the order they were added."""
        live = self._live
        ended = [tid for tid, t in live.items() if t.state in _FINAL]
        for tid in ended:
            del live[tid]
        return list(live.values())

    def _in_progress(self) -> int:
        return len(self._live_trials())  # every live state counts: running, queued, ending

    def _running(self) -> int:
        return sum(1 for t in self._live_trials() if t.state == "running")

    @property
    def done(self) -> bool:
        return self.done_at is not None

    def _finish(self, failure: str | None = None) -> None:
        if self.done_at is None:
            self.done_at = self._clock()
            self.failure = failure
            if failure:
                log.error("search failed: %s", failure)
            else:
                log.info("search done: %d completed trials", self._completed)
        self._notify()

    def _check_done(self) -> None:
        if self.done:
            return
        if self._completed >= self.config.max_trials:
            self._finish()
        elif self.exhausted and self._in_progress() == 0:
            self._finish()

    def _ongoing(self, tuner_id: str) -> _Trial | None:
        for t in self._live_trials():
            if t.state == "running" and t.tuner_id == tuner_id:
                return t
        return None

    def _hand_out(self, t: _Trial, tuner_id: str) -> TrialView:
        t.state, t.tuner_id, t.handed_at = "running", tuner_id, self._clock()
        t.runs += 1
        t.history = {}  # a rerun must not show the objective before it reports (the worker would skip UpdateTrial)
        return self._view(t)

    def _view(self, t: _Trial) -> TrialView:
        status: Status = {"running": "RUNNING", "queued": "RUNNING", "ending": "RUNNING", "completed": "COMPLETED", "failed": "FAILED"}[t.state]  # type: ignore[assignment]
        metrics = {name: tuple((step, tuple(vals)) for step, vals in sorted(h.items())) for name, h in t.history.items()}
        return TrialView(t.trial_id, status, {**t.values, **t.tuner_values}, metrics, t.score, t.best_step)

    def _trial(self, trial_id: str) -> _Trial:
        t = self._trials.get(trial_id)
        if t is None:
            raise api_error("not_found", f"trial {trial_id!r} is unknown to this chief; use a trial id from CreateTrial")
        return t

    # -- maintenance: expiry and exit --------------------------------------------------

    def _engine_holds(self, t: _Trial) -> bool:
        """Whether the engine hands this trial out again (a released suggestion of the
        same id); the baseline's and Hyperband's retries are this door's own."""
        return t.suggestion_id == t.trial_id and self._schedule is None and self.experiment is not None

    async def maintain(self) -> None:
        """Called periodically by the chief: trials whose worker went silent for
        trial_ttl_s are handed out again while their runs (the engine's attempts,
        durable) are within max(1, max_retries_per_trial), else their place returns."""
        async with self._lock:
            now = self._clock()
            expired = [t for t in self._live_trials() if t.state == "running" and now - t.handed_at > self.config.trial_ttl_s]
            runs = max(1, self.config.max_retries_per_trial)
            for t in expired:
                log.warning("trial %s expired: no EndTrial from %s within %.0f s", t.trial_id, t.tuner_id, self.config.trial_ttl_s)
                if not self.done and await self._queue_retry(t, max_runs=runs + 1):
                    continue
                t.state = "failed"
                if not self.done:
                    await self._fail_expired(t)
                await self._close(t)
                await self._check_failures(f"trial {t.trial_id} expired without an EndTrial after {t.runs} run(s)")
            if expired:
                self._notify()
            self._check_done()

    async def _fail_expired(self, t: _Trial) -> None:
        """A trial whose runs expired is a failed run for the engine's cap. An engine-held
        one was closed by its lease (counted there); a trial of this door's own is closed
        as used up (one attempt) or, without a suggestion, observed as failed, as its
        EndTrial FAILED would have been."""
        assert self.experiment is not None
        if self._engine_holds(t):
            return
        if t.suggestion_id is None:
            await self._observe(t, {}, None, 0)
            return
        try:
            await self.engine.release_suggestion(self.experiment.id, t.suggestion_id, max_attempts=1)
        except ApiError as exc:
            if exc.error_type not in ("suggestion_closed", "suggestion_expired", "suggestion_observed"):
                raise

    async def _queue_retry(self, t: _Trial, max_runs: int) -> bool:
        """Queue the trial for another run unless it had `max_runs` runs; False: used up.
        An engine-held trial is released there (the engine counts its runs and closes
        it when they are used up); the others queue here."""
        if self._engine_holds(t):
            assert self.experiment is not None and t.suggestion_id is not None
            try:
                s: Suggestion = await self.engine.release_suggestion(self.experiment.id, t.suggestion_id, max_attempts=max_runs)
            except ApiError as exc:
                if exc.error_type not in ("suggestion_closed", "suggestion_expired", "suggestion_observed"):
                    raise
                return False
            if not s.released:
                return False  # its runs are used up: the engine closed it
        elif t.runs < max_runs:
            self._local_retries.append(t.trial_id)
        else:
            return False
        t.state = "queued"
        return True

    def should_exit(self) -> bool:
        """Exit at once when the search is done, no trial runs, every known worker was
        told and the `workers` expected have all been told; otherwise linger (answering
        STOPPED to late joiners) for `linger_s` after the search is done. Without
        `workers` the chief cannot know that nobody is still starting up, so it lingers."""
        if self.done_at is None:
            return False
        if self._clock() - self.done_at >= self.config.linger_s:
            return True
        if self._running() or not self.known <= self.stopped:
            return False
        return self.config.workers is not None and len(self.stopped) >= self.config.workers

    @property
    def exit_code(self) -> int:
        return 1 if self.failure else 0

    # -- CreateTrial ---------------------------------------------------------------

    async def create_trial(self, tuner_id: str) -> TrialView:
        """A trial for `tuner_id`, STOPPED, or IDLE after holding the call up to hold_s.
        A hold for a free place in the bandwidth is the engine's waiting ask
        (`engine.suggest(wait_s=)`, outside this oracle's lock); holds this door alone
        knows (the baseline runs, every max_trials place is taken, Hyperband idles)
        wait for the oracle's next change."""
        if not isinstance(tuner_id, str) or not 1 <= len(tuner_id) <= 128 or not tuner_id.isprintable():
            raise invalid(f"tuner_id: give 1-128 printable characters, got {tuner_id[:40]!r}")
        deadline = self._clock() + self.config.hold_s
        while True:
            async with self._lock:
                self.known.add(tuner_id)
                step = await self._try_create(tuner_id)
                changed = self._changed
            if isinstance(step, _AskEngine) and deadline > self._clock():
                step = await self._ask_engine(tuner_id, min(deadline - self._clock(), MAX_WAIT_S))
            if isinstance(step, TrialView):
                if step.status == "STOPPED":
                    self.stopped.add(tuner_id)
                return step
            remaining = deadline - self._clock()
            if remaining <= 0:
                return TrialView("", "IDLE")
            with anyio.move_on_after(min(remaining, 1.0)):
                await changed.wait()

    async def _try_create(self, tuner_id: str) -> TrialView | _AskEngine | None:
        """A trial, STOPPED, _ASK_ENGINE (a suggestion decides), or None to hold the call."""
        ongoing = self._ongoing(tuner_id)
        if ongoing is not None:
            return self._view(ongoing)  # a restarted worker resumes its trial
        if self.done:
            if self.failure:
                self.stopped.add(tuner_id)
                raise SearchFailed(self.failure)
            return TrialView("", "STOPPED")
        if self._local_retries:
            return self._hand_out(self._trials[self._local_retries.pop()], tuner_id)  # LIFO, like the reference
        if any(t.state == "queued" and self._engine_holds(t) for t in self._live_trials()):
            return _ASK_ENGINE  # the engine hands out its released suggestions first
        if self._completed + self._in_progress() >= self.config.max_trials:
            return None  # every place is taken; one may fail and free up
        if self._schedule is not None:
            return await self._try_hyperband(tuner_id, self._schedule)
        if not self._space_known:
            if any(t.suggestion_id is None and t.state in ("running", "queued") for t in self._live_trials()):
                return None  # the baseline is running; its EndTrial brings the space
            self._baselines += 1
            t = _Trial(f"b{self._baselines}", None, {}, "queued")
            self._add(t)
            return self._hand_out(t, tuner_id)
        return _ASK_ENGINE

    async def _ask_engine(self, tuner_id: str, wait_s: float) -> TrialView | None:
        """The engine's suggestion as a trial: a released one is its trial's next run, a
        new one a new trial. The engine waits up to `wait_s` for a free place. None:
        hold (the wait ran out, the space is used up, or every place filled meanwhile)."""
        assert self.experiment is not None
        space = self._space  # the space the engine draws in, unless it grows meanwhile
        try:
            s: Suggestion = await self.engine.suggest(self.experiment.id, tag=tuner_id, wait_s=wait_s)
        except ApiError as exc:
            if exc.error_type == "bandwidth_full":
                return None
            if exc.error_type == "too_many_failures":
                async with self._lock:
                    await self._check_failures(None)
                return None  # the next round answers SearchFailed
            if exc.error_type in ("space_exhausted", "experiment_completed", "experiment_archived"):
                async with self._lock:
                    self.exhausted = True
                    log.info("no more trials: %s", exc.message)
                    self._check_done()  # done: the hold wakes at once to answer STOPPED
                return None
            raise
        async with self._lock:
            t = self._trials.get(s.id)
            if t is not None:  # a released suggestion: its trial's next run
                if self.done:
                    await self.engine.release_suggestion(self.experiment.id, s.id)  # the search ended meanwhile
                    return None
                t.runs = s.attempts - 1  # _hand_out counts this run
                return self._hand_out(t, tuner_id)
            if self.done or self._completed + self._in_progress() >= self.config.max_trials:
                await self.engine.close_suggestion(self.experiment.id, s.id)  # every place filled meanwhile
                return None
            t = _Trial(s.id, s.id, dict(s.assignments), "queued", drawn_in=space)
            self._add(t)
            return self._hand_out(t, tuner_id)

    async def _try_hyperband(self, tuner_id: str, schedule: HyperbandSchedule) -> TrialView | None:
        """KerasTuner's HyperbandOracle.populate_space over our trials: a new
        trial's values come from the engine (or are the baseline's defaults);
        a promoted one repeats its parent's values, so it is stored at its
        end as an observation of that point (the engine never suggests a point twice)."""
        if not self._space_known and any(
            t.suggestion_id is None and not t.values and t.state in ("running", "queued") for t in self._live_trials()
        ):
            return None  # the baseline is running; its EndTrial brings the space
        tid = f"hb{self._hb_trials + 1}"
        step = schedule.next(tid, self._loss_of, ongoing=self._in_progress() > 0)
        if isinstance(step, Idle):
            return None
        if isinstance(step, Finished):
            self.exhausted = True
            self._check_done()
            return TrialView("", "STOPPED") if self.done else None
        self._hb_trials += 1
        hb_values: dict[str, Value] = {
            "tuner/epochs": step.epochs,
            "tuner/initial_epoch": step.initial_epoch,
            "tuner/bracket": step.bracket,
            "tuner/round": step.round,
        }
        if isinstance(step, Promote):
            parent = self._trials[step.parent_id]
            t = _Trial(tid, None, dict(parent.values), "queued", tuner_values={**hb_values, "tuner/trial_id": step.parent_id})
        elif not self._space_known:
            t = _Trial(tid, None, {}, "queued", tuner_values=hb_values)
        else:
            assert isinstance(step, NewTrial) and self.experiment is not None
            try:
                s: Suggestion = await self.engine.suggest(self.experiment.id, tag=tuner_id)
            except ApiError as exc:
                schedule.cancel(tid)
                self._hb_trials -= 1
                if exc.error_type == "bandwidth_full":
                    return None
                if exc.error_type == "too_many_failures":
                    await self._check_failures(None)
                    return None  # the next round answers SearchFailed
                raise
            t = _Trial(tid, s.id, dict(s.assignments), "queued", tuner_values=hb_values)
        self._add(t)
        return self._hand_out(t, tuner_id)

    def _loss_of(self, trial_id: str) -> float | None:
        t = self._trials.get(trial_id)
        if t is None or t.state != "completed" or t.score is None:
            return None
        return -t.score if self.maximize else t.score

    # -- UpdateTrial / EndTrial ------------------------------------------------------------

    async def update_trial(self, trial_id: str, metrics: Mapping[str, float], step: int) -> TrialView:
        needed = [n for n, _ in self.config.objectives] or [self.config.objective]
        missing = [n for n in needed if n not in metrics]
        if missing:
            raise invalid(
                f"metrics: the objective(s) {missing} are missing (got {sorted(metrics)[:10]}); "
                "the worker's objective and the chief's --objective must agree"
            )
        if self.config.objectives and MULTI_OBJECTIVE not in metrics:
            # a worker whose run_trial returns a dict reports the objectives only: score them as KerasTuner does
            metrics = {**metrics, MULTI_OBJECTIVE: multi_objective_score(self.config.objectives, metrics)}
        async with self._lock:
            t = self._trial(trial_id)
            if t.state not in ("running", "queued"):
                raise api_error("invalid_request", f"trial {trial_id!r} has already ended ({t.state}); it takes no more metrics")
            for name, value in metrics.items():
                t.history.setdefault(name, {}).setdefault(int(step), []).append(float(value))
            return self._view(t)

    def _best(self, t: _Trial) -> tuple[float | None, int]:
        h = t.history.get(self.config.objective)
        if not h:
            return None, 0
        means = [(step, sum(v) / len(v)) for step, v in h.items() if v and not any(math.isnan(x) for x in v)]
        if not means:
            return math.nan, 0
        step, best = (max if self.maximize else min)(means, key=lambda sv: (sv[1], -sv[0]) if self.maximize else (sv[1], sv[0]))
        return best, step

    def _metrics_at(self, t: _Trial, step: int) -> dict[str, float]:
        out = {}
        for name, h in t.history.items():
            if name == self.config.objective:
                continue
            vals = h.get(step) or h[max(h)]
            mean = sum(vals) / len(vals)
            if math.isfinite(mean):
                out[name] = mean
        return out

    async def end_trial(self, trial_id: str, status: str, values: Mapping[str, Value], learned: Learned | None) -> None:
        if status not in ("COMPLETED", "INVALID", "FAILED"):
            raise invalid(f"trial.status: {status} is not an end status; send COMPLETED, INVALID or FAILED")
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
            await ending.wait()  # the same trial's other EndTrial is being written: its outcome decides
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
                t.state, t.score, t.best_step, t.ended = "completed", score, step, None
                self._completed += 1
                self._check_done()
                self._notify()
        ended.set()

    async def _end_locked(
        self, t: _Trial, status: str, values: Mapping[str, Value]
    ) -> tuple[TrialState, float | None, int, anyio.Event] | None:
        """EndTrial's work under the lock. A COMPLETED run is only marked "ending" here and
        its observation written by the caller outside the lock (every other RPC would
        otherwise wait for that commit, and commits could not group across workers):
        then (state before, score, step, the event set when written). None: done here."""
        if t.state in ("completed", "failed"):
            log.info("EndTrial for trial %s, which already ended (%s): ignored", t.trial_id, t.state)
            return None
        if t.trial_id in self._local_retries:
            self._local_retries.remove(t.trial_id)
        score, step = self._best(t)
        if status == "COMPLETED" and (score is None or math.isnan(score)):
            log.warning("trial %s: COMPLETED without a finite %r: counted as INVALID", t.trial_id, self.config.objective)
            status = "INVALID"
        if status == "COMPLETED":
            before, t.state, t.ended = t.state, "ending", anyio.Event()
            return before, score, step, t.ended
        if status == "INVALID" and t.runs <= self.config.max_retries_per_trial:
            await self._queue_retry(t, max_runs=self.config.max_retries_per_trial + 1)  # runs are left: it queues
            log.info("trial %s INVALID: retry %d of %d", t.trial_id, t.runs, self.config.max_retries_per_trial)
        else:
            await self._observe(t, values, None, 0)
            t.state = "failed"
            await self._check_failures(f"trial {t.trial_id} ended {status}")
        self._check_done()
        self._notify()
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

    async def _observe(self, t: _Trial, values: Mapping[str, Value], score: float | None, step: int) -> None:
        assert self.experiment is not None
        exp_id = self.experiment.id
        failed = score is None
        metrics = self._metrics_at(t, step) if not failed else {}
        if self.config.objectives and not failed:
            # tauopt keeps every objective: the first is the observation's value, the rest and
            # KerasTuner's score go with the metrics (so the Pareto front is there over HTTP)
            metrics[MULTI_OBJECTIVE] = score  # type: ignore[assignment]
            score = metrics.pop(self.config.objectives[0][0], None)
            if score is None:  # the first objective was not finite at the best step
                failed, metrics = True, {}
        if t.suggestion_id is not None and t.drawn_in is self._space:
            point = t.values  # what assignments_for would make of it: drawn in today's space
        else:
            point = assignments_for(self._space, {**values, **t.values}) if self._space.parameters or values else {}
        if t.suggestion_id is not None:
            if point == t.values:
                try:
                    await self.engine.observe(exp_id, suggestion_id=t.suggestion_id, value=score, failed=failed, metrics=metrics)
                    return
                except ApiError as exc:
                    if exc.error_type not in ("suggestion_expired", "suggestion_closed"):
                        raise
            else:
                # The space grew since this suggestion: store a point valid in today's space.
                await self._close(t)
        await self.engine.observe(exp_id, assignments=point, value=score, failed=failed, metrics=metrics)

    async def _close(self, t: _Trial) -> None:
        if t.suggestion_id is None or self.experiment is None:
            return
        try:
            await self.engine.close_suggestion(self.experiment.id, t.suggestion_id)
        except ApiError as exc:
            if exc.error_type not in ("suggestion_closed", "suggestion_expired", "suggestion_observed"):
                raise

    # -- space ------------------------------------------------------------------------------

    async def _learn(self, learned: Learned) -> None:
        if self._merged is not None and self._merged[0] is learned and self._merged[1] is self._space:
            return  # this very space was merged into today's space already (every EndTrial sends it)
        for reason in learned.skipped:
            log.warning("space: skipped %s", reason)
        merged, skipped = merge_space(self._space, learned.parameters)
        for reason in skipped:
            log.warning("space: skipped %s", reason)
        if len(merged.parameters) > len(self._space.parameters):
            assert self.experiment is not None
            exp = await self.engine.update_experiment(self.experiment.id, parameters=[p.to_dict() for p in merged.parameters])
            self.experiment = exp
            self._space = Space(exp.parameters)
            log.info("space: now %d parameters (%s)", len(self._space.parameters), ", ".join(p.name for p in self._space.parameters))
        if not self._space_known:
            self._space_known = True
            self._notify()
        self._merged = (learned, self._space)

    async def update_space(self, learned: Learned) -> None:
        async with self._lock:
            await self._learn(learned)

    def default_values(self) -> dict[str, Value]:
        return assignments_for(self._space, {}) if self._space.parameters else {}

    # -- reads ----------------------------------------------------------------------------

    async def get_trial(self, trial_id: str) -> TrialView:
        return self._view(self._trial(trial_id))

    async def best_trials(self, n: int) -> list[TrialView]:
        """Completed trials by score, padded with the others like the reference chief."""
        if n <= 0:
            return []
        done = [t for t in self._trials.values() if t.state == "completed" and t.score is not None]
        done.sort(key=lambda t: t.score, reverse=self.maximize)  # type: ignore[arg-type, return-value]
        rest = [t for t in self._trials.values() if not (t.state == "completed" and t.score is not None)]
        return [self._view(t) for t in (done + rest)[:n]]

    def summary(self) -> dict[str, Any]:
        states: dict[str, int] = {}
        for t in self._trials.values():
            states[t.state] = states.get(t.state, 0) + 1
        return {
            "experiment": self.experiment.id if self.experiment else None,
            "completed": self._completed,
            "trials": states,
            "workers_known": sorted(self.known),
            "workers_stopped": sorted(self.stopped),
            "failure": self.failure,
        }

