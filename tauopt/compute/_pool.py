"""StrategyPool: the engine's one call into compute, over any Executor.

    async with StrategyPool("process") as pool:          # or StrategyPool(my_executor)
        result = await pool.propose(experiment_id, "auto", request, deadline_s=5.0)

`propose` resolves `auto`, runs inline strategies (per the registry) right
here without queueing, submits pooled ones to the executor, and never raises
because a job failed: a failed job (it raised, its worker died, no answer in
time) is answered from the experiment's Sobol sequence, with the reason. The
counters cover every backend alike.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..strategies import StrategyJob, StrategyOutcome, SuggestRequest, get, request_rng, resolve
from ._executor import Executor, JobFailed
from ._local import LocalExecutor

__all__ = ["StrategyPool", "PoolStats", "sobol_fallback"]


@dataclass
class PoolStats:
    """Counters over pooled proposals (benchmarks and `inspect`)."""

    jobs: int = 0  # pooled proposals asked for, answered by the strategy or by a fallback
    fits: int = 0  # of those, the ones the pooled strategy itself answered (no fallback)
    candidates: int = 0
    fit_seconds: float = 0.0
    fallbacks: int = 0
    fallback_kinds: dict[str, int] = field(default_factory=dict)  # by fallback_kind(reason)
    in_flight: int = 0  # pooled jobs submitted and not yet answered


def fallback_kind(reason: str) -> str:
    """A reason's class, from a small fixed set (a bounded metrics label)."""
    text = reason.lower()
    if "unreachable" in text:  # a cluster's scheduler is gone (the Dask executor reconnects)
        return "cluster_unreachable"
    if "deadline" in text or "no answer" in text:
        return "deadline"
    if "restarted" in text or "pool closed" in text or "died" in text or "killed" in text:
        return "worker_lost"
    if "error" in text or "exception" in text or ":" in text:
        return "model_error"
    return "no_model"


def sobol_fallback(request: SuggestRequest, reason: str) -> StrategyOutcome:
    """The experiment's own Sobol points (continuing from `drawn`), saying why."""
    candidates = get("sobol").propose(request, request_rng(request))
    return StrategyOutcome(tuple(candidates), "sobol", reason, 0.0)


def _executor_named(kind: str, size: int | None) -> Executor:
    if kind == "dask":
        from ._dask import DaskExecutor  # lazy: distributed is the optional extra tauopt[dask]

        return DaskExecutor(n_workers=size)
    return LocalExecutor(kind, size)  # type: ignore[arg-type]  # it refuses other kinds itself


class StrategyPool:
    def __init__(self, executor: Executor | str = "process", size: int | None = None) -> None:
        """executor: "process" or "thread" (this machine), "dask" (a Dask LocalCluster of
        `size` worker processes; a remote cluster: `StrategyPool(DaskExecutor(address))`),
        or any Executor."""
        self.executor: Any = _executor_named(executor, size) if isinstance(executor, str) else executor
        self.stats = PoolStats()

    @property
    def kind(self) -> str:
        return getattr(self.executor, "kind", type(self.executor).__name__)

    async def __aenter__(self) -> "StrategyPool":
        await self.executor.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return await self.executor.__aexit__(*exc_info)

    async def propose(
        self, key: str, strategy: str, request: SuggestRequest, deadline_s: float | None = None
    ) -> StrategyOutcome:
        """Candidates for `request` from `strategy` ("auto" resolved here)."""
        spec = get(resolve(strategy, request))
        if not spec.pooled:
            t0 = time.monotonic()
            candidates = spec.propose(request, request_rng(request))
            return StrategyOutcome(tuple(candidates), spec.name, None, time.monotonic() - t0)
        if spec.bound_history is not None:
            request = spec.bound_history(request)
        self.stats.in_flight += 1
        try:
            result = await self.executor.submit(key, StrategyJob(spec.job_runner, request, None, deadline_s))
        except JobFailed as exc:
            result = sobol_fallback(request, str(exc))
        finally:
            self.stats.in_flight -= 1
        self.stats.jobs += 1
        self.stats.candidates += len(result.candidates)
        self.stats.fit_seconds += result.fit_seconds
        self.stats.fallbacks += result.fallback_reason is not None
        self.stats.fits += result.fallback_reason is None
        if result.fallback_reason is not None:
            kind = fallback_kind(result.fallback_reason)
            self.stats.fallback_kinds[kind] = self.stats.fallback_kinds.get(kind, 0) + 1
        return result

    @property
    def queue_depth(self) -> int:
        """Pooled jobs submitted and not yet answered (queued or running), over every experiment."""
        return self.stats.in_flight

    async def warm(self) -> None:
        """Start the executor's workers now, not at the first pooled job (an engine
        that knows GP experiments are coming). Executors without `start` do nothing."""
        start = getattr(self.executor, "start", None)
        if start is not None:
            await start()

    def forget(self, key: str) -> None:
        """Drop the warm-start state of an experiment that went away."""
        self.executor.forget(key)

    async def call(self, key: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a module-level function on a local worker (diagnostics, tests, benchmarks)."""
        return await self.executor.call(key, fn, *args)
