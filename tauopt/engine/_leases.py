"""Leases: what happens to a suggestion whose holder is declared dead.

`release` decides, from the suggestion and the door's `max_attempts`, whether it
goes back to the queue for the next ask (attempts survive a restart: they are
stored on the suggestion), is closed because its attempts are used up, or was
already released (nothing changes). The Ledger keeps the queue; the actor
commits the result and wakes waiting asks when a slot or a suggestion returned.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ApiError, api_error
from ..models import Suggestion
from ._ledger import Ledger

__all__ = ["Release", "release", "not_open_error"]


@dataclass(frozen=True)
class Release:
    suggestion: Suggestion
    changed: bool  # False: already released, nothing to write and nobody to wake


def release(ledger: Ledger, suggestion_id: str, max_attempts: int | None, now: float) -> Release:
    s = ledger.suggestion(suggestion_id)
    if s.state != "open":
        raise not_open_error(s)
    if s.released:
        return Release(s, changed=False)
    if max_attempts is not None and s.attempts >= max_attempts:
        return Release(ledger.leave_open(s, "closed", now), changed=True)  # used up: its place goes back
    return Release(ledger.release(s), changed=True)


def not_open_error(s: Suggestion) -> ApiError:
    if s.state == "expired":
        return api_error(
            "suggestion_expired",
            f"suggestion {s.id!r} expired (older than suggestion_ttl_s); re-post its assignments "
            "as an unsolicited observation",
            assignments=dict(s.assignments),
        )
    if s.state == "observed":
        return api_error("suggestion_observed", f"suggestion {s.id!r} already has an observation; ask for a new suggestion")
    return api_error(
        "suggestion_closed",
        f"suggestion {s.id!r} was closed; re-post its assignments as an unsolicited observation if you evaluated it",
        assignments=dict(s.assignments),
    )
