"""Several daemons on one database: a request for an experiment another daemon owns
is forwarded to that daemon, and its answer relayed.

The engine answers such a request with `not_owner` (421) and the owner's URL
(`details.owner_url`); this middleware turns that answer into the owner's own:
it sends the same method, path, query, body and Authorization there and relays
status, headers and body. Forwarding, not a redirect the clients follow: every
client works unchanged (curl, other languages, the retry policy that never
follows redirects), and the extra hop costs one round trip between daemons on
the rare requests that land on a non-owner (a worker's requests for one
experiment go to one daemon after the first). A forwarded request carries
`tauopt-forwarded: 1` and is never forwarded again (ownership moved meanwhile:
the 421 goes back, and the first daemon answers 503 `unavailable`, retry).
If the owner does not answer within twice its lease (plus a waiting ask's
`wait_s`), 503 `unavailable` says its experiments move to another daemon once
its lease lapses: a frozen owner keeps accepting connections without answering,
and once its lease has lapsed nothing it does with the request is kept (its
writes are fenced), so the retry is served here.

Only what a JSON API needs is buffered: a request's body is read before the app
runs, so it can be sent again.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ...errors import api_error
from ._render import render_error

__all__ = ["ForwardToOwner"]

_FORWARDED = b"tauopt-forwarded"
_PASSED = (b"authorization", b"content-type", b"accept")


class ForwardToOwner:
    def __init__(self, app: ASGIApp, lease_s: float = 3.0) -> None:
        self.app = app
        self.lease_s = lease_s
        self._client: httpx.AsyncClient | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1/experiments/"):
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        held: list[Message] = []

        async def hold_421(message: Message) -> None:
            if held or (message["type"] == "http.response.start" and message["status"] == 421):
                held.append(message)
            else:
                await send(message)

        await self.app(scope, replay, hold_421)
        if not held:
            return
        answer = b"".join(m.get("body", b"") for m in held if m["type"] == "http.response.body")
        owner = _owner_url(answer)
        headers = dict(scope["headers"])
        if owner is None or _FORWARDED in headers:
            error = api_error("unavailable", "the experiment is moving between daemons; retry in a second")
            await render_error(error)(scope, replay, send)
            return
        await self._forward(scope, owner, headers, body, replay, send)

    async def _forward(
        self, scope: Scope, owner: str, headers: dict[bytes, bytes], body: bytes, receive: Receive, send: Send
    ) -> None:
        if self._client is None:
            self._client = httpx.AsyncClient(follow_redirects=False)
        timeout = httpx.Timeout(2 * self.lease_s + _wait_s(body), connect=min(5.0, 2 * self.lease_s))
        query = scope.get("query_string", b"").decode("latin-1")
        url = owner.rstrip("/") + scope["path"] + (f"?{query}" if query else "")
        passed = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers.items() if k in _PASSED}
        passed["tauopt-forwarded"] = "1"
        try:
            response = await self._client.request(scope["method"], url, headers=passed, content=body, timeout=timeout)
        except httpx.TransportError as exc:
            error = api_error(
                "unavailable",
                f"the daemon that owns this experiment ({owner}) does not answer ({type(exc).__name__}); its "
                f"experiments move to another daemon within {self.lease_s:g} s of its last lease renewal; retry",
            )
            await render_error(error)(scope, receive, send)
            return
        kept = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers.items()
                if k.lower() not in ("content-length", "transfer-encoding", "connection", "date")]  # fmt: skip
        kept.append((b"content-length", str(len(response.content)).encode()))
        await send({"type": "http.response.start", "status": response.status_code, "headers": kept})
        await send({"type": "http.response.body", "body": response.content})


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _wait_s(body: bytes) -> float:
    """A waiting ask's `wait_s` (the owner may hold it that long), else 0."""
    if b"wait_s" not in body:
        return 0.0
    try:
        wait = json.loads(body).get("wait_s")
    except (ValueError, AttributeError):
        return 0.0
    return float(wait) if isinstance(wait, (int, float)) and 0 < wait < 3600 else 0.0


def _owner_url(answer: bytes) -> str | None:
    try:
        found = json.loads(answer)
    except ValueError:
        return None
    error = found.get("error") if isinstance(found, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    owner = details.get("owner_url") if isinstance(details, dict) else None
    return owner if isinstance(owner, str) and owner.startswith(("http://", "https://")) else None
