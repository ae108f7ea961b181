"""The strategy registry: one registration adds a strategy the engine accepts,
places (inline or pooled) and runs, without touching engine code."""

from __future__ import annotations

import numpy as np
import pytest

from tauopt import ApiError, Engine
from tauopt.compute import StrategyPool
from tauopt.models import Metric, Value
from tauopt.space import Space
from tauopt.strategies import Importance, Strategy, SuggestRequest, get, names, register, unregister

pytestmark = pytest.mark.anyio

X = [{"name": "x", "type": "double", "bounds": (0.0, 1.0)}]
M = {"name": "loss", "objective": "minimize"}


def toy_propose(request: SuggestRequest, rng: np.random.Generator) -> list[dict[str, Value]]:
    """Points on a 1/1000 ladder, continuing after everything seen: recognizably the toy's."""
    start = len(request.history) + len(request.pending)
    return [request.space.from_unit([(start + i + 0.5) / 1000]) for i in range(request.n)]


@pytest.fixture
def toy():  # type: ignore[no-untyped-def]
    register(Strategy("toy", toy_propose, pooled=True))
    yield
    unregister("toy")


def _on_ladder(x: float) -> bool:
    return abs(x * 1000 - 0.5 - round(x * 1000 - 0.5)) < 1e-9


def test_builtin_entries_declare_placement_and_needs() -> None:
    assert names() == ("auto", "random", "sobol", "grid", "gp")
    assert [n for n in names()[1:] if get(n).pooled] == ["gp"]
    assert not get("sobol").reads_history and not get("random").reads_history and get("grid").reads_history
    with pytest.raises(ValueError, match="unknown strategy 'nope'"):
        get("nope")


async def test_an_unregistered_name_is_refused_with_the_registered_ones() -> None:
    async with Engine() as engine:
        with pytest.raises(ApiError) as err:
            await engine.create_experiment("e", X, M, strategy="toy")
    assert err.value.error_type == "invalid_request" and "'gp'" in err.value.message


async def test_a_toy_pooled_strategy_runs_through_the_engine_and_the_pool(toy) -> None:  # type: ignore[no-untyped-def]
    async with Engine(pool="thread") as engine:
        exp = await engine.create_experiment("toy", X, M, strategy="toy", parallel_bandwidth=2)
        s1 = await engine.suggest(exp.id)
        await engine.observe(exp.id, suggestion_id=s1.id, value=1.0)
        s2 = await engine.suggest(exp.id)
        stats = await engine.inspect(exp.id)
        pool_stats = engine.pool.stats
    assert _on_ladder(s1.assignments["x"]) and _on_ladder(s2.assignments["x"])
    assert s1.assignments != s2.assignments
    assert stats["proposals"] >= 1 and stats["fallbacks"] == 0  # it went through the pool's job path
    assert pool_stats.jobs >= 1 and pool_stats.fallbacks == 0


async def test_a_toy_pooled_strategy_runs_in_a_worker_process(toy) -> None:  # type: ignore[no-untyped-def]
    request = SuggestRequest(Space.parse(X), Metric("loss"), n=3)
    async with StrategyPool("process", size=1) as pool:
        result = await pool.propose("e", "toy", request)
    assert result.strategy_used == "toy" and result.fallback_reason is None
    assert [c["x"] for c in result.candidates] == [0.0005, 0.0015, 0.0025]


def _toy_shares(space: Space, metric: Metric, history: object, seed: int) -> dict[str, float]:
    return {p.name: 1.0 for p in space.dims} if metric.name == "loss" else {}


async def test_importance_is_what_the_registry_says_the_strategy_can_explain() -> None:
    # a strategy registered with its own importance is asked for it, and grids=True
    # makes a continuous space finite: no engine code names the strategy
    register(Strategy("toy_explains", toy_propose, importance=Importance("toy_shares", _toy_shares), grids=True))
    try:
        async with Engine(pool=None) as engine:
            exp = await engine.create_experiment("e", X, M, strategy="toy_explains", strategy_options={"grid_size": 3})
            for x in (0.1, 0.5, 0.9):
                await engine.observe(exp.id, assignments={"x": x}, value=x)
            out = await engine.importance(exp.id)
            assert out["method"] == "toy_shares" and out["parameters"] == [{"name": "x", "importance": 1.0}]
            with pytest.raises(ApiError) as err:  # its 3 grid points are used: the space is finite
                await engine.suggest(exp.id)
            assert err.value.error_type == "space_exhausted"
            plain = await engine.create_experiment("p", X, M, strategy="random")
            await engine.observe(plain.id, assignments={"x": 0.5}, value=1.0)
            assert (await engine.importance(plain.id))["method"] == "binned_variance"
    finally:
        unregister("toy_explains")


def test_the_engine_names_no_strategy() -> None:
    """Which strategy does what is the registry's to say: no module of the engine
    holds a strategy's name as a string."""
    import ast
    from pathlib import Path

    import tauopt.engine

    found = []
    for path in sorted(Path(tauopt.engine.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names():
                found.append(f"{path.name}:{node.lineno}: {node.value!r}")
    assert found == []
