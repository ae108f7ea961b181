"""Compute: where pooled strategy jobs run, behind one Executor interface.

    Executor         the interface (submit a job -> outcome or JobFailed; routing
                     by key; forget; close)         -> _executor.py
    LocalExecutor    threads or processes of this machine   -> _local.py, _workers.py
    DaskExecutor     a Dask distributed cluster (remote, or a LocalCluster)
                     -> _dask.py (client side), _dask_task.py (worker side);
                     imported on first use, so distributed stays optional
    StrategyPool     the engine's call: inline vs pooled (from the strategy
                     registry), Sobol fallback, counters  -> _pool.py

A new backend is one module implementing Executor, passed as
`Engine(pool=StrategyPool(MyExecutor(...)))`. Imports strategies, never the engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..strategies import StrategyJob, StrategyOutcome
from ._executor import Executor, JobFailed
from ._local import ExecutorKind, LocalExecutor
from ._pool import PoolStats, StrategyPool, sobol_fallback
from ._workers import thread_report, torch_threads

if TYPE_CHECKING:  # the types of the lazy names below, for the type checker only
    from ._dask import DaskExecutor, DaskUnavailable, check_dask_cluster

__all__ = [
    "DaskExecutor",
    "DaskUnavailable",
    "Executor",
    "ExecutorKind",
    "JobFailed",
    "LocalExecutor",
    "PoolStats",
    "StrategyJob",
    "StrategyOutcome",
    "StrategyPool",
    "check_dask_cluster",
    "sobol_fallback",
    "thread_report",
    "torch_threads",
]


def __getattr__(name: str) -> object:
    # The Dask backend imports distributed: only when asked for.
    if name in ("DaskExecutor", "DaskUnavailable", "check_dask_cluster"):
        from . import _dask

        return getattr(_dask, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
