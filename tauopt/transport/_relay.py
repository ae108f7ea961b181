"""Several daemons on one database: a gRPC door's call for an experiment another daemon
owns is relayed to that daemon's same door, and its answer relayed back.

Each daemon advertises its doors' addresses beside its lease (`Engine.advertise_door`).
A call runs here as usual; when the engine answers `not_owner` (the experiment's owner
is the live daemon at `owner_url`), `answer_rpc` hands the error to this interceptor
instead of the caller, which sends the call's bytes, unchanged, to the address that
daemon advertised for the same door (`Engine.owner_door`) and returns its answer or
its status. A worker may so connect to any daemon, with an unmodified client (Optuna's
GrpcStorageProxy, KerasTuner's worker), which knows one address and never retries.

A relayed call carries `tauopt-forwarded: 1` and is answered where it lands, never
relayed again; if ownership moved meanwhile, the `not_owner` it answers makes this
daemon ask the engine again. If the owner cannot be reached (it died; nothing was
sent), the call waits here: once the owner's lease lapses, within `lease_s`, the
engine takes the experiment and the call is served here, so a worker rides through a
failover without an error. A call the owner received and never answered (it died
while serving it) answers UNAVAILABLE: whether it was applied is unknown, as with a
direct connection. An owner that takes longer than two leases (plus `max_wait_s`, the
longest a call may be held on purpose) answers UNAVAILABLE too: a frozen owner's
writes are fenced once its lease lapsed, and the retry is served here.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Awaitable, Callable

import anyio
import grpc

from ..errors import ApiError
from ._rpc import OwnerElsewhere

__all__ = ["RelayToOwner", "relay_for", "FORWARDED"]

log = logging.getLogger("tauopt.relay")

FORWARDED = "tauopt-forwarded"
_RETRY_S = 0.1  # between tries while the owner is unreachable and its lease still live


class _Relaying:
    """The call's context, marked so `answer_rpc` raises OwnerElsewhere for `not_owner`."""

    relays = True

    def __init__(self, context: Any) -> None:
        self._context = context

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


def relay_for(
    engine: Any, door: str, max_wait_s: float = 0.0, owner: Callable[[], Awaitable[str | None]] | None = None
) -> "RelayToOwner | None":
    """The relay for `door` on `engine`, or None when the engine shares its store with no daemon."""
    if engine.store.daemon_id is None:
        return None
    leases = getattr(engine.store, "shared", None)
    lease_s = float(getattr(leases, "lease_s", 3.0))
    return RelayToOwner(engine, door, lease_s=lease_s, max_wait_s=max_wait_s, owner=owner)


