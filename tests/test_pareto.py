"""Feasibility, best feasible and the Pareto front on hand-computed cases; hypervolume exactness."""

from __future__ import annotations

import numpy as np
import pytest

from tauopt.models import Experiment, Observation, Parameter
from tauopt.pareto import best_feasible, dominates, hypervolume, is_feasible, nondominated, pareto_front
from tauopt.schema import parse_metrics, parse_parameter


def _exp(metrics) -> Experiment:
    ms = parse_metrics(metrics=metrics)
    return Experiment("e", "e", (parse_parameter({"name": "x", "type": "double", "bounds": [0, 1]}),), ms[0], metrics=ms)


def _obs(i: int, value: float | None, failed: bool = False, **metrics: float) -> Observation:
    return Observation(str(i), "e", None, {"x": i / 10}, value, failed, 0.0, metrics)


TWO = [
    {"name": "acc", "objective": "maximize"},
    {"name": "latency", "objective": "minimize"},
    {"name": "mem", "constraint": {"<=": 100}},
]


def test_pareto_front_hand_computed_two_objectives_with_a_constraint():
    exp = _exp(TWO)
    obs = [
        _obs(1, 0.90, latency=50, mem=80),   # front
        _obs(2, 0.80, latency=30, mem=80),   # front
        _obs(3, 0.85, latency=60, mem=80),   # dominated by 1 (less acc, more latency)
        _obs(4, 0.99, latency=10, mem=200),  # dominates all, but infeasible (mem > 100)
        _obs(5, 0.70, latency=30, mem=80),   # dominated by 2 (same latency, less acc)
        _obs(6, 0.95, latency=90, mem=100),  # front: bound is inclusive
        _obs(7, None, failed=True),          # failed: never feasible
        _obs(8, 0.80, latency=30, mem=50),   # same vector as 2: 2 came first
        _obs(9, 0.60, latency=20, mem=99),   # front: fastest feasible
    ]
    assert [o.id for o in pareto_front(exp, obs)] == ["1", "2", "6", "9"]
    assert [is_feasible(exp, o) for o in obs] == [True, True, True, False, True, True, False, True, True]


def test_best_is_the_best_feasible_observation_and_none_while_nothing_is_feasible():
    exp = _exp([{"name": "loss", "objective": "minimize"}, {"name": "acc", "constraint": {">=": 0.5}}])
    infeasible = [_obs(1, 0.1, acc=0.4), _obs(2, 0.05, acc=0.49)]
    assert best_feasible(exp, infeasible) is None
    assert pareto_front(exp, infeasible) == []
    obs = infeasible + [_obs(3, 0.3, acc=0.5), _obs(4, 0.2, acc=0.9), _obs(5, 0.2, acc=0.6)]
    assert best_feasible(exp, obs).id == "4"  # first of equals
    assert [o.id for o in pareto_front(exp, obs)] == ["4"]  # one objective: the front is the best


def test_a_missing_constraint_metric_makes_an_observation_infeasible():
    exp = _exp([{"name": "loss", "objective": "minimize"}, {"name": "mem", "constraint": {"<=": 1}}])
    assert not is_feasible(exp, _obs(1, 0.1))


def test_dominance_needs_one_strict_improvement():
    assert dominates((1, 2), (1, 3))
    assert not dominates((1, 2), (1, 2))
    assert not dominates((0, 3), (1, 2))
    assert list(nondominated(np.array([[1, 2], [1, 2], [0, 3], [2, 2]]))) == [0, 2]


def test_hypervolume_exact_on_hand_computed_fronts():
    # 2-D: (1,3),(2,2),(3,1) under ref (4,4): 3 + 2 + 1 = 6 unit squares
    assert hypervolume(np.array([[1, 3], [2, 2], [3, 1]]), (4, 4)) == pytest.approx(6.0)
    # dominated and out-of-reference points add nothing
    assert hypervolume(np.array([[1, 3], [2, 2], [3, 1], [3, 3], [5, 0]]), (4, 4)) == pytest.approx(6.0)
    # 3-D: one point at the origin under ref (1,2,3) -> 6; two boxes overlapping
    assert hypervolume(np.array([[0, 0, 0]]), (1, 2, 3)) == pytest.approx(6.0)
    # union of [0,2]x[0,1]x[0,1] and [0,1]x[0,2]x[0,1] minus overlap [0,1]^3, ref (2,2,1)... boxes from points
    assert hypervolume(np.array([[0, 1, 0], [1, 0, 0]]), (2, 2, 1)) == pytest.approx(2 + 2 - 1)


def test_hypervolume_matches_monte_carlo_in_three_dimensions():
    rng = np.random.default_rng(0)
    pts = rng.random((12, 3))
    ref = np.ones(3) * 1.1
    samples = rng.random((200_000, 3)) * 1.1
    dominated = np.zeros(len(samples), dtype=bool)
    for p in pts:
        dominated |= np.all(samples >= p, axis=1)
    assert hypervolume(pts, ref) == pytest.approx(dominated.mean() * 1.1**3, rel=0.02)


def _brute_nondominated(pts: np.ndarray) -> list[int]:
    """The definition, row by row: not dominated, and no identical row before it."""
    return [
        i for i, p in enumerate(pts)
        if not any(dominates(q, p) for q in pts) and not any(np.array_equal(q, p) for q in pts[:i])
    ]  # fmt: skip


@pytest.mark.parametrize("dims", [1, 2, 3, 4])
def test_the_sweep_keeps_exactly_the_definitions_front_with_ties_and_duplicates(dims: int) -> None:
    rng = np.random.default_rng(dims)
    for _ in range(30):
        pts = rng.integers(0, 5, size=(int(rng.integers(0, 40)), dims)).astype(float)  # small integers: many ties
        assert list(nondominated(pts)) == _brute_nondominated(pts)


def test_the_two_objective_front_of_100_000_points_is_a_sort_not_a_square() -> None:
    x = np.linspace(0, 1, 100_000)
    front = nondominated(np.column_stack((x, 1 - x)))  # every point is on the front
    assert len(front) == 100_000 and front[0] == 0 and front[-1] == 99_999


def test_a_growing_front_matches_the_front_of_the_whole_history_at_every_length() -> None:
    from tauopt.pareto import GrowingFront

    exp = _exp(TWO)
    rng = np.random.default_rng(7)
    history = [
        _obs(i, float(rng.integers(0, 6)) / 5, latency=float(rng.integers(0, 6)), mem=float(rng.integers(90, 110)))
        for i in range(1, 120)
    ]
    grown = GrowingFront(exp)
    seen: list[int] = []
    for cut in (1, 2, 3, 10, 11, 50, 50, 119):
        seen.append(cut)
        assert [o.id for o in grown.front(history[:cut])] == [o.id for o in pareto_front(exp, history[:cut])]
    # a history that is not an extension of the one seen (a reloaded actor's copy) is taken afresh
    other = [_obs(i, 0.5, latency=1.0, mem=1.0) for i in range(1, 5)]
    assert [o.id for o in grown.front(other)] == ["1"]
