"""HttpDriver: the engine's operations over the daemon's REST API, with httpx.

Implements `tauopt.operations.Operations`, as the Engine does (the bearer
token decides whom the calls act for). Server errors come back as the same
`ApiError`, with the response headers in `e.headers` and the parsed
Retry-After in `e.retry_after`.

The response policy is layered like httpx's own client:

    _request          encode the body, decode the answer or raise ApiError
    _send_handling_retries   the retry loop; the decision is `retry_delay` and
                             `within_deadline` (pure)
    _send_single_request     one attempt on the wire

One wire: one `httpx.AsyncClient` per driver. Its transport is ours,
`H11Transport` (`_transport.py`: a keep-alive pool framed by h11, ~10x less
client CPU than httpx's pool, see there), unless a proxy applies from the
environment (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY: httpx's own
transport honours it) or a `transport` is injected. Transport errors are
httpx's own (httpx.ConnectError, httpx.ReadTimeout, ...), raised as they are
and never retried; redirects are never followed.

Imports only httpx, anyio, the stdlib and tauopt's models and errors, so a
worker on a compute node never loads fastapi, aiosqlite, torch or grpc.
"""

from __future__ import annotations

import http.cookiejar
import json
import math
import os
from contextlib import contextmanager
from contextvars import ContextVar
import ssl
import urllib.request
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator, Mapping, Sequence
from urllib.parse import quote, urlencode, urlsplit

import anyio
import httpx

from .._numbers import plain_json
from ..errors import ApiError, error_type_for_status, invalid
from ..limits import MAX_EXPERIMENTS_PAGE, MAX_PAGE, check_deadline_s, check_wait
from ..models import Experiment, Metric, Observation, Parameter, Report, ReportDecision, StrategyOptions, Suggestion, Value
from ..operations import UNSET, ExperimentState, SuggestionState
from ..schema import spec_given
from ._retry import parse_retry_after, retry_delay, within_deadline
from ._transport import H11Transport

if TYPE_CHECKING:
    from ..schema import ExperimentSpec

__all__ = ["HttpDriver", "DEFAULT_BASE_URL"]

DEFAULT_BASE_URL = "http://127.0.0.1:8080"
WAIT_MARGIN_S = 10.0  # read timeout beyond a waiting ask's wait_s: the answer's own time on the wire
Sleep = Callable[[float], Awaitable[Any]]
# One attempt's answer: (status, body, the httpx.Response). The response is None
# for a 2xx answer on the direct path: the driver reads only its body.
Answer = tuple[int, bytes, "httpx.Response | None"]
_NO_HEADERS = httpx.Headers()  # what the retry policy sees of a direct 2xx answer (it never retries a 2xx)

# A call's own deadline (anyio.current_time() clock), set by `HttpDriver.deadline`
# around one operation; a context variable so concurrent calls keep their own.
_CALL_DEADLINE: ContextVar[float | None] = ContextVar("tauopt_call_deadline", default=None)

# One encoder for every body: json.dumps with options builds a new one per call.
_ENCODE = json.JSONEncoder(allow_nan=False, separators=(",", ":")).encode
# Answers are UTF-8 JSON (RFC 8259 for JSON over a network; the server's
# renderer): decoded as such, without json.loads' encoding detection per call.
_DECODE = json.JSONDecoder().decode



