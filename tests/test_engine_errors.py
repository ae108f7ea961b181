"""One test per error type of the engine: status, type and message."""

from __future__ import annotations

import math

import pytest

from tauopt import ApiError, Engine

pytestmark = pytest.mark.anyio

X = [{"name": "x", "type": "double", "bounds": (0.0, 1.0)}]
Y = {"name": "y", "objective": "minimize"}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def raises(coro, status: int, error_type: str, match: str = "") -> ApiError:
    with pytest.raises(ApiError) as info:
        await coro
    err = info.value
    assert (err.status_code, err.error_type) == (status, error_type), err
    assert match in err.message, err.message
    assert err.headers == {} and err.retry_after is None
    return err


@pytest.fixture
async def engine():
    async with Engine() as e:
        yield e


@pytest.mark.parametrize(
    "parameters, match",
    [

        ([{"name": "", "type": "double", "bounds": (0, 1)}], "name"),
        ([{"name": "x", "type": "double", "bounds": (0, 1)}, {"name": "x", "type": "int", "bounds": (0, 3)}], "duplicate name 'x'"),
        ([{"name": "x", "type": "double", "bounds": (1, 1)}], "lo must be < hi"),
        ([{"name": "x", "type": "double", "bounds": (2, 1)}], "lo must be < hi"),
        ([{"name": "x", "type": "double", "bounds": (0, 1), "scale": "log"}], "log scale needs lo > 0"),
        ([{"name": "x", "type": "double", "bounds": (0, math.inf)}], "finite"),
        ([{"name": "c", "type": "categorical", "values": []}], "non-empty list"),
        ([{"name": "c", "type": "categorical", "values": ["a", "a"]}], "duplicate value 'a'"),
        ([{"name": "x", "type": "double", "bounds": (0, 1), "colour": "red"}], "unknown key(s) ['colour']"),
        ([{"name": "x", "type": "float", "bounds": (0, 1)}], "'float' is not one of"),
        ([{"name": "x", "type": "double", "bounds": (0, 1), "conditions": [{"parent": "nope", "values": [1]}]}], "unknown parent 'nope'"),
        (
            [
                {"name": "opt", "type": "categorical", "values": ["sgd", "adam"]},
                {"name": "m", "type": "double", "bounds": (0, 1), "conditions": [{"parent": "opt", "values": ["rmsprop"]}]},
            ],
            "condition value 'rmsprop' is not a value",
        ),
    ],
)
async def test_bad_parameters_are_invalid_request(engine, parameters, match):
    await raises(engine.create_experiment("e", parameters, Y), 400, "invalid_request", match)
    assert await engine.experiments() == []


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"parallel_bandwidth": 0}, "parallel_bandwidth"),
        ({"suggestion_ttl_s": 0}, "suggestion_ttl_s"),
        ({"suggestion_ttl_s": -1.0}, "suggestion_ttl_s"),
        ({"observation_budget": 0}, "observation_budget"),
        ({"strategy": "bayes"}, "strategy"),
        ({"metric": {"name": "y", "objective": "up"}}, "metric.objective"),
        ({"metric": {"name": "y", "goal": "min"}}, "unknown key(s) ['goal']"),
        ({"name": ""}, "name"),
    ],
)
async def test_bad_experiment_fields_are_invalid_request(engine, kwargs, match):
    args = {"name": "e", "parameters": X, "metric": Y, **kwargs}
    await raises(engine.create_experiment(**args), 400, "invalid_request", match)


async def test_bad_observations_are_invalid_request(engine):
    exp = await engine.create_experiment("e", X + [{"name": "n", "type": "int", "bounds": (1, 9), "step": 2}], Y)
    s = await engine.suggest(exp.id)
    for value in (math.nan, math.inf, -math.inf):
        await raises(engine.observe(exp.id, suggestion_id=s.id, value=value), 400, "invalid_request", "not finite")
    await raises(engine.observe(exp.id, suggestion_id=s.id), 400, "invalid_request", "value")
    await raises(engine.observe(exp.id, suggestion_id=s.id, value=1.0, failed=True), 400, "invalid_request", "not both")
    bad_points = [
        ({"x": 2.0, "n": 3}, "outside bounds"),
        ({"x": 0.5}, "missing active parameter 'n'"),
        ({"x": 0.5, "n": 4}, "step grid"),
        ({"x": 0.5, "n": 3, "z": 1}, "unknown parameter(s) ['z']"),
        ({"x": "a", "n": 3}, "give a number"),
    ]
    for point, match in bad_points:
        await raises(engine.observe(exp.id, assignments=point, value=1.0), 400, "invalid_request", match)
    await raises(engine.suggest(exp.id, tag=""), 400, "invalid_request", "tag")
    await raises(engine.suggest(exp.id, tag="x" * 129), 400, "invalid_request", "tag")
    await raises(engine.suggest(exp.id, tag="a\nb"), 400, "invalid_request", "tag")
    # nothing stored was touched by the refusals
    assert (await engine.experiment(exp.id)).observations == 0
    assert [o.state for o in await engine.suggestions(exp.id)] == ["open"]


