"""Several metrics through the engine: metrics=[...], observe(values=), best feasible,
the Pareto front, durability, and a database written before metrics existed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tauopt import ApiError, Engine

pytestmark = pytest.mark.anyio

DATA = Path(__file__).parent / "data"
SPACE = [{"name": "x", "type": "double", "bounds": [0, 1]}]
METRICS = [
    {"name": "acc", "objective": "maximize"},
    {"name": "latency_ms", "objective": "minimize"},
    {"name": "mem_mb", "constraint": {"<=": 512}},
]


async def _observe_all(engine: Engine, exp_id: str, rows: list[tuple[float, float, float, float]]) -> list[str]:
    ids = []
    for x, acc, lat, mem in rows:
        o = await engine.observe(exp_id, assignments={"x": x}, values={"acc": acc, "latency_ms": lat, "mem_mb": mem})
        ids.append(o.id)
    return ids


ROWS = [
    (0.1, 0.90, 50.0, 100.0),  # front
    (0.2, 0.80, 30.0, 100.0),  # front
    (0.3, 0.85, 60.0, 100.0),  # dominated by the first
    (0.4, 0.99, 10.0, 900.0),  # dominates all, infeasible
    (0.5, 0.95, 90.0, 512.0),  # front (bound inclusive)
]


async def test_pareto_front_and_best_feasible_through_the_engine_and_after_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    async with Engine(store=str(db), pool=None) as engine:
        exp = await engine.create_experiment("mo", SPACE, metrics=METRICS, strategy="random")
        assert [m.name for m in exp.metrics] == ["acc", "latency_ms", "mem_mb"] and exp.metric.name == "acc"
        ids = await _observe_all(engine, exp.id, ROWS)
        front = await engine.pareto_front(exp.id)
        assert [o.id for o in front] == [ids[0], ids[1], ids[4]]
        best = await engine.best(exp.id)
        assert best is not None and best.id == ids[4]  # by the first objective, feasible only (not 0.99)
        obs = await engine.observations(exp.id)
        assert obs[0].value == 0.90 and obs[0].metrics == {"latency_ms": 50.0, "mem_mb": 100.0}
        every = {"acc": 0.90, "latency_ms": 50.0, "mem_mb": 100.0}
        assert obs[0].values == every and list(obs[0].values) == ["acc", "latency_ms", "mem_mb"]
        assert best.values["acc"] == best.value == 0.95 and front[0].values == every
    async with Engine(store=str(db), pool=None) as engine:
        again = await engine.experiment(exp.id)
        assert again.metrics == exp.metrics
        # read back from the file: every metric by name, the first objective too
        assert [o.values for o in await engine.observations(exp.id)] == [
            {"acc": acc, "latency_ms": lat, "mem_mb": mem} for _, acc, lat, mem in ROWS
        ]
        assert [o.id for o in await engine.pareto_front(exp.id)] == [ids[0], ids[1], ids[4]]
        assert (await engine.best(exp.id)).id == ids[4]  # type: ignore[union-attr]


async def test_best_is_none_while_nothing_is_feasible() -> None:
    async with Engine(pool=None) as engine:
        exp = await engine.create_experiment(
            "c", SPACE, metrics=[{"name": "loss", "objective": "minimize"}, {"name": "mem", "constraint": {"<=": 1}}]
        )
        await engine.observe(exp.id, assignments={"x": 0.5}, values={"loss": 0.1, "mem": 2.0})
        assert await engine.best(exp.id) is None
        assert await engine.pareto_front(exp.id) == []
        ok = await engine.observe(exp.id, assignments={"x": 0.6}, values={"loss": 0.3, "mem": 0.5})
        assert (await engine.best(exp.id)).id == ok.id  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "kwargs, says",
    [
        ({"values": {"acc": 0.9, "latency_ms": 3.0}}, "['mem_mb'] missing"),
        ({"value": 0.9}, "['latency_ms', 'mem_mb'] missing"),
        ({"values": {"acc": 0.9, "latency_ms": 3.0, "mem_mb": float("nan")}}, "values.mem_mb: give a finite number"),
        # one outcome: value=, values= or failed=true (value= with values= lacking the first objective was stored)
        ({"value": 0.9, "values": {"acc": 0.9, "latency_ms": 3.0, "mem_mb": 1.0}}, "give value= or values=, not both"),
        ({"value": 0.9, "values": {"latency_ms": 3.0, "mem_mb": 1.0}},
         "not both: send values={'acc': ..., 'latency_ms': ..., 'mem_mb': ...} alone"),
        ({"failed": True, "values": {"acc": 0.9, "latency_ms": 3.0, "mem_mb": 1.0}}, "give values= or failed=true, not both"),
        ({"values": ["acc"]}, "values: give a dict"),
        ({"values": {"latency_ms": 3.0, "mem_mb": 1.0}}, "['acc'] missing"),
    ],
)
async def test_observe_names_what_is_missing_or_wrong_and_stores_nothing(kwargs: dict, says: str) -> None:
    async with Engine(pool=None) as engine:
        exp = await engine.create_experiment("mo", SPACE, metrics=METRICS)
        with pytest.raises(ApiError) as info:
            await engine.observe(exp.id, assignments={"x": 0.5}, **kwargs)
        assert info.value.error_type == "invalid_request" and says in str(info.value)
        assert await engine.observations(exp.id) == []


async def test_a_failed_evaluation_needs_no_values() -> None:
    async with Engine(pool=None) as engine:
        exp = await engine.create_experiment("mo", SPACE, metrics=METRICS)
        o = await engine.observe(exp.id, assignments={"x": 0.5}, failed=True)
        assert o.failed and o.value is None
        assert await engine.pareto_front(exp.id) == []


async def test_single_objective_value_still_works_and_metric_plus_metrics_is_refused() -> None:
    async with Engine(pool=None) as engine:
        exp = await engine.create_experiment("one", SPACE, {"name": "loss"})
        o = await engine.observe(exp.id, assignments={"x": 0.5}, value=0.3, metrics={"aux": 1.0})
        assert o.value == 0.3 and o.metrics == {"aux": 1.0}
        assert [f.id for f in await engine.pareto_front(exp.id)] == [o.id]
        with pytest.raises(ApiError, match="not both"):
            await engine.create_experiment("both", SPACE, {"name": "loss"}, metrics=METRICS)
        with pytest.raises(ApiError, match="metrics\\[1\\].name: 'acc' appears twice"):
            await engine.create_experiment("dup", SPACE, metrics=[METRICS[0], METRICS[0]])


async def test_a_database_written_before_metrics_existed_reads_and_keeps_working(tmp_path: Path) -> None:
    # tests/data/schema2_single_objective.db was written by main at 9fd124c (schema 2, no
    # "metrics" in experiment bodies): two experiments, one minimized, one maximized.
    db = tmp_path / "old.db"
    shutil.copy(DATA / "schema2_single_objective.db", db)
    db.chmod(0o600)
    async with Engine(store=str(db), pool=None) as engine:
        by_name = {e.name: e for e in await engine.experiments()}
        old_min, old_max = by_name["old-min"], by_name["old-max"]
        assert [m.to_dict() for m in old_min.metrics] == [{"name": "loss", "objective": "minimize"}]
        assert [m.to_dict() for m in old_max.metrics] == [{"name": "acc", "objective": "maximize"}]
        obs = await engine.observations(old_min.id)
        assert [o.value for o in obs] == [0.5, 0.2, 0.9, None] and obs[0].metrics == {"acc": 0.5}
        assert (await engine.best(old_min.id)).value == 0.2  # type: ignore[union-attr]
        assert [o.value for o in await engine.pareto_front(old_max.id)] == [0.8]
        assert len(await engine.suggestions(old_max.id, state="open")) == 1
        s = await engine.suggest(old_min.id)
        await engine.observe(old_min.id, suggestion_id=s.id, value=0.1)
    async with Engine(store=str(db), pool=None) as engine:
        assert (await engine.best(old_min.id)).value == 0.1  # type: ignore[union-attr]


class _GatedPool:
    """Records the requests the engine hands the pool; later jobs wait on a gate."""

    def __init__(self) -> None:
        import anyio

        self.gate, self.requests = anyio.Event(), []

    async def propose(self, key, strategy, request, deadline_s=None):  # type: ignore[no-untyped-def]
        import numpy as np

        from tauopt.strategies import StrategyOutcome, propose

        self.requests.append(request)
        if len(self.requests) > 1:
            await self.gate.wait()
        return StrategyOutcome(tuple(propose("sobol", request, np.random.default_rng(len(self.requests)))), "gp", None, 0.0)

    async def __aenter__(self):  # type: ignore[no-untyped-def]
        return self

    async def __aexit__(self, *exc):  # type: ignore[no-untyped-def]
        return None


XY = [{"name": "x", "type": "double", "bounds": [0, 1]}, {"name": "y", "type": "double", "bounds": [0, 1]}]
MO = [{"name": "f1", "objective": "minimize"}, {"name": "f2", "objective": "minimize"}, {"name": "c", "constraint": {"<=": 1.5}}]


async def test_the_pool_gets_every_metric_and_the_ahead_buffer_answers_without_waiting_on_a_fit() -> None:
    import anyio

    pool = _GatedPool()
    async with Engine(pool=pool) as engine:
        exp = await engine.create_experiment("mo-gp", XY, metrics=MO, strategy="gp", strategy_options={"initial_points": 1})
        await engine.observe(exp.id, assignments={"x": 0.5, "y": 0.5}, values={"f1": 1.0, "f2": 2.0, "c": 0.0})
        with anyio.fail_after(30):
            s = await engine.suggest(exp.id)  # the first fit runs and computes ahead
            await anyio.sleep(0.05)  # an evaluation longer than the fit (0 s ones wait for the round)
            await engine.observe(exp.id, suggestion_id=s.id, values={"f1": 0.5, "f2": 2.5, "c": 1.0})
            s2 = await engine.suggest(exp.id)  # from the buffer, while the next fit is held
        pool.gate.set()
    assert s2.assignments != s.assignments
    assert pool.requests[0].all_metrics == exp.metrics and pool.requests[0].history[0].metrics == {"f2": 2.0, "c": 0.0}


async def test_a_real_multi_objective_constrained_gp_through_the_thread_pool() -> None:
    import anyio

    async with Engine(pool="thread") as engine:
        exp = await engine.create_experiment(
            "mo", XY, metrics=MO, strategy="auto", parallel_bandwidth=4, strategy_options={"initial_points": 5, "seed": 1}
        )
        for _ in range(6):
            s = await engine.suggest(exp.id)
            x, y = s.assignments["x"], s.assignments["y"]
            await engine.observe(exp.id, suggestion_id=s.id, values={"f1": x, "f2": (1 - x) + y, "c": x + y})
        with anyio.fail_after(120):
            batch = [await engine.suggest(exp.id, tag=f"w{i}") for i in range(4)]
        stats = await engine.inspect(exp.id)
    assert len({tuple(sorted(s.assignments.items())) for s in batch}) == 4
    assert stats["proposals"] >= 1 and stats["fallbacks"] == 0, stats


async def test_the_summary_best_and_its_line_skip_infeasible_observations_as_best_does(tmp_path: Path) -> None:
    # the dashboard's best value is the operation's best: one definition (issue 12 item 5)
    db = tmp_path / "c.db"
    async with Engine(db, pool=None) as engine:
        exp = await engine.create_experiment(
            "c", SPACE, metrics=[{"name": "loss", "objective": "minimize"}, {"name": "mem", "constraint": {"<=": 1}}]
        )
        await engine.observe(exp.id, assignments={"x": 0.5}, values={"loss": 0.1, "mem": 2.0})  # better, infeasible
        await engine.observe(exp.id, assignments={"x": 0.6}, values={"loss": 0.3, "mem": 0.5})
        await engine.observe(exp.id, assignments={"x": 0.7}, values={"loss": 0.2, "mem": 1.5})  # better, infeasible
        summary = await engine.summary(exp.id)
        best = await engine.best(exp.id)
        assert best is not None and best.value == summary["best_value"] == 0.3
        assert summary["best_so_far"][0] == [2, 0.3] and summary["best_so_far"][-1] == [3, 0.3]
    async with Engine(db, pool=None) as engine:  # an actor rebuilt from the store draws the same line
        again = await engine.summary(exp.id)
        assert (again["best_value"], again["best_so_far"]) == (summary["best_value"], summary["best_so_far"])
