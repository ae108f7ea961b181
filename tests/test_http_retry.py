"""The HTTP client's retry policy: the pure decision, then the real thing
against a local ASGI server answering scripted 429/5xx sequences."""

from __future__ import annotations

import json
import time
from collections import deque
from typing import Any

import anyio
import httpx
import pytest

from tauopt.errors import ApiError
from tauopt.client import HttpDriver
from tauopt import AsyncClient, Client
from tauopt.client._retry import MAX_ATTEMPTS, parse_retry_after, retry_delay, within_deadline
from test_http_support import ServerThread, free_port


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- the pure decision --------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "POST", "PATCH", "DELETE"])
def test_429_is_retried_on_every_method(method: str) -> None:
    assert retry_delay(429, method, 1, {}) == 0.5


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_5xx_is_retried_on_non_post_methods_only(status: int) -> None:
    for method in ("GET", "PATCH", "DELETE", "PUT"):
        assert retry_delay(status, method, 1, {}) == 0.5
    assert retry_delay(status, "POST", 1, {}) is None
    assert retry_delay(status, "post", 1, {}) is None


@pytest.mark.parametrize("status", [200, 201, 301, 400, 401, 404, 409, 413, 501, 505])
def test_other_statuses_are_final(status: int) -> None:
    assert retry_delay(status, "GET", 1, {}) is None


def test_backoff_doubles_from_half_a_second_over_five_attempts() -> None:
    delays = [retry_delay(503, "GET", attempt, {}) for attempt in range(1, MAX_ATTEMPTS + 1)]
    assert delays == [0.5, 1.0, 2.0, 4.0, None]


def test_retry_after_is_honoured_and_capped_at_8_seconds() -> None:
    assert retry_delay(429, "POST", 1, {"Retry-After": "3"}) == 3.0
    assert retry_delay(429, "POST", 2, {"retry-after": "0"}) == 0.0
    assert retry_delay(503, "GET", 1, {"Retry-After": "120"}) == 8.0
    assert retry_delay(429, "GET", 1, {"Retry-After": "soon"}) == 0.5  # malformed: backoff
    assert retry_delay(429, "GET", MAX_ATTEMPTS, {"Retry-After": "1"}) is None


def test_parse_retry_after_reads_seconds_and_http_dates() -> None:
    assert parse_retry_after(None) is None
    assert parse_retry_after("") is None
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after("-1") is None
    assert parse_retry_after("nan") is None
    assert parse_retry_after("tomorrow") is None
    now = 1_000_000_000.0  # 2001-09-09T01:46:40Z
    assert parse_retry_after("Sun, 09 Sep 2001 01:46:50 GMT", now=now) == 10.0
    assert parse_retry_after("Sun, 09 Sep 2001 01:46:30 GMT", now=now) == 0.0


def test_a_delay_that_would_end_past_the_deadline_is_not_slept() -> None:
    assert within_deadline(2.0, now=10.0, deadline=None) == 2.0
    assert within_deadline(2.0, now=10.0, deadline=12.0) == 2.0
    assert within_deadline(8.0, now=10.0, deadline=13.0) is None
    assert within_deadline(0.0, now=10.0, deadline=9.0) is None  # already past: final
    assert within_deadline(None, now=10.0, deadline=13.0) is None


# -- against a real server ----------------------------------------------------


class ScriptedApp:
    """Answers each request with the next scripted (status, headers); 200 when the script runs out."""

    def __init__(self) -> None:
        self.script: deque[tuple[int, dict[str, str]]] = deque()
        self.seen: list[tuple[str, str]] = []
        self.stall_s = 0.0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        while (await receive()).get("more_body"):
            pass
        self.seen.append((scope["method"], scope["path"]))
        if self.stall_s:
            await anyio.sleep(self.stall_s)
        status, headers = self.script.popleft() if self.script else (200, {})
        if status < 300:
            body = json.dumps({"closed": 3}).encode()
        elif status < 400:
            body = b""
        else:
            body = json.dumps({"error": {"type": "scripted", "message": f"scripted {status}", "details": {}}}).encode()
        raw = [(b"content-type", b"application/json")] + [(k.encode(), v.encode()) for k, v in headers.items()]
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def scripted() -> Any:
    app = ScriptedApp()
    with ServerThread(app) as server:
        yield app, server.url


@pytest.fixture
def driver(scripted: Any) -> Any:
    app, url = scripted
    app.script.clear()
    app.seen.clear()
    app.stall_s = 0.0
    delays: list[float] = []

    async def fake_sleep(d: float) -> None:
        delays.append(d)

    return app, HttpDriver(url, "t0k", sleep=fake_sleep), delays


