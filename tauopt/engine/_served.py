"""Server-side suggestions for a study's unmodified workers (opt-in per study).

A study whose user attribute `tauopt:serve_suggestions` is set (JSON `true`, or a
strategy's name: "auto", "gp", "sobol", ...) gets tauopt's points without any change
to its workers: the engine keeps WAITING trials whose system attribute
`fixed_params` is one of the strategy's suggestions — Optuna's own mechanism, the
one `enqueue_trial` uses — so a worker's `study.ask()` claims one and its
`suggest_*` calls return the served values, whatever its sampler. A parameter
the point lacks (one the space does not know yet, a conditional one) is the
worker's sampler's to choose.

How many are kept waiting follows the observed workers: as many as trials are
running (at least one, at most `MAX_SERVED`). A served trial nobody claims within
`SERVED_TTL_S`, or drawn before more results arrived than workers run (at least
`STALENESS_BOUND`, as for points computed ahead), gets a fresh point when one is
ready: the history has moved on since it was drawn. Points are
served only once the space is known (after the first finished trial), and a
pooled strategy's points only when computed ahead: a claim never waits for a fit.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from ..errors import invalid
from ..models import Value
from ..strategies import AUTO
from ..strategies import get as get_strategy
from ._ahead import STALENESS_BOUND
from ._trials import Trial

__all__ = [
    "SERVE_KEY", "SERVED_KEY", "SERVED_TTL_S", "MAX_SERVED", "served_strategy", "check_serve_attr", "served_trial",
    "refreshed_attrs", "to_serve",
]

SERVE_KEY = "tauopt:serve_suggestions"  # the study's user attribute that asks for it
SERVED_KEY = "tauopt:served"  # a served trial's system attribute: when its point was drawn, and after how many results
SERVED_TTL_S = 60.0
MAX_SERVED = 64


def served_strategy(user_attrs: Mapping[str, str]) -> str | None:
    """The strategy serving the study's workers, or None when it asks for none."""
    text = user_attrs.get(SERVE_KEY)
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if value is True:
        return AUTO
    return value if isinstance(value, str) and value else None


def check_serve_attr(text: str) -> None:
    """Refuse a value of SERVE_KEY that names no strategy (false turns serving off)."""
    value = json.loads(text)
    if value is True or value is False or value is None:
        return
    if not isinstance(value, str):
        raise invalid(f"{SERVE_KEY}: give true, false or a strategy's name, got {text[:40]}")
    if value != AUTO:
        try:
            get_strategy(value)
        except ValueError:
            raise invalid(f"{SERVE_KEY}: {value!r} is not a strategy; give true, false or a strategy's name") from None


def served_trial(point: Mapping[str, Value], now: float, seen: int) -> Trial:
    """A WAITING trial's template whose workers run `point` (drawn at `now`, after `seen` results)."""
    return Trial(0, 0, "WAITING", system_attrs=_served_attrs(point, now, seen))


def _served_attrs(point: Mapping[str, Value], now: float, seen: int) -> dict[str, str]:
    return {"fixed_params": json.dumps(dict(point)), SERVED_KEY: json.dumps({"at": now, "seen": seen})}


def refreshed_attrs(t: Trial, point: Mapping[str, Value], now: float, seen: int) -> dict[str, str]:
    return {**t.system_attrs, **_served_attrs(point, now, seen)}


def to_serve(trials: Sequence[Trial], now: float, seen: int) -> tuple[int, list[Trial], int]:
    """How many WAITING trials to add, the served ones to draw again (unclaimed past
    the TTL, or drawn too many results ago), and the observed number of workers."""
    waiting = [t for t in trials if t.state == "WAITING"]
    running = sum(1 for t in trials if t.state == "RUNNING")
    workers = min(max(1, running), MAX_SERVED)
    bound = max(STALENESS_BOUND, workers)
    stale = []
    for t in waiting:
        drawn = _drawn(t)
        if drawn is not None and (now - drawn[0] > SERVED_TTL_S or seen - drawn[1] > bound):
            stale.append(t)
    return max(0, workers - len(waiting)), stale, workers


def _drawn(t: Trial) -> tuple[float, int] | None:
    """When a served trial's point was drawn and after how many results; None: not served."""
    text = t.system_attrs.get(SERVED_KEY)
    if text is None:
        return None
    try:
        value: Any = json.loads(text)
        return float(value["at"]), int(value["seen"])
    except (ValueError, TypeError, KeyError):
        return 0.0, 0
