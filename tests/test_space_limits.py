"""Work per request is bounded: wide integer ranges, long categoricals, deep or cyclic
conditions and numeric edges are either handled arithmetically or refused with a
400 that names the limit. Engine level, over a real SQLite file."""

from __future__ import annotations

from pathlib import Path
from typing import Any, AsyncIterator

import pytest

from tauopt import ApiError, Engine
from tauopt.limits import (
    MAX_CATEGORICAL_VALUES,
    MAX_CONDITION_DEPTH,
    MAX_CONDITIONS,
    MAX_METRICS,
    MAX_PARAMETERS,
)
from tauopt.space import Space

pytestmark = pytest.mark.anyio

Y = {"name": "y", "objective": "minimize"}


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Engine]:
    async with Engine(store=str(tmp_path / "limits.db"), pool=None) as e:
        yield e


async def refused(coro: Any, *words: str) -> str:
    with pytest.raises(ApiError) as info:
        await coro
    err = info.value
    assert (err.status_code, err.error_type) == (400, "invalid_request"), err
    for w in words:
        assert w in err.message, err.message
    return err.message


# -- wide integer ranges: sizes, dedup and sampling by arithmetic -------------------


def test_the_size_of_a_wide_int_domain_is_computed_not_enumerated() -> None:
    space = Space.parse([{"name": "s", "type": "int", "bounds": [0, 2**62]}])
    assert space.size() is None  # over the enumeration cap: treated as unbounded
    domain = space.domain(space.parameters[0])
    assert len(domain) == 2**62 + 1 and domain[-1] == 2**62 and domain[3] == 3  # type: ignore[arg-type,index]
    stepped = Space.parse([{"name": "d", "type": "double", "bounds": [0.0, 1e12], "step": 1e-3}])
    assert stepped.size() is None and len(stepped.domain(stepped.parameters[0])) == 10**15 + 1  # type: ignore[arg-type]
    small = Space.parse([{"name": "s", "type": "int", "bounds": [0, 9], "step": 3}, {"name": "b", "type": "boolean"}])
    assert small.size() == 8 and list(small.domain(small.parameters[0])) == [0, 3, 6, 9]  # type: ignore[arg-type]


def test_neighbouring_large_integers_have_distinct_dedup_keys() -> None:
    space = Space.parse([{"name": "s", "type": "int", "bounds": [0, 2**62]}])
    # a float key would merge them (2.0**62 + 1 == 2.0**62): dedup would refuse a fresh point
    assert space.key({"s": 2**62}) != space.key({"s": 2**62 - 1})
    # ... while the equality users rely on stays: 1 == 1.0, True is not 1
    cat = Space.parse([{"name": "c", "type": "categorical", "values": [1, True, "1"]}])
    assert cat.key({"c": 1}) == cat.key({"c": 1.0}) != cat.key({"c": True})
    assert cat.validate({"c": 1.0}) == {"c": 1} and cat.validate({"c": True}) == {"c": True}


async def test_asks_on_an_int_over_0_to_2_to_the_62_answer(engine: Engine) -> None:
    exp = await engine.create_experiment("wide", [{"name": "s", "type": "int", "bounds": [0, 2**62]}], Y, parallel_bandwidth=4)
    seen = set()
    for strategy_run in range(4):
        s = await engine.suggest(exp.id)
        v = s.assignments["s"]
        assert isinstance(v, int) and 0 <= v <= 2**62
        seen.add(v)
    assert len(seen) == 4
    await engine.observe(exp.id, suggestion_id=s.id, value=1.0)
    # an unsolicited observation of a value next to another keeps both apart
    await engine.observe(exp.id, assignments={"s": 2**62}, value=2.0)
    await engine.observe(exp.id, assignments={"s": 2**62 - 1}, value=3.0)
    assert len(await engine.observations(exp.id)) == 3


