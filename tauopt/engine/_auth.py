"""Credentials, and the per-credential quotas and rate limits of the doors.

- A token is `tau_` + 32 random bytes (urlsafe base64) from `secrets`. Only its
  sha256 is stored; the presented token's hash is compared with
  `hmac.compare_digest` (constant time).
- `SuggestionQuota`: suggestions per rolling window (default 1,000 per 24 h).
  A refused ask answers 429 `quota_exceeded` with `retry_after` = seconds until
  the oldest suggestion in the window leaves it.
- `TokenBucket`: heavy reads (listings of suggestions and observations),
  15 per second with a burst of 30; 429 `rate_limited` with `retry_after`. A read
  costs one token, and one more per `HEAVY_READ_ROWS` rows it answered (charged
  after the read, into debt if need be): a read's cost follows its size.
- The active-experiment cap (default 100 non-archived experiments): 429
  `active_experiment_cap` with no `retry_after` (waiting does not help).

Every piece takes an injectable clock, so windows are tested without sleeping.
The doors (HTTP, gRPC) call `Gate`; the engine itself stays unaware of them.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
import time
import uuid
from collections import deque
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Iterator

import anyio

from ..errors import ApiError, api_error
from ..limits import MAX_WAIT_S
from ..store import CredentialRecord, CredentialStore

__all__ = [
    "Credential",
    "Limits",
    "TokenBucket",
    "SuggestionQuota",
    "Gate",
    "new_token",
    "hash_token",
    "token_matches",
    "new_credential",
]

Clock = Callable[[], float]
TOKEN_PREFIX = "tau_"
DAY_S = 86_400.0


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def token_matches(token: str, token_hash: str) -> bool:
    """Constant-time check of a presented token against a stored hash."""
    return hmac.compare_digest(hash_token(token).encode(), token_hash.encode())


# A bearer token's record is the store's own type: `id` owns the experiments the
# token creates; limits left as None use the server's defaults (`Limits`).
Credential = CredentialRecord


def new_credential(
    name: str,
    suggestions_per_day: int | None = None,
    max_active_experiments: int | None = None,
    clock: Clock = time.time,
) -> tuple[Credential, str]:
    """A fresh credential and its token (shown once; only the hash is kept)."""
    if not name or not name.strip():
        raise api_error("invalid_request", "name: give a non-empty credential name")
    for key, v in (("suggestions_per_day", suggestions_per_day), ("max_active_experiments", max_active_experiments)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise api_error("invalid_request", f"{key}: give an integer >= 1, got {v!r}")
    token = new_token()
    cred = Credential(
        id="cred_" + uuid.uuid4().hex[:16],
        name=name.strip(),
        token_hash=hash_token(token),
        created_at=clock(),
        suggestions_per_day=suggestions_per_day,
        max_active_experiments=max_active_experiments,
    )
    return cred, token


HEAVY_READ_ROWS = 5000  # rows per heavy-read token beyond a read's first


@dataclass(frozen=True)
class Limits:
    """Server-wide defaults; a credential's own limits override the first two."""

    suggestions_per_day: int = 1000
    max_active_experiments: int = 100
    heavy_read_rate: float = 15.0
    heavy_read_burst: int = 30
    window_s: float = DAY_S
    # The longest an ask waits for a slot at this door (long-poll): a longer `wait_s` is cut
    # to it (a proxy in front may close idle requests sooner; the fuzz test's daemon uses 1 s).
    max_wait_s: float = MAX_WAIT_S
    # Asks of one credential waiting for a slot at once; beyond it an ask does not wait (it
    # is answered at once, bandwidth_full if no slot is free), so one token cannot hold
    # the connections every other tenant needs.
    max_waiting_asks: int = 16


def _limited(error_type: str, message: str, retry_after: float) -> ApiError:
    e = api_error(error_type, message)
    e.retry_after = retry_after
    return e


