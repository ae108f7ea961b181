"""The cap on consecutive failures: an experiment whose runs keep failing stops.

A *failed run* is a failed observation, or a suggestion closed because its
lease attempts are used up (`release` with `max_attempts`). A successful
observation ends the run of failures. With `max_consecutive_failures` = N,
the N-th failed run in a row stops the experiment: `stopped_reason` says why
and asks answer `too_many_failures` until the user acts. Observations are
still accepted (workers finishing their runs); a success does not lift the
stop, since the user has not fixed anything yet.

What re-enables it: setting `max_consecutive_failures` again with
update_experiment (the same value, another one, or None to turn the cap off)
clears the stop and counts from zero; that update is the user's "fixed it,
try again". Archiving ends it for good. The count and the reason are stored
with the experiment (written only when they change, so experiments without
failures never pay for it), so a restart keeps both.

Pure functions over the Experiment header; the actor commits what they return.
"""

from __future__ import annotations

from typing import Any

from ..errors import ApiError, api_error
from ..models import Experiment

__all__ = ["count_failure", "count_success", "reset_changes", "stopped_error"]


def count_failure(exp: Experiment, what: str) -> Experiment | None:
    """The header after one more failed run (`what` names it), or None when nothing
    changes: without a cap nothing is counted."""
    cap = exp.max_consecutive_failures
    if cap is None:
        return None
    n = exp.consecutive_failures + 1
    if n >= cap and exp.stopped_reason is None:
        reason = f"stopped after {n} consecutive failed runs (max_consecutive_failures={cap}; last: {what})"
        return exp.evolve(consecutive_failures=n, stopped_reason=reason)
    return exp.evolve(consecutive_failures=n)


def count_success(exp: Experiment) -> Experiment | None:
    """The header after a successful observation, or None when nothing changes."""
    if exp.consecutive_failures == 0:
        return None
    return exp.evolve(consecutive_failures=0)


def reset_changes(cap: int | None) -> dict[str, Any]:
    """update_experiment(max_consecutive_failures=cap): a fresh count, no stop."""
    return {"max_consecutive_failures": cap, "consecutive_failures": 0, "stopped_reason": None}


def stopped_error(exp: Experiment) -> ApiError:
    return api_error(
        "too_many_failures",
        f"experiment {exp.id!r} {exp.stopped_reason}; fix the evaluation, then raise or clear the cap with "
        "update_experiment(max_consecutive_failures=N or None) to continue, or archive the experiment",
        consecutive_failures=exp.consecutive_failures,
        max_consecutive_failures=exp.max_consecutive_failures,
    )
