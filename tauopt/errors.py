"""The error catalogue: every failure a user can see, and how each door renders it.

    ApiError                      the one exception every door raises or renders
      .error_type                 a key of CATALOGUE (what happened)
      .status_code                its HTTP status (from CATALOGUE)
      .message                    what to do about it
      .details                    machine-readable extras (e.g. assignments)
      .headers / .retry_after     filled by the HTTP client; empty in process
                                  (headers: an httpx.Headers, case-insensitive)

Transports translate with one table: `CATALOGUE[error_type]` gives the HTTP
status and the gRPC status code name. Nothing else maps errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:  # httpx is imported on first use of .headers: `import tauopt` stays light
    import httpx

__all__ = ["ApiError", "ErrorKind", "CATALOGUE", "api_error"]


@dataclass(frozen=True)
class ErrorKind:
    error_type: str
    http_status: int
    grpc_code: str  # a grpc.StatusCode name; kept as text so this module imports no grpc
    meaning: str


def _kinds(*rows: tuple[str, int, str, str]) -> dict[str, ErrorKind]:
    return {r[0]: ErrorKind(*r) for r in rows}


CATALOGUE: Mapping[str, ErrorKind] = _kinds(
    ("invalid_request", 400, "INVALID_ARGUMENT", "the request is malformed or outside the space"),
    ("unauthorized", 401, "UNAUTHENTICATED", "missing or unknown bearer token"),
    ("not_found", 404, "NOT_FOUND", "no such experiment, suggestion or credential"),
    ("method_not_allowed", 405, "UNIMPLEMENTED", "the path does not accept this method"),
    ("suggestion_expired", 409, "FAILED_PRECONDITION", "the suggestion outlived suggestion_ttl_s"),
    ("suggestion_observed", 409, "FAILED_PRECONDITION", "the suggestion already has an observation"),
    ("suggestion_closed", 409, "FAILED_PRECONDITION", "the suggestion was closed"),
    ("space_exhausted", 409, "FAILED_PRECONDITION", "every point of a finite space is used"),
    ("experiment_completed", 409, "FAILED_PRECONDITION", "observation_budget reached"),
    ("experiment_archived", 409, "FAILED_PRECONDITION", "the experiment is archived"),
    ("payload_too_large", 413, "RESOURCE_EXHAUSTED", "request body over the size limit"),
    ("bandwidth_full", 429, "RESOURCE_EXHAUSTED", "parallel_bandwidth suggestions are open"),
    ("quota_exceeded", 429, "RESOURCE_EXHAUSTED", "daily suggestion quota used up"),
    ("rate_limited", 429, "RESOURCE_EXHAUSTED", "too many heavy reads per second"),
    ("store_in_use", 409, "FAILED_PRECONDITION", "another engine holds the SQLite file; serve it over HTTP"),
    ("active_experiment_cap", 429, "RESOURCE_EXHAUSTED", "too many non-archived experiments"),
    ("internal", 500, "INTERNAL", "a bug or a storage failure; nothing half-done is kept"),
    ("unavailable", 503, "UNAVAILABLE", "the engine is shutting down or not started"),
    ("store_unavailable", 503, "UNAVAILABLE", "the database file was deleted or replaced; writes are refused"),
)


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
    return api_error("invalid_request", message, **details)
