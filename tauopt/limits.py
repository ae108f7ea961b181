"""The documented maximums of user input, and the checks every text and number passes.

Each limit bounds the work one request can cause (the README's "Limits" section
lists them); input over a limit is refused with `invalid_request` naming it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
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
    "Range",
    "COUNT",
    "POSITIVE_SECONDS",
    "WAIT_S",
    "REPORT_STEP",
    "TAG_CHARS",
    "STRATEGY_OPTIONS",
    "STOPPING_OPTIONS",
    "MAX_METADATA_KEYS",
    "METADATA_KEY_CHARS",
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
MAX_METADATA_KEYS = 64  # keys of an experiment's metadata


@dataclass(frozen=True)
class Range:
    """A simple limit, declared once: the rules test a value against it (`in`) and name its
    ends in their messages, and the spec types write it into /openapi.json (`keywords()`:
    pydantic's Field arguments, which it writes as minimum/maximum, or `lengths()` for text),
    so changing a limit here changes both."""

    ge: int | float | None = None
    gt: int | float | None = None
    le: int | float | None = None

    def __contains__(self, v: object) -> bool:
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            return False
        return not (
            (self.ge is not None and v < self.ge) or (self.gt is not None and v <= self.gt)
            or (self.le is not None and v > self.le)
        )  # fmt: skip

    def keywords(self) -> dict[str, Any]:
        return {k: v for k, v in (("ge", self.ge), ("gt", self.gt), ("le", self.le)) if v is not None}

    def lengths(self) -> dict[str, Any]:
        return {k: v for k, v in (("min_length", self.ge), ("max_length", self.le)) if v is not None}


COUNT = Range(ge=1)  # parallel_bandwidth, observation_budget, max_consecutive_failures
POSITIVE_SECONDS = Range(gt=0)  # suggestion_ttl_s
WAIT_S = Range(ge=0, le=MAX_WAIT_S)  # an ask's wait for a slot
REPORT_STEP = Range(ge=0, le=2**53)  # an intermediate report's step: an integer JSON carries exactly
TAG_CHARS = Range(ge=1, le=128)  # a suggestion's tag
METADATA_KEY_CHARS = Range(ge=1, le=128)  # a key of an experiment's metadata
STRATEGY_OPTIONS = {"grid_size": Range(ge=2), "initial_points": Range(ge=1), "seed": Range(ge=0)}
# early_stopping's options (asha's max_step must also be above its min_step)
STOPPING_OPTIONS = {
    "min_trials": Range(ge=1, le=2**31), "grace_steps": Range(ge=0, le=2**31), "min_step": Range(ge=1, le=2**31),
    "max_step": Range(ge=2, le=2**31), "reduction_factor": Range(ge=2, le=2**31),
}  # fmt: skip


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


_WAIT_LEAST, _WAIT_MOST = float(WAIT_S.ge or 0), float(WAIT_S.le or 0)  # read once: an ask may carry a wait


def check_wait(wait_s: Any) -> float | None:
    """An ask's wait for a free slot in seconds (None or 0: answer at once)."""
    if wait_s is None:
        return None
    if isinstance(wait_s, bool) or not isinstance(wait_s, (int, float)) or not _WAIT_LEAST <= wait_s <= _WAIT_MOST:
        raise invalid(f"wait_s: give a number of seconds from {WAIT_S.ge} to {WAIT_S.le:g}, got {wait_s!r}")
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
