"""The GP with several objectives (ParEGO: a Chebyshev scalarization per suggestion)
and with constraint metrics (probability of feasibility times log-EI)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gpytorch")

from tauopt.models import Metric, Observation, parse_metrics  # noqa: E402
from tauopt.space import Space  # noqa: E402
from tauopt.strategies._request import SuggestRequest  # noqa: E402
from tauopt.strategies._scalarize import chebyshev, targets  # noqa: E402
from tauopt.strategies.gp import propose_gp  # noqa: E402

LINE = Space.parse([{"name": "x", "type": "double", "bounds": [0, 1]}])


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():  # type: ignore[no-untyped-def]
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _history(values) -> tuple[Observation, ...]:  # type: ignore[no-untyped-def]
    xs = np.linspace(0.02, 0.98, 9)
    out = []
    for i, x in enumerate(xs):
        first, rest = values(x)
        out.append(Observation(str(i), "e", None, {"x": float(x)}, first, False, 0.0, rest))
    return tuple(out)


def test_chebyshev_normalizes_each_objective_and_weights_the_worst():
    objs = np.array([[0.0, 10.0], [1.0, 0.0], [0.5, 5.0], [np.nan, np.nan]])
    s = chebyshev(objs, np.array([0.5, 0.5]), rho=0.0)
    assert s[:3].tolist() == [0.5, 0.5, 0.25] and np.isnan(s[3])


def test_targets_sign_objectives_and_mark_feasibility():
    ms = parse_metrics(metrics=[{"name": "acc", "objective": "maximize"}, {"name": "mem", "constraint": {"<=": 1}}])
    hist = (
        Observation("0", "e", None, {"x": 0.1}, 0.9, False, 0.0, {"mem": 2.0}),
        Observation("1", "e", None, {"x": 0.2}, 0.8, False, 0.0, {"mem": 0.5}),
        Observation("2", "e", None, {"x": 0.3}, None, True, 0.0, {}),
    )
    t = targets(ms, hist)
    assert t.objectives[:2, 0].tolist() == [-0.9, -0.8] and np.isnan(t.objectives[2, 0])
    assert t.violations[:2, 0].tolist() == [1.0, -0.5]
    assert t.feasible.tolist() == [False, True, False]


def test_two_objectives_spread_suggestions_along_the_front():
    # f1 = (x-0.2)^2, f2 = (x-0.8)^2: the Pareto set is [0.2, 0.8]. Modelling only the
    # first objective puts every suggestion near 0.2; ParEGO's per-suggestion weights
    # reach the other end too.
    ms = parse_metrics(metrics=[{"name": "f1", "objective": "minimize"}, {"name": "f2", "objective": "minimize"}])
    hist = _history(lambda x: ((x - 0.2) ** 2, {"f2": (x - 0.8) ** 2}))
    req = SuggestRequest(LINE, ms[0], hist, (), 6, 3, len(hist), metrics=ms)
    r = propose_gp(req, np.random.default_rng(1))
    assert r.info.fallback_reason is None
    xs = sorted(a["x"] for a in r.candidates)
    assert len(xs) == 6
    assert xs[-1] > 0.55, xs  # some suggestion favours f2


def test_a_constraint_steers_suggestions_into_the_feasible_region():
    # minimize x subject to c = x >= 0.6: unconstrained, the GP goes to x = 0.
    ms = parse_metrics(metrics=[{"name": "f", "objective": "minimize"}, {"name": "c", "constraint": {">=": 0.6}}])
    hist = _history(lambda x: (x, {"c": x}))
    req = SuggestRequest(LINE, ms[0], hist, (), 2, 3, len(hist), metrics=ms)
    r = propose_gp(req, np.random.default_rng(2))
    assert r.info.fallback_reason is None
    assert all(a["x"] > 0.45 for a in r.candidates), r.candidates


def test_nothing_feasible_yet_searches_for_feasibility():
    # every observation violates c <= 0 where c = 0.9 - x: feasibility starts at 0.9, beyond all observed x < 0.9
    ms = parse_metrics(metrics=[{"name": "f", "objective": "minimize"}, {"name": "c", "constraint": {"<=": 0.0}}])
    hist = tuple(o for o in _history(lambda x: (x, {"c": 0.9 - x + 0.05})) )
    req = SuggestRequest(LINE, ms[0], hist, (), 1, 3, len(hist), metrics=ms)
    r = propose_gp(req, np.random.default_rng(3))
    assert r.info.fallback_reason is None
    assert r.candidates[0]["x"] > 0.8, r.candidates
