"""What runs on a Dask worker: one strategy job, pinned to one torch/BLAS thread.

Imported by the worker when it unpickles a job, so it imports nothing heavy at
module level but distributed (there already) and nothing of the engine: the job is plain data (the request's
space, history, pending points, options and seed, and the warm state) plus the
strategy's run function, pickled by reference.
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

__all__ = ["TauoptWorkerSetup", "WorkerReport", "missing_gp_packages", "gp_extra_message", "run_on_worker", "worker_check", "fits_run"]

GP_PACKAGES = ("torch", "gpytorch")

_pin_lock = threading.Lock()
_pinned = False
# (experiment, observation count) of every job this worker process ran, read by
# tests and diagnostics through `client.run(fits_run)`: proof from the worker side.
_FITS_RUN: list[tuple[str, int]] = []


@dataclass(frozen=True)
class WorkerReport:
    """A job's outcome and where it ran (the executor routes the key's next job there)."""

    outcome: StrategyOutcome
    worker: str
    pid: int


def missing_gp_packages() -> list[str]:
    """The GP packages this process cannot import (found without importing them)."""
    return [m for m in GP_PACKAGES if _find(m) is None]


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


def _prepare() -> None:
    from ._workers import _warm_up

    _pin_threads()
    _warm_up()


def run_on_worker(job: StrategyJob, key: str, n_obs: int, submitted_at: float) -> WorkerReport:
    """The task the executor submits: checks the GP packages (a clear error naming the
    extra, not an ImportError deep in a fit), skips a job whose caller has given up
    (it waited in a worker's queue past its deadline), pins threads, runs the job
    with the time it has left."""
    from distributed import get_worker

    worker = get_worker()
    missing = missing_gp_packages()
    if missing:
        raise RuntimeError(gp_extra_message(worker.address, missing))
    if job.deadline_s is not None:
        # Wall clock: the submitter and this worker may be different machines (NTP-close).
        left = job.deadline_s - (time.time() - submitted_at)
        if left <= 0:
            raise TimeoutError("deadline passed while the job was queued on the Dask worker")
        job = job.with_warm(job.warm, left)
    _pin_threads()
    outcome = run_job(job)
    _FITS_RUN.append((key, n_obs))
    return WorkerReport(outcome, worker.address, os.getpid())


def fits_run() -> list[tuple[str, int]]:
    """(experiment, observation count) of the jobs this worker process ran."""
    return list(_FITS_RUN)


def torch_threads_here() -> tuple[int, int]:
    """torch's (intra-op, inter-op) threads in this worker process, after pinning."""
    _pin_threads()
    import torch

    return torch.get_num_threads(), torch.get_num_interop_threads()
