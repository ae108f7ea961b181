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
from typing import Any, Literal, Mapping, Union

from .._numbers import integral
from ..errors import invalid
from ..limits import STOPPING_OPTIONS

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
class NoStopping:
    rule: Literal["none"] = "none"


@dataclass(frozen=True)
class MedianRule:
    min_trials: int = 5
    grace_steps: int = 0
    rule: Literal["median"] = "median"

    def __post_init__(self) -> None:
        _check_int("min_trials", self.min_trials)
        _check_int("grace_steps", self.grace_steps)


@dataclass(frozen=True)
class AshaRule:
    max_step: int
    min_step: int = 1
    reduction_factor: int = 3
    rule: Literal["asha"] = "asha"

    def __post_init__(self) -> None:
        _check_int("min_step", self.min_step)
        if isinstance(self.max_step, int) and not isinstance(self.max_step, bool) and self.max_step <= self.min_step:
            raise invalid(
                f"early_stopping.max_step: {self.max_step} must be above min_step ({self.min_step}); "
                "max_step is the full budget in steps, min_step the first rung"
            )
        _check_int("max_step", self.max_step, self.min_step + 1)
        _check_int("reduction_factor", self.reduction_factor)

    def rungs(self) -> tuple[int, ...]:
        """The steps where trials are compared: min_step * rf**k < max_step."""
        out, step = [], self.min_step
        while step < self.max_step:
            out.append(step)
            step *= self.reduction_factor
        return tuple(out)


StoppingRule = Union[NoStopping, MedianRule, AshaRule]

_OPTIONS: dict[str, tuple[str, ...]] = {
    "none": (),
    "median": ("min_trials", "grace_steps"),
    "asha": ("min_step", "max_step", "reduction_factor"),
}


def _check_int(option: str, value: Any, low: int | None = None) -> None:
    """`value` an integer within the option's declared range (`low`: a tighter least value)."""
    limit = STOPPING_OPTIONS[option]
    least = int(limit.ge or 0) if low is None else max(low, int(limit.ge or 0))
    if not isinstance(value, int) or value not in limit or value < least:
        most = int(limit.le or 0).bit_length() - 1  # the limit is a power of two
        raise invalid(f"early_stopping.{option}: give an integer >= {least} (and <= 2**{most}), got {value!r}")


def parse_rule(spec: Mapping[str, Any] | None) -> StoppingRule:
    """`{"rule": "none"|"median"|"asha", ...options}` -> a rule; bad input -> 400."""
    if spec is None:
        return NoStopping()
    if not isinstance(spec, Mapping):
        raise invalid('early_stopping: give an object such as {"rule": "median", "min_trials": 5}')
    name = spec.get("rule", "none")
    if not isinstance(name, str) or name not in _OPTIONS:
        raise invalid(f"early_stopping.rule: give one of none, median, asha; got {name!r}")
    unknown = sorted(set(spec) - {"rule", *_OPTIONS[name]})
    if unknown:
        allowed = ", ".join(_OPTIONS[name]) or "no options"
        raise invalid(f"early_stopping: {name} takes {allowed}; remove {', '.join(map(str, unknown))}")
    options = {k: integral(spec[k]) for k in _OPTIONS[name] if k in spec}
    if name == "none":
        return NoStopping()
    if name == "median":
        return MedianRule(**options)
    if "max_step" not in options:
        raise invalid("early_stopping.max_step: asha needs the full budget in steps (max_step)")
    return AshaRule(**options)


def rule_to_json(rule: StoppingRule) -> dict[str, Any]:
    if isinstance(rule, MedianRule):
        return {"rule": "median", "min_trials": rule.min_trials, "grace_steps": rule.grace_steps}
    if isinstance(rule, AshaRule):
        return {
            "rule": "asha",
            "min_step": rule.min_step,
            "max_step": rule.max_step,
            "reduction_factor": rule.reduction_factor,
        }
    return {"rule": "none"}


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
