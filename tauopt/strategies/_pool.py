"""StrategyPool: where slow strategies (GP) run, fairly across experiments.

    async with StrategyPool(kind="process") as pool:
        result = await pool.propose(experiment_id, "auto", request, deadline_s=5.0)

kind="process": `size` worker processes (spawn; default: the machine's cores,
    started by the first job, so a daemon with no GP experiment starts none),
    each started with torch.set_num_threads(1), one interop thread and a
    one-thread BLAS, so N workers never oversubscribe N cores. Workers are
    daemonic, killed when the pool exits, and exit on their own when the pipe to
    the pool closes (the engine's process died): no orphans.
kind="thread": `size` (default 1) worker threads in this process, for scripts
    using the local driver where starting processes costs more than it saves.
    torch is pinned to one thread for the duration of each job and the previous
    count restored afterwards.

Fairness: every key (experiment id) has its own FIFO queue and at most one job
in flight; free workers take keys round-robin. So one experiment's slow fit
occupies one worker at most and never delays another experiment's job behind it.

Warm start: the pool keeps the last GPState per key and hands it to that key's
next fit (jobs of a key are serialized, so there is no race). `forget(key)`
drops it when an experiment goes away.

Inline strategies (random, sobol, grid, and `auto` before the GP takes over)
are computed in the caller without queueing.
"""

from __future__ import annotations

import collections
import logging
import multiprocessing
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Literal

import anyio
import numpy as np

from ..models import Value
from ._pool_types import ProposeResult
from ._request import SuggestRequest

__all__ = ["StrategyPool", "PoolStats", "ProposeResult", "propose_here", "run_job", "torch_threads"]

PoolKind = Literal["process", "thread"]
log = logging.getLogger("tauopt.strategies")
_DEADLINE_GRACE_S = 1.0  # past deadline_s + this, the caller gets a Sobol point without the worker


# -- what crosses into a worker ------------------------------------------------


@dataclass(frozen=True)
class _Job:
    strategy: str
    request: SuggestRequest
    warm: Any  # GPState | None
    deadline_s: float | None


@dataclass(frozen=True)
class _Outcome:
    candidates: tuple[dict[str, Value], ...]
    strategy_used: str
    fallback_reason: str | None
    fit_seconds: float
    state: Any  # GPState | None


def request_rng(request: SuggestRequest) -> np.random.Generator:
    """One generator per (seed, drawn): every draw of an experiment is reproducible."""
    return np.random.default_rng([request.seed, request.drawn])


def run_job(job: _Job) -> _Outcome:
    """Run one strategy call (module level, so it pickles into worker processes)."""
    from . import propose, resolve

    name = resolve(job.strategy, job.request)
    rng = request_rng(job.request)
    t0 = time.monotonic()
    if name == "gp":
        from .gp import propose_gp

        r = propose_gp(job.request, rng, job.warm, job.deadline_s)
        if r.info.no_model:  # the initial design, not a failure: no fallback reason
            return _Outcome(tuple(r.candidates), "sobol", None, r.info.fit_seconds, r.state)
        used = "gp" if r.info.fallback_reason is None else "sobol"
        return _Outcome(tuple(r.candidates), used, r.info.fallback_reason, r.info.fit_seconds, r.state)
    cands = propose(name, job.request, rng)
    return _Outcome(tuple(cands), name, None, time.monotonic() - t0, job.warm)


def propose_here(strategy: str, request: SuggestRequest, deadline_s: float | None = None) -> ProposeResult:
    """One strategy call in the calling thread, torch pinned to one thread while it
    runs (as in the thread pool); for Engine(pool=None)."""
    with _torch_pinned():
        out = run_job(_Job(strategy, request, None, deadline_s))
    return ProposeResult(out.candidates, out.strategy_used, out.fallback_reason, out.fit_seconds)


def torch_threads(hold_s: float = 0.0) -> tuple[int, int]:
    """(intra-op, inter-op) torch threads where this runs, after holding the worker
    for hold_s seconds (so concurrent probes reach different workers); for tests and diagnostics."""
    import torch

    time.sleep(hold_s)
    return torch.get_num_threads(), torch.get_num_interop_threads()


# -- workers -------------------------------------------------------------------


def _pin_process() -> None:
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    import torch

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    try:  # numpy's BLAS was loaded before this ran (unpickling imports tauopt)
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except ImportError:  # pragma: no cover - optional
        pass
    _warm_up()


