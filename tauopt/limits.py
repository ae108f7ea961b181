"""The documented maximums of user input, and the checks every text and number passes.

Each limit bounds the work one request can cause (the README's "Limits" section
lists them); input over a limit is refused with `invalid_request` naming it.
"""

from __future__ import annotations

import math
from typing import Any

from .errors import invalid

__all__ = [
    "MAX_PARAMETERS",
    "MAX_CATEGORICAL_VALUES",
    "MAX_CONDITIONS",
    "MAX_CONDITION_DEPTH",
    "MAX_METRICS",
    "MAX_NAME_CHARS",
    "MAX_DESCRIPTION_CHARS",
    "MAX_TEXT_VALUE_CHARS",
    "MAX_JSON_DEPTH",
    "INT_MIN",
    "INT_MAX",
    "check_text",
    "check_int64",
    "check_count",
    "as_float",
    "MAX_WAIT_S",
    "check_wait",
    "check_deadline_s",
    "MAX_PAGE",
    "MAX_EXPERIMENTS_PAGE",
    "EXPERIMENTS_PAGE",
]

MAX_PARAMETERS = 10_000  # parameters in one space
MAX_CATEGORICAL_VALUES = 10_000  # values of one categorical parameter (and of one condition)
MAX_CONDITIONS = 16  # conditions on one parameter
MAX_CONDITION_DEPTH = 64  # longest chain parent -> child -> grandchild ...
MAX_METRICS = 100  # extra metric names on one observation
MAX_NAME_CHARS = 256  # names: experiment, parameter, metric, condition parent
MAX_TEXT_VALUE_CHARS = 1024  # a string value of a categorical, fixed or default
MAX_DESCRIPTION_CHARS = 4096  # an experiment's free-text description
MAX_JSON_DEPTH = 32  # nesting of a request body (the deepest valid body is ~5)
MAX_PAGE = 10_000  # rows per answer of a listing that grows with history (observations, reports): read on by cursor
MAX_EXPERIMENTS_PAGE = 1_000  # experiments per answer of GET /v1/experiments (~0.6 KB each): read on by cursor
EXPERIMENTS_PAGE = 100  # ... when the caller gives no limit
INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1  # integers are signed 64-bit, like SQLite's
MAX_WAIT_S = 300.0  # an ask's wait for a slot (long-poll) holds a connection; past this, ask again


def check_text(where: str, text: str, max_chars: int = MAX_NAME_CHARS) -> str:
    """`text` if it is storable: at most max_chars and valid Unicode (no lone UTF-16 surrogate,
    which JSON can carry but UTF-8, and so the store, cannot)."""
    if len(text) > max_chars:
        raise invalid(f"{where}: {len(text)} characters is over the limit of {max_chars}; shorten it")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start : exc.end].encode("unicode_escape").decode("ascii")
        raise invalid(
            f"{where}: contains a lone UTF-16 surrogate ({bad}) at character {exc.start}, "
            "which is not valid Unicode text; send the text as UTF-8 or escape a complete surrogate pair"
        ) from None
    return text


def check_int64(where: str, n: int) -> int:
    if not INT_MIN <= n <= INT_MAX:
        raise invalid(
            f"{where}: {_short(n)} is outside the signed 64-bit range [-2**63, 2**63 - 1] integers must fit in"
        )
    return n


def check_count(where: str, n: int, limit: int, what: str) -> None:
    if n > limit:
        raise invalid(f"{where}: {n} {what} is over the limit of {limit}; split the work or use fewer")


def as_float(where: str, v: int | float) -> float:
    """v as a float, refusing an int too large for one (10**400) with a clear error."""
    try:
        return float(v)
    except OverflowError:
        raise invalid(f"{where}: {_short(v)} is too large for a 64-bit float (about 1.8e308 at most)") from None


def check_wait(wait_s: Any) -> float | None:
    """An ask's wait for a free slot in seconds (None or 0: answer at once)."""
    if wait_s is None:
        return None
    if isinstance(wait_s, bool) or not isinstance(wait_s, (int, float)) or not math.isfinite(wait_s) or not 0 <= wait_s <= MAX_WAIT_S:
        raise invalid(f"wait_s: give a number of seconds from 0 to {MAX_WAIT_S:g}, got {wait_s!r}")
    return float(wait_s) or None


def check_deadline_s(deadline_s: Any) -> float | None:
    """A call's deadline in seconds as a float (None: no deadline), or an invalid_request saying what is accepted."""
    if deadline_s is None:
        return None
    if isinstance(deadline_s, bool) or not isinstance(deadline_s, (int, float)) or not math.isfinite(deadline_s) or deadline_s < 0:
        raise invalid(
            f"deadline_s: {deadline_s!r} is not a finite number of seconds >= 0; "
            "pass e.g. deadline_s=30, or None for no deadline"
        )
    return float(deadline_s)


def _short(n: Any) -> str:
    # str() of a huge int is itself slow (and refused past 4300 digits): describe it instead
    if isinstance(n, int) and n.bit_length() >= 200:
        return f"an integer of about {int(n.bit_length() * 0.30103) + 1} digits"
    return repr(n)
