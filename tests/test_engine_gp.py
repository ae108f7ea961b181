"""Pooled strategies never block an experiment's mailbox: asks are parked and
answered in arrival order when the proposal lands, other experiments and other
messages are served meanwhile, and a failing pool falls back to Sobol."""

from __future__ import annotations

import anyio
import numpy as np
import pytest

from tauopt import Engine
from tauopt.strategies import propose
from tauopt.strategies import StrategyOutcome as ProposeResult

pytestmark = pytest.mark.anyio

XY = [{"name": "x", "type": "double", "bounds": (0.0, 1.0)}, {"name": "y", "type": "double", "bounds": (0.0, 1.0)}]
M = {"name": "loss", "objective": "minimize"}


class GatedPool:
    """A pool boundary whose GP jobs (Sobol underneath) wait for the test to open
    the gate: what the engine answers while a job is held cannot have waited on it."""

    def __init__(self, fail: bool = False, free_jobs: int = 0, kind: str = "sobol") -> None:
        self.gate = anyio.Event()
        self.fail, self.free_jobs, self.jobs, self.finished = fail, free_jobs, 0, 0
        self.kind = kind  # what the "GP" answers with underneath

    async def propose(self, key, strategy, request, deadline_s=None):
        self.jobs += 1
        if self.jobs > self.free_jobs:
            await self.gate.wait()
        self.finished += 1
        if self.fail:
            raise RuntimeError("cholesky failed")
        cands = propose(self.kind, request, np.random.default_rng(self.jobs))
        return ProposeResult(tuple(cands), "gp", None, 0.0)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return None


async def gp_experiment(engine: Engine, name: str, bandwidth: int):
    """A `gp` experiment past its initial design (one point, observed unsolicited,
    so no suggestion is listed): its next asks go to the pool."""
    exp = await engine.create_experiment(
        name, XY, M, strategy="gp", parallel_bandwidth=bandwidth, strategy_options={"initial_points": 1}
    )
    await engine.observe(exp.id, assignments={"x": 0.5, "y": 0.5}, value=1.0)
    return exp


async def test_an_ask_on_b_is_answered_while_as_fit_runs():
    pool = GatedPool()
    async with Engine(pool=pool) as engine:
        a = await gp_experiment(engine, "slow-gp", 4)
        b = await engine.create_experiment("random", XY, M, strategy="random", parallel_bandwidth=4)
        got: dict[str, object] = {}

        async def ask_a():
            got["a"] = await engine.suggest(a.id, tag="first")

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask_a)
                while pool.jobs == 0:  # A's fit is now running, held at the gate
                    await anyio.sleep(0.01)
                got["b"] = await engine.suggest(b.id)
                got["a-listing"] = await engine.suggestions(a.id)  # A's own mailbox keeps serving
                assert "a" not in got and pool.finished == 0
                pool.gate.set()
    assert got["a"].tag == "first" and got["a-listing"] == []


async def test_parked_asks_are_answered_in_arrival_order_with_distinct_points():
    pool = GatedPool()
    async with Engine(pool=pool) as engine:
        exp = await gp_experiment(engine, "gp", 8)
        order: list[str] = []

        async def ask(tag: str):
            s = await engine.suggest(exp.id, tag=tag)
            order.append(s.tag)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for i in range(8):
                    tg.start_soon(ask, f"w{i}")
                    await anyio.sleep(0.01)
                assert order == []  # all parked behind the held fit
                pool.gate.set()
        open_ = await engine.suggestions(exp.id, state="open")
    assert order == [f"w{i}" for i in range(8)]
    assert [s.tag for s in open_] == order  # ids handed out in arrival order
    assert len({tuple(sorted(s.assignments.items())) for s in open_}) == 8