def _warm_up() -> None:
    """A tiny fit at start-up, so the first real fit does not pay gpytorch's
    imports and first-call set-up (about 2 s here)."""
    try:
        from ._gp_model import Posterior, fit

        x = np.linspace(0.0, 1.0, 6)[:, None]
        y = np.sin(6 * x[:, 0])
        hyper, _ = fit(x, y, max_iters=2)
        Posterior(x, y, np.full(6, hyper.noise), hyper).predict(x)
    except Exception:  # noqa: BLE001 - a failing warm-up only costs the first fit time
        pass


def _worker_main(conn: Any) -> None:
    _pin_process()
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return  # the pool is gone
        if msg is None:
            return
        fn, args = msg
        try:
            reply = ("ok", fn(*args))
        except BaseException as exc:  # noqa: BLE001 - reported to the pool, the worker lives on
            reply = ("err", f"{type(exc).__name__}: {exc}"[:500])
        try:
            conn.send(reply)
        except (EOFError, OSError):
            return


class _WorkerDied(Exception):
    pass


class _ProcessWorker:
    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self._start()

    def _start(self) -> None:
        parent, child = self._ctx.Pipe(duplex=True)
        self.proc = self._ctx.Process(target=_worker_main, args=(child,), daemon=True, name="tauopt-strategy")
        self.proc.start()
        child.close()
        self.conn = parent

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[str, Any]:
        """Blocking; runs on a helper thread."""
        try:
            self.conn.send((fn, args))
            return self.conn.recv()
        except (EOFError, OSError, BrokenPipeError) as exc:
            raise _WorkerDied(f"strategy worker {self.proc.pid} died ({type(exc).__name__})") from exc

    def restart(self) -> None:
        self.kill()
        self._start()

    def kill(self) -> None:
        try:
            self.conn.close()
        except OSError:
            pass
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(2.0)
            if self.proc.is_alive():
                self.proc.kill()
        self.proc.join(2.0)


_pin_lock = threading.Lock()
_pin_depth = 0
_pin_saved = 1


@contextmanager
def _torch_pinned() -> Iterator[None]:
    """torch at one thread while any pinned job runs in this process; restored after the last."""
    global _pin_depth, _pin_saved
    import torch

    with _pin_lock:
        if _pin_depth == 0:
            _pin_saved = torch.get_num_threads()
            torch.set_num_threads(1)
        _pin_depth += 1
    try:
        yield
    finally:
        with _pin_lock:
            _pin_depth -= 1
            if _pin_depth == 0:
                torch.set_num_threads(_pin_saved)


_THREAD_CLOSE_WAIT_S = 30.0  # a fit is bounded by its own deadline (fit_deadline_s, 30 s by default)


class _ThreadWorker:
    """Runs jobs on an anyio worker thread. A cancelled caller abandons the thread,
    but the thread keeps running: `kill` (at pool exit) waits for it, because a
    thread still inside torch when the interpreter exits aborts the process
    ("terminate called without an active exception", exit 134)."""

    def __init__(self) -> None:
        self._idle = threading.Event()
        self._idle.set()

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[str, Any]:
        self._idle.clear()
        try:
            with _torch_pinned():
                return ("ok", fn(*args))
        except Exception as exc:  # noqa: BLE001 - reported like a process worker's
            return ("err", f"{type(exc).__name__}: {exc}"[:500])
        finally:
            self._idle.set()

    def restart(self) -> None:
        pass

    def kill(self) -> None:
        if not self._idle.wait(_THREAD_CLOSE_WAIT_S):
            log.warning("strategy pool: a fit thread still runs %.0f s after close; leaving it", _THREAD_CLOSE_WAIT_S)


# -- the pool ------------------------------------------------------------------


@dataclass
class PoolStats:
    """Counters over pooled proposals (benchmarks and `inspect`)."""

    jobs: int = 0
    candidates: int = 0
    fit_seconds: float = 0.0
    fallbacks: int = 0
    fallback_kinds: dict[str, int] = field(default_factory=dict)  # by fallback_kind(reason)


def fallback_kind(reason: str) -> str:
    """A reason's class, from a small fixed set (a bounded metrics label)."""
    text = reason.lower()
    if "deadline" in text or "no answer" in text:
        return "deadline"
    if "restarted" in text or "pool closed" in text or "died" in text:
        return "worker_lost"
    if "error" in text or "exception" in text or ":" in text:
        return "model_error"
    return "no_model"


@dataclass(eq=False)
class _Pending:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    deadline_at: float | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    reply: tuple[str, Any] | None = None
    abandoned: bool = False