class HttpDriver:
    """The async HTTP driver. Safe to share between many concurrent tasks.

    base_url / token default to $TAUOPT_BASE_URL / $TAUOPT_TOKEN.
    `max_connections` bounds the pool; every connection is kept alive, so
    that many concurrent callers do not reconnect per request.
    `verify` (https only): True (certifi / SSL_CERT_FILE, as httpx), a CA
    bundle path, an ssl.SSLContext, or False.
    `deadline_s` bounds each call, retries included: no retry sleep ends
    past it, and when the next attempt could not start in time the last
    ApiError (with its retry_after and headers) is raised. A call narrows it
    with `with driver.deadline(s):` (AsyncClient/Client: `deadline_s=` on any
    operation); an enclosing anyio cancel scope's deadline bounds it too.
    `timeout` stays httpx's per-request network timeout.
    `sleep` and `transport` (an httpx transport, used through httpx) are
    injectable for tests.
    """

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float | httpx.Timeout = 60.0,
        max_connections: int = 64,
        verify: bool | str | ssl.SSLContext = True,
        deadline_s: float | None = None,
        sleep: Sleep | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        base_url = base_url or os.environ.get("TAUOPT_BASE_URL")
        if not base_url:
            raise invalid(
                "driver='http' needs the daemon's URL: pass base_url= or set TAUOPT_BASE_URL "
                f"(where `tauopt serve` listens, by default {DEFAULT_BASE_URL}), and the token with token= "
                "or TAUOPT_TOKEN"
            )
        if "://" not in base_url:
            raise invalid(
                f"base_url {base_url!r} has no scheme; write it as a URL: http://{base_url} (or https://)"
            )
        # where the token came from, for a 401's message: the server only knows it was refused
        self.token_source = "token=" if token is not None else "TAUOPT_TOKEN"
        token = token if token is not None else os.environ.get("TAUOPT_TOKEN")
        headers = {"Accept": "application/json", "User-Agent": "tauopt-http"}
        if token:
            headers["Authorization"] = f"Bearer {token.strip()}"
        if not isinstance(timeout, httpx.Timeout):
            # Waiting for a pooled connection is queueing, not a fault: no pool timeout.
            timeout = httpx.Timeout(timeout, connect=min(timeout, 10.0), pool=None)
        # Several daemons on one database: "http://a:8080,http://b:8080"; a connection refused
        # by one (nothing was sent) moves this client to the next, for this and later calls.
        self.base_urls = [u.strip().rstrip("/") for u in base_url.split(",") if u.strip()]
        self.base_url = self.base_urls[0]
        self.deadline_s = check_deadline_s(deadline_s)
        self._sleep: Sleep = sleep or anyio.sleep
        ssl_context = _ssl_context(verify) if self.base_url.startswith("https:") else None
        if transport is None and not _proxied(self.base_url):
            transport = H11Transport(max_connections=max_connections, ssl_context=ssl_context)
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=timeout,
            follow_redirects=False,
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
            transport=transport,
            verify=ssl_context or True,
            cookies=_NoCookies(),
        )
        # Only what a JSON API needs on every request (h11 validates each header
        # per request): no Accept-Encoding (answers are small JSON, never
        # compressed) and no Connection: keep-alive (HTTP/1.1's default).
        for name in ("Accept-Encoding", "Connection"):
            self._http.headers.pop(name, None)
        self._urls: dict[str, httpx.URL] = {}
        self._heads: dict[tuple[str, int], httpx.Headers] = {}
        self._json_headers = httpx.Headers(self._http.headers)
        self._json_headers["Content-Type"] = "application/json"
        self._extensions = self._http.build_request("GET", "/").extensions
        # Our own transport is called directly: AsyncClient.send's auth, redirect,
        # cookie and event-hook layers do nothing for this driver (bearer header,
        # redirects never followed, no cookies, no hooks) yet cost about as much
        # client CPU as the wire itself. Any other transport goes through send.
        self._direct = transport if isinstance(transport, H11Transport) else None

    async def __aenter__(self) -> "HttpDriver":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    @contextmanager
    def deadline(self, deadline_s: float | None) -> Iterator[None]:
        """Calls made inside end by `deadline_s` from now (retries included); None: the client's own."""
        deadline_s = check_deadline_s(deadline_s)
        token = _CALL_DEADLINE.set(None if deadline_s is None else anyio.current_time() + deadline_s)
        try:
            yield
        finally:
            _CALL_DEADLINE.reset(token)

    def _deadline(self, started: float | None) -> float | None:
        """The tightest of the call's, the client's (from `started`, the call's start)
        and the enclosing cancel scope's deadlines."""
        candidates = [_CALL_DEADLINE.get(), anyio.current_effective_deadline()]
        if self.deadline_s is not None and started is not None:
            candidates.append(started + self.deadline_s)
        finite = [d for d in candidates if d is not None and math.isfinite(d)]
        return min(finite) if finite else None

    # -- the response policy -------------------------------------------------

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        wait_s: float | None = None,
    ) -> Any:
        """`wait_s`: the server may hold this request that long (a waiting ask): the
        read timeout stretches past it, and the request is sent once, since the
        server's wait replaces the retry loop (its bandwidth_full is final)."""
        content = None
        if body is not None:
            try:
                content = _ENCODE(plain_json(body)).encode()
            except ValueError as exc:
                advice = (
                    "report a finite intermediate value" if path.endswith("/reports")
                    else "send a finite value, or failed=True for a failed evaluation"
                )  # fmt: skip
                raise invalid(f"{method} {path}: the body holds NaN or infinity, which JSON cannot carry; {advice}") from exc
            except TypeError as exc:
                raise invalid(f"{method} {path}: the body is not JSON-serializable: {exc}") from exc
        if params:
            clean = {k: v for k, v in params.items() if v is not None}
            if clean:
                path += "?" + urlencode(clean)
        if wait_s:
            status, answer, response = await self._send_single_request(method, path, content, self._waiting(wait_s))
        else:
            status, answer, response = await self._send_handling_retries(method, path, content)
        if 200 <= status < 300:  # httpx's is_success
            return _DECODE(answer.decode()) if answer else None
        assert response is not None  # every answer but a direct 2xx has one
        error = _api_error(response, self.base_url)
        if error.error_type == "unauthorized" and "TAUOPT_TOKEN" in error.message and self.token_source != "TAUOPT_TOKEN":
            error.message = error.message.replace("TAUOPT_TOKEN", f"the token given ({self.token_source})")
            error.args = (error.message,)
        raise error

    async def _send_handling_retries(self, method: str, path: str, content: bytes | None) -> Answer:
        attempt = 1
        started = anyio.current_time() if self.deadline_s is not None else None
        while True:
            answer = await self._send_single_request(method, path, content)
            status, _, response = answer
            delay = retry_delay(status, method, attempt, _NO_HEADERS if response is None else response.headers)
            if delay is None:  # the usual case: no clock read, no deadline to work out
                return answer
            delay = within_deadline(delay, anyio.current_time(), self._deadline(started))
            if delay is None:
                return answer
            await self._sleep(delay)
            attempt += 1

    def _waiting(self, wait_s: float) -> dict[str, Any]:
        """Request extensions whose read timeout outlasts a server-side wait of `wait_s`."""
        timeouts = dict(self._extensions.get("timeout") or {})
        read = timeouts.get("read")
        if read is not None:
            timeouts["read"] = max(read, wait_s + WAIT_MARGIN_S)
        return {**self._extensions, "timeout": timeouts}

    async def _send_single_request(
        self, method: str, path: str, content: bytes | None, extensions: dict[str, Any] | None = None
    ) -> Answer:
        for tried in range(1, len(self.base_urls) + 1):
            try:
                return await self._send_on_the_wire(method, path, content, extensions or self._extensions)
            except httpx.ConnectError as exc:
                if tried == len(self.base_urls):
                    raise _unreachable(", ".join(self.base_urls), exc) from exc
                self._fail_over()
        raise AssertionError("unreachable")

    def _fail_over(self) -> None:
        """Move to the next base URL (the caches hold merged URLs and Host headers of the old one)."""
        i = self.base_urls.index(self.base_url)
        self.base_url = self.base_urls[(i + 1) % len(self.base_urls)]
        self._http.base_url = httpx.URL(self.base_url)
        self._urls.clear()
        self._heads.clear()

    async def _send_on_the_wire(
        self, method: str, path: str, content: bytes | None, extensions: dict[str, Any]
    ) -> Answer:
        """One attempt: (status, body, response; see `Answer`). The request is the one
        `AsyncClient.build_request` makes (base URL, client headers, Host and
        Content-Length, timeout), with the merged URL and each distinct header
        set cached: merging and encoding cost more client CPU than the wire
        itself. The driver sends no cookies."""
        url = self._urls.get(path)
        if url is None:
            if len(self._urls) >= 1024:
                self._urls.clear()
            url = self._urls[path] = self._http.build_request("GET", path).url
        if self._direct is None:
            headers = self._json_headers if content is not None else self._http.headers
            request = httpx.Request(method, url, headers=headers, content=content, extensions=extensions)
            response = await self._http.send(request, follow_redirects=False)
            return response.status_code, response.content, response
        if self._http.is_closed:
            raise RuntimeError("Cannot send a request, as the client has been closed.")
        body = b"" if content is None else content
        request = httpx.Request(
            method, url, headers=self._headers_for(method, url, content), stream=httpx.ByteStream(body),
            extensions=extensions,
        )  # fmt: skip
        request.read()  # a ByteStream: its content, readable as on any request httpx builds
        head, answer = await self._direct.exchange(request, body)
        status = head.status_code
        return status, answer, None if 200 <= status < 300 else H11Transport.response(request, head, answer)

    def _headers_for(self, method: str, url: httpx.URL, content: bytes | None) -> httpx.Headers:
        """The headers httpx gives `method` with `content`, built by httpx once per
        (method, body length) and reused; the base URL fixes the Host header."""
        key = (method, -1 if content is None else len(content))
        headers = self._heads.get(key)
        if headers is None:
            if len(self._heads) >= 256:
                self._heads.clear()
            base = self._json_headers if content is not None else self._http.headers
            headers = self._heads[key] = httpx.Request(method, url, headers=base, content=content).headers
        return headers

    # -- operations (same as Engine) -------------------------------------------

    async def health(self) -> dict[str, Any]:
        return await self._request("GET", "/v1/health")

    async def create_experiment(
        self,
        name: str | None = None,
        parameters: Sequence[Parameter | Mapping[str, Any]] | None = None,
        metric: Metric | Mapping[str, Any] | None = None,
        parallel_bandwidth: int = 1,
        suggestion_ttl_s: float | None = None,
        observation_budget: int | None = None,
        strategy: str = "auto",
        strategy_options: StrategyOptions | Mapping[str, Any] | None = None,
        early_stopping: Mapping[str, Any] | None = None,
        metrics: Sequence[Metric | Mapping[str, Any]] | None = None,
        max_consecutive_failures: int | None = None,
        description: str | None = None,
        *,
        spec: ExperimentSpec | Mapping[str, Any] | None = None,
    ) -> Experiment:
        body = spec_given(spec, dict(
            name=name, parameters=parameters, metric=metric, metrics=metrics, parallel_bandwidth=parallel_bandwidth,
            suggestion_ttl_s=suggestion_ttl_s, observation_budget=observation_budget, strategy=strategy,
            strategy_options=strategy_options, early_stopping=early_stopping,
            max_consecutive_failures=max_consecutive_failures, description=description,
        ))  # fmt: skip
        for key, as_json in _SPEC_JSON.items():
            if body.get(key) is not None:
                body[key] = as_json(body[key])
        return Experiment.from_dict(await self._request("POST", "/v1/experiments", body=body))

    async def experiment(self, experiment_id: str) -> Experiment:
        return Experiment.from_dict(await self._request("GET", _exp(experiment_id)))

    async def experiments(
        self, state: ExperimentState | None = None, *, after: str | None = None, limit: int | None = None,
        name: str | None = None,
    ) -> list[Experiment]:
        """One page with `limit`; without, every page (the server answers at most
        MAX_EXPERIMENTS_PAGE per request)."""
        out: list[Experiment] = []
        while True:
            params = {"state": state, "name": name, "after": after, "limit": limit or MAX_EXPERIMENTS_PAGE}
            page = await self._request("GET", "/v1/experiments", params=params)
            out += [Experiment.from_dict(d) for d in page]
            if limit is not None or len(page) < MAX_EXPERIMENTS_PAGE:
                return out
            after = page[-1]["id"]

    async def update_experiment(
        self,
        experiment_id: str,
        *,
        name: str = UNSET,
        parallel_bandwidth: int = UNSET,
        suggestion_ttl_s: float | None = UNSET,
        observation_budget: int | None = UNSET,
        parameters: Sequence[Parameter | Mapping[str, Any]] = UNSET,
        early_stopping: Mapping[str, Any] = UNSET,
        max_consecutive_failures: int | None = UNSET,
        description: str | None = UNSET,
        metadata: Mapping[str, Value] | None = UNSET,
    ) -> Experiment:
        given = {
            "name": name,
            "parallel_bandwidth": parallel_bandwidth,
            "suggestion_ttl_s": suggestion_ttl_s,
            "observation_budget": observation_budget,
            "parameters": [_as_dict(p) for p in parameters] if _is_sequence(parameters) else parameters,
            "early_stopping": early_stopping,
            "max_consecutive_failures": max_consecutive_failures,
            "description": description,
            "metadata": dict(metadata) if isinstance(metadata, Mapping) else metadata,
        }
        body = {k: v for k, v in given.items() if v is not UNSET}
        return Experiment.from_dict(await self._request("PATCH", _exp(experiment_id), body=body))

    async def archive_experiment(self, experiment_id: str) -> Experiment:
        return Experiment.from_dict(await self._request("POST", _exp(experiment_id) + "/archive"))

    async def unarchive_experiment(self, experiment_id: str) -> Experiment:
        return Experiment.from_dict(await self._request("POST", _exp(experiment_id) + "/unarchive"))

    async def delete_experiment(self, experiment_id: str, force: bool = False) -> Experiment:
        params = {"force": "true"} if force is True else None
        if not isinstance(force, bool):
            raise invalid(f"force: give true or false, not {force!r}")
        return Experiment.from_dict(await self._request("DELETE", _exp(experiment_id), params=params))

    async def export_experiment(self, experiment_id: str) -> dict[str, Any]:
        data: dict[str, Any] = await self._request("GET", _exp(experiment_id) + "/export")
        return data

    async def import_experiment(self, data: Mapping[str, Any]) -> Experiment:
        return Experiment.from_dict(await self._request("POST", "/v1/experiments/import", body=data))

    async def suggest(self, experiment_id: str, tag: str | None = None, wait_s: float | None = None) -> Suggestion:
        path = _exp(experiment_id) + "/suggestions"
        if tag is None and wait_s is None:  # the body is optional: none is the worker loop's plain ask
            return Suggestion.from_dict(await self._request("POST", path))
        body: dict[str, Any] = {"tag": tag}
        if wait_s is not None:
            body["wait_s"] = check_wait(wait_s)  # refused here with the server's message, before the wire
        return Suggestion.from_dict(await self._request("POST", path, body=body, wait_s=body.get("wait_s")))

    async def observe(
        self,
        experiment_id: str,
        suggestion_id: str | None = None,
        assignments: Mapping[str, Any] | None = None,
        value: float | None = None,
        failed: bool = False,
        metrics: Mapping[str, float] | None = None,
        values: Mapping[str, float] | None = None,
        stopped: bool = False,
    ) -> Observation:
        body: dict[str, Any] = {"failed": failed}
        if stopped:
            body["stopped"] = True
        if suggestion_id is not None:
            body["suggestion_id"] = str(suggestion_id)  # as the engine takes it: "3" or 3
        if assignments is not None:
            body["assignments"] = dict(assignments) if isinstance(assignments, Mapping) else assignments
        if value is not None:
            body["value"] = value
        if metrics is not None:
            body["metrics"] = dict(metrics) if isinstance(metrics, Mapping) else metrics
        if values is not None:
            body["values"] = dict(values) if isinstance(values, Mapping) else values
        return Observation.from_dict(await self._request("POST", _exp(experiment_id) + "/observations", body=body))

    async def suggestions(
        self, experiment_id: str, state: SuggestionState | None = None, tag: str | None = None
    ) -> list[Suggestion]:
        data = await self._request("GET", _exp(experiment_id) + "/suggestions", params={"state": state, "tag": tag})
        return [Suggestion.from_dict(d) for d in data]

    async def suggestion(self, experiment_id: str, suggestion_id: str) -> Suggestion:
        return Suggestion.from_dict(await self._request("GET", _sugg(experiment_id, suggestion_id)))

    async def close_suggestion(self, experiment_id: str, suggestion_id: str) -> Suggestion:
        return Suggestion.from_dict(await self._request("DELETE", _sugg(experiment_id, suggestion_id)))

    async def close_all_suggestions(self, experiment_id: str) -> int:
        data = await self._request("DELETE", _exp(experiment_id) + "/suggestions")
        return int(data["closed"])

    async def report(self, experiment_id: str, suggestion_id: str, step: int, value: float) -> ReportDecision:
        data = await self._request("POST", _sugg(experiment_id, suggestion_id) + "/reports", body={"step": step, "value": value})
        return ReportDecision(bool(data["should_stop"]), data.get("reason"))

    async def reports(self, experiment_id: str, suggestion_id: str | None = None) -> list[Report]:
        if suggestion_id is None:  # the REST API keeps reports under their suggestion
            raise invalid("reports over HTTP: name the suggestion, reports(experiment_id, suggestion_id)")
        data = await self._request("GET", _sugg(experiment_id, suggestion_id) + "/reports")
        return [Report(d["suggestion_id"], int(d["step"]), float(d["value"]), float(d["created_at"])) for d in data]

    async def observations(
        self, experiment_id: str, after: int | None = None, *, limit: int | None = None, failed: bool | None = None
    ) -> list[Observation]:
        return await self._pages(_exp(experiment_id) + "/observations", after, limit, failed)

    async def _pages(
        self, path: str, after: int | None = None, limit: int | None = None, failed: bool | None = None
    ) -> list[Observation]:
        """One page with `limit`; without, every observation of a paged listing (after `after`),
        read page by page: the server answers at most MAX_PAGE per request, and a full page
        means more may follow its last id."""
        out: list[Observation] = []
        while True:
            params = {"after": after, "limit": limit or MAX_PAGE, "failed": None if failed is None else str(failed).lower()}
            page = await self._request("GET", path, params=params)
            out += [Observation.from_dict(d) for d in page]
            if limit is not None or len(page) < MAX_PAGE or not str(page[-1]["id"]).isdigit():
                return out
            after = int(page[-1]["id"])

    async def best(self, experiment_id: str) -> Observation | None:
        data = await self._request("GET", _exp(experiment_id) + "/best")
        return None if data is None else Observation.from_dict(data)

    async def pareto_front(self, experiment_id: str) -> list[Observation]:
        return await self._pages(_exp(experiment_id) + "/pareto_front")

    async def summary(self, experiment_id: str) -> dict[str, Any]:
        data = await self._request("GET", _exp(experiment_id) + "/summary")
        return dict(data, experiment=Experiment.from_dict(data["experiment"]))

    async def workers(self, experiment_id: str, after: int = 0, limit: int | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"after": after} if limit is None else {"after": after, "limit": limit}
        data: dict[str, Any] = await self._request("GET", _exp(experiment_id) + "/workers", params=params)
        return data

    async def importance(self, experiment_id: str) -> dict[str, Any]:
        data: dict[str, Any] = await self._request("GET", _exp(experiment_id) + "/importance")
        return data

    async def report_log(self, experiment_id: str, after: int = 0, limit: int | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"after": after} if limit is None else {"after": after, "limit": limit}
        data = await self._request("GET", _exp(experiment_id) + "/reports", params=params)
        reports = [Report(d["suggestion_id"], int(d["step"]), float(d["value"]), float(d["created_at"])) for d in data["reports"]]
        return {"cursor": int(data["cursor"]), "reports": reports, "more": bool(data["more"])}


