"""The GP with several objectives (EHVI for two, ParEGO's Chebyshev scalarization per
suggestion for three or four, either by GPConfig) and with constraint metrics
(probability of feasibility times the acquisition)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gpytorch")

from tauopt.models import Metric, Observation  # noqa: E402
from tauopt.space import Space  # noqa: E402
from tauopt.pareto import hypervolume  # noqa: E402
from tauopt.strategies._gp_ehvi import ehvi, log_ehvi  # noqa: E402
from tauopt.strategies._request import SuggestRequest  # noqa: E402
from tauopt.strategies._scalarize import chebyshev, targets  # noqa: E402
from tauopt.strategies.gp import GPConfig, propose_gp  # noqa: E402
from tauopt.schema import parse_metrics  # noqa: E402

TWO_MIN = parse_metrics(metrics=[{"name": "f1", "objective": "minimize"}, {"name": "f2", "objective": "minimize"}])
MODES = [GPConfig(multi_objective="ehvi"), GPConfig(multi_objective="parego")]

LINE = Space.parse([{"name": "x", "type": "double", "bounds": [0, 1]}])


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


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


@pytest.mark.parametrize("config", MODES, ids=["ehvi", "parego"])
def test_two_objectives_spread_suggestions_along_the_front(config):
    # f1 = (x-0.2)^2, f2 = (x-0.8)^2: the Pareto set is [0.2, 0.8]. Modelling only the
    # first objective puts every suggestion near 0.2; ParEGO's per-suggestion weights
    # and EHVI's believed front reach the other end too.
    ms = TWO_MIN
    hist = _history(lambda x: ((x - 0.2) ** 2, {"f2": (x - 0.8) ** 2}))
    req = SuggestRequest(LINE, ms[0], hist, (), 6, 3, len(hist), metrics=ms)
    r = propose_gp(req, np.random.default_rng(1), config=config)
    assert r.info.fallback_reason is None
    xs = sorted(a["x"] for a in r.candidates)
    assert len(xs) == 6
    assert xs[-1] > 0.55, xs  # some suggestion favours f2
    assert xs[0] < 0.45, xs  # and some f1


# -- EHVI (two objectives) -------------------------------------------------------

FRONT = np.array([[0.1, 0.8], [0.3, 0.5], [0.6, 0.2], [0.4, 0.9]])  # the last is dominated
REF = np.array([1.0, 1.0])


def test_ehvi_matches_a_monte_carlo_estimate_of_the_hypervolume_gain():
    mu = np.array([[0.35, 0.4], [0.2, 0.2], [0.5, 0.6], [-0.2, 1.2]])
    sd = np.array([[0.1, 0.2], [0.05, 0.3], [0.3, 0.1], [0.2, 0.3]])
    exact = ehvi(mu, sd, FRONT, REF)
    rng = np.random.default_rng(0)
    base = hypervolume(FRONT, REF)
    for i in range(len(mu)):
        ys = mu[i] + sd[i] * rng.standard_normal((4000, 2))
        gain = np.array([hypervolume(np.vstack([FRONT, y]), REF) - base for y in ys])
        se = gain.std() / np.sqrt(len(gain))
        assert exact[i] > 0 and abs(exact[i] - gain.mean()) < 4 * se + 1e-9, (i, exact[i], gain.mean(), se)


def test_ehvi_without_uncertainty_is_the_hypervolume_gain_of_the_mean():
    y = np.array([0.2, 0.3])
    gain = hypervolume(np.vstack([FRONT, y]), REF) - hypervolume(FRONT, REF)
    assert ehvi(y[None], np.full((1, 2), 1e-9), FRONT, REF)[0] == pytest.approx(gain, rel=1e-6)
    assert ehvi(y[None], np.full((1, 2), 1e-9), np.zeros((0, 2)), REF)[0] == pytest.approx(0.8 * 0.7, rel=1e-6)  # empty front


def test_ehvi_is_zero_where_a_point_is_surely_dominated_and_its_log_still_ranks():
    dominated = np.array([[0.35, 0.6], [0.7, 0.95]])  # behind (0.3, 0.5); behind (0.6, 0.2)
    tiny = np.full((2, 2), 1e-6)
    assert np.all(ehvi(dominated, tiny, FRONT, REF) == 0.0)
    assert np.all(ehvi(np.array([[1.5, 0.1]]), tiny[:1], FRONT, REF) == 0.0)  # beyond the reference point
    # far in the tail EHVI underflows, its log does not: the nearer candidate ranks higher
    far = log_ehvi(np.array([[0.5, 0.7], [0.8, 0.9]]), np.full((2, 2), 0.01), FRONT, REF)
    assert np.all(np.isfinite(far)) and far[0] > far[1]


def test_ehvi_batch_with_pending_points_spreads():
    ms = TWO_MIN
    hist = _history(lambda x: ((x - 0.2) ** 2, {"f2": (x - 0.8) ** 2}))
    config = GPConfig(multi_objective="ehvi")
    one = propose_gp(SuggestRequest(LINE, ms[0], hist, (), 1, 3, len(hist), metrics=ms), np.random.default_rng(4), config=config)
    x0 = one.candidates[0]["x"]
    # the same ask with that point pending (a parallel worker evaluating it) goes elsewhere
    again = propose_gp(SuggestRequest(LINE, ms[0], hist, ({"x": x0},), 1, 3, len(hist), metrics=ms), np.random.default_rng(4), config=config)
    assert abs(again.candidates[0]["x"] - x0) > 0.02, (x0, again.candidates)
    batch = propose_gp(SuggestRequest(LINE, ms[0], hist, (), 4, 3, len(hist), metrics=ms), np.random.default_rng(4), config=config)
    xs = np.sort([a["x"] for a in batch.candidates])
    assert batch.info.fallback_reason is None and len(xs) == 4
    assert np.diff(xs).min() > 0.02, xs  # four different points, none on top of another


def test_ehvi_with_a_constraint_stays_feasible():
    # two objectives pulling to 0.2 and 0.8, and c = x >= 0.5: the feasible front is [0.5, 0.8]
    ms = parse_metrics(metrics=[*({"name": m.name, "objective": "minimize"} for m in TWO_MIN), {"name": "c", "constraint": {">=": 0.5}}])
    hist = _history(lambda x: ((x - 0.2) ** 2, {"f2": (x - 0.8) ** 2, "c": x}))
    req = SuggestRequest(LINE, ms[0], hist, (), 3, 3, len(hist), metrics=ms)
    r = propose_gp(req, np.random.default_rng(5), config=GPConfig(multi_objective="ehvi"))
    assert r.info.fallback_reason is None
    assert all(a["x"] > 0.4 for a in r.candidates), r.candidates


def test_multi_objective_mode_by_number_of_objectives():
    auto = GPConfig()
    assert [auto.mo_mode(k) for k in (1, 2, 3, 4)] == ["single", "ehvi", "parego", "parego"]
    assert GPConfig(multi_objective="parego").mo_mode(2) == "parego"
    assert GPConfig(multi_objective="ehvi").mo_mode(3) == "parego"  # EHVI here is for two objectives
    with pytest.raises(ValueError, match="multi_objective must be"):
        GPConfig(multi_objective="nsga")


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
