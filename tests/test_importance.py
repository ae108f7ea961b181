"""The importance estimate (binned_variance) as a pure function."""

from __future__ import annotations

import numpy as np
import pytest

from tauopt.engine._importance import METHOD, importance
from tauopt.models import Observation, Parameter
from tauopt.schema import parse_metric, parse_parameter

PARAMS = [
    parse_parameter({"name": "x", "type": "double", "bounds": [1e-4, 1.0], "scale": "log"}),
    parse_parameter({"name": "noise", "type": "double", "bounds": [0.0, 1.0]}),
    parse_parameter({"name": "act", "type": "categorical", "values": ["relu", "tanh"]}),
    parse_parameter({"name": "c", "type": "fixed", "value": 3}),
]


def dataset(seed: int, n: int = 60) -> list[Observation]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        a = {"x": float(10 ** rng.uniform(-4, 0)), "noise": float(rng.random()), "act": ["relu", "tanh"][int(rng.integers(2))], "c": 3}
        value = (np.log10(a["x"]) + 2) ** 2 + (2.0 if a["act"] == "tanh" else 0.0)
        out.append(Observation(str(i + 1), "e", None, a, float(value)))
    return out


def test_a_parameter_that_does_nothing_scores_near_zero_on_average() -> None:
    # 10 bins of 60 points explain ~9/59 = 0.15 of the variance by chance; the correction removes that
    scores = [{p["name"]: p["importance"] for p in importance(PARAMS, dataset(seed))["parameters"]} for seed in range(100)]
    assert np.mean([s["noise"] for s in scores]) < 0.06
    assert np.mean([s["x"] for s in scores]) > 0.4 and np.mean([s["act"] for s in scores]) > 0.15


def test_fixed_parameters_are_left_out_and_failures_ignored() -> None:
    obs = dataset(1, 20) + [Observation("21", "e", None, {"x": 0.1, "noise": 0.5, "act": "relu", "c": 3}, None, True)]
    out = importance(PARAMS, obs)
    assert out["method"] == METHOD == "binned_variance" and out["observations"] == 20
    assert {p["name"] for p in out["parameters"]} == {"x", "noise", "act"}


def test_no_variance_or_too_few_points_give_zeros_not_errors() -> None:
    same = [Observation(str(i), "e", None, {"x": 0.1 * (i + 1), "noise": 0.5, "act": "relu", "c": 3}, 1.0) for i in range(5)]
    assert all(p["importance"] == 0.0 for p in importance(PARAMS, same)["parameters"])
    assert all(p["importance"] == 0.0 for p in importance(PARAMS, same[:1])["parameters"])
    assert importance(PARAMS, [])["observations"] == 0


# -- GP experiments: importance from the fitted length-scales -------------------------

GP_PARAMS = [
    {"name": "noise_a", "type": "double", "bounds": [0.0, 1.0]},
    {"name": "x", "type": "double", "bounds": [0.0, 1.0]},
    {"name": "noise_b", "type": "int", "bounds": [1, 8]},
    {"name": "act", "type": "categorical", "values": ["relu", "tanh", "gelu"]},
]


def _gp_available() -> bool:
    from tauopt.strategies import get

    return get("gp").available()


def _gp_points(n: int, seed: int = 3) -> list[tuple[dict, float]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        a = {"noise_a": float(rng.random()), "x": float(rng.random()), "noise_b": int(rng.integers(1, 9)),
             "act": ["relu", "tanh", "gelu"][int(rng.integers(3))]}  # fmt: skip
        out.append((a, float(np.sin(6.0 * a["x"]) + 3.0 * a["x"] ** 2)))  # only x matters
    return out


@pytest.mark.skipif(not _gp_available(), reason="the gp extra (torch, gpytorch) is not installed")
def test_lengthscale_importance_ranks_the_parameter_the_metric_depends_on_first() -> None:
    from tauopt.models import Metric
    from tauopt.space import Space
    from tauopt.strategies import lengthscale_importance

    space = Space.parse(GP_PARAMS)
    history = [Observation(str(i + 1), "e", None, a, v) for i, (a, v) in enumerate(_gp_points(30))]
    history.append(Observation("31", "e", None, _gp_points(1, seed=9)[0][0], None, True))  # a failure is imputed, not fatal
    shares = lengthscale_importance(space, parse_metric({"name": "loss", "objective": "minimize"}), history)
    assert set(shares) == {"noise_a", "x", "noise_b", "act"}
    assert max(shares, key=lambda k: shares[k]) == "x"
    assert sum(shares.values()) == pytest.approx(1.0)
    assert shares["x"] > 2 * max(v for k, v in shares.items() if k != "x")


@pytest.mark.anyio
@pytest.mark.skipif(not _gp_available(), reason="the gp extra (torch, gpytorch) is not installed")
async def test_a_gp_experiment_names_gp_lengthscales_and_others_keep_binned_variance(tmp_path) -> None:
    from tauopt import Engine

    metric = {"name": "loss", "objective": "minimize"}
    async with Engine(store=f"sqlite:///{tmp_path / 'imp.db'}", pool=None) as engine:
        gp = await engine.create_experiment("gp-search", GP_PARAMS, metric, strategy="gp")
        rnd = await engine.create_experiment("random-search", GP_PARAMS, metric, strategy="random")
        for a, v in _gp_points(30):
            for eid in (gp.id, rnd.id):
                await engine.observe(eid, assignments=a, value=v)
        out = await engine.importance(gp.id)
        assert out["method"] == "gp_lengthscales" and out["observations"] == 30
        assert out["parameters"][0]["name"] == "x"
        assert sum(p["importance"] for p in out["parameters"]) == pytest.approx(1.0)
        assert await engine.importance(gp.id) is out  # kept while the history is unchanged: no refit per poll
        other = await engine.importance(rnd.id)
        assert other["method"] == "binned_variance" and other["parameters"][0]["name"] == "x"
        await engine.observe(gp.id, assignments=_gp_points(1, seed=11)[0][0], value=0.5)
        again = await engine.importance(gp.id)
        assert again is not out and again["observations"] == 31


@pytest.mark.anyio
async def test_a_gp_experiment_still_in_its_initial_design_uses_binned_variance(tmp_path) -> None:
    from tauopt import Engine

    async with Engine(store=f"sqlite:///{tmp_path / 'imp.db'}", pool=None) as engine:
        gp = await engine.create_experiment("gp-early", GP_PARAMS, {"name": "loss", "objective": "minimize"}, strategy="gp")
        for a, v in _gp_points(4):  # the initial design is max(5, 2*d) = 8 points: no model yet
            await engine.observe(gp.id, assignments=a, value=v)
        assert (await engine.importance(gp.id))["method"] == "binned_variance"