async def test_a_failing_pool_falls_back_to_sobol_and_records_why():
    pool = GatedPool(fail=True)
    pool.gate.set()
    async with Engine(pool=pool) as engine:
        exp = await gp_experiment(engine, "gp", 3)
        got = [await engine.suggest(exp.id) for _ in range(3)]
        stats = await engine.inspect(exp.id)
    assert len({tuple(sorted(s.assignments.items())) for s in got}) == 3
    assert stats["fallbacks"] >= 1 and "cholesky failed" in stats["last_fallback_reason"]


async def test_computed_ahead_points_answer_asks_without_waiting_for_a_fit():
    pool = GatedPool(free_jobs=1)  # the first fit runs; every later one is held
    async with Engine(pool=pool) as engine:
        exp = await gp_experiment(engine, "gp", 1)
        with anyio.fail_after(30):
            s = await engine.suggest(exp.id)  # waits for the first fit, which also computes ahead
            await anyio.sleep(0.05)  # an evaluation longer than the fit (0 s ones wait for the round)
            await engine.observe(exp.id, suggestion_id=s.id, value=1.0)
            s2 = await engine.suggest(exp.id)  # answered from the buffer while later fits are held
        assert pool.finished == 1
        pool.gate.set()
    assert s2.assignments != s.assignments


async def test_real_gp_through_the_thread_pool_gives_distinct_points():
    async with Engine(pool="thread") as engine:
        exp = await engine.create_experiment(
            "gp", XY, M, strategy="auto", parallel_bandwidth=8, strategy_options={"initial_points": 5, "seed": 1}
        )
        for _ in range(6):
            s = await engine.suggest(exp.id)
            x, y = s.assignments["x"], s.assignments["y"]
            await engine.observe(exp.id, suggestion_id=s.id, value=(x - 0.3) ** 2 + (y - 0.7) ** 2)
        with anyio.fail_after(60):
            batch = [await engine.suggest(exp.id, tag=f"w{i}") for i in range(8)]
        stats = await engine.inspect(exp.id)
    assert len({tuple(sorted(s.assignments.items())) for s in batch}) == 8
    assert stats["proposals"] >= 1


async def _sequence(engine: Engine, strategy: str, options: dict, n: int) -> list[tuple[float, float]]:
    exp = await engine.create_experiment(strategy, XY, M, strategy=strategy, strategy_options=options)
    out = []
    for _ in range(n):
        s = await engine.suggest(exp.id)
        x, y = s.assignments["x"], s.assignments["y"]
        out.append((x, y))
        await engine.observe(exp.id, suggestion_id=s.id, value=(x - 0.3) ** 2 + (y - 0.7) ** 2)
    return out


async def test_gp_starts_with_the_sobol_design_of_initial_points():
    async with Engine(pool="thread") as engine:
        with anyio.fail_after(120):
            sobol = await _sequence(engine, "sobol", {"seed": 7}, 6)
            three = await _sequence(engine, "gp", {"seed": 7, "initial_points": 3}, 6)
            five = await _sequence(engine, "gp", {"seed": 7, "initial_points": 5}, 6)
    assert three[:3] == sobol[:3] and five[:5] == sobol[:5]  # the design, as under auto
    assert three != five  # initial_points is honoured: the GP takes over at 4 vs 6
    corners = {0.0, 1.0}
    assert not any(x in corners and y in corners for x, y in five[:5])


async def _gp_asks(engine: Engine, n: int) -> None:
    exp = await engine.create_experiment("gp", XY, M, strategy="gp", strategy_options={"initial_points": 2, "seed": 3})
    with anyio.fail_after(120):
        for i in range(n):
            s = await engine.suggest(exp.id)
            await engine.observe(exp.id, suggestion_id=s.id, value=float(i))


async def test_gp_pins_torch_to_one_thread_without_a_pool_and_restores_it(monkeypatch):
    import torch

    from tauopt.strategies import gp

    seen: list[int] = []
    real = gp.propose_gp

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(gp, "propose_gp", spy)
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        async with Engine(pool=None) as engine:
            await _gp_asks(engine, 4)
        after = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    assert seen and set(seen) == {1}
    assert after == 3


