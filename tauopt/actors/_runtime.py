from __future__ import annotations

import asyncio
import logging
import math
from collections import deque
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Generic, TypeVar

import anyio
import anyio.lowlevel

from ..errors import ApiError, api_error

__all__ = [
    "ActorGone", "ActorRef", "Mailbox", "MailboxSender", "NOT_NOW", "Reply", "Request", "checkpoint", "close_mailbox", "fail",
    "mailbox", "reply", "serve",
]  # fmt: skip

log = logging.getLogger("tauopt.actors")
M = TypeVar("M")


class ActorGone(Exception):
    """The actor's mailbox is closed (it stopped or passivated) before taking the message."""


_CLOSED: Any = object()  # what a reply closed without an answer holds
_TIME_UP: Any = object()  # what a wait_within that ran out holds


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

    async def wait_within(self, seconds: float) -> bool:
        """Wait up to `seconds` for the answer: True if it came, False if not (then it is
        never read: a wake-up, not an answer)."""
        if self._future is not None:
            future = self._future
            timer = None if future.done() else future.get_loop().call_later(seconds, self._time_up)
            try:
                outcome = await future
            finally:
                self._waiting_done = True
                if timer is not None:
                    timer.cancel()
            return outcome is not _TIME_UP
        assert self._event is not None
        try:
            with anyio.move_on_after(seconds):
                await self._event.wait()
        finally:
            self._waiting_done = True
        return self._event.is_set()

    def _time_up(self) -> None:
        self.give(_TIME_UP)

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


class _Box:
    """What an actor's mailbox's two ends share."""

    __slots__ = ("items", "size", "senders", "closed", "ready", "room")

    def __init__(self, size: int) -> None:
        self.items: deque[Request[Any]] = deque()
        self.size = size
        self.senders = 1
        self.closed = False  # the receiving end is closed
        self.ready: Reply | None = None  # set while the receiver waits for a message
        self.room: deque[Reply] = deque()  # senders waiting for room (a full mailbox)

    def wake(self) -> None:
        if self.ready is not None:
            self.ready.give(True)

    def wake_sender(self) -> None:
        while self.room:
            waiting = self.room.popleft()
            if not waiting.abandoned:
                waiting.give(True)
                return


class MailboxSender:
    """A sending end of an actor's mailbox: `send_nowait` (WouldBlock when full), `send`
    (waits for room), `clone`, `close`; once the receiving end is closed, sends raise
    BrokenResourceError; after `close`, ClosedResourceError. The mailbox ends for the
    receiver when every sending end is closed."""

    __slots__ = ("_box", "_open")

    def __init__(self, box: _Box) -> None:
        self._box = box
        self._open = True

    def send_nowait(self, request: Request[Any]) -> None:
        box = self._box
        if not self._open:
            raise anyio.ClosedResourceError
        if box.closed:
            raise anyio.BrokenResourceError
        if len(box.items) >= box.size:
            raise anyio.WouldBlock
        box.items.append(request)
        box.wake()

    async def send(self, request: Request[Any]) -> None:
        while True:
            try:
                return self.send_nowait(request)
            except anyio.WouldBlock:
                room = Reply()
                self._box.room.append(room)
                await room.wait()

    def clone(self) -> MailboxSender:
        if not self._open:
            raise anyio.ClosedResourceError
        self._box.senders += 1
        return MailboxSender(self._box)

    def close(self) -> None:
        if self._open:
            self._open = False
            self._box.senders -= 1
            if not self._box.senders:
                self._box.wake()  # the receiver sees the end


class Mailbox:
    """The receiving end of an actor's mailbox (one receiver), a bounded queue of Requests.

    Why not an anyio memory object stream: a receive that waited built a generic
    receiver object (subscripted at run time) and looked up the current task's
    info, and each wait took a cancel scope; an actor whose messages come one at a
    time (most actors, most of the time) paid that per message. Here a wait is one
    Reply (a future on asyncio) and a timer."""

    __slots__ = ("_box",)

    def __init__(self, box: _Box) -> None:
        self._box = box

    @property
    def pending(self) -> int:
        """Messages waiting to be received."""
        return len(self._box.items)

    def receive_nowait(self) -> Request[Any]:
        box = self._box
        if box.closed:
            raise anyio.ClosedResourceError
        if box.items:
            request = box.items.popleft()
            if box.room:
                box.wake_sender()
            return request
        if not box.senders:
            raise anyio.EndOfStream
        raise anyio.WouldBlock

    async def receive(self, within_s: float | None = None) -> Request[Any] | None:
        """The next message; None when none came within `within_s` seconds (None: no bound).
        Raises EndOfStream once every sender is closed and the mailbox is empty."""
        box = self._box
        while True:
            try:
                return self.receive_nowait()
            except anyio.WouldBlock:
                pass
            ready = box.ready = Reply()
            try:
                if within_s is None or within_s == math.inf:
                    await ready.wait()
                elif not await ready.wait_within(within_s):
                    return None
            finally:
                box.ready = None

    def close(self) -> None:
        """Close for good: senders get BrokenResourceError; what is queued is dropped
        (`close_mailbox` fails it first)."""
        box = self._box
        box.closed = True
        box.items.clear()
        for waiting in box.room:
            waiting.give(True)  # they retry, and see the mailbox closed
        box.room.clear()

    def __enter__(self) -> Mailbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def mailbox(size: int) -> tuple[MailboxSender, Mailbox]:
    box = _Box(size)
    return MailboxSender(box), Mailbox(box)


def close_mailbox(receive: Mailbox, error: Callable[[], BaseException]) -> None:
    """Close an actor's mailbox for good, failing each request still in it with `error()`:
    closing drops what it holds, and those callers would wait for an answer forever.
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
    at once, outside its mailbox, as it would from it (a read of state that is already
    durable); NOT_NOW for every other message. `ask` tries it first. The actor's peek
    must be safe on any thread (it reads state the actor publishes, never state its
    messages are changing), so `peek` may be called from other threads than the loop's."""

    __slots__ = ("_send", "_peek")

    def __init__(self, send: MailboxSender, peek: Callable[[Any], Any] | None = None) -> None:
        self._send = send
        self._peek = peek

    def peek(self, message: Any) -> Any:
        """The answer to `message` outside the mailbox, or NOT_NOW (then `ask`). Any thread."""
        return NOT_NOW if self._peek is None else self._peek(message)

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


async def checkpoint() -> None:
    """One turn of the event loop for the other ready tasks: anyio.lowlevel.checkpoint,
    which on asyncio is `await asyncio.sleep(0)` after a lookup of the running backend
    (sniffio) that costs several times the turn. A hot path (a busy actor, once a
    message; the store's group commit, once a turn) takes the turn directly when on
    asyncio; a cancelled task still meets its cancellation there, as in anyio's."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # not on asyncio (trio)
        await anyio.lowlevel.checkpoint()
        return
    await asyncio.sleep(0)


async def serve(
    receive: Mailbox,
    handle: Callable[[Request[Any]], Awaitable[None]],
    idle_s: float | None = None,
    on_idle: Callable[[], Awaitable[bool]] | None = None,
) -> None:
    """Handle requests one at a time until the mailbox closes, or until `on_idle`
    (called after `idle_s` without a message) returns True."""
    while True:
        request: Request[Any] | None
        try:
            request = receive.receive_nowait()  # busy mailbox: no wait, one turn of the loop for the others
            await checkpoint()
        except anyio.WouldBlock:
            try:
                request = await receive.receive(idle_s)
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
