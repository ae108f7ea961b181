"""CommitThenReply: an actor's replies leave only after their writes are durable.

`commit(request, writes, outcome)` hands the writes (possibly none) to the
store and answers `request` from the store's commit callback, so nothing is
acknowledged before it is durable. A reply that changes nothing still waits
behind this actor's uncommitted writes, so no caller sees state that could
vanish in a crash. A failed commit poisons the actor: memory is ahead of the
store, so it stops and the engine rebuilds it from the store.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from ..actors import Request, fail, reply
from ..store import Store, Write
from ..store._filewatch import commit_error

__all__ = ["CommitThenReply"]

log = logging.getLogger("tauopt.engine")


class CommitThenReply:
    def __init__(self, store: Store, experiment_id: str, header: Callable[[list[Write]], None]) -> None:
        """header(writes): adds what a mutation must carry besides its own writes (the counters)."""
        self._store = store
        self._id = experiment_id
        self._header = header
        self.uncommitted = 0
        self.poisoned: BaseException | None = None

    def commit(
        self, request: Request[Any] | None, writes: list[Write], outcome: Any, then: Callable[[], None] | None = None
    ) -> None:
        """Queue writes and answer `request` once they, and every earlier write of this
        actor, are committed. `outcome` is a value or an ApiError. `then`: called once
        they are committed, before the answer, unless a commit of this actor failed
        (memory is then ahead of the store: nothing more is published from it)."""
        if writes:
            self._header(writes)
        elif not self.uncommitted:
            if then is not None and self.poisoned is None:
                then()
            if request is not None:
                answer(request, outcome)
            return
        self.uncommitted += 1

        def done(exc: BaseException | None) -> None:
            self.uncommitted -= 1
            if exc is not None:
                self.poisoned = exc
                log.error("store commit failed for experiment %s: %r", self._id, exc)
                if request is not None:
                    fail(request, commit_error(exc, "nothing of this request was kept, retry it"))
                return
            if then is not None and self.poisoned is None:
                then()
            if request is not None:  # answer(), written out: this runs for every ask and observe
                if isinstance(outcome, BaseException):
                    fail(request, outcome)
                else:
                    reply(request, outcome)

        self._store.submit(writes, done)

    async def drain(self) -> None:
        """Wait until every write this actor queued is committed."""
        while self.uncommitted:
            await self._store.write(())  # a barrier: after every write queued before it


def answer(request: Request[Any], outcome: Any) -> None:
    if isinstance(outcome, BaseException):
        fail(request, outcome)
    else:
        reply(request, outcome)