class StrategyPool:
    def __init__(self, kind: PoolKind = "process", size: int | None = None) -> None:
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
        self.stats = PoolStats()

    async def __aenter__(self) -> "StrategyPool":
        self._cond = anyio.Condition()
        self._start_lock = anyio.Lock()
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def start(self) -> None:
        """Start the workers. Called by the first job, so an engine that never runs a
        GP starts no process and a daemon listens before torch is imported anywhere."""
        async with self._start_lock:
            if self._workers:
                return
            if self.kind == "process":
                ctx = multiprocessing.get_context("spawn")
                workers = [await anyio.to_thread.run_sync(_ProcessWorker, ctx) for _ in range(self.size)]
            else:
                workers = [_ThreadWorker() for _ in range(self.size)]
            self._workers = workers
            for w in workers:
                self._tg.start_soon(self._serve, w)

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

    # -- API for the actor ---------------------------------------------------

    async def propose(
        self, key: str, strategy: str, request: SuggestRequest, deadline_s: float | None = None
    ) -> ProposeResult:
        """Candidates for `request` from `strategy` ("auto" resolved here). Never
        raises because a model failed: the answer is then Sobol, with the reason."""
        from . import INLINE, propose, resolve

        name = resolve(strategy, request)
        if name in INLINE:
            t0 = time.monotonic()
            cands = propose(name, request, request_rng(request))
            return ProposeResult(tuple(cands), name, None, time.monotonic() - t0)
        job = _Job(strategy, request, None, deadline_s)
        wait = None if deadline_s is None else deadline_s + _DEADLINE_GRACE_S
        status, value = await self._submit(key, run_job, (job,), deadline_s, wait)
        if status == "ok":
            out: _Outcome = value
            result = ProposeResult(out.candidates, out.strategy_used, out.fallback_reason, out.fit_seconds)
        else:
            result = self._fallback(request, value)
        self.stats.jobs += 1
        self.stats.candidates += len(result.candidates)
        self.stats.fit_seconds += result.fit_seconds
        self.stats.fallbacks += result.fallback_reason is not None
        if result.fallback_reason is not None:
            kind = fallback_kind(result.fallback_reason)
            self.stats.fallback_kinds[kind] = self.stats.fallback_kinds.get(kind, 0) + 1
        return result

    @property
    def queue_depth(self) -> int:
        """Jobs waiting for a worker, over every experiment."""
        return sum(len(q) for q in self._queues.values())

    async def call(self, key: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a picklable module-level function on a worker under the same
        fairness rules (diagnostics, tests, benchmarks). Raises RuntimeError if it failed."""
        status, value = await self._submit(key, fn, args, None, None)
        if status != "ok":
            raise RuntimeError(value)
        return value

    def forget(self, key: str) -> None:
        """Drop the warm-start state of an experiment that went away."""
        self._warm.pop(key, None)

    # -- internals -------------------------------------------------------------

    @staticmethod
    def _fallback(request: SuggestRequest, reason: str) -> ProposeResult:
        from .gp import sobol_fallback

        return ProposeResult(tuple(sobol_fallback(request, request_rng(request))), "sobol", reason, 0.0)

    async def _submit(
        self, key: str, fn: Callable[..., Any], args: tuple[Any, ...], deadline_s: float | None, wait: float | None
    ) -> tuple[str, Any]:
        if self._cond is None or self._tg is None:
            raise RuntimeError("StrategyPool is not running; use `async with StrategyPool() as pool`")
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
            try:
                item.reply = await self._execute(worker, key, item)
            finally:
                self._busy.discard(key)
                if self._queues.get(key):
                    self._ready.append(key)  # round-robin: back of the line
                    assert self._cond is not None
                    async with self._cond:
                        self._cond.notify()
                item.done.set()

    async def _execute(self, worker: Any, key: str, item: _Pending) -> tuple[str, Any]:
        args = item.args
        if item.fn is run_job:
            job: _Job = args[0]
            remaining = None
            if item.deadline_at is not None:
                remaining = item.deadline_at - time.monotonic()
                if remaining <= 0:
                    return ("err", "deadline passed while the job was queued")
            args = (_Job(job.strategy, job.request, self._warm.get(key), remaining),)
        try:
            reply = await anyio.to_thread.run_sync(worker.call, item.fn, args, abandon_on_cancel=True)
        except _WorkerDied as exc:
            await anyio.to_thread.run_sync(worker.restart)
            return ("err", f"{exc}; restarted it")
        if reply[0] == "ok" and item.fn is run_job and reply[1].state is not None:
            self._warm[key] = reply[1].state
        return reply


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1
