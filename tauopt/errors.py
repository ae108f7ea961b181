"""The error catalogue: every failure a user can see, and how each door renders it.

    ApiError                      the one exception every door raises or renders
      .error_type                 a key of CATALOGUE (what happened)
      .status_code                its HTTP status (from CATALOGUE)
      .message                    what to do about it
      .details                    machine-readable extras (e.g. assignments)
      .headers / .retry_after     filled by the HTTP client; empty in process
                                  (headers: an httpx.Headers, case-insensitive)

One table, `CATALOGUE[error_type]`, gives everything a door needs: the HTTP
status, the gRPC status code name, the Retry-After policy and any other
header. Doors render with `ErrorKind.http_headers(e)` / `kind_of(e)`;
clients parse with `error_type_for_status` when an answer is not ours.
Nothing else maps errors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Mapping

if TYPE_CHECKING:  # httpx is imported on first use of .headers: `import tauopt` stays light
    import httpx

__all__ = ["ApiError", "ErrorKind", "CATALOGUE", "api_error", "invalid", "kind_of", "error_type_for_status"]

# How a kind sends Retry-After: "never" (waiting does not help), "error" (the
# seconds the raising code computed, rounded up, at least 1), or a fixed number.
RetryAfter = Literal["never", "error"] | int


@dataclass(frozen=True)
class ErrorKind:
    error_type: str
    http_status: int
    grpc_code: str  # a grpc.StatusCode name; kept as text so this module imports no grpc
    meaning: str
    retry_after: RetryAfter = "error"
    headers: Mapping[str, str] = field(default_factory=dict)

    def http_headers(self, e: "ApiError") -> dict[str, str]:
        """The headers an HTTP answer for `e` carries."""
        headers = dict(self.headers)
        if isinstance(self.retry_after, int) and not isinstance(self.retry_after, bool):
            headers["Retry-After"] = str(self.retry_after)
        elif self.retry_after == "error" and e.retry_after is not None:
            headers["Retry-After"] = str(max(1, math.ceil(e.retry_after)))
        return headers


def _kinds(*kinds: ErrorKind) -> dict[str, ErrorKind]:
    return {k.error_type: k for k in kinds}


_K = ErrorKind
CATALOGUE: Mapping[str, ErrorKind] = _kinds(
    _K("invalid_request", 400, "INVALID_ARGUMENT", "the request is malformed or outside the space"),
    _K("unauthorized", 401, "UNAUTHENTICATED", "missing or unknown bearer token",
       headers={"WWW-Authenticate": 'Bearer realm="tauopt"'}),
    _K("not_found", 404, "NOT_FOUND", "no such experiment, suggestion or credential"),
    _K("method_not_allowed", 405, "UNIMPLEMENTED", "the path does not accept this method"),
    _K("suggestion_expired", 409, "FAILED_PRECONDITION", "the suggestion outlived suggestion_ttl_s"),
    _K("suggestion_observed", 409, "FAILED_PRECONDITION", "the suggestion already has an observation"),
    _K("suggestion_closed", 409, "FAILED_PRECONDITION", "the suggestion was closed"),
    _K("space_exhausted", 409, "FAILED_PRECONDITION", "every point of a finite space is used"),
    _K("experiment_completed", 409, "FAILED_PRECONDITION", "observation_budget reached"),
    _K("experiment_archived", 409, "FAILED_PRECONDITION", "the experiment is archived"),
    _K("too_many_failures", 409, "FAILED_PRECONDITION", "max_consecutive_failures failed runs in a row"),
    _K("request_timeout", 408, "DEADLINE_EXCEEDED", "the request body did not arrive within the body timeout"),
    _K("name_taken", 409, "ALREADY_EXISTS", "a study with this name exists"),
    _K("trial_finished", 409, "FAILED_PRECONDITION", "the trial is finished; it cannot change"),
    _K("suggestions_open", 409, "FAILED_PRECONDITION", "a delete while suggestions are open; close them or force it"),
    _K("payload_too_large", 413, "RESOURCE_EXHAUSTED", "request body over the size limit"),
    # backpressure: a slot returns within a worker's evaluation, so "try again in a second"
    _K("bandwidth_full", 429, "RESOURCE_EXHAUSTED", "parallel_bandwidth suggestions are open", retry_after=1),
    _K("quota_exceeded", 429, "RESOURCE_EXHAUSTED", "daily suggestion quota used up"),
    _K("rate_limited", 429, "RESOURCE_EXHAUSTED", "too many heavy reads per second"),
    _K("store_in_use", 409, "FAILED_PRECONDITION", "another engine holds the SQLite file; serve it over HTTP"),
    _K("active_experiment_cap", 429, "RESOURCE_EXHAUSTED", "too many non-archived experiments", retry_after="never"),
    _K("internal", 500, "INTERNAL", "a bug or a storage failure; nothing half-done is kept"),
    _K("unavailable", 503, "UNAVAILABLE", "the engine is shutting down or not started"),
    _K("store_unavailable", 503, "UNAVAILABLE", "the database file was deleted or replaced; writes are refused"),
    # several daemons on one database: the HTTP door forwards these to the owner itself
    _K("not_owner", 421, "UNAVAILABLE", "another daemon owns the experiment; send the request to it"),
)
del _K

# An answer that is not ours (a proxy's HTML 502, a framework's bare 404): the
# first catalogued type with that status; gateways' 502/504 mean "unavailable".
_TYPE_BY_STATUS: dict[int, str] = {}
for _kind in CATALOGUE.values():
    _TYPE_BY_STATUS.setdefault(_kind.http_status, _kind.error_type)
_TYPE_BY_STATUS.update({502: "unavailable", 504: "unavailable"})


def error_type_for_status(status: int, default: str | None = None) -> str:
    """The catalogue's error type for a bare HTTP status (used where no body says it).

    An uncatalogued status gives `default`, or else `invalid_request` below 500
    and `internal` from 500 (the server's reading of a framework's bare error).
    """
    if status in _TYPE_BY_STATUS:
        return _TYPE_BY_STATUS[status]
    if default is not None:
        return default
    return "invalid_request" if status < 500 else "internal"


def kind_of(e: "ApiError") -> ErrorKind:
    """The catalogue entry of `e` (an unknown type renders as `internal`, with its own status)."""
    return CATALOGUE.get(e.error_type) or ErrorKind(e.error_type, e.status_code, "INTERNAL", "uncatalogued")


class ApiError(Exception):
    """A failure with a catalogued `error_type`, raised the same way by every client."""

    def __init__(
        self,
        status_code: int,
        error_type: str,
        message: str,
        details: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.error_type = error_type
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        self._raw_headers: Mapping[str, str] = headers or {}
        self._headers: httpx.Headers | None = None
        self.retry_after = retry_after

    @property
    def headers(self) -> "httpx.Headers":
        """The response headers, looked up case-insensitively (`e.headers["Retry-After"]`).

        An httpx.Headers, so `dict(e.headers)` has lower-case names and is `{}` in process.
        """
        if self._headers is None:
            import httpx

            self._headers = httpx.Headers(self._raw_headers)
        return self._headers

    def __repr__(self) -> str:
        return f"ApiError({self.status_code}, {self.error_type!r}, {self.message!r})"

    def __str__(self) -> str:
        return f"{self.error_type} ({self.status_code}): {self.message}"

    def __reduce__(self):  # picklable across process pools
        return (
            ApiError,
            (self.status_code, self.error_type, self.message, self.details, dict(self._raw_headers), self.retry_after),
        )

    @property
    def kind(self) -> ErrorKind:
        return CATALOGUE.get(self.error_type, CATALOGUE["internal"])


def api_error(error_type: str, message: str, **details: Any) -> ApiError:
    """An ApiError whose status comes from the catalogue."""
    return ApiError(CATALOGUE[error_type].http_status, error_type, message, details)


def invalid(message: str, **details: Any) -> ApiError:
    """An `invalid_request` ApiError (400 / INVALID_ARGUMENT)."""
    return api_error("invalid_request", message, **details)