class RelayToOwner(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """A grpc.aio server interceptor for one door ("optuna", "kerastuner") of a daemon
    sharing its database: unary calls whose experiment another daemon owns go there."""

    def __init__(
        self, engine: Any, door: str, *, lease_s: float, max_wait_s: float = 0.0,
        owner: Callable[[], Awaitable[str | None]] | None = None,
    ) -> None:  # fmt: skip
        """`owner`: for a door whose calls name no experiment (the KerasTuner chief serves
        one), asked before each call: None to serve it here, else the owner's URL."""
        self.engine = engine
        self.owner = owner
        self.door = door
        self.lease_s = lease_s
        self.max_wait_s = max_wait_s
        self.connect_s = min(1.0, lease_s / 2)
        self.relayed = 0  # calls answered by another daemon, for tests and metrics
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._addresses: dict[str, str] = {}  # owner URL -> its door's address
        self._handlers: dict[tuple[str, str], grpc.RpcMethodHandler] = {}

    async def intercept_service(
        self, continuation: Callable[[Any], Awaitable[grpc.RpcMethodHandler]], details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        return self.choose(await continuation(details), details)

    def choose(self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        """The handler for a call: the door's own, or one that relays (or guards) it.
        A thread-pool server (`_threaded`) asks this for each call, as grpc.aio's
        interceptor chain does."""
        if handler is None or handler.unary_unary is None:
            return handler
        method: str = details.method  # type: ignore[attr-defined]
        if any(key == FORWARDED for key, _ in (details.invocation_metadata or ())):  # type: ignore[attr-defined]
            # relayed here by a peer: answered here, never relayed again
            return handler if self.owner is None else self._wrapped(method, handler, self._guarding)
        return self._wrapped(method, handler, self._relaying)

    def _wrapped(self, method: str, handler: grpc.RpcMethodHandler, how: Callable[..., Any]) -> grpc.RpcMethodHandler:
        wrapped = self._handlers.get((method, how.__name__))
        if wrapped is None:
            serialize = handler.response_serializer
            wrapped = self._handlers[(method, how.__name__)] = grpc.unary_unary_rpc_method_handler(
                how(method, handler.unary_unary, handler.request_deserializer),
                request_deserializer=None,  # the raw bytes: what is relayed
                response_serializer=lambda r: r if isinstance(r, bytes) else serialize(r),
            )
        return wrapped

    def _guarding(
        self, method: str, inner: Callable[[Any, Any], Awaitable[Any]], deserialize: Callable[[bytes], Any] | None
    ) -> Callable[[bytes, Any], Awaitable[Any]]:
        """A relayed call at a door with an `owner` hook: served only if this daemon serves
        the experiment (ownership may have moved since the sender asked); else `not_owner`,
        which makes the sender ask again."""

        async def behavior(raw: bytes, context: Any) -> Any:
            url = await self._owner(context)
            if url is not None:
                await context.abort(grpc.StatusCode.UNAVAILABLE, f"not_owner: the daemon at {url} serves this; ask again")
            return await inner(deserialize(raw) if deserialize is not None else raw, context)

        return behavior

    def _relaying(
        self, method: str, inner: Callable[[Any, Any], Awaitable[Any]], deserialize: Callable[[bytes], Any] | None
    ) -> Callable[[bytes, Any], Awaitable[Any]]:
        async def behavior(raw: bytes, context: Any) -> Any:
            request = deserialize(raw) if deserialize is not None else raw
            relaying = _Relaying(context)
            deadline = time.monotonic() + 2 * self.lease_s + self.connect_s
            while True:
                url = None if self.owner is None else await self._owner(context)
                if url is None:
                    try:
                        return await inner(request, relaying)
                    except OwnerElsewhere as held:
                        found = held.error.details.get("owner_url") if isinstance(held.error.details, dict) else None
                        url = found if isinstance(found, str) else None
                answer = None if url is None else await self._relay(method, raw, url, context)
                if answer is not None:
                    return answer
                if time.monotonic() > deadline:
                    await context.abort(
                        grpc.StatusCode.UNAVAILABLE,
                        f"unavailable: the daemon that owns this experiment does not answer on its {self.door} door "
                        f"(it died, or serves no such door); its experiments move to another daemon within "
                        f"{self.lease_s:g} s of its last lease renewal; retry",
                    )
                await anyio.sleep(_RETRY_S)  # its lease lapses meanwhile: the engine then takes the experiment here

        return behavior

    async def _owner(self, context: Any) -> str | None:
        assert self.owner is not None
        try:
            return await self.owner()
        except ApiError as exc:
            await context.abort(grpc.StatusCode[exc.kind.grpc_code], f"{exc.error_type}: {exc.message}")
            raise  # abort raises

    async def _relay(self, method: str, raw: bytes, url: str, context: Any) -> bytes | None:
        """The owner's answer, or None when the owner was not reached (nothing was sent)."""
        address = self._addresses.get(url)
        if address is None:
            address = await self.engine.owner_door(url, self.door)
            if address is None:
                return None
            self._addresses[url] = address
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = grpc.aio.insecure_channel(
                address, options=[("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
            )
        try:
            with anyio.fail_after(self.connect_s):
                await channel.channel_ready()
        except TimeoutError:
            self._addresses.pop(url, None)  # read again next time: a daemon restarted there may listen elsewhere
            return None
        remaining = context.time_remaining()
        timeout = remaining if remaining is not None else 2 * self.lease_s + self.max_wait_s
        try:
            answer: bytes = await channel.unary_unary(method)(raw, timeout=timeout, metadata=((FORWARDED, "1"),))
        except grpc.aio.AioRpcError as exc:
            details = exc.details() or ""
            if exc.code() == grpc.StatusCode.UNAVAILABLE and details.startswith("not_owner"):
                return None  # ownership moved meanwhile (nothing was done there): ask the engine again
            log.debug("%s relayed to %s: %s %s", method, address, exc.code().name, details)
            await context.abort(exc.code(), details)
        self.relayed += 1
        return answer

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()
