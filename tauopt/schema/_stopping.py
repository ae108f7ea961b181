"""The early-stopping rule as a value: which rule, with which options (`parse_rule`
judges a user's JSON form, `rule_to_json` writes it back). The decisions the rules
make over a trial's reports are `tauopt.strategies.stopping`'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping, Union

from .._numbers import integral
from ..errors import invalid
from ..limits import STOPPING_OPTIONS

__all__ = ["NoStopping", "MedianRule", "AshaRule", "StoppingRule", "parse_rule", "rule_to_json"]


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