class _NoCookies(http.cookiejar.CookieJar):
    """The API sets no cookies and the driver keeps none (as the hand-written wire
    before it): httpx would otherwise parse every answer for Set-Cookie."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None


def _seg(value: str) -> str:
    return quote(str(value), safe="")


def _exp(experiment_id: str) -> str:
    return "/v1/experiments/" + _seg(experiment_id)


def _sugg(experiment_id: str, suggestion_id: str) -> str:
    return _exp(experiment_id) + "/suggestions/" + _seg(suggestion_id)


def _is_sequence(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _as_dict(value: Any) -> Any:
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    if isinstance(value, Mapping):
        return {k: _as_dict(v) if isinstance(v, Mapping) else v for k, v in value.items()}
    return value


# the spec's fields that may hold the engine's objects (Parameter, Metric, StrategyOptions), as JSON
_SPEC_JSON: dict[str, Callable[[Any], Any]] = {
    "parameters": lambda v: [_as_dict(p) for p in v] if _is_sequence(v) else v,
    "metric": _as_dict,
    "metrics": lambda v: [_as_dict(m) for m in v] if _is_sequence(v) else v,
    "strategy_options": _as_dict,
    "early_stopping": lambda v: dict(v) if isinstance(v, Mapping) else v,
}


def _ssl_context(verify: bool | str | ssl.SSLContext) -> ssl.SSLContext:
    if isinstance(verify, ssl.SSLContext):
        return verify
    if isinstance(verify, str):  # a CA bundle (httpx 0.28 deprecates passing the path itself)
        return ssl.create_default_context(cafile=verify)
    return httpx.create_ssl_context(verify=verify)


def _unreachable(base_url: str, exc: httpx.ConnectError) -> httpx.ConnectError:
    """The same httpx.ConnectError (the documented contract), saying where and what to check."""
    reason = str(exc).split(": ", 1)[-1] if str(exc).startswith("cannot connect to ") else str(exc)
    try:
        request = exc.request
    except RuntimeError:
        request = None
    return httpx.ConnectError(f"cannot connect to {base_url} ({reason}); is `tauopt serve` running there?", request=request)


def _proxied(base_url: str) -> bool:
    """Whether a proxy from the environment applies to base_url (then httpx, which honours it, carries it)."""
    parts = urlsplit(base_url)
    proxies = urllib.request.getproxies()
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass(parts.hostname or "")


def _api_error(response: httpx.Response, base_url: str = "") -> ApiError:
    """The ApiError a non-2xx answer stands for, with its headers and Retry-After. An
    answer without tauopt's error body is from something else (another server, a proxy)."""
    response.read()  # the direct path hands it over unread (its body is in memory): readable as usual
    status = response.status_code
    headers = dict(response.headers)
    retry_after = parse_retry_after(response.headers.get("retry-after"))
    try:
        payload = json.loads(response.content)
        err = payload["error"]
        error_type, message = str(err["type"]), str(err["message"])
        details = err.get("details") or {}
        if not isinstance(details, dict):
            details = {"details": details}
    except (ValueError, KeyError, TypeError):
        error_type = error_type_for_status(status, default="internal")  # not our answer: a proxy, a redirect
        snippet = response.text[:200].strip()
        hint = " (redirects are not followed; check base_url)" if 300 <= status < 400 else ""
        message = f"HTTP {status} from {response.request.method} {response.request.url}{hint}: {snippet!r}"
        details = {}
        if status in (404, 405, 501):  # the path or method is unknown there: not a tauopt daemon
            error_type = "not_found"
            message = (
                f"no tauopt API at {base_url or response.request.url}: {response.request.method} "
                f"{response.request.url.path} answered HTTP {status} without tauopt's error body; check base_url "
                "(the address `tauopt serve` prints) and any proxy in between"
            )
    return ApiError(status, error_type, message, details, headers=headers, retry_after=retry_after)