async def test_bandwidth_full_is_429_with_exact_message(engine):
    exp = await engine.create_experiment("e", X, Y, parallel_bandwidth=2)
    await engine.suggest(exp.id)
    await engine.suggest(exp.id)
    await raises(
        engine.suggest(exp.id), 429, "bandwidth_full", "2 open suggestions >= parallel_bandwidth=2; observe or close one first"
    )


async def test_expired_suggestion_is_409_with_assignments():
    clock = Clock()
    async with Engine(clock=clock) as engine:
        exp = await engine.create_experiment("e", X, Y, suggestion_ttl_s=10, parallel_bandwidth=1)
        s = await engine.suggest(exp.id, tag="w")
        clock.now += 11
        await engine.suggest(exp.id)  # the sibling's ask expires it
        err = await raises(engine.observe(exp.id, suggestion_id=s.id, value=1.0), 409, "suggestion_expired", "re-post")
        assert err.details["assignments"] == s.assignments
        assert (await engine.suggestion(exp.id, s.id)).state == "expired"
        # the recipe: re-post the assignments as an unsolicited observation
        obs = await engine.observe(exp.id, assignments=err.details["assignments"], value=1.0)
        assert obs.suggestion_id is None and obs.assignments == s.assignments


async def test_observe_past_the_ttl_before_any_ask_succeeds():
    # expiry is lazy: only an ask expires; a late worker with no race keeps its link
    clock = Clock()
    async with Engine(clock=clock) as engine:
        exp = await engine.create_experiment("e", X, Y, suggestion_ttl_s=10, parallel_bandwidth=2)
        s = await engine.suggest(exp.id, tag="w")
        clock.now += 11
        assert [o.id for o in await engine.suggestions(exp.id, state="open")] == [s.id]
        assert (await engine.suggestion(exp.id, s.id)).state == "open"
        obs = await engine.observe(exp.id, suggestion_id=s.id, value=1.0)
        assert obs.suggestion_id == s.id and obs.assignments == s.assignments
        assert (await engine.suggestion(exp.id, s.id)).state == "observed"
        assert len(await engine.observations(exp.id)) == 1


async def test_ttl_expiry_frees_the_slot_at_the_next_ask():
    clock = Clock()
    async with Engine(clock=clock) as engine:
        exp = await engine.create_experiment("e", X, Y, suggestion_ttl_s=5, parallel_bandwidth=1)
        first = await engine.suggest(exp.id)
        await raises(engine.suggest(exp.id), 429, "bandwidth_full")
        clock.now += 6
        second = await engine.suggest(exp.id)
        assert second.id != first.id
        assert (await engine.suggestion(exp.id, first.id)).state == "expired"


async def test_observing_twice_is_409_suggestion_observed(engine):
    exp = await engine.create_experiment("e", X, Y)
    s = await engine.suggest(exp.id)
    await engine.observe(exp.id, suggestion_id=s.id, value=1.0)
    await raises(engine.observe(exp.id, suggestion_id=s.id, value=2.0), 409, "suggestion_observed", "already has an observation")
    assert len(await engine.observations(exp.id)) == 1


async def test_observing_a_closed_suggestion_is_409_suggestion_closed(engine):
    exp = await engine.create_experiment("e", X, Y)
    s = await engine.suggest(exp.id)
    closed = await engine.close_suggestion(exp.id, s.id)
    assert closed.state == "closed"
    err = await raises(engine.observe(exp.id, suggestion_id=s.id, value=2.0), 409, "suggestion_closed", "was closed")
    assert err.details["assignments"] == s.assignments


