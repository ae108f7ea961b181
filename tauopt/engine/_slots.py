"""SlotWaiters: asks that wait (long-poll, `wait_s`) for a free suggestion slot.

The actor parks an ask here when the bandwidth is full and the caller is willing
to wait. Whenever a slot may have returned (an observe, a close, a release, a
wider bandwidth) the actor asks `ready()` for the parked asks to retry, oldest
first; a timer per ask sends the actor `SlotWaitOver`, and `timed_out()` hands
back the ask to refuse. The actor stays the owner of the experiment's state:
this holds only the queue and never answers a suggestion itself.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable, Iterator

import anyio
from anyio.abc import TaskGroup

from ..actors import ActorRef, Request
from ..errors import ApiError, api_error
from ._messages import Msg, SlotWaitOver, Suggest

__all__ = ["SlotWaiters", "wait_over_error"]


class SlotWaiters:
    def __init__(self) -> None:
        self._parked: deque[tuple[Request[Any], Suggest]] = deque()

    def __len__(self) -> int:
        return len(self._parked)

    def __iter__(self) -> Iterator[tuple[Request[Any], Suggest]]:
        return iter(self._parked)

    def park(self, request: Request[Any], msg: Suggest, tg: TaskGroup, self_ref: ActorRef) -> None:
        """Queue the ask and start its timer: after msg.wait_s the actor gets SlotWaitOver."""
        assert msg.wait_s is not None, "only an ask that waits is parked for a slot"
        self._parked.append((request, msg))
        tg.start_soon(wake_after, msg.wait_s, self_ref, SlotWaitOver(request=request))

    def ready(self, has_room: Callable[[], bool]) -> Iterator[tuple[Request[Any], Suggest]]:
        """Parked asks to retry now, oldest first, while `has_room()` (re-read after each
        retry, since a retry takes the slot). Callers that went away are dropped, not served."""
        while self._parked and has_room():
            request, msg = self._parked.popleft()
            if request.reply_to.abandoned:
                continue  # the caller went away: hand it nothing
            yield request, msg

    def timed_out(self, request: Request[Any]) -> Suggest | None:
        """Unpark the ask whose wait ran out; None when it was already answered."""
        for i, (parked, ask) in enumerate(self._parked):
            if parked is request:
                del self._parked[i]
                return ask
        return None


def wait_over_error(n_open: int, bandwidth: int, wait_s: float) -> ApiError:
    return api_error(
        "bandwidth_full",
        f"{n_open} open suggestions >= parallel_bandwidth={bandwidth} for the {wait_s:g} s this ask waited; "
        "observe or close one first",
    )


async def wake_after(delay: float, ref: ActorRef, msg: Msg) -> None:
    """Send the actor `msg` after `delay` seconds (its own timers)."""
    await anyio.sleep(delay)
    try:
        await ref.ask(msg)
    except Exception:
        pass  # the actor is stopping