async def test_the_full_signed_64_bit_range_is_accepted_and_wider_is_refused(engine: Engine) -> None:
    full = [{"name": "s", "type": "int", "bounds": [-(2**63), 2**63 - 1]}]
    exp = await engine.create_experiment("int64", full, Y, strategy="random")
    for _ in range(3):
        s = await engine.suggest(exp.id)
        assert -(2**63) <= s.assignments["s"] <= 2**63 - 1
        await engine.observe(exp.id, suggestion_id=s.id, value=0.5)
    log = [{"name": "s", "type": "int", "bounds": [1, 2**63 - 1], "scale": "log"}]
    exp = await engine.create_experiment("int64 log", log, Y)
    assert 1 <= (await engine.suggest(exp.id)).assignments["s"] <= 2**63 - 1
    for bounds in ([0, 2**64], [-(2**63) - 1, 0], [0, 10**400]):
        await refused(engine.create_experiment("too wide", [{"name": "s", "type": "int", "bounds": bounds}], Y), "64-bit")


# -- numeric edges ---------------------------------------------------------------


async def test_numbers_too_large_for_a_float_are_400s(engine: Engine) -> None:
    await refused(engine.create_experiment("big", [{"name": "x", "type": "double", "bounds": [0, 10**400]}], Y), "too large")
    await refused(engine.create_experiment("big", [{"name": "x", "type": "double", "bounds": [0.0, 1.0], "step": 10**400}], Y))
    await refused(engine.create_experiment("big", [{"name": "c", "type": "categorical", "values": [10**400]}], Y), "64-bit")
    exp = await engine.create_experiment("ok", [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}], Y)
    s = await engine.suggest(exp.id)
    await refused(engine.observe(exp.id, suggestion_id=s.id, value=10**400), "value", "too large")
    await refused(engine.observe(exp.id, suggestion_id=s.id, value=1.0, metrics={"m": 10**400}), "metrics.m")
    await refused(engine.observe(exp.id, assignments={"x": 10**400}, value=1.0), "outside bounds")
    await engine.observe(exp.id, suggestion_id=s.id, value=1.0)  # the suggestion was kept open through it all


async def test_double_bounds_whose_span_overflows_are_refused_at_create(engine: Engine) -> None:
    await refused(
        engine.create_experiment("huge", [{"name": "x", "type": "double", "bounds": [-1e308, 1e308]}], Y), "hi - lo", "overflows"
    )
    await refused(
        engine.create_experiment("tiny step", [{"name": "x", "type": "double", "bounds": [0.0, 1e300], "step": 1e-300}], Y), "2**63"
    )
    exp = await engine.create_experiment("wide", [{"name": "x", "type": "double", "bounds": [-1e307, 1e307]}], Y, parallel_bandwidth=3)
    points = {(await engine.suggest(exp.id)).assignments["x"] for _ in range(3)}
    assert len(points) == 3 and all(-1e307 <= x <= 1e307 for x in points)


# -- long categorical lists and other counts ---------------------------------------


def test_categorical_duplicates_keep_todays_equality() -> None:
    Space.parse([{"name": "c", "type": "categorical", "values": [1, 1.0, True, "1"]}])  # one of each type
    for values in ([1, 2, 1], [0.5, 0.5], ["a", "b", "a"], [True, False, True]):
        with pytest.raises(ApiError, match="duplicate value"):
            Space.parse([{"name": "c", "type": "categorical", "values": values}])


async def test_a_categorical_at_the_limit_is_created_and_one_more_is_refused(engine: Engine) -> None:
    values = [f"v{i}" for i in range(MAX_CATEGORICAL_VALUES)]
    children = [{"name": "child", "type": "boolean", "conditions": [{"parent": "c", "values": values}]}]
    exp = await engine.create_experiment("cat", [{"name": "c", "type": "categorical", "values": values}, *children], Y)
    assert (await engine.suggest(exp.id)).assignments["c"] in values
    await refused(
        engine.create_experiment("cat", [{"name": "c", "type": "categorical", "values": [*values, "one more"]}], Y),
        f"limit of {MAX_CATEGORICAL_VALUES}",
    )