@pytest.mark.anyio
async def test_get_retries_5xx_with_backoff_until_success(driver: Any) -> None:
    app, d, delays = driver
    app.script.extend([(503, {}), (502, {}), (500, {}), (504, {})])
    async with d:
        assert await d.close_all_suggestions("e1") == 3
    assert delays == [0.5, 1.0, 2.0, 4.0]
    assert len(app.seen) == 5


@pytest.mark.anyio
async def test_get_gives_up_after_five_attempts_with_the_last_error(driver: Any) -> None:
    app, d, delays = driver
    app.script.extend([(503, {})] * 6)
    async with d:
        with pytest.raises(ApiError) as info:
            await d.experiment("e1")
    assert (info.value.status_code, info.value.error_type) == (503, "scripted")
    assert len(app.seen) == 5 and delays == [0.5, 1.0, 2.0, 4.0]


@pytest.mark.anyio
async def test_post_raises_5xx_after_its_first_attempt(driver: Any) -> None:
    app, d, delays = driver
    app.script.extend([(503, {"Retry-After": "1"}), (200, {})])
    async with d:
        with pytest.raises(ApiError) as info:
            await d.suggest("e1")
    assert info.value.status_code == 503
    assert info.value.retry_after == 1.0
    assert app.seen == [("POST", "/v1/experiments/e1/suggestions")] and delays == []


@pytest.mark.anyio
async def test_post_retries_429_honouring_retry_after_capped_at_8(driver: Any) -> None:
    app, d, delays = driver
    app.script.extend([(429, {"Retry-After": "2"}), (429, {"Retry-After": "30"}), (429, {}), (200, {})])
    async with d:
        with pytest.raises(KeyError):  # the scripted 200 body is not a suggestion; the attempts are what count
            await d.suggest("e1")
    assert delays == [2.0, 8.0, 2.0]
    assert len(app.seen) == 4


@pytest.mark.anyio
async def test_final_429_carries_headers_and_retry_after(driver: Any) -> None:
    app, d, delays = driver
    app.script.extend([(429, {"Retry-After": "1"})] * 5)
    async with d:
        with pytest.raises(ApiError) as info:
            await d.suggest("e1")
    e = info.value
    assert (e.status_code, e.error_type, e.retry_after) == (429, "scripted", 1.0)
    assert e.headers["retry-after"] == "1"
    assert delays == [1.0] * 4 and len(app.seen) == 5


@pytest.mark.anyio
async def test_malformed_retry_after_is_none_and_falls_back_to_backoff(driver: Any) -> None:
    app, d, delays = driver
    app.script.extend([(429, {"Retry-After": "later"})] * 2 + [(404, {"Retry-After": "later"})])
    async with d:
        with pytest.raises(ApiError) as info:
            await d.experiment("e1")
    assert info.value.retry_after is None and info.value.status_code == 404
    assert delays == [0.5, 1.0]


@pytest.mark.anyio
async def test_redirects_are_not_followed(driver: Any) -> None:
    app, d, delays = driver
    app.script.append((307, {"Location": "/elsewhere"}))
    async with d:
        with pytest.raises(ApiError) as info:
            await d.experiment("e1")
    assert info.value.status_code == 307
    assert "redirects are not followed" in info.value.message
    assert len(app.seen) == 1 and delays == []


@pytest.mark.anyio
async def test_connect_error_is_raised_as_is_and_never_retried() -> None:
    delays: list[float] = []

    async def fake_sleep(d: float) -> None:
        delays.append(d)

    async with HttpDriver(f"http://127.0.0.1:{free_port()}", "t0k", sleep=fake_sleep) as d:
        with pytest.raises(httpx.ConnectError):
            await d.experiment("e1")
    assert delays == []


@pytest.mark.anyio
async def test_read_timeout_is_raised_as_is_and_never_retried(driver: Any) -> None:
    app, _, delays = driver
    app.stall_s = 0.5
    async with HttpDriver(driver[1].base_url, "t0k", timeout=0.1, sleep=lambda d: delays.append(d)) as d:
        with pytest.raises(httpx.ReadTimeout):
            await d.experiment("e1")
    assert delays == [] and len(app.seen) == 1


@pytest.mark.anyio
async def test_nan_value_is_refused_before_sending(driver: Any) -> None:
    app, d, _ = driver
    async with d:
        with pytest.raises(ApiError) as info:
            await d.observe("e1", suggestion_id="s1", value=float("nan"))
    assert info.value.error_type == "invalid_request"
    assert app.seen == []


