"""The importance estimate (binned_variance) as a pure function."""

from __future__ import annotations

import numpy as np

from tauopt.engine._importance import METHOD, importance
from tauopt.models import Observation, Parameter

PARAMS = [
    Parameter.parse({"name": "x", "type": "double", "bounds": [1e-4, 1.0], "scale": "log"}),
    Parameter.parse({"name": "noise", "type": "double", "bounds": [0.0, 1.0]}),
    Parameter.parse({"name": "act", "type": "categorical", "values": ["relu", "tanh"]}),
    Parameter.parse({"name": "c", "type": "fixed", "value": 3}),
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
