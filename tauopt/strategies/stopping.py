"""Early-stopping rules: pure decisions over intermediate reports.

A trial reports `(step, value)` while it runs; the experiment's rule answers
whether it should stop. Everything here is pure and incremental: `CurveStats`
keeps, per step, the sorted values of completed trials (median rule) and, per
rung, the sorted values of trials that reached it (ASHA), so a decision costs
a bisect, never a pass over the history. The engine owns one `CurveStats` per
experiment and feeds it in report order; replaying the same reports in the
same order rebuilds the same state (and the same past decisions).

Values are compared as losses: for a maximised objective the sign is flipped
on the way in, so the rules below only ever minimise.

- median (Optuna's MedianPruner, Vizier's median stopping): at step s >=
  `grace_steps`, once at least `min_trials` completed, not-stopped trials
  reported at step s, a trial whose best value so far is worse than their
  median at s stops.
- asha (asynchronous successive halving, Li et al. 2020; Optuna's
  SuccessiveHalvingPruner): rungs at min_step * rf**k below max_step. The
  first report at or past a rung records the trial's value there; the trial
  continues only if that value is in the best max(1, n // rf) of the n values
  the rung has seen so far (itself included). Reports at or past `max_step`
  never stop (the trial has reached the full budget).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

from ..schema._stopping import AshaRule, MedianRule, NoStopping, StoppingRule, parse_rule, rule_to_json

__all__ = [
    "NoStopping",
    "MedianRule",
    "AshaRule",
    "StoppingRule",
    "Decision",
    "CurveStats",
    "StepOrderError",
    "parse_rule",
    "rule_to_json",
]


@dataclass(frozen=True)
class Decision:
    should_stop: bool
    reason: str | None = None


_CONTINUE = Decision(False)


@dataclass
class _Curve:
    steps: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    best: float = math.inf


class StepOrderError(ValueError):
    """A report whose step is not greater than the trial's last one."""


class CurveStats:
    """One experiment's learning curves and the statistics the rules read.

    `report` records and decides; `complete` and `discard` end a curve. The
    rule can change at any time (`set_rule`): ASHA rungs are rebuilt from the
    curves kept here, since a rung's set of values does not depend on order.
    """

    def __init__(self, rule: StoppingRule = NoStopping(), maximize: bool = False) -> None:
        self._sign = -1.0 if maximize else 1.0
        self._open: dict[str, _Curve] = {}
        self._done: dict[str, _Curve] = {}
        self._stopped: set[str] = set()
        # step -> sorted losses of completed, not-stopped trials at that step
        self._at_step: dict[int, list[float]] = {}
        self._rule: StoppingRule = NoStopping()
        self._rungs: tuple[int, ...] = ()
        self._rung_values: dict[int, list[float]] = {}
        self._rung_seen: dict[str, int] = {}  # trial -> rungs recorded so far
        self.set_rule(rule)

    @property
    def rule(self) -> StoppingRule:
        return self._rule

    def set_rule(self, rule: StoppingRule) -> None:
        self._rule = rule
        self._rungs = rule.rungs() if isinstance(rule, AshaRule) else ()
        self._rung_values = {r: [] for r in self._rungs}
        self._rung_seen = {}
        for trial_id, curve in (*self._done.items(), *self._open.items()):
            for step, loss in zip(curve.steps, curve.losses):
                self._record_rungs(trial_id, step, loss)

    def last_step(self, trial_id: str) -> int | None:
        curve = self._open.get(trial_id) or self._done.get(trial_id)
        return curve.steps[-1] if curve and curve.steps else None

    def curve(self, trial_id: str) -> list[tuple[int, float]]:
        curve = self._open.get(trial_id) or self._done.get(trial_id)
        if curve is None:
            return []
        return [(s, loss * self._sign) for s, loss in zip(curve.steps, curve.losses)]

    def report(self, trial_id: str, step: int, value: float) -> Decision:
        """Record `value` at `step` for an open trial and decide whether it stops."""
        curve = self._open.setdefault(trial_id, _Curve())
        if curve.steps and step <= curve.steps[-1]:
            raise StepOrderError(f"step {step} is not after this suggestion's last reported step {curve.steps[-1]}")
        loss = value * self._sign
        curve.steps.append(step)
        curve.losses.append(loss)
        curve.best = min(curve.best, loss)
        rung = self._record_rungs(trial_id, step, loss)
        if isinstance(self._rule, MedianRule):
            return self._median(self._rule, step, curve.best)
        if isinstance(self._rule, AshaRule) and rung is not None and step < self._rule.max_step:
            return self._asha(self._rule, rung, loss)
        return _CONTINUE

    def complete(self, trial_id: str, stopped: bool = False) -> None:
        """The trial was observed: its curve joins the statistics (the median
        reads completed, not-stopped trials only, like Optuna's)."""
        curve = self._open.pop(trial_id, None)
        if curve is None:
            return
        self._done[trial_id] = curve
        if stopped:
            self._stopped.add(trial_id)
            return
        for step, loss in zip(curve.steps, curve.losses):
            bisect.insort(self._at_step.setdefault(step, []), loss)

    def discard(self, trial_id: str) -> None:
        """A closed or expired suggestion: its reports stay in the rungs (they
        were compared against) but it never joins the median's trials."""
        curve = self._open.pop(trial_id, None)
        if curve is not None:
            self._done[trial_id] = curve
            self._stopped.add(trial_id)

    def _record_rungs(self, trial_id: str, step: int, loss: float) -> int | None:
        """Record `loss` in every rung this report reaches for the first time;
        returns the highest such rung (the one decided on), else None."""
        seen = self._rung_seen.get(trial_id, 0)
        reached = None
        while seen < len(self._rungs) and self._rungs[seen] <= step:
            reached = self._rungs[seen]
            bisect.insort(self._rung_values[reached], loss)
            seen += 1
        self._rung_seen[trial_id] = seen
        return reached

    def _median(self, rule: MedianRule, step: int, best: float) -> Decision:
        if step < rule.grace_steps:
            return _CONTINUE
        values = self._at_step.get(step, [])
        n = len(values)
        if n < rule.min_trials:
            return _CONTINUE
        median = values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2
        if best > median:
            return Decision(
                True,
                f"median: best value so far {best * self._sign:g} is worse than the median "
                f"{median * self._sign:g} of {n} completed trials at step {step}",
            )
        return _CONTINUE

    def _asha(self, rule: AshaRule, rung: int, loss: float) -> Decision:
        values = self._rung_values[rung]
        keep = max(1, len(values) // rule.reduction_factor)
        cutoff = values[keep - 1]
        if loss > cutoff:
            return Decision(
                True,
                f"asha: value {loss * self._sign:g} at rung step {rung} is not in the best {keep} "
                f"of {len(values)} trials there (reduction factor {rule.reduction_factor})",
            )
        return _CONTINUE