async def test_completed_experiment_refuses_asks_with_409(engine):
    exp = await engine.create_experiment("e", X, Y, observation_budget=2, parallel_bandwidth=2)
    for _ in range(2):
        s = await engine.suggest(exp.id)
        await engine.observe(exp.id, suggestion_id=s.id, value=1.0)
    assert (await engine.experiment(exp.id)).state == "completed"
    await raises(engine.suggest(exp.id), 409, "experiment_completed", "observation_budget=2")
    # raising the budget reopens it
    exp = await engine.update_experiment(exp.id, observation_budget=3)
    assert exp.state == "active"
    await engine.suggest(exp.id)


async def test_archived_experiment_refuses_asks_with_409(engine):
    exp = await engine.create_experiment("e", X, Y)
    archived = await engine.archive_experiment(exp.id)
    assert archived.state == "archived"
    await raises(engine.suggest(exp.id), 409, "experiment_archived", "archived")
    assert [e.id for e in await engine.experiments(state="archived")] == [exp.id]


async def test_unknown_ids_are_404_not_found(engine):
    await raises(engine.suggest("nope"), 404, "not_found", "experiment 'nope' not found")
    exp = await engine.create_experiment("e", X, Y)
    await raises(engine.suggestion(exp.id, "99"), 404, "not_found", "suggestion '99' not found")
    await raises(engine.observe(exp.id, suggestion_id="99", value=1.0), 404, "not_found")
    await raises(engine.close_suggestion(exp.id, "99"), 404, "not_found")


async def test_another_owner_gets_404_never_403(engine):
    alice, bob = engine.as_owner("alice"), engine.as_owner("bob")
    exp = await alice.create_experiment("e", X, Y)
    await raises(bob.suggest(exp.id), 404, "not_found")
    await raises(bob.experiment(exp.id), 404, "not_found")
    assert await bob.experiments() == []
    assert (await alice.suggest(exp.id)).state == "open"


async def test_space_exhausted_is_409_never_a_repeat(engine):
    space = [
        {"name": "c", "type": "categorical", "values": ["a", "b"]},
        {"name": "n", "type": "int", "bounds": (1, 3)},
        {"name": "f", "type": "boolean"},
    ]
    for strategy in ("random", "sobol", "grid", "auto"):
        exp = await engine.create_experiment("e", space, Y, parallel_bandwidth=12, strategy=strategy)
        seen = set()
        for _ in range(12):
            s = await engine.suggest(exp.id)
            key = tuple(sorted(s.assignments.items()))
            assert key not in seen
            seen.add(key)
        assert len(seen) == 12
        await raises(engine.suggest(exp.id), 409, "space_exhausted", "close a suggestion")
        # a closed (never observed) point leaves the used set and may come back
        s = (await engine.suggestions(exp.id))[3]
        await engine.close_suggestion(exp.id, s.id)
        again = await engine.suggest(exp.id)
        assert again.assignments == s.assignments


async def test_grid_needs_a_grid_size_for_continuous_parameters(engine):
    await raises(engine.create_experiment("e", X, Y, strategy="grid"), 400, "invalid_request", "grid size")
    exp = await engine.create_experiment("e", X, Y, strategy="grid", strategy_options={"grid_size": 3}, parallel_bandwidth=3)
    got = sorted([(await engine.suggest(exp.id)).assignments["x"] for _ in range(3)])
    assert got == [0.0, 0.5, 1.0]
    await raises(engine.suggest(exp.id), 409, "space_exhausted")


async def test_update_validates_and_keeps_state(engine):
    exp = await engine.create_experiment("e", X, Y)
    await raises(engine.update_experiment(exp.id, parallel_bandwidth=0), 400, "invalid_request", "parallel_bandwidth")
    await raises(engine.update_experiment(exp.id, parameters=[]), 400, "invalid_request", "missing")
    updated = await engine.update_experiment(exp.id, name="renamed", parallel_bandwidth=3, suggestion_ttl_s=60)
    assert (updated.name, updated.parallel_bandwidth, updated.suggestion_ttl_s) == ("renamed", 3, 60.0)
    unset = await engine.update_experiment(exp.id, suggestion_ttl_s=None)
    assert unset.suggestion_ttl_s is None and unset.name == "renamed"


async def test_an_unowned_experiment_is_open_to_every_credential(engine):
    # experiments made in process (the KerasTuner chief) have no owner; the daemon's tokens all see them
    exp = await engine.create_experiment("chief", X, Y)
    bob = engine.as_owner("bob")
    assert [e.id for e in await bob.experiments()] == [exp.id]
    assert (await bob.experiment(exp.id)).id == exp.id
