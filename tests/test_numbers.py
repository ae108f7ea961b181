"""Numbers are numbers (issue 20): numpy scalars, 0-d arrays and anything with
`__float__` are accepted as values, metrics and assignments by the local driver
and over HTTP (a real daemon), converted to plain ints and floats at the
boundary; a real non-number is refused in every door with "pass float(x)"."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from tauopt import ApiError, Client
from tauopt._numbers import plain_json, plain_number
from test_http_daemon import Daemon, token_of

PARAMS = [
    {"name": "x", "type": "double", "bounds": [0.0, 1.0]},
    {"name": "k", "type": "int", "bounds": [1, 8]},
    {"name": "c", "type": "categorical", "values": [1, 2, 3]},
]


class Torchish:
    """Anything implementing __float__ (a torch scalar, a jax scalar, a Decimal)."""

    def __init__(self, v: float) -> None:
        self.v = v

    def __float__(self) -> float:
        return self.v


def test_number_likes_become_plain_ints_and_floats_and_the_rest_is_left_alone() -> None:
    cases: list[tuple[Any, Any]] = [
        (np.float32(0.5), 0.5), (np.float64(0.25), 0.25), (np.int64(3), 3), (np.array(2.5), 2.5),
        (np.array(4), 4), (np.bool_(True), True), (Decimal("0.5"), 0.5), (Fraction(1, 4), 0.25),
        (Torchish(0.75), 0.75), (7, 7), (True, True),
    ]
    for given, plain in cases:
        got = plain_number(given)
        assert got == plain and type(got) is type(plain), (given, got)
    for left in ("0.5", np.array([1.0, 2.0]), None, [1.0]):
        assert plain_number(left) is left
    assert plain_json({"a": [np.float32(1.5)], "b": {"c": np.int8(2)}}) == {"a": [1.5], "b": {"c": 2}}
    with pytest.raises(ApiError, match=r"value: give a number, got array\(\[1\., 2\.\]\); pass float\(x\)"):
        plain_json({"value": np.array([1.0, 2.0])})


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("numbers") / "tauopt.db")
    yield d
    d.stop()


@pytest.fixture(params=["local", "http"])
def client(request: pytest.FixtureRequest, daemon: Daemon) -> Iterator[Client]:
    if request.param == "local":
        c = Client(driver="local")
    else:
        c = Client(driver="http", base_url=daemon.url, token=token_of(daemon))
    with c:
        yield c


def test_numpy_and_float_likes_are_accepted_as_values_metrics_and_assignments(client: Client) -> None:
    exp = client.create_experiment(name="numbers", parameters=PARAMS, metric={"name": "loss", "objective": "minimize"})
    s = client.suggest(exp.id)
    client.observe(exp.id, suggestion_id=s.id, value=np.float32(0.25), metrics={"aux": np.array(1.5), "d": Decimal("2")})
    client.observe(
        exp.id,
        assignments={"x": np.float64(0.5), "k": np.int64(2), "c": np.int32(3)},
        value=Torchish(0.125),
    )
    first, second = client.observations(exp.id)
    assert (first.value, first.metrics) == (0.25, {"aux": 1.5, "d": 2.0})
    assert type(first.value) is float and all(type(v) is float for v in first.metrics.values())
    assert second.value == 0.125 and second.assignments == {"x": 0.5, "k": 2, "c": 3}
    assert type(second.assignments["k"]) is int and type(second.assignments["x"]) is float
    assert client.best(exp.id).value == 0.125  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"value": "0.3"},
        {"value": np.array([0.1, 0.2])},
        {"value": 0.3, "metrics": {"aux": "1.0"}},
        {"value": 0.3, "assignments": {"x": "0.5", "k": 2, "c": 1}},
    ],
    ids=["str-value", "array-value", "str-metric", "str-assignment"],
)
def test_a_real_non_number_is_refused_in_every_door_with_pass_float(client: Client, kwargs: dict[str, Any]) -> None:
    exp = client.create_experiment(name="refused", parameters=PARAMS, metric={"name": "loss", "objective": "minimize"})
    if "assignments" not in kwargs:
        kwargs = dict(kwargs, suggestion_id=client.suggest(exp.id).id)
    with pytest.raises(ApiError) as caught:
        client.observe(exp.id, **kwargs)
    assert caught.value.error_type == "invalid_request"
    assert "pass float(x)" in caught.value.message, caught.value.message
    assert client.observations(exp.id) == []