@pytest.mark.parametrize("pool", [None, "thread"])
async def test_the_initial_design_is_not_logged_as_a_gp_fallback(pool, caplog):
    async with Engine(pool=pool) as engine:
        await _gp_asks(engine, 4)
    assert not [r for r in caplog.records if "fell back" in r.getMessage()]


@pytest.mark.parametrize("pool", [None, "thread"])
async def test_a_real_gp_failure_is_still_logged_with_its_reason(pool, caplog, monkeypatch):
    from tauopt.strategies import gp

    def broken(*args, **kwargs):
        raise RuntimeError("cholesky exploded")

    monkeypatch.setattr(gp, "_propose", broken)
    async with Engine(pool=pool) as engine:
        await _gp_asks(engine, 4)
    warned = [r.getMessage() for r in caplog.records if "GP fell back to Sobol" in r.getMessage()]
    assert warned and all("RuntimeError: cholesky exploded" in m for m in warned)


async def test_inspect_counts_points_served_stale_and_from_fallbacks():
    pool = GatedPool(free_jobs=1)  # the first fit runs; every later one is held
    async with Engine(pool=pool) as engine:
        exp = await gp_experiment(engine, "gp", 1)
        with anyio.fail_after(30):
            s = await engine.suggest(exp.id)  # fresh from the first fit
            fresh = await engine.inspect(exp.id)
            await engine.observe(exp.id, suggestion_id=s.id, value=1.0)
            await engine.suggest(exp.id)  # computed before that observation: stale
            stale = await engine.inspect(exp.id)
        pool.gate.set()
    assert (fresh["served_pooled"], fresh["served_stale"], fresh["served_fallback"]) == (1, 0, 0)
    assert (stale["served_pooled"], stale["served_stale"], stale["served_fallback"]) == (2, 1, 0)


async def test_inspect_counts_every_point_a_failing_pool_answered_with_sobol():
    pool = GatedPool(fail=True)
    pool.gate.set()
    async with Engine(pool=pool) as engine:
        exp = await gp_experiment(engine, "gp", 3)
        for _ in range(3):
            await engine.suggest(exp.id)
        stats = await engine.inspect(exp.id)
    assert stats["served_pooled"] == 3 and stats["served_fallback"] == 3


@pytest.mark.parametrize("park", [False, True])
async def test_asks_a_landing_job_had_no_point_for_wait_for_the_next_job_when_parking(monkeypatch, park):
    """One point computed ahead (MAX_AHEAD = 1): the held job was sized for the
    first ask plus one, and three more asks park behind it. When it lands, two
    asks take its points; the other two take Sobol points (PARK_LEFTOVERS off,
    the engine's answer before) or wait for the next job, sized for them, and
    get the strategy's points (on)."""
    from tauopt.engine import _ahead

    monkeypatch.setattr(_ahead, "MAX_AHEAD", 1)
    monkeypatch.setattr(_ahead, "PARK_LEFTOVERS", park)
    pool = GatedPool(kind="random")  # each job's points new (the real GP never repeats a used one)
    async with Engine(pool=pool) as engine:
        exp = await gp_experiment(engine, "gp", 4)
        got = []

        async def ask(tag: str):
            got.append(await engine.suggest(exp.id, tag=tag))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for i in range(4):
                    tg.start_soon(ask, f"w{i}")
                    await anyio.sleep(0.01)
                assert got == [] and pool.jobs == 1
                pool.gate.set()
        stats = await engine.inspect(exp.id)
    assert sorted(s.tag for s in got) == ["w0", "w1", "w2", "w3"]
    assert len({tuple(sorted(s.assignments.items())) for s in got}) == 4
    assert stats["served_pooled"] == 4
    assert stats["served_fallback"] == (0 if park else 2)
    assert pool.jobs == 2  # parked: the second job answered the two; not parked: it refilled the one ahead