@dataclass
class TokenBucket:
    """`rate` tokens per second, at most `burst` saved up."""

    rate: float
    burst: int
    clock: Clock = time.monotonic
    _tokens: float = field(init=False)
    _at: float = field(init=False)

    def __post_init__(self) -> None:
        self._tokens = float(self.burst)
        self._at = self.clock()

    def _refill(self) -> None:
        now = self.clock()
        if now > self._at:  # a wall clock may step back: never refill negatively
            self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.rate)
            self._at = now

    def take(self) -> float | None:
        """Take one token: None on success, else seconds until one is available."""
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return None
        return (1.0 - self._tokens) / self.rate

    def charge(self, tokens: int) -> None:
        """Take `tokens` for work already done, into debt if need be (paid back by the refill)."""
        self._refill()
        self._tokens -= tokens


@dataclass
class SuggestionQuota:
    """At most `limit` reservations in any rolling `window_s`."""

    limit: int
    window_s: float = DAY_S
    clock: Clock = time.time
    times: deque[float] = field(default_factory=deque)

    def reserve(self) -> float:
        """Reserve a slot and return its time, or raise 429 quota_exceeded."""
        now = self.clock()
        while self.times and self.times[0] <= now - self.window_s:
            self.times.popleft()
        if len(self.times) >= self.limit:
            wait = self.times[0] + self.window_s - now
            raise _limited(
                "quota_exceeded",
                f"{len(self.times)} suggestions in the last {self.window_s:g} s >= quota {self.limit}; "
                f"retry in {math.ceil(wait)} s or ask an admin for a larger suggestions-per-day quota",
                wait,
            )
        self.times.append(now)
        return now

    def release(self, at: float) -> None:
        """Give back a reservation whose ask did not produce a suggestion."""
        try:
            self.times.remove(at)
        except ValueError:
            pass


