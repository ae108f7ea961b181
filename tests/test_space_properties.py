"""Property tests of space validation, sampling and the canonical dedup key."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tauopt import ApiError
from tauopt.space import Space
from tauopt.strategies import SuggestRequest, propose
from tauopt.models import Metric

finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@st.composite
def numeric_param(draw, name: str):
    ptype = draw(st.sampled_from(["double", "int"]))
    scale = draw(st.sampled_from(["linear", "log", "reverse_log"]))
    if ptype == "int":
        lo = draw(st.integers(1 if scale != "linear" else -1000, 1000))
        hi = draw(st.integers(lo + 1, lo + 5000))
        step = draw(st.none() | st.integers(1, max(1, (hi - lo))))
    else:
        lo = draw(st.floats(1e-6, 1e3) if scale != "linear" else finite)
        hi = lo + draw(st.floats(1e-3, 1e4))
        if not hi > lo:
            hi = lo + 1.0
        step = draw(st.none() | st.floats((hi - lo) / 50, hi - lo))
    p = {"name": name, "type": ptype, "bounds": (lo, hi), "scale": scale}
    if step is not None:
        p["step"] = step
    return p


@st.composite
def spaces(draw):
    params = [draw(numeric_param("n0"))]
    values = draw(st.lists(st.one_of(st.text(min_size=1, max_size=5), st.integers(-5, 5), st.booleans()), min_size=1, max_size=4, unique_by=lambda v: (type(v), v)))
    params.append({"name": "cat", "type": "categorical", "values": values})
    params.append({"name": "flag", "type": "boolean"})
    params.append({"name": "fix", "type": "fixed", "value": draw(st.integers(0, 3))})
    params.append(
        {**draw(numeric_param("child")), "conditions": [{"parent": "cat", "values": values[: draw(st.integers(1, len(values)))]}]}
    )
    params.append({**draw(numeric_param("grandchild")), "conditions": [{"parent": "flag", "values": [True]}, {"parent": "child", "values": []}][:1]})
    return Space.parse(params)


def check_inside(space: Space, point: dict) -> None:
    assert space.validate(point) == point  # every suggested point is inside the space, canonical already
    for p in space.parameters:
        active = space.is_active(p, point)
        assert (p.name in point) == active  # conditions honoured: inactive parameters absent
        if not active or p.bounds is None:
            continue
        v = point[p.name]
        lo, hi = p.bounds
        assert lo <= v <= hi
        if p.type == "int":
            assert isinstance(v, int) and not isinstance(v, bool)
        if p.step is not None:
            k = round((v - lo) / p.step)
            assert abs(v - (lo + k * p.step)) <= max(1e-6 * p.step, 1e-12 * max(1.0, abs(v)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(space=spaces(), seed=st.integers(0, 2**31), strategy=st.sampled_from(["random", "sobol"]))
def test_sampled_points_are_inside_the_space(space, seed, strategy):
    request = SuggestRequest(space=space, metric=Metric("y"), n=16, seed=seed, drawn=seed % 1000)
    for point in propose(strategy, request, np.random.default_rng(seed)):
        check_inside(space, point)


@settings(max_examples=100, deadline=None)
@given(space=spaces(), seed=st.integers(0, 2**31))
def test_key_is_canonical(space, seed):
    point = propose("random", SuggestRequest(space=space, metric=Metric("y")), np.random.default_rng(seed))[0]
    reordered = dict(reversed(list(point.items())))
    assert space.key(reordered) == space.key(point)
    assert space.key(space.validate(reordered)) == space.key(point)
    # numbers given as another numeric type land on the same key
    loose = {k: (float(v) if isinstance(v, int) and not isinstance(v, bool) else v) for k, v in point.items()}
    assert space.key(space.validate(loose)) == space.key(point)


def test_key_keeps_bool_apart_from_int():
    space = Space.parse([{"name": "c", "type": "categorical", "values": [True, 1, "1"]}])
    keys = {space.key(space.validate({"c": v})) for v in (True, 1, "1")}
    assert len(keys) == 3
    assert space.validate({"c": 1.0}) == {"c": 1}


def test_log_scale_is_sampled_in_log_space():
    space = Space.parse([{"name": "lr", "type": "double", "bounds": (1e-6, 1.0), "scale": "log"}])
    points = propose("sobol", SuggestRequest(space=space, metric=Metric("y"), n=1024), np.random.default_rng(0))
    logs = np.log10([p["lr"] for p in points])
    # equal mass per decade
    counts = np.histogram(logs, bins=6, range=(-6, 0))[0]
    assert counts.min() > 140 and counts.max() < 200


@settings(max_examples=200, deadline=None)
@given(lo=finite, width=st.floats(-10, 10), scale=st.sampled_from(["linear", "log"]))
def test_validation_refuses_empty_and_inverted_bounds(lo, width, scale):
    hi = lo + width
    p = {"name": "x", "type": "double", "bounds": (lo, hi), "scale": scale}
    ok = hi > lo and (scale == "linear" or lo > 0) and math.isfinite(hi)
    if ok:
        Space.parse([p])
    else:
        with pytest.raises(ApiError) as info:
            Space.parse([p])
        assert info.value.error_type == "invalid_request" and "parameters[0] ('x')" in info.value.message


def test_grid_enumerates_conditional_spaces_exactly():
    space = Space.parse(
        [
            {"name": "opt", "type": "categorical", "values": ["sgd", "adam"]},
            {"name": "momentum", "type": "double", "bounds": (0.0, 0.9), "step": 0.3, "conditions": [{"parent": "opt", "values": ["sgd"]}]},
            {"name": "layers", "type": "int", "bounds": (1, 3)},
        ]
    )
    points = list(space.grid())
    assert len(points) == space.finite_size == (4 + 1) * 3
    assert len({space.key(p) for p in points}) == len(points)
    for p in points:
        check_inside(space, p)
