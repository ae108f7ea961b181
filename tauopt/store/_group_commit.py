"""GroupCommitWriter: batches of writes from many tasks, committed as one transaction.

Store-independent: a durable store gives it two functions and gets group
commit, write-before-reply and an orderly close.

    writer = GroupCommitWriter(prepare, apply, name="tauopt.db")
    await task_group.start(writer.run)
    writer.submit(writes, done)        # never blocks; done(None | exc) after the commit
    await writer.close(timeout)        # commits what is queued, then stops

`submit` queues a batch and wakes the writer task; the writer takes
*everything* queued, lets `prepare(batches)` turn it into one plan (and fail,
alone, any batch that cannot be stored), runs `await apply(plan)` as ONE
transaction, then calls each batch's `done` in submission order. While a
transaction commits, new batches pile up and become the next group, so the
number of commits per second stays about constant while the number of writes
per commit grows with load. A transaction that fails fails every batch of its
group; an empty batch is a barrier and is answered None either way.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Awaitable, Callable, Generic, Literal, Sequence, TypeVar

import anyio
from anyio.abc import TaskStatus

from ..actors import checkpoint
from ._base import Done, StoreError, Write

__all__ = ["GroupCommitWriter", "Prepare", "Apply"]

log = logging.getLogger("tauopt.store")

P = TypeVar("P")
# prepare(batches) -> (plan, per-batch outcome: None, or the error that batch alone fails with)
Prepare = Callable[[Sequence[Sequence[Write]]], tuple[P, list[BaseException | None]]]
Apply = Callable[[P], Awaitable[bool]]  # runs the plan as one transaction; True if it wrote


class GroupCommitWriter(Generic[P]):
    def __init__(
        self,
        prepare: Prepare[P],
        apply: Apply[P],
        *,
        name: str,
        explain: Callable[[Exception], str] = repr,
        gather_turns: int = 16,
    ) -> None:
        self._prepare = prepare
        self._apply = apply
        self._explain = explain
        self.name = name
        self.gather_turns = gather_turns
        self._queue: list[tuple[Sequence[Write], Done]] = []
        self._wake = anyio.Event()
        self._scope: anyio.CancelScope | None = None
        self._stopped = anyio.Event()
        self._state: Literal["new", "open", "closing"] = "new"
        # Counters, for tests and benchmarks: committed transactions and batches.
        self.transactions = 0
        # called after each committed transaction with (batches, seconds): metrics
        self.on_commit: Callable[[int, float], None] | None = None
        self.batches = 0

    @property
    def accepting(self) -> bool:
        return self._state in ("open", "closing") and not self._stopped.is_set()

    def submit(self, writes: Sequence[Write], done: Done) -> None:
        if not self.accepting:
            done(StoreError(f"{self.name} is not open; writes are refused"))
            return
        self._queue.append((writes, done))
        self._wake.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        self._state = "open"
        try:
            with anyio.CancelScope() as self._scope:
                task_status.started()
                while True:
                    if not self._queue:
                        if self._state != "open":
                            break
                        # No await between the check and the new event: no submit can slip by.
                        self._wake = anyio.Event()
                        await self._wake.wait()
                        continue
                    await self._gather()
                    group, self._queue = self._queue, []
                    await self._commit(group)
        finally:
            self._stopped.set()
            self.fail_queued(StoreError(f"{self.name}: the writer stopped before these writes were committed"))

    async def _gather(self) -> None:
        """Let ready tasks run first, as long as they keep adding batches (up to a
        cap): what they submit joins this group. Under load, fewer and bigger
        transactions; when idle, one extra turn of the loop."""
        for _ in range(self.gather_turns):
            queued = len(self._queue)
            await checkpoint()
            if len(self._queue) == queued:
                break

    async def close(self, timeout: float) -> None:
        """Commit what is queued (within `timeout`, shielded), then stop the writer."""
        if self._state == "new":
            self._stopped.set()
            return
        self._state = "closing"
        self._wake.set()
        with anyio.move_on_after(timeout, shield=True):
            await self._stopped.wait()
        if not self._stopped.is_set() and self._scope is not None:
            log.error("store %s: queued writes not committed within %.1f s of close", self.name, timeout)
            self._scope.cancel()
        self.fail_queued(StoreError(f"{self.name} closed before these writes were committed"))

    def fail_queued(self, exc: BaseException) -> None:
        queued, self._queue = self._queue, []
        for _, done in queued:
            _call(done, exc)

    async def _commit(self, group: list[tuple[Sequence[Write], Done]]) -> None:
        plan, outcome = self._prepare([writes for writes, _ in group])
        try:
            t0 = time.perf_counter()
            if await self._apply(plan):
                self.transactions += 1
                if self.on_commit is not None:
                    self.on_commit(len(group), time.perf_counter() - t0)
        except BaseException as exc:
            # Every batch of the group shares the transaction's fate (cancellation included).
            if isinstance(exc, StoreError):
                err: BaseException = exc  # the store's own verdict (e.g. its file is gone): as it is
            elif isinstance(exc, Exception):
                log.error("store %s: a transaction of %d batches failed: %r", self.name, len(group), exc)
                err = StoreError(self._explain(exc))
                err.__cause__ = exc
            else:
                err = StoreError(f"{self.name}: the writer was stopped before committing these writes")
            # A barrier (no writes) only orders: it is answered None all the same.
            outcome = [err if o is None and writes else o for (writes, _), o in zip(group, outcome)]
            for (_, done), o in zip(group, outcome):
                _call(done, o)
            if not isinstance(exc, Exception):
                raise  # cancellation goes on
            return
        self.batches += sum(1 for o in outcome if o is None)
        for (_, done), o in zip(group, outcome):
            _call(done, o)


def _call(done: Done, exc: BaseException | None) -> None:
    try:
        done(exc)
    except Exception:  # a broken callback must not stop the writer for everyone else
        log.exception("store done-callback raised")


class GroupWritten:
    """What a store writing through a GroupCommitWriter shows of it: the
    committed transactions and batches (for tests and benchmarks), and its
    `on_commit` hook, read at each commit so it may be set after the store is made."""

    _group: GroupCommitWriter[Any]
    on_commit: Callable[[int, float], None] | None

    def _committed(self, batches: int, seconds: float) -> None:
        if self.on_commit is not None:
            self.on_commit(batches, seconds)

    @property
    def transactions(self) -> int:
        return self._group.transactions

    @property
    def batches(self) -> int:
        return self._group.batches