async def test_counts_over_the_documented_limits_are_refused_naming_the_limit(engine: Engine) -> None:
    many = [{"name": f"p{i}", "type": "boolean"} for i in range(MAX_PARAMETERS + 1)]
    await refused(engine.create_experiment("many", many, Y), "parameters", f"limit of {MAX_PARAMETERS}")
    conds = [{"parent": "a", "values": [True]}] * (MAX_CONDITIONS + 1)
    await refused(
        engine.create_experiment("conds", [{"name": "a", "type": "boolean"}, {"name": "b", "type": "boolean", "conditions": conds}], Y),
        "conditions",
        f"limit of {MAX_CONDITIONS}",
    )
    exp = await engine.create_experiment("m", [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}], Y)
    s = await engine.suggest(exp.id)
    metrics = {f"m{i}": 1.0 for i in range(MAX_METRICS + 1)}
    await refused(engine.observe(exp.id, suggestion_id=s.id, value=1.0, metrics=metrics), "metric names", f"limit of {MAX_METRICS}")
    await refused(engine.create_experiment("n" * 257, [{"name": "x", "type": "boolean"}], Y), "256")
    await refused(engine.create_experiment("long", [{"name": "x" * 257, "type": "boolean"}], Y), "limit of 256")
    await refused(engine.create_experiment("long", [{"name": "x", "type": "boolean"}], {"name": "y" * 257}), "limit of 256")
    await refused(engine.create_experiment("long", [{"name": "c", "type": "categorical", "values": ["v" * 1025]}], Y), "limit of 1024")


# -- deep nesting and recursion: condition graphs checked iteratively ----------------


def _chain(n: int, reversed_: bool = False, cycle: bool = False) -> list[dict[str, Any]]:
    """p0 <- p1 <- ... (each conditioned on the previous); declared last-first when reversed."""
    params: list[dict[str, Any]] = [
        {"name": f"p{i}", "type": "boolean", "conditions": [{"parent": f"p{i - 1}", "values": [True]}] if i else []}
        for i in range(n)
    ]
    if cycle:
        params[0]["conditions"] = [{"parent": f"p{n - 1}", "values": [True]}]
    return params[::-1] if reversed_ else params


async def test_long_condition_cycles_and_chains_are_400s(engine: Engine) -> None:
    await refused(engine.create_experiment("cycle", _chain(2000, cycle=True), Y), "cycle")
    await refused(engine.create_experiment("chain", _chain(1500, reversed_=True), Y), "deep", f"limit of {MAX_CONDITION_DEPTH}")
    exp = await engine.create_experiment("chain", _chain(MAX_CONDITION_DEPTH, reversed_=True), Y)
    assert (await engine.suggest(exp.id)).assignments["p0"] in (True, False)


async def test_ten_thousand_booleans_with_grid_create_and_ask(engine: Engine) -> None:
    params = [{"name": f"b{i}", "type": "boolean"} for i in range(10_000)]
    exp = await engine.create_experiment("bools", params, Y, strategy="grid", parallel_bandwidth=2)
    a, b = await engine.suggest(exp.id), await engine.suggest(exp.id)
    assert len(a.assignments) == len(b.assignments) == 10_000 and a.assignments != b.assignments
    await engine.observe(exp.id, suggestion_id=a.id, value=1.0)


async def test_a_lone_surrogate_in_added_parameters_is_refused_and_the_space_is_unchanged(engine: Engine) -> None:
    exp = await engine.create_experiment("e", [{"name": "x", "type": "boolean"}], Y)
    bad = "\ud800"
    for param in ({"name": "n" + bad, "type": "boolean", "default": True}, {"name": "c", "type": "categorical", "values": ["a", bad], "default": "a"}):
        await refused(engine.update_experiment(exp.id, parameters=[{"name": "x", "type": "boolean"}, param]), "surrogate")
    assert [p.name for p in (await engine.experiment(exp.id)).parameters] == ["x"]
    s = await engine.suggest(exp.id)
    await engine.observe(exp.id, suggestion_id=s.id, value=1.0)
