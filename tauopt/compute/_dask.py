"""DaskExecutor: the Executor on a Dask distributed cluster.

    async with StrategyPool(DaskExecutor("tcp://scheduler:8786")) as pool: ...
    async with StrategyPool(DaskExecutor()) as pool: ...     # a LocalCluster of this machine

The engine talks to the scheduler with distributed's asynchronous Client on its
own (asyncio) event loop: a call is a message on the client's comm, no thread
per call, and the mailbox never waits on it (ComputeAhead runs it in a task).

- One `JobRunner` actor per worker carries the jobs: a job is one request/reply
  relayed by the scheduler (about a millisecond), where a Dask task costs eight
  hops and a gather (10-20 ms on one machine; the README has the figures).
- Routing: jobs of one key (an experiment) run one at a time, in order, on the
  worker that ran the key's previous job while it is alive; new keys go to the
  live worker with the fewest keys per thread. The warm state (small: the GP's
  hyperparameters) comes back with each outcome and travels with the next job,
  so any worker can take over; states are kept by observation count, so a late
  outcome never replaces the warm state of a later fit.
- Faults: a worker that dies mid-job (the actor call breaks) has the job run
  again on another worker, up to _ATTEMPTS runs; past the job's deadline (+ grace)
  the caller gets JobFailed, which the StrategyPool answers from Sobol. With the
  scheduler gone, jobs fail at once ("unreachable; reconnecting") and a watcher
  reconnects when it returns; both are logged and counted (`lost`, `reconnects`).
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
from ._dask_task import JobRunner, TauoptWorkerSetup, WorkerReport, gp_extra_message, worker_check
from ._executor import JobFailed

__all__ = ["DaskExecutor", "DaskStats", "DaskUnavailable", "check_dask_cluster"]

log = logging.getLogger("tauopt.compute.dask")


class ReconnectNoise(logging.Filter):
    """Drops distributed's "Failed to reconnect to scheduler ... closing client" error:
    it comes from the old client this executor replaces (the watcher reconnects with
    a new one and logs the loss and the reconnection itself), so in a daemon's log it
    read as a failure after the search had resumed. Installed on `distributed.client`
    while a DaskExecutor is open."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Failed to reconnect to scheduler")


_NOISE = ReconnectNoise()

_DEADLINE_GRACE_S = 1.0  # past deadline_s + this, the caller gets a failure without the cluster
_ATTEMPTS = 3  # runs of one job on workers that die under it, before it fails (Dask's allowed-failures)


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
        self._runners: dict[str, tuple[Any, Any]] = {}  # worker address -> (JobRunner actor, its future)
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
        logging.getLogger("distributed.client").addFilter(_NOISE)  # once: addFilter ignores a repeat
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
        self._runners.clear()  # their futures go with the client
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
        assert report.outcome is not None  # an error came back as JobFailed
        self._home[key] = report.worker
        self._keep_warm(key, len(job.request.history), report.outcome.state)
        return report.outcome

    def forget(self, key: str) -> None:
        self._warm.pop(key, None)
        self._home.pop(key, None)
        self._locks.pop(key, None)

    # -- internals -------------------------------------------------------------

    async def _run(self, key: str, job: StrategyJob, wait: float | None) -> WorkerReport:
        n_obs = len(job.request.history)
        warm = self._warm.get(key)
        job = job.with_warm(None if warm is None else warm[1], None if wait is None else wait - _DEADLINE_GRACE_S)
        died: set[str] = set()  # workers lost under this job: not its home again
        with anyio.move_on_after(wait if wait is not None else float("inf")):
            while True:
                client = self._client
                if client is None or not self._connected or client.status != "running":
                    raise JobFailed(f"the Dask scheduler at {self.address} is unreachable; reconnecting")
                try:
                    runner, where = await self._runner_for(key, client, died)
                except Exception as exc:  # no live worker, or the scheduler went away
                    raise JobFailed(f"Dask job failed: {type(exc).__name__}: {exc}"[:500]) from exc
                self.stats.submitted += 1
                try:
                    report: WorkerReport = await runner.run(job, key, n_obs, time.time())
                except Exception as exc:  # the call broke: the worker went away mid-job
                    died.add(where)
                    self._runners.pop(where, None)
                    log.warning("Dask worker %s was lost under a job (%s: %s)", where, type(exc).__name__, exc)
                    if len(died) >= _ATTEMPTS:
                        raise JobFailed(f"Dask job failed: {len(died)} workers died under it") from exc
                    continue
                if report.error is not None:
                    raise JobFailed(f"Dask job failed: {report.error}"[:500])
                return report
        raise JobFailed(f"no answer from the Dask cluster within {wait:.1f} s")

    async def _runner_for(self, key: str, client: Any, avoid: set[str]) -> tuple[Any, str]:
        """The key's home worker's runner, making one if that worker has none yet."""
        home = await self._pick_home(key, client, avoid)
        if home is None:
            raise RuntimeError("no live Dask worker to run the job")
        held = self._runners.get(home)
        if held is None:
            # Placed by the scheduler (a restriction to a worker that just died would
            # wait for it forever); the runner says where it landed, and that is the home.
            future = client.submit(JobRunner, actor=True, workers=[home], allow_other_workers=True, pure=False)
            actor = await future
            home = await actor.where()
            held = self._runners.setdefault(home, (actor, future))
            self._home[key] = home
        return held[0], home

    async def _pick_home(self, key: str, client: Any, avoid: set[str]) -> str | None:
        """The key's last worker while it is alive; else the live worker that is home
        to the fewest keys per thread (experiments spread over the cluster); None
        without workers. The client's worker list is a cache refreshed every few
        seconds: it is asked afresh (one round trip) only when a key needs a new home."""
        home = self._home.get(key)
        if home is not None and home not in avoid:
            if home in self._runners or home in client.scheduler_info().get("workers", {}):
                return home
        alive = {w: n for w, n in (await client.nthreads()).items() if w not in avoid}
        if home in alive:
            return home
        if not alive:
            return None
        load = dict.fromkeys(alive, 0)
        for h in self._home.values():
            if h in load:
                load[h] += 1
        home = min(sorted(alive), key=lambda w: load[w] / max(alive[w], 1))
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
        self._runners.clear()  # actors of the old scheduler's workers
        if old is not None:
            with anyio.move_on_after(2):
                await old.close()
        try:
            self._client = await self._connect()
        except DaskUnavailable:
            return  # try again at the next watch
        try:  # the new scheduler's workers get pinned and warmed up too
            await self._client.register_plugin(TauoptWorkerSetup())
        except Exception as exc:  # noqa: BLE001 - each job pins its worker anyway
            log.warning("could not register the tauopt worker plugin after reconnecting: %s", exc)
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