async def test_the_observation_budget_sizes_the_design_and_reaches_the_strategy(monkeypatch):
    """max(5, 2d) = 5 Sobol points without a budget; with the design at a third of
    the budget, a budget of 10 leaves 3 (d + 1), and the pool's request carries the budget."""
    from tauopt.strategies import _registry

    monkeypatch.setattr(_registry, "DESIGN_SHARE", 3)
    pool = GatedPool(free_jobs=100)
    seen: list[object] = []
    inner = pool.propose

    async def propose_seeing(key, strategy, request, deadline_s=None):
        seen.append(request.budget)
        return await inner(key, strategy, request, deadline_s)

    pool.propose = propose_seeing  # type: ignore[method-assign]
    async with Engine(pool=pool) as engine:
        with anyio.fail_after(30):
            for budget, design in ((None, 5), (10, 3)):
                exp = await engine.create_experiment(f"b{budget}", XY, M, strategy="gp", observation_budget=budget)
                jobs = pool.jobs
                for _ in range(design):
                    s = await engine.suggest(exp.id)
                    await engine.observe(exp.id, suggestion_id=s.id, value=1.0)
                assert pool.jobs == jobs  # the design is Sobol, asked inline
                await engine.suggest(exp.id)
                assert pool.jobs > jobs and seen[-1] == budget


class SlowPool(GatedPool):
    """Every job takes `seconds` (a fit), then answers with random points."""

    def __init__(self, seconds: float) -> None:
        super().__init__(kind="random")
        self.gate.set()
        self.seconds = seconds

    async def propose(self, key, strategy, request, deadline_s=None):
        await anyio.sleep(self.seconds)
        return await super().propose(key, strategy, request, deadline_s)


async def _workers(engine: Engine, exp_id: str, workers: int, asks: int, holder: bool = False) -> None:
    """`workers` tasks ask and observe at once (0 s evaluations), `asks` in all; with
    `holder`, one more ask is taken first and never observed (a worker that died)."""
    left = [asks]
    if holder:
        await engine.suggest(exp_id, tag="holder")

    async def worker(i: int) -> None:
        while left[0] > 0:
            left[0] -= 1
            s = await engine.suggest(exp_id, tag=f"w{i}")
            await engine.observe(exp_id, suggestion_id=s.id, value=s.assignments["x"])

    async with anyio.create_task_group() as tg:
        for i in range(workers):
            tg.start_soon(worker, i)


async def test_with_evaluations_short_next_to_a_fit_each_job_waits_for_the_rounds_observations():
    """0 s evaluations and 0.4 s jobs: points computed ahead would land after the
    observations of the points out, a round behind them; each job waits for those
    observations instead, so the served points are computed on every observation.
    (Jobs of 0.4 s, not less: evaluations count as short below a quarter of a job, and
    on a loaded machine an ask-to-observe of 0 s work can take tens of milliseconds.)"""
    async with Engine(pool=SlowPool(0.4)) as engine:
        exp = await gp_experiment(engine, "gp", 4)
        with anyio.fail_after(30):
            await _workers(engine, exp.id, 4, 24)
        stats = await engine.inspect(exp.id)
    assert stats["served_pooled"] >= 20
    # the first round is computed before any time is measured; after it, none is stale
    assert stats["served_stale"] <= 4, stats
    assert stats["served_fallback"] <= 4, stats


async def test_a_suggestion_never_observed_delays_the_round_only_by_a_bounded_wait():
    async with Engine(pool=SlowPool(0.05)) as engine:
        exp = await gp_experiment(engine, "gp", 4)
        with anyio.fail_after(30):
            await _workers(engine, exp.id, 3, 18, holder=True)
        open_ = await engine.suggestions(exp.id, state="open")
    assert [s.tag for s in open_] == ["holder"]
