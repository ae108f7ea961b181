from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Generic, TypeVar

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..errors import ApiError, api_error

__all__ = ["ActorGone", "ActorRef", "NOT_NOW", "Reply", "Request", "close_mailbox", "fail", "mailbox", "reply", "serve"]

log = logging.getLogger("tauopt.actors")
M = TypeVar("M")


class ActorGone(Exception):
    """The actor's mailbox is closed (it stopped or passivated) before taking the message."""


_CLOSED: Any = object()  # what a reply closed without an answer holds


class Reply:
    """One request's answer: given once by the actor (`give`), awaited once by its caller
    (`wait`). Giving never blocks: an answer to a caller that stopped waiting, or a
    second answer, is dropped. Closed without an answer, the caller's `wait` raises
    EndOfStream.

    On asyncio it is a future of the running loop; on other anyio backends (trio) an
    anyio Event with the answer beside it. Why not a one-slot memory object stream:
    every ask made one, and building it (two stream objects on a generic state
    class subscripted at run time) cost more than the rest of the round trip."""

    __slots__ = ("_future", "_event", "_outcome", "_waiting_done")

    def __init__(self) -> None:
        try:
            self._future: asyncio.Future[Any] | None = asyncio.get_running_loop().create_future()
            self._event: anyio.Event | None = None
        except RuntimeError:  # not on asyncio
            self._future, self._event = None, anyio.Event()
        self._outcome: Any = _CLOSED
        self._waiting_done = False

    @property
    def abandoned(self) -> bool:
        """Nobody will read an answer: the caller stopped waiting (cancelled, or answered)."""
        return self._waiting_done

    @property
    def given(self) -> bool:
        """Answered or closed already."""
        if self._future is not None:
            return self._future.done()
        return self._event is not None and self._event.is_set()

    def give(self, outcome: Any) -> None:
        if self.given:
            return
        if self._future is not None:
            self._future.set_result(outcome)
        else:
            assert self._event is not None
            self._outcome = outcome
            self._event.set()

    def close(self) -> None:
        """No answer will come (the caller's `wait` raises EndOfStream); no-op once given."""
        self.give(_CLOSED)

    async def wait(self) -> Any:
        try:
            if self._future is not None:
                outcome = await self._future
            else:
                assert self._event is not None
                await self._event.wait()
                outcome = self._outcome
        finally:
            self._waiting_done = True
        if outcome is _CLOSED:
            raise anyio.EndOfStream
        return outcome


@dataclass(frozen=True)
class _Err:
    error: BaseException


@dataclass(frozen=True)
class Request(Generic[M]):
    message: M
    reply_to: Reply


def reply(request: Request[Any], value: Any = None) -> None:
    request.reply_to.give(value)


def fail(request: Request[Any], error: BaseException) -> None:
    request.reply_to.give(_Err(error))


def mailbox(size: int) -> tuple[MemoryObjectSendStream[Request[Any]], MemoryObjectReceiveStream[Request[Any]]]:
    return anyio.create_memory_object_stream[Request[Any]](size)


def close_mailbox(receive: MemoryObjectReceiveStream[Request[Any]], error: Callable[[], BaseException]) -> None:
    """Close an actor's mailbox for good, failing each request still in it with `error()`:
    a closed stream drops what it holds, and those callers would wait for an answer forever.
    Later senders get ActorGone."""
    while True:
        try:
            request = receive.receive_nowait()
        except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
            break
        fail(request, error())
    receive.close()


NOT_NOW = object()  # what a peek answers when the message must go through the mailbox


class ActorRef:
    """A handle to an actor's mailbox. Safe to share between tasks of one event loop.

    `peek(message)`, if the actor gives one: the answer to a message the actor can answer
    at once, outside its mailbox, exactly as it would from it (a read of state that is
    already durable); NOT_NOW for every other message. It runs on the loop's thread, so
    it sees the actor between two of its messages."""

    __slots__ = ("_send", "_peek")

    def __init__(self, send: MemoryObjectSendStream[Request[Any]], peek: Callable[[Any], Any] | None = None) -> None:
        self._send = send
        self._peek = peek

    async def ask(self, message: Any) -> Any:
        if self._peek is not None:
            found = self._peek(message)
            if found is not NOT_NOW:
                return found
        answer = Reply()
        request = Request(message, answer)
        try:
            try:
                self._send.send_nowait(request)  # the usual case: no extra trip through the loop
            except anyio.WouldBlock:
                await self._send.send(request)  # a full mailbox is backpressure
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise ActorGone() from None
        try:
            outcome = await answer.wait()
        except anyio.EndOfStream:
            raise api_error("internal", "the experiment's actor stopped before answering; retry the request") from None
        if isinstance(outcome, _Err):
            raise outcome.error
        return outcome

    def close(self) -> None:
        self._send.close()


async def serve(
    receive: MemoryObjectReceiveStream[Request[Any]],
    handle: Callable[[Request[Any]], Awaitable[None]],
    idle_s: float | None = None,
    on_idle: Callable[[], Awaitable[bool]] | None = None,
) -> None:
    """Handle requests one at a time until the mailbox closes, or until `on_idle`
    (called after `idle_s` without a message) returns True."""
    while True:
        request: Request[Any] | None = None
        try:
            request = receive.receive_nowait()  # busy mailbox: skip the timeout scope
            await anyio.lowlevel.checkpoint()
        except anyio.WouldBlock:
            with anyio.move_on_after(idle_s if idle_s is not None else float("inf")):
                try:
                    request = await receive.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError):
                    return
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            return
        if request is None:
            if on_idle is not None and await on_idle():
                return
            continue
        try:
            await handle(request)
        except ApiError as exc:
            fail(request, exc)
        except Exception as exc:  # a bad message never kills the actor
            log.exception("actor handler failed on %r", type(request.message).__name__)
            fail(request, api_error("internal", f"internal error while handling the request: {exc!r}"))
