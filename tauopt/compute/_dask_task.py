"""What runs on a Dask worker: one strategy job, pinned to one torch/BLAS thread.

Imported by the worker when it unpickles a job, so it imports nothing heavy at
module level but distributed (there already) and nothing of the engine: the job is plain data (the request's
space, history, pending points, options and seed, and the warm state) plus the
strategy's run function, pickled by reference.

Jobs reach a worker through its `JobRunner`, a Dask actor (one per worker): a call
is one request/reply between the client and the worker, relayed by the scheduler,
instead of a task's eight hops (submit, compute, finished, key-in-memory, then a
gather through the scheduler). See the README's "Scaling out" for the figures.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from ..strategies import StrategyJob, StrategyOutcome, run_job

__all__ = [
    "JobRunner",
    "TauoptWorkerSetup",
    "dask_setup",
    "WorkerReport",
    "fits_run",
    "gp_extra_message",
    "missing_gp_packages",
    "run_on_worker",
    "worker_check",
]

GP_PACKAGES = ("torch", "gpytorch")

_pin_lock = threading.Lock()
_pinned = False
_packages_found = False  # set once both GP packages were found: they do not go away
# (experiment, observation count) of every job this worker process ran, read by
# tests and diagnostics through `client.run(fits_run)`: proof from the worker side.
_FITS_RUN: list[tuple[str, int]] = []


@dataclass(frozen=True)
class WorkerReport:
    """A job's outcome, or the error it raised (as text), and where it ran (the executor
    routes the key's next job there). An error travels as a value, so anything the
    actor call itself raises means the worker was lost, never that the job failed."""

    outcome: StrategyOutcome | None
    worker: str
    pid: int
    error: str | None = None


def missing_gp_packages() -> list[str]:
    """The GP packages this process cannot import (found without importing them;
    searched once per process, not per job)."""
    global _packages_found
    if _packages_found:
        return []
    missing = [m for m in GP_PACKAGES if _find(m) is None]
    _packages_found = not missing
    return missing


def _find(module: str) -> Any:
    try:
        return importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None


def gp_extra_message(where: str, missing: list[str]) -> str:
    return (
        f"Dask worker {where} cannot import {', '.join(missing)}: GP jobs need them there; "
        "install the extra on every worker: pip install 'tauopt[gp]'"
    )


def worker_check() -> list[str]:
    """Run by the executor on every worker at start (`client.run`): what is missing."""
    return missing_gp_packages()


def _pin_threads() -> None:
    """One torch (and BLAS) thread per Dask worker thread, set once per process, as the
    local pool does: N single-threaded workers never oversubscribe N cores."""
    global _pinned
    with _pin_lock:
        if _pinned:
            return
        os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        import torch

        torch.set_num_threads(1)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:  # already set once in this process (torch allows it once)
            pass
        try:
            from threadpoolctl import threadpool_limits

            threadpool_limits(1)
        except ImportError:  # pragma: no cover - optional
            pass
        _pinned = True


class TauoptWorkerSetup(WorkerPlugin):  # type: ignore[misc]
    """A Dask worker plugin (registered by the executor; runs on every worker, also on
    ones joining later): pin threads and warm up gpytorch before the first real fit,
    as the local pool's processes do. A worker without the GP packages is left alone
    here; its tasks fail with the message naming the extra."""

    name = "tauopt-worker-setup"
    idempotent = True

    async def setup(self, worker: Any) -> None:
        if missing_gp_packages():
            return
        # Off the worker's event loop: a warm-up fit takes seconds, heartbeats must not wait.
        await asyncio.get_running_loop().run_in_executor(None, _prepare)


_prepare_lock = threading.Lock()
_prepared = False


def _prepare() -> None:
    """Pin threads and warm gpytorch up, once per worker process."""
    global _prepared
    with _prepare_lock:
        if _prepared:
            return
        from ._workers import _warm_up

        _pin_threads()
        _warm_up()
        _prepared = True


def dask_setup(worker: Any) -> None:
    """`dask worker --preload tauopt.compute._dask_task`: the plugin's work done at the
    worker's start, before it joins the scheduler, so it joins ready for a first fit
    (the plugin then finds it done)."""
    if not missing_gp_packages():
        _prepare()


def run_on_worker(job: StrategyJob, key: str, n_obs: int, submitted_at: float, address: str | None = None) -> WorkerReport:
    """One job, on a worker thread: checks the GP packages (a clear error naming the
    extra, not an ImportError deep in a fit), skips a job whose caller has given up
    (it waited in the worker's queue past its deadline), pins threads, runs the job
    with the time it has left. `address`: the worker's (default: asked of Dask, which
    knows it only inside a task)."""
    if address is None:
        from distributed import get_worker

        address = get_worker().address
    missing = missing_gp_packages()
    if missing:
        raise RuntimeError(gp_extra_message(address, missing))
    if job.deadline_s is not None:
        # Wall clock: the submitter and this worker may be different machines (NTP-close).
        left = job.deadline_s - (time.time() - submitted_at)
        if left <= 0:
            raise TimeoutError("deadline passed while the job was queued on the Dask worker")
        job = job.with_warm(job.warm, left)
    _pin_threads()
    outcome = run_job(job)
    _FITS_RUN.append((key, n_obs))
    return WorkerReport(outcome, address, os.getpid())


class JobRunner:
    """A Dask actor, one per worker (created by the executor with `actor=True`): runs
    the jobs sent to it on the worker's task threads (`--nthreads` of them), so the
    worker's event loop stays free for heartbeats while a fit runs."""

    def __init__(self) -> None:
        from distributed import get_worker

        self._worker = get_worker()

    def where(self) -> str:
        """The worker's address (asked once, when the executor creates this runner)."""
        return str(self._worker.address)

    async def run(self, job: StrategyJob, key: str, n_obs: int, submitted_at: float) -> WorkerReport:
        worker = self._worker
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(worker.executor, run_on_worker, job, key, n_obs, submitted_at, worker.address)
        except Exception as exc:  # noqa: BLE001 - the job's own failure, reported as a value
            return WorkerReport(None, worker.address, os.getpid(), f"{type(exc).__name__}: {exc}")


def fits_run() -> list[tuple[str, int]]:
    """(experiment, observation count) of the jobs this worker process ran."""
    return list(_FITS_RUN)


def torch_threads_here() -> tuple[int, int]:
    """torch's (intra-op, inter-op) threads in this worker process, after pinning."""
    _pin_threads()
    import torch

    return torch.get_num_threads(), torch.get_num_interop_threads()
