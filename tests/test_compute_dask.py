"""GP work on a real Dask cluster: a `dask scheduler` and `dask worker`s started
here on 127.0.0.1 as separate processes. Fits are proven to run on the workers
from the worker side (`client.run(fits_run)`), a worker is killed mid-job, the
scheduler is stopped and restarted under load, a worker without gpytorch is
refused naming the extra. Ordering is proven with a file gate, not with sleeps.

A worker's start costs seconds of CPU (torch and gpytorch imported and warmed up
by the tauopt plugin), so one cluster is shared by the module (`shared`): the
tests that use it say how many workers they need (`ensure`), in the order that
uses each worker longest (the affinity test, then the kill test on the same two
workers, then the restart test on the survivor). Each still runs alone."""

from __future__ import annotations

import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import anyio
import pytest

from tauopt import Engine
from tauopt.compute import DaskExecutor, DaskUnavailable, Executor, JobFailed, StrategyPool
from tauopt.compute._dask_task import fits_run, torch_threads_here
from prometheus_client import generate_latest

from tauopt.models import Metric
from tauopt.space import Space
from tauopt.transport._metrics import Metrics, _engine_snapshot
from tauopt.strategies import Strategy, StrategyJob, SuggestRequest, get, register, unregister
from tauopt.schema import parse_metric

pytestmark = pytest.mark.anyio

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DASK = str(Path(sys.executable).with_name("dask"))
XY = [{"name": "x", "type": "double", "bounds": (0.0, 1.0)}, {"name": "y", "type": "double", "bounds": (0.0, 1.0)}]
M = {"name": "loss", "objective": "minimize"}
FIT_DEADLINE_S = 120.0
GP_EARLY = {"initial_points": 2}  # the GP takes over after 2 Sobol points (default max(5, 2d))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """Scheduler and worker processes on 127.0.0.1, all killed at the end."""

    def __init__(self, gate: Path) -> None:
        self.port = _free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.gate = gate
        self.scheduler: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []

    def start_scheduler(self, wait: bool = True) -> None:
        cmd = [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(self.port), "--no-dashboard"]
        # The scheduler unpickles task graphs too: it needs the same importable modules.
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(TESTS)]))
        self.scheduler = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if wait:
            self.wait_scheduler()

    def wait_scheduler(self) -> None:
        for _ in range(600):  # bounded: 60 s
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.1)
        raise RuntimeError("the dask scheduler did not listen within 60 s")

    def start_worker(self, extra_path: Path | None = None) -> subprocess.Popen[bytes]:
        """A worker process, not waited for: it imports and warms torch up first (the
        preload), then joins the scheduler, waiting for it if it is not up (yet)."""
        path = [str(p) for p in (extra_path, ROOT, TESTS) if p is not None]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), TAUOPT_TEST_GATE=str(self.gate))
        cmd = [DASK, "worker", self.address, "--nthreads", "1", "--no-nanny", "--no-dashboard", "--host", "127.0.0.1"]
        cmd += ["--preload", "tauopt.compute._dask_task"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.workers.append(proc)
        return proc

    def ensure(self, workers: int) -> list[subprocess.Popen[bytes]]:
        """A live scheduler and at least `workers` live worker processes (started
        here when missing, without waiting for them to join); the live workers."""
        started = self.scheduler is None or self.scheduler.poll() is not None
        if started:
            self.start_scheduler(wait=False)
        self.workers = [w for w in self.workers if w.poll() is None]
        while len(self.workers) < workers:
            self.start_worker()  # its imports overlap the scheduler's start
        if started:
            self.wait_scheduler()
        return list(self.workers)

    def stop_scheduler(self) -> None:
        assert self.scheduler is not None
        self.scheduler.kill()
        self.scheduler.wait(30)

    def close(self) -> None:
        for p in [*self.workers, self.scheduler]:
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(30)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("dask-gate"))
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def gated() -> Iterator[str]:
    from dask_gated_job import gated_run

    register(Strategy("gated", get("sobol").propose, pooled=True, run=gated_run))
    try:
        yield "gated"
    finally:
        unregister("gated")


