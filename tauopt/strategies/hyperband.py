"""KerasTuner's Hyperband bracket schedule, as a pure state machine.

This reproduces `keras_tuner.oracles.HyperbandOracle.populate_space`
decision for decision (tests/test_hyperband_schedule.py drives both side by
side), so unmodified `keras_tuner.Hyperband` workers see the `tuner/epochs`,
`tuner/initial_epoch`, `tuner/bracket`, `tuner/round` and `tuner/trial_id`
they would get from KerasTuner's own chief. Its rules, kept as they are:

- brackets run from the most exploratory (many trials, few epochs) down to
  bracket 0; `hyperband_iterations` passes over all brackets;
- round r of bracket b holds `ceil(ceil(1 + log_f(max_epochs)) / (b + 1) * f**(b - r))`
  trials trained to `ceil(max_epochs / f**(b - r))` epochs;
- a trial of round r >= 1 continues the best *completed* trial of round r-1
  not yet promoted, once more of them completed than the round drops;
- `tuner/bracket` of a promotion is the bracket being filled with new trials
  at that moment (KerasTuner's quirk), not the promoted trial's own bracket.

Scores are losses: the caller flips the sign of a maximised objective.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Union

__all__ = ["HyperbandSchedule", "NewTrial", "Promote", "Idle", "Finished", "Step"]


@dataclass(frozen=True)
class NewTrial:
    """Start a trial from fresh values (the caller picks them)."""

    epochs: int
    bracket: int
    round: int = 0
    initial_epoch: int = 0


@dataclass(frozen=True)
class Promote:
    """Continue `parent_id`'s values and checkpoint from `initial_epoch` to `epochs`."""

    parent_id: str
    epochs: int
    initial_epoch: int
    bracket: int
    round: int


@dataclass(frozen=True)
class Idle:
    """Nothing to hand out until a running trial ends."""


@dataclass(frozen=True)
class Finished:
    """Every bracket of every iteration is done."""


Step = Union[NewTrial, Promote, Idle, Finished]


@dataclass
class _Bracket:
    num: int
    # rounds[r] = [(parent_id or None, trial_id), ...]
    rounds: list[list[tuple[str | None, str]]] = field(default_factory=list)


class HyperbandSchedule:
    def __init__(self, max_epochs: int, factor: int = 3, iterations: int = 1) -> None:
        if factor < 2:
            raise ValueError("factor: give an integer >= 2")
        if max_epochs < 1 or iterations < 1:
            raise ValueError("max_epochs and hyperband_iterations: give integers >= 1")
        self.max_epochs = max_epochs
        self.factor = factor
        self.iterations = iterations
        self._iteration = 0
        self._current = self.num_brackets() - 1
        self._brackets: list[_Bracket] = []
        self._start_bracket()

    def num_brackets(self) -> int:
        epochs, brackets = float(self.max_epochs), 0
        while epochs >= 1:
            epochs /= self.factor
            brackets += 1
        return brackets

    def size(self, bracket: int, round_num: int) -> int:
        end_size = math.ceil(1 + math.log(self.max_epochs, self.factor)) / (bracket + 1)
        return math.ceil(end_size * self.factor ** (bracket - round_num))

    def epochs(self, bracket: int, round_num: int) -> int:
        return math.ceil(self.max_epochs / self.factor ** (bracket - round_num))

    def next(self, trial_id: str, score: Callable[[str], float | None], ongoing: bool) -> Step:
        """The step for a new trial `trial_id`. `score(id)` is a completed
        trial's loss, None while it runs or if it failed; `ongoing` says
        whether any trial still runs (then the end is Idle, not Finished)."""
        self._brackets = [b for b in self._brackets if len(b.rounds[-1]) != self.size(b.num, len(b.rounds) - 1)]
        for bracket in self._brackets:
            if len(bracket.rounds[0]) < self.size(bracket.num, 0):
                return self._new(trial_id, bracket)
            promoted = self._promote(trial_id, bracket, score)
            if promoted is not None:
                return promoted
        if self._current == 0 and self._iteration + 1 == self.iterations:
            return Idle() if ongoing else Finished()
        self._current -= 1
        if self._current < 0:
            self._current = self.num_brackets() - 1
            self._iteration += 1
        self._start_bracket()
        return self._new(trial_id, self._brackets[-1])

    def state(self) -> dict[str, Any]:
        """Where the schedule stands (JSON-able): `restore` continues from it."""
        return {
            "iteration": self._iteration,
            "current": self._current,
            "brackets": [[b.num, [[[p, t] for p, t in r] for r in b.rounds]] for b in self._brackets],
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from `state()` of a schedule with the same arguments."""
        self._iteration = int(state["iteration"])
        self._current = int(state["current"])
        self._brackets = [
            _Bracket(int(num), [[(p, t) for p, t in r] for r in rounds]) for num, rounds in state["brackets"]
        ]

    def cancel(self, trial_id: str) -> None:
        """Forget a NewTrial the caller could not fill (no fresh values left)."""
        for bracket in self._brackets:
            bracket.rounds[0] = [e for e in bracket.rounds[0] if e[1] != trial_id]

    def _start_bracket(self) -> None:
        self._brackets.append(_Bracket(self._current, [[] for _ in range(self._current + 1)]))

    def _new(self, trial_id: str, bracket: _Bracket) -> NewTrial:
        bracket.rounds[0].append((None, trial_id))
        return NewTrial(epochs=self.epochs(bracket.num, 0), bracket=self._current)

    def _promote(self, trial_id: str, bracket: _Bracket, score: Callable[[str], float | None]) -> Promote | None:
        for r in range(1, len(bracket.rounds)):
            taken = {parent for parent, _ in bracket.rounds[r]}
            candidates = [
                (s, tid) for _, tid in bracket.rounds[r - 1] if tid not in taken and (s := score(tid)) is not None
            ]
            if len(candidates) > self.size(bracket.num, r - 1) - self.size(bracket.num, r):
                # min() keeps the first of equal scores, like KerasTuner's stable sort.
                best = min(candidates, key=lambda c: c[0])[1]
                bracket.rounds[r].append((best, trial_id))
                return Promote(
                    parent_id=best,
                    epochs=self.epochs(bracket.num, r),
                    initial_epoch=self.epochs(bracket.num, r - 1),
                    bracket=self._current,
                    round=r,
                )
        return None
