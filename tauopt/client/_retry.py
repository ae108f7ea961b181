"""The HTTP client's retry policy, as pure functions (no socket, no clock).

The contract (DESIGN.md, "Contracts users rely on"):
- at most `MAX_ATTEMPTS` (5) attempts per request;
- 429 is retried on every method; 500, 502, 503, 504 on non-POST methods only
  (a POST that answered 5xx may have been applied: re-sending could ask twice);
- each delay honours Retry-After when present, capped at `MAX_DELAY_S` (8 s),
  else doubles from 0.5 s (0.5, 1, 2, 4), capped at 8 s;
- a deadline (the client's or the call's `deadline_s`, or an enclosing anyio
  cancel scope) bounds the retries: a delay that would end past it is not
  slept, and the last answer is final (`within_deadline`);
- transport errors (ConnectError, ReadTimeout) never reach this policy: the
  client raises them as they are.
"""

from __future__ import annotations

import email.utils
import math
import time
from typing import Mapping

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_DELAY_S",
    "BASE_DELAY_S",
    "RETRY_ANY_METHOD",
    "RETRY_IDEMPOTENT",
    "parse_retry_after",
    "retry_delay",
    "within_deadline",
]

MAX_ATTEMPTS = 5
BASE_DELAY_S = 0.5
MAX_DELAY_S = 8.0
RETRY_ANY_METHOD = frozenset({429})
RETRY_IDEMPOTENT = frozenset({500, 502, 503, 504})


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP-date.

    None when absent or malformed (negative, NaN, unparseable). A date in the
    past means 0.
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when is None or when.tzinfo is None:
            return None
        now = time.time() if now is None else now
        return max(0.0, when.timestamp() - now)
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds


def retry_delay(status_code: int, method: str, attempt: int, headers: Mapping[str, str]) -> float | None:
    """The delay before the next attempt, or None when the response is final.

    `attempt` is the 1-based number of the attempt that produced this response.
    `headers` is looked up with "Retry-After" and "retry-after" (httpx headers
    are case-insensitive; a plain dict from a test may use either).
    """
    if attempt >= MAX_ATTEMPTS:
        return None
    if status_code in RETRY_ANY_METHOD:
        pass
    elif status_code in RETRY_IDEMPOTENT and method.upper() != "POST":
        pass
    else:
        return None
    raw = headers.get("Retry-After")
    if raw is None:
        raw = headers.get("retry-after")
    after = parse_retry_after(raw)
    if after is not None:
        return min(after, MAX_DELAY_S)
    return min(BASE_DELAY_S * 2 ** (attempt - 1), MAX_DELAY_S)


def within_deadline(delay: float | None, now: float, deadline: float | None) -> float | None:
    """`delay` if the next attempt can start by `deadline`, else None (the answer is final).

    `now` and `deadline` are on one clock (the client uses anyio.current_time());
    a None deadline bounds nothing. Giving up at once, instead of sleeping up to
    the deadline, hands the caller the last error while it can still act on it.
    """
    if delay is None or deadline is None:
        return delay
    return delay if now + delay <= deadline else None
