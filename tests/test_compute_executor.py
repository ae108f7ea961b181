"""The compute room's Executor contract, on the local executor: a job gives an
outcome or JobFailed; a worker process killed mid-job fails its job (the engine
then answers from Sobol), never a hung ask; the worker is replaced."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio
import numpy as np
import pytest

from tauopt import Engine
from tauopt.compute import Executor, JobFailed, LocalExecutor, StrategyPool
from tauopt.models import Metric, Value
from tauopt.space import Space
from tauopt.strategies import Strategy, StrategyJob, SuggestRequest, get, register, unregister

pytestmark = pytest.mark.anyio

X = [{"name": "x", "type": "double", "bounds": (0.0, 1.0)}]
M = {"name": "loss", "objective": "minimize"}
_MARK = "TAUOPT_TEST_STARTED_MARK"


def stuck_propose(request: SuggestRequest, rng: np.random.Generator) -> list[dict[str, Value]]:
    """Says it started (a file), then never returns on its own."""
    Path(os.environ[_MARK]).write_text(str(os.getpid()))
    import time

    time.sleep(3600)
    return []


def failing_propose(request: SuggestRequest, rng: np.random.Generator) -> list[dict[str, Value]]:
    raise ZeroDivisionError("model blew up")


@pytest.fixture
def stuck(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    mark = tmp_path / "started"
    monkeypatch.setenv(_MARK, str(mark))  # spawned workers inherit it
    register(Strategy("stuck", stuck_propose, pooled=True))
    register(Strategy("failing", failing_propose, pooled=True))
    yield mark
    unregister("stuck")
    unregister("failing")


async def _started(mark: Path) -> int:
    while not mark.exists() or not mark.read_text():
        await anyio.sleep(0.05)
    return int(mark.read_text())


def test_the_local_executor_implements_the_interface() -> None:
    assert isinstance(LocalExecutor("thread"), Executor)


async def test_a_job_that_raises_is_a_job_failed_and_the_executor_goes_on(stuck: Path) -> None:
    request = SuggestRequest(Space.parse(X), Metric("loss"))
    async with LocalExecutor("thread") as executor:
        with pytest.raises(JobFailed, match="ZeroDivisionError: model blew up"):
            await executor.submit("e", StrategyJob(get("failing").job_runner, request))
        outcome = await executor.submit("e", StrategyJob(get("sobol").job_runner, request))
    assert outcome.strategy_used == "sobol" and len(outcome.candidates) == 1


async def test_a_failed_job_answered_by_sobol_counts_as_a_fallback_not_a_fit(stuck: Path) -> None:
    request = SuggestRequest(Space.parse(X), Metric("loss"))
    async with StrategyPool(LocalExecutor("thread")) as pool:
        outcome = await pool.propose("e", "failing", request)
    assert outcome.strategy_used == "sobol" and outcome.fallback_reason is not None
    assert (pool.stats.jobs, pool.stats.fits, pool.stats.fallbacks) == (1, 0, 1)  # what tauopt_gp_fits_total reads


async def test_a_killed_worker_process_fails_its_job_and_the_ask_gets_sobol(
    stuck: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The replacement process is held until the ask has its answer: on a busy machine a
    # spawn + torch import outlasts the job's deadline, and the caller must not wait for it.
    import threading

    from tauopt.compute import _workers

    answered = threading.Event()
    real_restart = _workers.ProcessWorker.restart

    def held_restart(self: _workers.ProcessWorker) -> None:
        assert answered.wait(60), "the ask was not answered before the worker's restart"
        real_restart(self)

    monkeypatch.setattr(_workers.ProcessWorker, "restart", held_restart)
    with anyio.fail_after(120):  # a bound against a hang, not a speed claim
        async with Engine(pool=StrategyPool("process", size=1)) as engine:
            exp = await engine.create_experiment("stuck", X, M, strategy="stuck", parallel_bandwidth=1)
            got: dict[str, object] = {}

            async def ask() -> None:
                got["s"] = await engine.suggest(exp.id)
                answered.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(ask)
                pid = await _started(stuck)
                assert engine.pool.executor.pids == [pid]
                os.kill(pid, signal.SIGKILL)
            stats = await engine.inspect(exp.id)
            # the caller got its failure first; the worker is replaced right after
            while engine.pool.executor.pids == [pid]:
                await anyio.sleep(0.05)
            replacement = engine.pool.executor.pids
    assert "died" in (stats["last_fallback_reason"] or "") and stats["fallbacks"] == 1
    s = got["s"]
    assert 0.0 <= s.assignments["x"] <= 1.0  # answered, from the experiment's Sobol sequence
    assert len(replacement) == 1 and replacement != [pid]  # the dead worker was replaced
