"""The workers a LocalExecutor drives: threads of this process, or processes.

A worker's `call(fn, args)` blocks (it runs on a helper thread) and returns
("ok", value) or ("err", reason); a process worker whose process died raises
WorkerDied. Both run torch (and BLAS) on one thread per job, so N workers never
oversubscribe N cores.
"""

from __future__ import annotations

import concurrent.futures
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np

__all__ = ["ThreadWorker", "ProcessWorker", "WorkerDied", "thread_report", "torch_threads", "torch_pinned", "blas_pinned"]

Reply = tuple[str, Any]
log = logging.getLogger("tauopt.compute")


class WorkerDied(Exception):
    pass


def torch_threads(hold_s: float = 0.0) -> tuple[int, int]:
    """(intra-op, inter-op) torch threads where this runs, after holding the worker
    for hold_s seconds (so concurrent probes reach different workers); for tests and diagnostics."""
    import torch

    time.sleep(hold_s)
    return torch.get_num_threads(), torch.get_num_interop_threads()


def thread_report() -> dict[str, Any]:
    """Where this runs: torch's intra- and inter-op threads, each BLAS/OpenMP library's
    thread limit (threadpoolctl) and the process's OS threads; for benchmarks and diagnostics."""
    import torch

    out: dict[str, Any] = {"torch": [torch.get_num_threads(), torch.get_num_interop_threads()]}
    try:
        from threadpoolctl import threadpool_info

        out["threadpools"] = [
            {"api": i.get("user_api"), "library": i.get("internal_api"), "threads": i.get("num_threads")} for i in threadpool_info()
        ]
    except ImportError:  # pragma: no cover - optional
        out["threadpools"] = None
    try:
        out["os_threads"] = len(os.listdir("/proc/self/task"))
    except OSError:  # not Linux
        out["os_threads"] = None
    return out


def _error(exc: BaseException) -> Reply:
    return ("err", f"{type(exc).__name__}: {exc}"[:500])


# -- threads -------------------------------------------------------------------

_pin_lock = threading.Lock()
_pin_depth = 0
_pin_saved = 1


@contextmanager
def torch_pinned() -> Iterator[None]:
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


_blas_depth = 0
_blas_saved: Any = None  # threadpoolctl's record of the BLAS limits before the first pinned job
_blas_controller: Any = None


@contextmanager
def blas_pinned() -> Iterator[None]:
    """numpy's and scipy's BLAS at one thread while any thread worker's job runs;
    restored after the last. Enter it from the event loop's thread, not the worker's:
    OpenBLAS 0.3.30 ignores a thread count set from another thread once one was set
    and restored (measured). Why: scipy's L-BFGS-B calls BLAS on tiny vectors, and
    two OpenBLAS threads waking on a busy 2-core machine cost about half of a GP
    job (the benchmarks log). Process workers pin BLAS for good (_pin_process)."""
    global _blas_depth, _blas_saved
    with _pin_lock:  # engines on event loops in several threads share the count
        if _blas_depth == 0:
            _blas_saved = _limit_blas()
        _blas_depth += 1
    try:
        yield
    finally:
        with _pin_lock:
            _blas_depth -= 1
            if _blas_depth == 0 and _blas_saved is not None:
                _blas_saved.restore_original_limits()
                _blas_saved = None


def _limit_blas() -> Any:
    global _blas_controller
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - optional
        return None
    controller = _blas_controller or ThreadpoolController()  # a scan of the loaded libraries: ~9 ms
    if _blas_controller is None and "scipy.linalg" in sys.modules:  # every BLAS a GP job uses is loaded
        _blas_controller = controller
    return controller.limit(limits=1, user_api="blas")


_THREAD_CLOSE_WAIT_S = 30.0  # a fit is bounded by its own deadline (fit_deadline_s, 30 s by default)


class ThreadWorker:
    """Runs jobs on an anyio worker thread. A cancelled caller abandons the thread,
    but the thread keeps running: `kill` (at pool exit) waits for it, because a
    thread still inside torch when the interpreter exits aborts the process
    ("terminate called without an active exception", exit 134)."""

    def __init__(self) -> None:
        self._idle = threading.Event()
        self._idle.set()

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Reply:
        self._idle.clear()
        try:
            with torch_pinned():
                return ("ok", fn(*args))
        except Exception as exc:  # noqa: BLE001 - reported like a process worker's
            return _error(exc)
        finally:
            self._idle.set()

    def restart(self) -> None:
        pass

    def kill(self) -> None:
        if not self._idle.wait(_THREAD_CLOSE_WAIT_S):
            log.warning("strategy pool: a fit thread still runs %.0f s after close; leaving it", _THREAD_CLOSE_WAIT_S)


# -- processes -----------------------------------------------------------------


def _pin_process(parent: int) -> None:
    """Initializer of a worker process: one thread for torch and BLAS, a warm-up
    fit, and an exit of its own if the engine's process dies (no orphans)."""
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True, name="tauopt-parent-watch").start()
    import torch

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    try:  # numpy's BLAS was loaded before this ran (unpickling imports tauopt)
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except ImportError:  # pragma: no cover - optional
        pass
    _warm_up()


def _exit_with_parent(parent: int) -> None:
    # The executor's queues do not tell a worker that the engine was killed; its
    # re-parenting does.
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def _warm_up() -> None:
    """A tiny fit at start-up, so the first real fit does not pay gpytorch's
    imports and first-call set-up (about 2 s here)."""
    try:
        from ..strategies._gp_model import Posterior, fit

        x = np.linspace(0.0, 1.0, 6)[:, None]
        y = np.sin(6 * x[:, 0])
        hyper, _ = fit(x, y, max_iters=2)
        Posterior(x, y, np.full(6, hyper.noise), hyper).predict(x)
    except Exception:  # noqa: BLE001 - a failing warm-up only costs the first fit time
        pass


class ProcessWorker:
    """One worker process: a `concurrent.futures.ProcessPoolExecutor` of one
    process (spawned), so a key routed here finds the same process each time.
    Blocking methods; the LocalExecutor calls them on helper threads."""

    def __init__(self) -> None:
        self._start()

    def _start(self) -> None:
        self._pool = concurrent.futures.ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_pin_process,
            initargs=(os.getpid(),),
        )
        self.pid: int = self._pool.submit(os.getpid).result()  # started and warmed up

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Reply:
        try:
            future = self._pool.submit(fn, *args)
            return ("ok", future.result())
        except BrokenProcessPool as exc:
            raise WorkerDied(f"strategy worker {self.pid} died") from exc
        except Exception as exc:  # noqa: BLE001 - the job raised: reported, the worker lives on
            return _error(exc)

    def restart(self) -> None:
        self.kill()
        self._start()

    def kill(self) -> None:
        """Stop now: a job in flight is not waited for (its caller already has its answer)."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        # The executor sees its process gone, fails what was pending and joins it.
        self._pool.shutdown(wait=True, cancel_futures=True)
