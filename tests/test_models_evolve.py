"""Models evolve by copying their fields (no __init__ per field): the copy equals what
dataclasses.replace gives, the original is untouched, and a misspelt field fails.
Suggestion and Observation write their __init__ out: it takes the fields, in order,
with their defaults, as the generated one would, and the models stay frozen."""

from __future__ import annotations

import inspect
from dataclasses import MISSING, FrozenInstanceError, fields, replace
from typing import Any

import pytest

from tauopt.models import Experiment, Metric, Observation, Parameter, Suggestion
from tauopt.schema import parse_parameter


def _experiment() -> Experiment:
    return Experiment("e1", "n", (parse_parameter({"name": "x", "type": "double", "bounds": [0, 1]}, 0),), Metric("y"))


def test_an_evolved_experiment_equals_replace_and_leaves_the_original_alone() -> None:
    exp = _experiment()
    new = exp.evolve(open_suggestions=3, observations=7, state="completed")
    assert new == replace(exp, open_suggestions=3, observations=7, state="completed")
    assert (exp.open_suggestions, exp.observations, exp.state) == (0, 0, "active")
    assert new.metrics == exp.metrics
    with pytest.raises(AttributeError):  # still frozen
        new.state = "active"  # type: ignore[misc]
    # a new metric goes through __init__ (and __post_init__) as before
    assert exp.evolve(metric=Metric("z")) == replace(exp, metric=Metric("z"))


def test_an_evolved_suggestion_equals_replace_and_a_misspelt_field_fails() -> None:
    s = Suggestion("1", "e1", {"x": 0.5})
    assert s.evolve(state="observed", released=False) == replace(s, state="observed", released=False)
    assert s.evolve(attempts=2).assignments is s.assignments  # shared, as replace shares it
    with pytest.raises(TypeError, match="no field"):
        s.evolve(stat="observed")


@pytest.mark.parametrize("cls", [Suggestion, Observation])
def test_a_written_out_init_takes_the_fields_in_order_with_their_defaults(cls: Any) -> None:
    params = list(inspect.signature(cls).parameters.values())
    assert [p.name for p in params] == [f.name for f in fields(cls)]
    for p, f in zip(params, fields(cls)):
        if f.default is not MISSING:
            assert p.default == f.default, f.name
        elif f.default_factory is not MISSING:
            assert p.default is not inspect.Parameter.empty, f.name  # a fresh value per instance, below
        else:
            assert p.default is inspect.Parameter.empty, f.name


def test_written_out_inits_build_what_the_fields_say_and_stay_frozen() -> None:
    s = Suggestion("1", "e1", {"x": 0.5}, tag="w0", created_at=2.0)
    assert (s.state, s.tag, s.created_at, s.attempts, s.released) == ("open", "w0", 2.0, 1, False)
    assert vars(s) == {f.name: getattr(s, f.name) for f in fields(s)}  # every field set, nothing else
    a, b = Observation("1", "e1", None, {"x": 0.5}), Observation("2", "e1", "1", {"x": 0.5}, 1.0)
    assert a.metrics == {} and a.metrics is not b.metrics  # a new dict each, like default_factory=dict
    assert (b.value, b.failed, b.stopped_at_step) == (1.0, False, None)
    assert replace(b, value=2.0) == Observation("2", "e1", "1", {"x": 0.5}, 2.0)
    with pytest.raises(FrozenInstanceError):
        s.state = "observed"  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        b.value = 3.0  # type: ignore[misc]
