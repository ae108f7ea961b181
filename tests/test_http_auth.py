"""Credentials, quotas and rate limits as pure pieces with an injectable clock."""

from __future__ import annotations

import pytest

from tauopt.engine._auth import (
    DAY_S,
    SuggestionQuota,
    TokenBucket,
    hash_token,
    new_credential,
    new_token,
    token_matches,
)
from tauopt.errors import ApiError


class FakeClock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_tokens_are_random_and_only_their_hash_is_kept() -> None:
    cred, token = new_credential("ci", clock=FakeClock())
    assert token.startswith("tau_") and len(token) > 40
    assert token not in repr(cred)
    assert cred.token_hash == hash_token(token) and len(cred.token_hash) == 64
    assert token_matches(token, cred.token_hash)
    assert not token_matches(token + "x", cred.token_hash)
    assert new_token() != new_token()


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_credential_limits_must_be_positive_integers(bad: object) -> None:
    with pytest.raises(ApiError) as info:
        new_credential("x", suggestions_per_day=bad)  # type: ignore[arg-type]
    assert info.value.error_type == "invalid_request"
    with pytest.raises(ApiError):
        new_credential("  ")


def test_suggestion_quota_is_a_rolling_window() -> None:
    clock = FakeClock()
    quota = SuggestionQuota(limit=3, window_s=DAY_S, clock=clock)
    for _ in range(3):
        quota.reserve()
        clock.now += 100
    with pytest.raises(ApiError) as info:
        quota.reserve()
    e = info.value
    assert (e.status_code, e.error_type) == (429, "quota_exceeded")
    # the oldest slot frees one day after it was taken
    assert e.retry_after == pytest.approx(DAY_S - 300)
    clock.now += e.retry_after
    quota.reserve()  # exactly one slot came back
    with pytest.raises(ApiError):
        quota.reserve()


def test_released_reservation_gives_the_slot_back() -> None:
    quota = SuggestionQuota(limit=1, clock=FakeClock())
    at = quota.reserve()
    quota.release(at)
    quota.reserve()
    with pytest.raises(ApiError):
        quota.reserve()


def test_token_bucket_allows_a_burst_then_the_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=15.0, burst=30, clock=clock)
    assert all(bucket.take() is None for _ in range(30))
    wait = bucket.take()
    assert wait == pytest.approx(1 / 15)
    clock.now += 1.0
    assert sum(bucket.take() is None for _ in range(30)) == 15  # refilled 15 in one second
    clock.now += 100.0
    assert sum(bucket.take() is None for _ in range(40)) == 30  # never more than the burst


@pytest.mark.anyio
async def test_an_ask_inside_the_gates_suggestion_takes_a_slot_and_a_failed_one_gives_it_back() -> None:
    from tauopt.engine._auth import Gate, Limits, new_credential

    class _NoHistory:
        async def suggestion_times(self, owner: str, since: float) -> list[float]:
            return []

    cred, _ = new_credential("alice", suggestions_per_day=1)
    gate = Gate(store=_NoHistory(), limits=Limits())  # type: ignore[arg-type]
    with pytest.raises(ApiError) as failed:
        async with gate.suggestion(cred):
            raise ApiError(409, "bandwidth_full", "no slot")
    assert failed.value.error_type == "bandwidth_full"  # the ask's own error, unchanged
    async with gate.suggestion(cred):
        pass  # the slot came back: this ask takes it
    with pytest.raises(ApiError) as info:
        async with gate.suggestion(cred):
            pass
    assert info.value.error_type == "quota_exceeded"