async def _wait_until(predicate, what: str, limit_s: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    with anyio.fail_after(limit_s):
        while not predicate():
            await anyio.sleep(0.05)


async def _rounds(engine: Engine, exp_id: str, n: int) -> list[dict]:
    seen = []
    for _ in range(n):
        s = await engine.suggest(exp_id)
        seen.append(s.assignments)
        await engine.observe(exp_id, s.id, value=(s.assignments["x"] - 0.3) ** 2 + s.assignments["y"])
    return seen


async def test_gp_fits_run_on_the_dask_workers_one_experiment_per_worker(shared: Cluster) -> None:
    shared.ensure(2)
    executor = DaskExecutor(shared.address)
    # A generous fit deadline: on a loaded test machine the first fits are slow, and
    # this test is about where fits run (a fallback here would prove nothing).
    async with Engine(pool=StrategyPool(executor), fit_deadline_s=FIT_DEADLINE_S) as engine:
        await executor.client.wait_for_workers(2, timeout=60)
        a = await engine.create_experiment("a", XY, M, strategy="gp", parallel_bandwidth=1, strategy_options=GP_EARLY)
        b = await engine.create_experiment("b", XY, M, strategy="gp", parallel_bandwidth=1, strategy_options=GP_EARLY)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_rounds, engine, a.id, 4)
            tg.start_soon(_rounds, engine, b.id, 4)
        landed = engine.pool.stats.jobs
        ran_all: dict[str, list[tuple[str, int]]] = await executor.client.run(fits_run)
        # The shared workers also ran other tests' jobs: these experiments' only.
        ran = {w: [(k, n) for k, n in fits if k in (a.id, b.id)] for w, fits in ran_all.items()}
        threads = set((await executor.client.run(torch_threads_here)).values())
        prefixes = await executor.client.run_on_scheduler(_task_prefixes)
        from dask_gated_job import failing_run

        failing = StrategyJob(failing_run, SuggestRequest(Space.parse(XY), parse_metric(M)), None, 20.0)
        with pytest.raises(JobFailed, match="ZeroDivisionError: model blew up"):
            await executor.submit("failing", failing)
    by_exp = {exp: {w for w, fits in ran.items() for k, _ in fits if k == exp} for exp in (a.id, b.id)}
    # Every job that landed ran on a worker, as the workers themselves report (the
    # rest were still computing ahead when the workers were asked).
    assert landed <= sum(len(f) for f in ran.values()) <= executor.stats.submitted
    # Affinity: each experiment stayed on one worker, and the two were spread.
    assert len(by_exp[a.id]) == 1 and len(by_exp[b.id]) == 1 and by_exp[a.id] != by_exp[b.id]
    # Fits with observations (not the empty-history fallback) ran there, as GP.
    assert any(n > 0 for fits in ran.values() for _, n in fits)
    assert threads == {(1, 1)}
    # Each job was one call to a worker's JobRunner actor, not a Dask task: the only
    # tasks the scheduler ever saw are the runners, one per worker (live while the
    # executor was), none per job.
    assert set(prefixes) == {"JobRunner"}
    assert prefixes["JobRunner"] == 2 < executor.stats.submitted


def _task_prefixes(dask_scheduler) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """On the scheduler: every task name prefix it has seen, with its tasks held in memory now."""
    return {name: p.state_counts["memory"] for name, p in dask_scheduler.task_prefixes.items()}


async def test_a_worker_killed_mid_job_has_it_rerun_elsewhere_and_every_ask_answered(
    shared: Cluster, gated: str
) -> None:
    cluster = shared
    procs = {p.pid: p for p in cluster.ensure(2)}
    executor = DaskExecutor(cluster.address)
    async with Engine(pool=StrategyPool(executor)) as engine:
        await executor.client.wait_for_workers(2, timeout=60)
        exp = await engine.create_experiment("kill", XY, M, strategy=gated, parallel_bandwidth=4)
        got = []

        async def ask() -> None:
            got.append(await engine.suggest(exp.id))

        with anyio.fail_after(90):
            async with anyio.create_task_group() as tg:
                for _ in range(4):
                    tg.start_soon(ask)
                await _wait_until(lambda: any(cluster.gate.glob("started-*")), "a job started")
                first = next(cluster.gate.glob("started-*")).name
                victim = int(first.split("-")[1])
                procs[victim].send_signal(signal.SIGKILL)  # mid-job: it is waiting at the gate
                survivor_started = lambda: any(f.name.split("-")[1] != str(victim) for f in cluster.gate.glob("started-*"))  # noqa: E731
                await _wait_until(survivor_started, "the job was rerun on the other worker")
                (cluster.gate / "go").write_text("")
        listed = await engine.suggestions(exp.id)
    assert len(got) == 4 and len({s.id for s in got}) == 4
    assert len({tuple(sorted(s.assignments.items())) for s in got}) == 4  # no point handed out twice
    assert {s.id for s in listed} == {s.id for s in got}  # none lost: all four are open
    assert engine.pool.stats.fallbacks == 0  # the rerun answered, no Sobol needed


