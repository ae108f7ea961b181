from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Generic, TypeVar

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..errors import ApiError, api_error

__all__ = ["ActorGone", "ActorRef", "NOT_NOW", "Request", "close_mailbox", "fail", "mailbox", "reply", "serve"]

log = logging.getLogger("tauopt.actors")
M = TypeVar("M")


class ActorGone(Exception):
    """The actor's mailbox is closed (it stopped or passivated) before taking the message."""


@dataclass(frozen=True)
class _Ok:
    value: Any


@dataclass(frozen=True)
class _Err:
    error: BaseException


@dataclass(frozen=True)
class Request(Generic[M]):
    message: M
    reply_to: MemoryObjectSendStream[Any]


def _answer(request: Request[Any], outcome: _Ok | _Err) -> None:
    try:
        request.reply_to.send_nowait(outcome)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass  # the caller went away, or was already answered
    finally:
        request.reply_to.close()


def reply(request: Request[Any], value: Any = None) -> None:
    _answer(request, _Ok(value))


def fail(request: Request[Any], error: BaseException) -> None:
    _answer(request, _Err(error))


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
        reply_send, reply_receive = anyio.create_memory_object_stream[Any](1)
        with reply_receive:
            request = Request(message, reply_send)
            try:
                try:
                    self._send.send_nowait(request)  # the usual case: no extra trip through the loop
                except anyio.WouldBlock:
                    await self._send.send(request)  # a full mailbox is backpressure
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                reply_send.close()
                raise ActorGone() from None
            try:
                outcome = await reply_receive.receive()
            except anyio.EndOfStream:
                raise api_error("internal", "the experiment's actor stopped before answering; retry the request") from None
        if isinstance(outcome, _Err):
            raise outcome.error
        return outcome.value

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
