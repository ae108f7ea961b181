"""compute: StrategyPool over the LocalExecutor: one torch thread per worker, fairness across experiments,
fallbacks at the pool boundary, and no orphan processes."""

from __future__ import annotations

import math
import multiprocessing
import time

import anyio
import numpy as np
import pytest

pytest.importorskip("gpytorch")

from tauopt.models import Metric, Observation  # noqa: E402
from tauopt.space import Space  # noqa: E402
from tauopt.compute import StrategyPool, thread_report, torch_threads  # noqa: E402
from tauopt.strategies._request import SuggestRequest  # noqa: E402

pytestmark = pytest.mark.anyio

SPACE = Space.parse(
    [{"name": "x1", "type": "double", "bounds": [-5, 10]}, {"name": "x2", "type": "double", "bounds": [0, 15]}]
)


def gp_request(n_obs: int = 12, seed: int = 0) -> SuggestRequest:
    rng = np.random.default_rng(seed)
    history = []
    for i in range(n_obs):
        a = SPACE.from_unit(rng.random(2))
        history.append(Observation(str(i), "e", None, a, math.sin(a["x1"]) + a["x2"] / 15))
    return SuggestRequest(SPACE, Metric("y"), tuple(history), n=1, seed=seed, drawn=n_obs)


async def test_process_pool_runs_torch_on_one_thread_is_fair_and_leaves_no_orphans() -> None:
    async with StrategyPool("process", size=2) as pool:
        pids = pool.executor.pids
        # Two probes held for a moment land on both workers: each runs torch on one thread.
        probes: list[tuple[int, int]] = []

        async def probe(key: str) -> None:
            probes.append(await pool.call(key, torch_threads, 0.5))

        async with anyio.create_task_group() as tg:
            tg.start_soon(probe, "p1")
            tg.start_soon(probe, "p2")
        assert probes == [(1, 1), (1, 1)]
        # and so do numpy's and scipy's BLAS and OpenMP (threadpoolctl's view from inside the worker)
        report = await pool.call("p1", thread_report)
        assert report["torch"] == [1, 1] and report["threadpools"] and {p["threads"] for p in report["threadpools"]} == {1}

        result = await pool.propose("B", "gp", gp_request())
        assert result.strategy_used == "gp" and result.fallback_reason is None
        assert len(result.candidates) == 1 and SPACE.validate(result.candidates[0])

        # Experiment A queues two deliberately slow jobs; B's ask is answered while
        # A's first one runs, and A never holds more than one worker.
        a_done: list[float] = []

        async def slow_a() -> None:
            await pool.call("A", time.sleep, 2.5)
            a_done.append(time.monotonic())

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow_a)
            tg.start_soon(slow_a)
            await anyio.sleep(0.2)
            t0 = time.monotonic()
            b = await pool.propose("B", "gp", gp_request(14))
            answered = time.monotonic()
            assert b.strategy_used == "gp"
            assert answered - t0 < 2.0 and not a_done  # A is still sleeping
        assert a_done[1] - a_done[0] > 2.0  # A's two jobs ran one after the other
    assert multiprocessing.active_children() == []
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            import os

            os.kill(pid, 0)


async def test_thread_pool_pins_torch_for_the_job_and_restores_it_afterwards() -> None:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        async with StrategyPool("thread") as pool:
            intra, _ = await pool.call("probe", torch_threads)
            assert intra == 1
            assert torch.get_num_threads() == 2
            r = await pool.propose("e", "gp", gp_request())
            assert r.strategy_used == "gp" and len(r.candidates) == 1
            again = await pool.propose("e", "gp", gp_request(13))
            assert again.fallback_reason is None
            assert pool.executor._warm.get("e") is not None  # the warm start is kept per experiment
    finally:
        torch.set_num_threads(before)


async def test_inline_strategies_and_auto_before_the_gp_skip_the_workers() -> None:
    async with StrategyPool("thread") as pool:
        r = await pool.propose("e", "auto", gp_request(2))
        assert r.strategy_used == "sobol" and r.fallback_reason is None
        r = await pool.propose("e", "random", gp_request(20))
        assert r.strategy_used == "random"


async def test_a_fit_past_its_deadline_answers_sobol_with_the_reason() -> None:
    async with StrategyPool("thread") as pool:
        r = await pool.propose("e", "gp", gp_request(), deadline_s=0.0)
        assert r.strategy_used == "sobol"
        assert r.fallback_reason is not None and "deadline" in r.fallback_reason
        assert len(r.candidates) == 1


async def test_a_worker_that_raises_is_reported_and_the_pool_goes_on() -> None:
    async with StrategyPool("thread") as pool:
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            await pool.call("e", divmod, 1, 0)
        assert (await pool.propose("e", "gp", gp_request())).strategy_used == "gp"


def _blas_threads() -> set[int]:
    from threadpoolctl import threadpool_info

    return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


async def test_thread_pool_runs_blas_on_one_thread_for_the_job_and_restores_it_afterwards() -> None:
    pytest.importorskip("threadpoolctl")
    import scipy.linalg  # noqa: F401 - scipy's BLAS loaded, as a GP job loads it
    from threadpoolctl import threadpool_limits

    with threadpool_limits(2, user_api="blas"):
        async with StrategyPool("thread") as pool:
            assert await pool.call("probe", _blas_threads) == {1}
            assert _blas_threads() == {2}