async def test_scheduler_stopped_and_restarted_asks_keep_answered_then_fits_resume(
    shared: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tauopt.compute.dask")
    cluster = shared
    cluster.ensure(1)
    executor = DaskExecutor(cluster.address, connect_timeout_s=2.0, watch_every_s=0.1)
    async with Engine(pool=StrategyPool(executor), fit_deadline_s=FIT_DEADLINE_S) as engine:
        await executor.client.wait_for_workers(1, timeout=60)
        exp = await engine.create_experiment("restart", XY, M, strategy="gp", parallel_bandwidth=1, strategy_options=GP_EARLY)
        await _rounds(engine, exp.id, 3)
        jobs_before = engine.pool.stats.jobs
        cluster.stop_scheduler()
        cluster.start_worker()  # for the scheduler to come: it warms up meanwhile, then joins
        await _wait_until(lambda: executor.stats.lost == 1, "the loss was noticed")
        fallbacks = engine.pool.stats.fallbacks
        await _rounds(engine, exp.id, 3)  # answered while the scheduler is gone
        assert engine.pool.stats.fallbacks >= fallbacks + 1
        cluster.start_scheduler()
        await _wait_until(lambda: executor.stats.reconnects == 1, "reconnected")
        await executor.client.wait_for_workers(1, timeout=60)
        submitted = executor.stats.submitted
        await _rounds(engine, exp.id, 3)
        ran = await executor.client.run(fits_run)
        metrics = Metrics()
        metrics._snapshot = await _engine_snapshot(engine, 5)  # what GET /metrics renders
        scrape = generate_latest(metrics.registry).decode()
    assert "tauopt_dask_scheduler_lost_total 1.0" in scrape and "tauopt_dask_reconnects_total 1.0" in scrape
    assert 'tauopt_gp_fallbacks_total{reason="cluster_unreachable"}' in scrape
    assert jobs_before >= 1 and executor.stats.submitted > submitted
    assert sum(len(f) for f in ran.values()) >= 1  # fits ran on the new cluster's worker
    text = caplog.text
    assert "lost the Dask scheduler" in text and "reconnected to the Dask scheduler" in text
    assert "Failed to reconnect" not in text  # the replaced client's give-up is not an error of the daemon's
    assert f"tauopt_gp_fits_total {float(engine.pool.stats.fits)}" in scrape  # the fallbacks are not fits


def test_the_replaced_clients_reconnect_failure_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    from tauopt.compute._dask import ReconnectNoise

    noisy, quiet = logging.getLogger("distributed.client"), ReconnectNoise()
    noisy.addFilter(quiet)
    try:
        with caplog.at_level(logging.ERROR, logger="distributed.client"):
            noisy.error("Failed to reconnect to scheduler after %.2f seconds, closing client", 30.0)
            noisy.error("another error")
    finally:
        noisy.removeFilter(quiet)
    assert "Failed to reconnect" not in caplog.text and "another error" in caplog.text


async def test_a_worker_without_gpytorch_is_refused_at_start_naming_the_extra(cluster: Cluster) -> None:
    cluster.start_scheduler()
    cluster.start_worker(extra_path=TESTS / "shims" / "hide_gpytorch")
    executor = DaskExecutor(cluster.address, min_workers=1, connect_timeout_s=60.0)
    with pytest.raises(DaskUnavailable) as info:
        async with StrategyPool(executor):
            pass
    message = str(info.value)
    assert "gpytorch" in message and "pip install 'tauopt[gp]'" in message and "torch," not in message


async def test_an_unreachable_scheduler_is_refused_at_start() -> None:
    executor = DaskExecutor(f"tcp://127.0.0.1:{_free_port()}", connect_timeout_s=1.0)
    with pytest.raises(DaskUnavailable, match="cannot reach the Dask scheduler at tcp://127.0.0.1:"):
        async with StrategyPool(executor):
            pass


def test_the_dask_executor_implements_the_interface() -> None:
    assert isinstance(DaskExecutor("tcp://127.0.0.1:1"), Executor)


def test_a_job_is_plain_data_with_no_engine_or_store_objects() -> None:
    request = SuggestRequest(Space.parse(XY), parse_metric(M), (), ({"x": 0.5, "y": 0.5},), 2, 7, 3)
    blob = pickle.dumps(StrategyJob(get("gp").job_runner, request, None, 5.0))
    assert b"tauopt.engine" not in blob and b"tauopt.store" not in blob and b"anyio" not in blob


def test_a_late_outcome_never_replaces_the_warm_state_of_a_later_fit() -> None:
    executor = DaskExecutor("tcp://127.0.0.1:1")
    executor._keep_warm("e", 10, "state@10")
    executor._keep_warm("e", 7, "state@7")  # the late result of an older fit
    executor._keep_warm("e", 10, "state@10-again")  # a repeated one of the same count
    assert executor._warm["e"] == (10, "state@10-again")


async def test_engine_pool_dask_starts_a_local_cluster_whose_workers_run_the_fits() -> None:
    async with Engine(pool="dask", pool_size=1, fit_deadline_s=FIT_DEADLINE_S) as engine:
        executor = engine.pool.executor
        assert isinstance(executor, DaskExecutor) and executor.address.startswith("tcp://127.0.0.1:")
        exp = await engine.create_experiment("local", XY, M, strategy="gp", parallel_bandwidth=1, strategy_options=GP_EARLY)
        await _rounds(engine, exp.id, 3)
        landed = engine.pool.stats.jobs
        ran = await executor.client.run(fits_run)
    assert len(ran) == 1 and landed >= 1
    assert landed <= len(next(iter(ran.values())))
    assert all(k == exp.id for k, _ in next(iter(ran.values())))


def test_serve_exits_with_one_line_when_the_scheduler_is_unreachable(tmp_path: Path) -> None:
    address = f"tcp://127.0.0.1:{_free_port()}"
    db = tmp_path / "t.db"
    cmd = [sys.executable, "-m", "tauopt.cli", "serve", "--db", str(db), "--port", "0", "--pool", "dask"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    pipes = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    # All at once: each pays the interpreter's start, the first also its 1 s connect timeout.
    with subprocess.Popen([*cmd, "--dask-scheduler", address, "--dask-connect-timeout-s", "1"], **pipes) as unreachable, \
            subprocess.Popen([*cmd[:-2], "--dask-scheduler", address], **pipes) as wrong, \
            subprocess.Popen([*cmd, "--dask-scheduler", address, "--dask-connect-timeout-s", "0"], **pipes) as zero:
        wrong_err = wrong.communicate(timeout=60)[1]
        zero_err = zero.communicate(timeout=60)[1]
        done_err = unreachable.communicate(timeout=120)[1]
    assert unreachable.returncode == 1
    assert done_err.startswith(f"tauopt: cannot reach the Dask scheduler at {address} within 1 s")
    assert "Traceback" not in done_err and not db.exists()  # refused before anything was written
    assert wrong.returncode == 2 and "--dask-scheduler goes with --pool dask" in wrong_err
    assert zero.returncode == 2 and "--dask-connect-timeout-s must be positive" in zero_err


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_on_trio_the_dask_pool_is_refused_naming_asyncio() -> None:
    with pytest.raises(RuntimeError, match="needs the asyncio event loop"):
        async with DaskExecutor("tcp://127.0.0.1:1"):
            pass


def test_importing_the_compute_room_loads_no_dask() -> None:
    code = "import sys, tauopt, tauopt.compute, tauopt.engine; print('distributed' in sys.modules)"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr
