"""The KerasTuner chief's door onto the engine's trial queue: translation only.

The engine's `TrialQueue` (tauopt/engine/_trialqueue.py) owns the trials: their
states, claims, retries, Hyperband's brackets, the counters and the failure cap.
This door maps KerasTuner's calls onto it: CreateTrial is a claim, UpdateTrial a
report (with KerasTuner's `multi_objective` score added for an objective list),
EndTrial an end, and a trial is shown as KerasTuner's Trial (its status, its
values with Hyperband's `tuner/*` keys, its metric history and score).

Differences from KerasTuner's reference chief: CreateTrial is held open
instead of answering IDLE (no hot loop); a trial whose worker died is handed
out again after `trial_ttl_s`; a failed or expired trial frees its place;
late workers get STOPPED while the chief lingers; consecutive failures end the
search with an error every worker sees, and the chief exits instead of hanging.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping

from ...engine import STOPPED, Brackets, SearchFailed, TrialInfo, TrialPolicy, TrialQueue
from ...errors import invalid
from ...models import MAX_OBJECTIVES, Experiment, Parameter, Value
from ...space import Space
from ._convert import Learned

__all__ = ["ChiefConfig", "HyperbandConfig", "TrialView", "SearchFailed", "KerasTunerOracle", "MULTI_OBJECTIVE", "multi_objective_score"]

MULTI_OBJECTIVE = "multi_objective"  # KerasTuner's name for the score of an objective list

# Once every worker was told STOPPED, the chief still answers until no call came for this
# long (never past linger_s): a worker's search returns on STOPPED and its program then asks
# for the best trials; a chief already gone leaves that call waiting for a server (KerasTuner's
# client waits for the chief, up to an hour).
LAST_CALLS_S = 2.0


def multi_objective_score(objectives: tuple[tuple[str, str], ...], metrics: Mapping[str, float]) -> float:
    """keras_tuner.engine.objective.MultiObjective.get_value: min objectives add, max ones subtract."""
    return sum(metrics[n] if d == "min" else -metrics[n] for n, d in objectives)


Status = Literal["RUNNING", "IDLE", "STOPPED", "COMPLETED", "FAILED", "INVALID"]


# KerasTuner's Hyperband: trials get tuner/epochs, tuner/initial_epoch, tuner/bracket,
# tuner/round and, when promoted, tuner/trial_id (the engine's bracket runs, shown so)
HyperbandConfig = Brackets


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

    def policy(self) -> TrialPolicy:
        """The engine's trial queue for this chief: KerasTuner's objective (or objective
        list, ranked by its `multi_objective` score) over the project's experiment."""
        return TrialPolicy(
            project=self.project,
            objectives=self.objectives or ((self.objective, self.direction),),
            score=self.objective,
            maximize=self.direction == "max",
            max_trials=self.max_trials,
            strategy=self.strategy,
            trial_ttl_s=self.trial_ttl_s,
            max_retries_per_trial=self.max_retries_per_trial,
            max_consecutive_failures=self.max_consecutive_failures,
            parallel_bandwidth=self.parallel_bandwidth,
            seed=self.seed,
            space=self.space,
            brackets=self.hyperband,
        )

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


_STATUS: dict[str, Status] = {"waiting": "RUNNING", "running": "RUNNING", "ending": "RUNNING", "completed": "COMPLETED", "failed": "FAILED"}
_STATE_NAMES = {"waiting": "queued"}  # the chief's summary says "queued" for a trial waiting for its next run


def _view(t: TrialInfo) -> TrialView:
    values = t.values
    b = t.bracket
    if b is not None:
        values = {**values, "tuner/epochs": b.epochs, "tuner/initial_epoch": b.initial_epoch, "tuner/bracket": b.bracket, "tuner/round": b.round}
        if b.parent_id is not None:
            values["tuner/trial_id"] = b.parent_id
    return TrialView(t.trial_id, _STATUS[t.state], values, t.history, t.score, t.best_step)


class KerasTunerOracle:
    def __init__(self, engine: Any, config: ChiefConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.engine = engine
        self.config = config
        self.trials = TrialQueue(engine, config.policy(), clock)
        self._clock = clock
        self._last_call = clock()

    @property
    def maximize(self) -> bool:
        return self.config.direction == "max"

    @property
    def space(self) -> Space:
        return self.trials.space

    @property
    def experiment(self) -> Experiment | None:
        return self.trials.experiment

    @property
    def done(self) -> bool:
        return self.trials.done

    @property
    def failure(self) -> str | None:
        return self.trials.failure

    @property
    def exit_code(self) -> int:
        return 1 if self.failure else 0

    async def start(self) -> Experiment:
        """Create the project's experiment, or resume the active one of that name."""
        return await self.trials.start()

    async def maintain(self) -> None:
        await self.trials.maintain()

    def heard(self) -> None:
        """A call began or ended (see LAST_CALLS_S)."""
        self._last_call = self._clock()

    def should_exit(self) -> bool:
        if not self.trials.should_exit(self.config.linger_s, self.config.workers):
            return False
        now, done_at = self._clock(), self.trials.done_at
        if done_at is not None and now - done_at >= self.config.linger_s:
            return True
        return now - self._last_call >= LAST_CALLS_S

    async def create_trial(self, tuner_id: str) -> TrialView:
        """A trial for `tuner_id`, STOPPED, or IDLE after holding the call up to hold_s."""
        if not isinstance(tuner_id, str) or not 1 <= len(tuner_id) <= 128 or not tuner_id.isprintable():
            raise invalid(f"tuner_id: give 1-128 printable characters, got {tuner_id[:40]!r}")
        claimed = await self.trials.claim(tuner_id, self.config.hold_s)
        if claimed is None:
            return TrialView("", "IDLE")
        if claimed == STOPPED:
            return TrialView("", "STOPPED")
        assert isinstance(claimed, TrialInfo)
        return _view(claimed)

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
        return _view(await self.trials.report(trial_id, metrics, step))

    async def end_trial(self, trial_id: str, status: str, values: Mapping[str, Value], learned: Learned | None) -> None:
        if status not in ("COMPLETED", "INVALID", "FAILED"):
            raise invalid(f"trial.status: {status} is not an end status; send COMPLETED, INVALID or FAILED")
        await self.trials.end(trial_id, status, values, learned)  # type: ignore[arg-type]

    async def update_space(self, learned: Learned) -> None:
        await self.trials.learn(learned)

    def default_values(self) -> dict[str, Value]:
        return self.trials.default_values()

    async def get_trial(self, trial_id: str) -> TrialView:
        return _view(self.trials.info(trial_id))

    async def best_trials(self, n: int) -> list[TrialView]:
        """Completed trials by score, padded with the others like the reference chief."""
        return [_view(t) for t in self.trials.best(n)]

    def summary(self) -> dict[str, Any]:
        out = self.trials.summary()
        out["trials"] = {_STATE_NAMES.get(k, k): v for k, v in out["trials"].items()}
        return out