class Gate:
    """Authentication and per-credential limits, in front of an engine.

    `store` must provide `credential_by_hash(hash)`, `suggestion_times(owner,
    since)` and `count_experiments(owner)`. Credentials found are cached for
    `cache_s` seconds, so a revoke from another process takes effect within
    that time.
    """

    def __init__(
        self,
        store: CredentialStore,
        limits: Limits = Limits(),
        *,
        clock: Clock = time.time,
        cache_s: float = 2.0,
    ) -> None:
        self.store = store
        self.limits = limits
        self.clock = clock
        self.cache_s = cache_s
        self._cache: dict[str, tuple[float, Credential]] = {}
        self._lookups: dict[str, anyio.Event] = {}  # token hash -> its lookup running
        self._quotas: dict[str, SuggestionQuota] = {}
        self._buckets: dict[str, TokenBucket] = {}
        self._create_locks: dict[str, anyio.Lock] = {}
        self._waiting: dict[str, int] = {}

    async def authenticate(self, authorization: str | None) -> Credential:
        """The credential of an `Authorization: Bearer <token>` header, or 401."""
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise api_error(
                "unauthorized",
                "missing bearer token; send 'Authorization: Bearer <token>' (tauopt token create prints one)",
            )
        digest = hash_token(token)
        hit = self._cache.get(digest)
        cred = hit[1] if hit is not None and self.clock() - hit[0] < self.cache_s else await self._look_up(digest)
        # The lookup was by hash; confirm in constant time all the same.
        if not hmac.compare_digest(digest.encode(), cred.token_hash.encode()):
            raise api_error("unauthorized", "unknown or revoked token; check TAUOPT_TOKEN or create a new token")
        return cred

    async def _look_up(self, digest: str) -> Credential:
        """The store's credential of `digest`, cached. One lookup at a time per token: the
        requests that arrive while it runs (a busy token's, every time its cache entry
        expires) wait for its answer instead of each asking the store."""
        while True:
            running = self._lookups.get(digest)
            if running is None:
                break
            await running.wait()
            hit = self._cache.get(digest)
            if hit is not None:
                return hit[1]
            # that lookup failed (refused, or the store unavailable): this request asks for itself
        done = self._lookups[digest] = anyio.Event()
        try:
            now = self.clock()
            found = await self.store.credential_by_hash(digest)
            if found is None or found.revoked:
                self._cache.pop(digest, None)
                raise api_error("unauthorized", "unknown or revoked token; check TAUOPT_TOKEN or create a new token")
            self._cache[digest] = (now, found)
            return found
        finally:
            del self._lookups[digest]
            done.set()

    def forget(self, token_hash: str | None = None) -> None:
        """Drop cached credentials (all, or one) so a revoke applies at once."""
        if token_hash is None:
            self._cache.clear()
        else:
            self._cache.pop(token_hash, None)

    async def _quota(self, cred: Credential) -> SuggestionQuota:
        quota = self._quotas.get(cred.id)
        if quota is None:
            limit = cred.suggestions_per_day or self.limits.suggestions_per_day
            since = self.clock() - self.limits.window_s
            times = sorted(await self.store.suggestion_times(cred.id, since))
            quota = self._quotas.get(cred.id)  # another task may have loaded it meanwhile
            if quota is None:
                quota = SuggestionQuota(limit, self.limits.window_s, self.clock, deque(times))
                self._quotas[cred.id] = quota
        return quota

    def suggestion(self, cred: Credential) -> _Reservation:
        """`async with`: count one suggestion against the quota; given back if the ask fails."""
        return _Reservation(self, cred)

    @contextmanager
    def waiting_ask(self, cred: Credential) -> Iterator[bool]:
        """Whether this ask of `cred` may wait for a slot (fewer than `max_waiting_asks` of
        its asks are waiting): counted as waiting while inside."""
        held = self._waiting.get(cred.id, 0)
        if held >= self.limits.max_waiting_asks:
            yield False
            return
        self._waiting[cred.id] = held + 1
        try:
            yield True
        finally:
            left = self._waiting[cred.id] - 1
            if left:
                self._waiting[cred.id] = left
            else:
                del self._waiting[cred.id]

    def _bucket(self, cred: Credential) -> TokenBucket:
        bucket = self._buckets.get(cred.id)
        if bucket is None:
            bucket = TokenBucket(self.limits.heavy_read_rate, self.limits.heavy_read_burst, self.clock)
            self._buckets[cred.id] = bucket
        return bucket

    def heavy_read_rows(self, cred: Credential, rows: int) -> None:
        """Charge a heavy read that answered `rows` rows by its size: a token per
        `HEAVY_READ_ROWS` of them (the read's first token was taken by `heavy_read`)."""
        if rows >= HEAVY_READ_ROWS:
            self._bucket(cred).charge(rows // HEAVY_READ_ROWS)

    def heavy_read(self, cred: Credential) -> None:
        """Take a heavy-read token, or raise 429 rate_limited."""
        wait = self._bucket(cred).take()
        if wait is not None:
            raise _limited(
                "rate_limited",
                f"more than {self.limits.heavy_read_rate:g} listings per second (burst {self.limits.heavy_read_burst}); "
                f"retry in {wait:.2f} s, or fetch one suggestion by id instead of listing",
                wait,
            )

    @asynccontextmanager
    async def experiment_creation(self, cred: Credential) -> AsyncIterator[None]:
        """Hold the credential's create lock while checking the active cap."""
        lock = self._create_locks.setdefault(cred.id, anyio.Lock())
        async with lock:
            cap = cred.max_active_experiments or self.limits.max_active_experiments
            active = await self.store.count_experiments(cred.id)
            if active >= cap:
                raise api_error(
                    "active_experiment_cap",
                    f"{active} non-archived experiments >= cap {cap}; archive one (POST .../archive) "
                    "before creating another",
                )
            yield


class _Reservation:
    """One ask's place in its credential's suggestion quota (Gate.suggestion): taken on
    entry (or 429 quota_exceeded), given back if the ask fails. A class rather than a
    generator-based context manager: every ask enters one, and that kind makes and
    closes an async generator each time."""

    __slots__ = ("_gate", "_cred", "_quota", "_at")

    def __init__(self, gate: Gate, cred: Credential) -> None:
        self._gate, self._cred = gate, cred

    async def __aenter__(self) -> None:
        self._quota = await self._gate._quota(self._cred)
        self._at = self._quota.reserve()

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if kind is not None:
            self._quota.release(self._at)
