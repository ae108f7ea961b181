"""Compute: where pooled strategy jobs run, behind one Executor interface.

    Executor         the interface (submit a job -> outcome or JobFailed; routing
                     by key; forget; close)         -> _executor.py
    LocalExecutor    threads or processes of this machine   -> _local.py, _workers.py
    StrategyPool     the engine's call: inline vs pooled (from the strategy
                     registry), Sobol fallback, counters  -> _pool.py

A new backend (e.g. a Dask cluster) is one module implementing Executor, passed
as `Engine(pool=StrategyPool(MyExecutor(...)))`. Imports strategies, never the engine.
"""

from __future__ import annotations

from ..strategies import StrategyJob, StrategyOutcome
from ._executor import Executor, JobFailed
from ._local import ExecutorKind, LocalExecutor
from ._pool import PoolStats, StrategyPool, sobol_fallback
from ._workers import torch_threads

__all__ = [
    "Executor",
    "ExecutorKind",
    "JobFailed",
    "LocalExecutor",
    "PoolStats",
    "StrategyJob",
    "StrategyOutcome",
    "StrategyPool",
    "sobol_fallback",
    "torch_threads",
]