# -- deadlines bound the retries (real sleeps, real server) -------------------
# Bounds, not speed: the old client slept Retry-After (8 s) up to four times.


@pytest.mark.anyio
async def test_client_deadline_ends_a_429_retry_after_8_within_one_request_of_3_s(driver: Any) -> None:
    app, d, _ = driver
    app.script.extend([(429, {"Retry-After": "8"})] * 5)
    start = anyio.current_time()
    async with HttpDriver(d.base_url, "t0k", deadline_s=3) as real:
        with pytest.raises(ApiError) as info:
            await real.suggest("e1")
    elapsed = anyio.current_time() - start
    assert elapsed < 3 + 1.5 and elapsed < 8, elapsed
    e = info.value
    assert (e.status_code, e.error_type, e.retry_after) == (429, "scripted", 8.0)
    assert e.headers["Retry-After"] == "8" and e.headers["retry-after"] == "8"
    assert len(app.seen) == 1  # an 8 s wait cannot fit in 3 s: the first answer is final


@pytest.mark.anyio
async def test_call_deadline_retries_while_the_next_attempt_fits(driver: Any) -> None:
    app, d, _ = driver
    app.script.extend([(429, {"Retry-After": "1"})] * 5)
    start = anyio.current_time()
    async with AsyncClient(driver="http", base_url=d.base_url, token="t0k") as client:
        with pytest.raises(ApiError) as info:
            await client.suggest("e1", deadline_s=2.5)
    elapsed = anyio.current_time() - start
    # Attempts at ~0, 1, 2 s; a fourth would start at ~3 s, past 2.5 s.
    assert 2 <= len(app.seen) <= 3, app.seen
    assert elapsed < 2.5 + 1.5, elapsed
    assert info.value.retry_after == 1.0 and info.value.headers["RETRY-AFTER"] == "1"


@pytest.mark.anyio
async def test_an_enclosing_cancel_scope_deadline_bounds_the_retries(driver: Any) -> None:
    app, d, _ = driver
    app.script.extend([(429, {"Retry-After": "8"})] * 5)
    async with HttpDriver(d.base_url, "t0k") as real:
        with anyio.move_on_after(3) as scope:
            with pytest.raises(ApiError) as info:
                await real.suggest("e1")
    assert not scope.cancel_called and info.value.retry_after == 8.0 and len(app.seen) == 1


def test_sync_client_takes_a_per_call_deadline(driver: Any) -> None:
    app, d, _ = driver
    app.script.extend([(429, {"Retry-After": "8"})] * 5)
    start = time.monotonic()
    with Client(driver="http", base_url=d.base_url, token="t0k") as client:
        with pytest.raises(ApiError) as info:
            client.suggest("e1", deadline_s=3)
    assert time.monotonic() - start < 3 + 1.5
    assert info.value.retry_after == 8.0 and len(app.seen) == 1


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), "3", True])
def test_a_bad_deadline_is_an_invalid_request(bad: Any) -> None:
    with pytest.raises(ApiError) as info:
        HttpDriver("http://127.0.0.1:9", "t0k", deadline_s=bad)
    assert info.value.error_type == "invalid_request" and "deadline_s" in info.value.message
    with Client(driver="local") as client:
        with pytest.raises(ApiError) as info:
            client.experiments(deadline_s=bad)
    assert info.value.error_type == "invalid_request"


def test_local_client_accepts_a_call_deadline() -> None:
    with Client(driver="local") as client:
        assert client.experiments(deadline_s=1.0) == []


# -- ApiError.headers ----------------------------------------------------------


def test_error_headers_are_case_insensitive_and_empty_in_process() -> None:
    import pickle

    e = ApiError(429, "bandwidth_full", "m", headers={"retry-after": "1", "X-Tauopt": "a"})
    assert e.headers["Retry-After"] == e.headers["retry-after"] == "1" and e.headers["x-tauopt"] == "a"
    assert "RETRY-AFTER" in e.headers and e.headers.get("Missing") is None
    assert dict(e.headers) == {"retry-after": "1", "x-tauopt": "a"}
    copy = pickle.loads(pickle.dumps(e))
    assert copy.headers["Retry-After"] == "1"
    with Client(driver="local") as client:
        exp = client.create_experiment("one", [{"name": "x", "type": "double", "bounds": (0, 1)}], {"name": "y"})
        client.suggest(exp.id)
        with pytest.raises(ApiError) as info:
            client.suggest(exp.id)
    assert dict(info.value.headers) == {} and info.value.headers.get("Retry-After") is None
