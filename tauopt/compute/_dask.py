"""DaskExecutor: the Executor on a Dask distributed cluster.

    async with StrategyPool(DaskExecutor("tcp://scheduler:8786")) as pool: ...
    async with StrategyPool(DaskExecutor()) as pool: ...     # a LocalCluster of this machine

The engine talks to the scheduler with distributed's asynchronous Client on its
own (asyncio) event loop: a submit is a message on the client's comm, no thread
per call, and the mailbox never waits on it (ComputeAhead runs it in a task).

- Routing: jobs of one key (an experiment) run one at a time, in order, and go
  to the worker that ran the key's previous job while it is alive (`workers=`
  with `allow_other_workers=True`, so a busy or dead home never holds a job).
  The warm state (small: the GP's hyperparameters) comes back with each outcome
  and travels with the next job, so any worker can take over.
- A job's Dask key is (experiment, observation count, points drawn): a repeated
  submission is the same task, and a late outcome never replaces the warm state
  of a later fit (states are kept by observation count).
- Faults: a worker that dies mid-job has its task rerun elsewhere by the
  scheduler; past the job's deadline (+ grace) the caller gets JobFailed, which
  the StrategyPool answers from Sobol. With the scheduler gone, jobs fail at once
  ("unreachable; reconnecting") and a watcher reconnects when it returns; both
  are logged and counted (`lost`, `reconnects`).
- At start: an unreachable scheduler raises DaskUnavailable (`tauopt serve`
  exits with its message); a worker that cannot import torch/gpytorch too,
  naming the extra `tauopt[gp]`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import anyio

from ..strategies import StrategyJob, StrategyOutcome
from ._dask_task import TauoptWorkerSetup, gp_extra_message, run_on_worker, worker_check
from ._executor import JobFailed

__all__ = ["DaskExecutor", "DaskStats", "DaskUnavailable", "check_dask_cluster"]

log = logging.getLogger("tauopt.compute.dask")

_DEADLINE_GRACE_S = 1.0  # past deadline_s + this, the caller gets a failure without the cluster


class DaskUnavailable(RuntimeError):
    """The cluster cannot serve GP jobs (scheduler unreachable, a worker missing packages)."""


@dataclass
class DaskStats:
    """Counters of the cluster connection (`/metrics`, benchmarks, tests)."""

    submitted: int = 0
    failed: int = 0
    lost: int = 0  # times the scheduler was found gone
    reconnects: int = 0  # times a connection came back after a loss


class DaskExecutor:
    kind = "dask"

    def __init__(
        self,
        address: str | None = None,
        *,
        n_workers: int | None = None,
        min_workers: int = 0,
        connect_timeout_s: float = 10.0,
        watch_every_s: float = 1.0,
    ) -> None:
        """address: a scheduler (tcp://HOST:8786); None starts a LocalCluster of
        `n_workers` processes (default: the cores), one thread each. min_workers:
        wait at start (up to connect_timeout_s) until this many workers joined, so
        all of them are checked for the GP packages."""
        if n_workers is not None and n_workers < 1:
            raise ValueError(f"n_workers must be >= 1, got {n_workers}")
        self.address = address
        self.n_workers = n_workers
        self.min_workers = min_workers
        self.stats = DaskStats()
        self._connect_timeout_s = connect_timeout_s
        self._watch_every_s = watch_every_s
        self._cluster: Any = None
        self._client: Any = None
        self._connected = False
        self._locks: dict[str, anyio.Lock] = {}
        self._home: dict[str, str] = {}  # key -> worker address of its last job
        self._warm: dict[str, tuple[int, Any]] = {}  # key -> (observation count, state)
        self._tg: Any = None

    # -- lifetime --------------------------------------------------------------

    async def __aenter__(self) -> "DaskExecutor":
        _require_asyncio()
        if self.address is None:
            self._cluster = await _local_cluster(self.n_workers)
            self.address = self._cluster.scheduler_address
        try:
            self._client = await self._connect()
            await self._check_workers()
            # Pinned and warmed up on every worker, now and as they join.
            await self._client.register_plugin(TauoptWorkerSetup())
        except BaseException:
            await self._close_all()
            raise
        self._connected = True
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._watch)
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
            self._tg = None
        with anyio.CancelScope(shield=True):
            await self._close_all()
        return None

    async def aclose(self) -> None:
        await self.__aexit__(None, None, None)

    async def _close_all(self) -> None:
        client, self._client, self._connected = self._client, None, False
        if client is not None:
            with anyio.move_on_after(10):
                await client.close()
        cluster, self._cluster = self._cluster, None
        if cluster is not None:
            with anyio.move_on_after(20):
                await cluster.close()

    @property
    def client(self) -> Any:
        """The live distributed Client (tests and diagnostics: `client.run(...)`)."""
        return self._client

    async def _connect(self) -> Any:
        from distributed import Client

        try:
            with anyio.fail_after(self._connect_timeout_s + 5):
                return await Client(self.address, asynchronous=True, timeout=self._connect_timeout_s)
        except (OSError, TimeoutError) as exc:
            raise DaskUnavailable(
                f"cannot reach the Dask scheduler at {self.address} within {self._connect_timeout_s:g} s ({exc}); "
                "start it (`dask scheduler`) or pass the right --dask-scheduler tcp://HOST:PORT"
            ) from exc

    async def _check_workers(self) -> None:
        """Every worker present now can run GP jobs (workers joining later are checked
        by each task, which fails with the same message)."""
        if self.min_workers:
            try:
                await self._client.wait_for_workers(self.min_workers, timeout=self._connect_timeout_s)
            except TimeoutError as exc:
                raise DaskUnavailable(
                    f"fewer than {self.min_workers} Dask workers joined {self.address} "
                    f"within {self._connect_timeout_s:g} s; start them (`dask worker {self.address}`)"
                ) from exc
        missing: dict[str, list[str]] = await self._client.run(worker_check)
        bad = {addr: m for addr, m in missing.items() if m}
        if bad:
            addr, m = sorted(bad.items())[0]
            more = f" (and {len(bad) - 1} more workers)" if len(bad) > 1 else ""
            raise DaskUnavailable(gp_extra_message(addr, m) + more)

    # -- the Executor interface --------------------------------------------------

    async def submit(self, key: str, job: StrategyJob) -> StrategyOutcome:
        lock = self._locks.setdefault(key, anyio.Lock())
        wait = None if job.deadline_s is None else job.deadline_s + _DEADLINE_GRACE_S
        started = time.monotonic()
        async with lock:  # one job per key, in order (anyio's Lock is FIFO)
            remaining = None if wait is None else wait - (time.monotonic() - started)
            if remaining is not None and remaining <= _DEADLINE_GRACE_S:
                self.stats.failed += 1
                raise JobFailed("deadline passed while the job was queued")
            try:
                report = await self._run(key, job, remaining)
            except JobFailed:
                self.stats.failed += 1
                raise
        self._home[key] = report.worker
        self._keep_warm(key, len(job.request.history), report.outcome.state)
        return report.outcome

    def forget(self, key: str) -> None:
        self._warm.pop(key, None)
        self._home.pop(key, None)
        self._locks.pop(key, None)

    # -- internals -------------------------------------------------------------

    async def _run(self, key: str, job: StrategyJob, wait: float | None) -> Any:
        client = self._client
        if client is None or not self._connected or client.status != "running":
            raise JobFailed(f"the Dask scheduler at {self.address} is unreachable; reconnecting")
        n_obs = len(job.request.history)
        warm = self._warm.get(key)
        job = job.with_warm(None if warm is None else warm[1], None if wait is None else wait - _DEADLINE_GRACE_S)
        future = None
        try:
            home = await self._pick_home(key, client)
            future = client.submit(
                run_on_worker,
                job,
                key,
                n_obs,
                time.time(),
                key=f"tauopt-{key}-n{n_obs}-d{job.request.drawn}",
                workers=[home] if home else None,
                allow_other_workers=bool(home),
                pure=False,
            )
            self.stats.submitted += 1
            with anyio.move_on_after(wait if wait is not None else float("inf")):
                return await future
            raise JobFailed(f"no answer from the Dask cluster within {wait:.1f} s")
        except JobFailed:
            raise
        except Exception as exc:  # the task raised, its workers kept dying, or the scheduler went away
            raise JobFailed(f"Dask job failed: {type(exc).__name__}: {exc}"[:500]) from exc
        finally:
            if future is not None and not future.done():
                future.release()  # the caller gave up: the scheduler may drop the task

    async def _pick_home(self, key: str, client: Any) -> str | None:
        """The key's last worker while it is alive; else the live worker that is home
        to the fewest keys (experiments spread over the cluster); None without workers.
        The client's worker list is a cache refreshed every few seconds: it is asked
        afresh (one round trip) only when a key needs a new home."""
        home = self._home.get(key)
        if home is not None and home in client.scheduler_info().get("workers", {}):
            return home
        alive = set(await client.nthreads())
        if home in alive:
            return home
        if not alive:
            return None
        load = {w: 0 for w in alive}
        for h in self._home.values():
            if h in load:
                load[h] += 1
        home = min(sorted(alive), key=load.__getitem__)
        self._home[key] = home
        return home

    def _keep_warm(self, key: str, n_obs: int, state: Any) -> None:
        if state is None:
            return
        held = self._warm.get(key)
        if held is None or n_obs >= held[0]:  # a late outcome of an older fit never wins
            self._warm[key] = (n_obs, state)

    async def _watch(self) -> None:
        """Notice the scheduler going away and coming back; log and count both."""
        while True:
            await anyio.sleep(self._watch_every_s)
            client = self._client
            alive = client is not None and client.status == "running"
            if self._connected and not alive:
                self._connected = False
                self.stats.lost += 1
                log.warning("lost the Dask scheduler at %s; GP asks fall back to Sobol until it returns", self.address)
            if not self._connected and alive:
                self._mark_reconnected()
            elif not self._connected and (client is None or client.status in ("closed", "closing", "failed")):
                await self._reconnect()

    async def _reconnect(self) -> None:
        old, self._client = self._client, None
        if old is not None:
            with anyio.move_on_after(2):
                await old.close()
        try:
            self._client = await self._connect()
        except DaskUnavailable:
            return  # try again at the next watch
        self._mark_reconnected()

    def _mark_reconnected(self) -> None:
        self._connected = True
        self.stats.reconnects += 1
        log.warning("reconnected to the Dask scheduler at %s; GP jobs run on the cluster again", self.address)


def _require_asyncio() -> None:
    import sniffio

    if sniffio.current_async_library() != "asyncio":
        raise RuntimeError("the Dask pool needs the asyncio event loop (distributed's client is asyncio-only)")


async def _local_cluster(n_workers: int | None) -> Any:
    from distributed import LocalCluster

    from ._local import _cores

    return await LocalCluster(
        n_workers=n_workers or _cores(),
        threads_per_worker=1,
        processes=True,
        asynchronous=True,
        dashboard_address=None,
        # The scheduler serves HTTP (health, metrics) even without a dashboard, on
        # 8787 unless told: a free port, so two engines on one machine never collide.
        scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"},
        host="127.0.0.1",
    )


async def check_dask_cluster(address: str, connect_timeout_s: float = 10.0) -> None:
    """Reach the scheduler at `address` and check its workers for the GP packages,
    then disconnect; raises DaskUnavailable saying what to do (`tauopt serve` calls
    this before it listens)."""
    executor = DaskExecutor(address, connect_timeout_s=connect_timeout_s)
    try:
        executor._client = await executor._connect()
        await executor._check_workers()
    finally:
        await executor._close_all()
