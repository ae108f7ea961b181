"""LocalExecutor: the Executor on this machine, fairly across experiments.

    async with LocalExecutor(kind="process") as executor: ...

kind="process": `size` worker processes (default: the machine's cores, started
    by the first job, so a daemon with no GP experiment starts none), each a
    `concurrent.futures.ProcessPoolExecutor` of one spawned process pinned to
    one torch/BLAS thread (`_workers.ProcessWorker`). A worker that dies fails
    its job (JobFailed) and is replaced; workers are killed when the executor
    closes and exit on their own if the engine's process dies.
kind="thread": `size` (default 1) worker threads in this process, for scripts
    using the local driver where starting processes costs more than it saves.

Fairness and routing: every key (experiment id) has its own FIFO queue and at
most one job in flight; free workers take keys round-robin. So one experiment's
slow fit occupies one worker at most and never delays another experiment's job
behind it. The last outcome's `state` per key is handed to that key's next job
(warm start); `forget(key)` drops it.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import anyio

from ..strategies import StrategyJob, StrategyOutcome, run_job
from ._executor import JobFailed
from ._workers import ProcessWorker, ThreadWorker, WorkerDied, blas_pinned

__all__ = ["LocalExecutor", "ExecutorKind"]

ExecutorKind = Literal["process", "thread"]
log = logging.getLogger("tauopt.compute")
_DEADLINE_GRACE_S = 1.0  # past deadline_s + this, the caller gets a failure without the worker


@dataclass(eq=False)
class _Pending:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    deadline_at: float | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    reply: tuple[str, Any] | None = None
    abandoned: bool = False


class LocalExecutor:
    def __init__(self, kind: ExecutorKind = "process", size: int | None = None) -> None:
        if kind not in ("process", "thread"):
            raise ValueError(f"pool kind must be 'process' or 'thread', got {kind!r}")
        if size is not None and size < 1:
            raise ValueError(f"pool size must be >= 1, got {size}")
        self.kind = kind
        self.size = size or (_cores() if kind == "process" else 1)
        self._workers: list[Any] = []
        self._queues: dict[str, collections.deque[_Pending]] = {}
        self._ready: collections.deque[str] = collections.deque()
        self._busy: set[str] = set()
        self._warm: dict[str, Any] = {}
        self._cond: anyio.Condition | None = None
        self._start_lock: anyio.Lock | None = None
        self._tg: Any = None

    async def __aenter__(self) -> "LocalExecutor":
        self._cond = anyio.Condition()
        self._start_lock = anyio.Lock()
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        self._tg.cancel_scope.cancel()
        for q in self._queues.values():  # nobody will serve these: answer their callers
            for item in q:
                item.reply = ("err", "the strategy pool closed")
                item.done.set()
        self._queues.clear()
        try:
            return await self._tg.__aexit__(*exc_info)
        finally:
            with anyio.CancelScope(shield=True):
                for w in self._workers:
                    await anyio.to_thread.run_sync(w.kill)
            self._workers = []

    async def aclose(self) -> None:
        await self.__aexit__(None, None, None)

    @property
    def pids(self) -> list[int]:
        """Process ids of the worker processes (empty for threads); for tests and diagnostics."""
        return [w.pid for w in self._workers if isinstance(w, ProcessWorker)]

    async def start(self) -> None:
        """Start the workers. Called by the first job, so an engine that never runs a
        pooled strategy starts no process and a daemon listens before torch is imported."""
        assert self._start_lock is not None
        async with self._start_lock:
            if self._workers:
                return
            if self.kind == "process":
                workers: list[Any] = await _start_processes(self.size)
            else:
                workers = [ThreadWorker() for _ in range(self.size)]
            self._workers = workers
            for w in workers:
                self._tg.start_soon(self._serve, w)

    # -- the Executor interface --------------------------------------------------

    async def submit(self, key: str, job: StrategyJob) -> StrategyOutcome:
        wait = None if job.deadline_s is None else job.deadline_s + _DEADLINE_GRACE_S
        status, value = await self._submit(key, run_job, (job,), job.deadline_s, wait)
        if status != "ok":
            raise JobFailed(value)
        return value

    def forget(self, key: str) -> None:
        """Drop the warm-start state of an experiment that went away."""
        self._warm.pop(key, None)

    async def call(self, key: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a picklable module-level function on a worker under the same
        fairness rules (diagnostics, tests, benchmarks). Raises RuntimeError if it failed."""
        status, value = await self._submit(key, fn, args, None, None)
        if status != "ok":
            raise RuntimeError(value)
        return value

    # -- internals -------------------------------------------------------------

    async def _submit(
        self, key: str, fn: Callable[..., Any], args: tuple[Any, ...], deadline_s: float | None, wait: float | None
    ) -> tuple[str, Any]:
        if self._cond is None or self._tg is None:
            raise RuntimeError("LocalExecutor is not running; use `async with LocalExecutor() as executor`")
        if not self._workers:
            await self.start()
        item = _Pending(fn, args, None if deadline_s is None else time.monotonic() + deadline_s)
        self._queues.setdefault(key, collections.deque()).append(item)
        if key not in self._busy and key not in self._ready:
            self._ready.append(key)
            async with self._cond:
                self._cond.notify()
        try:
            with anyio.move_on_after(wait if wait is not None else float("inf")):
                await item.done.wait()
        finally:
            if item.reply is None:
                item.abandoned = True  # cancelled or timed out: the worker skips or discards it
        if item.reply is None:
            within = "" if wait is None else f" within {wait:.1f} s"
            return ("err", f"no answer from the strategy worker{within}")
        return item.reply

    async def _next(self) -> tuple[str, _Pending] | None:
        assert self._cond is not None
        async with self._cond:
            while not self._ready:
                await self._cond.wait()
            key = self._ready.popleft()
        q = self._queues.get(key)
        while q and q[0].abandoned:
            q.popleft()
        if not q:
            self._queues.pop(key, None)
            return None
        item = q.popleft()
        if not q:
            self._queues.pop(key, None)
        return key, item

    async def _serve(self, worker: Any) -> None:
        while True:
            nxt = await self._next()
            if nxt is None:
                continue
            key, item = nxt
            self._busy.add(key)
            died = False
            try:
                item.reply, died = await self._execute(worker, key, item)
            finally:
                self._busy.discard(key)
                if self._queues.get(key):
                    self._ready.append(key)  # round-robin: back of the line
                    assert self._cond is not None
                    async with self._cond:
                        self._cond.notify()
                item.done.set()
            if died:
                # After the caller has its failure: a new process (spawn, torch import)
                # can take longer than the job's deadline on a busy machine.
                await anyio.to_thread.run_sync(worker.restart)

    async def _execute(self, worker: Any, key: str, item: _Pending) -> tuple[tuple[str, Any], bool]:
        """The job's reply, and whether its worker died (the caller restarts it)."""
        args = item.args
        if item.fn is run_job:
            job: StrategyJob = args[0]
            remaining = None
            if item.deadline_at is not None:
                remaining = item.deadline_at - time.monotonic()
                if remaining <= 0:
                    return ("err", "deadline passed while the job was queued"), False
            args = (job.with_warm(self._warm.get(key), remaining),)
        try:
            with blas_pinned() if isinstance(worker, ThreadWorker) else contextlib.nullcontext():
                reply = await anyio.to_thread.run_sync(worker.call, item.fn, args, abandon_on_cancel=True)
        except WorkerDied as exc:
            return ("err", f"{exc}; restarting it"), True
        if reply[0] == "ok" and item.fn is run_job and reply[1].state is not None:
            self._warm[key] = reply[1].state
        return reply, False


async def _start_processes(n: int) -> list[Any]:
    """n worker processes started at once, with one log line before and one after:
    each imports torch and gpytorch and runs a warm-up fit (5-15 s on a cold cache),
    which used to stall the first GP ask of a fresh daemon with nothing in the logs."""
    log.info("GP pool: warming %d worker process%s (torch, gpytorch and a warm-up fit)", n, "" if n == 1 else "es")
    started = time.monotonic()
    workers: list[Any] = [None] * n

    async def one(i: int) -> None:
        workers[i] = await anyio.to_thread.run_sync(ProcessWorker)

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    log.info("GP pool: ready, %d worker process%s in %.1f s", n, "" if n == 1 else "es", time.monotonic() - started)
    return workers


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1
