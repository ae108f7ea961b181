"""Models evolve by copying their fields (no __init__ per field): the copy equals what
dataclasses.replace gives, the original is untouched, and a misspelt field fails."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tauopt.models import Experiment, Metric, Parameter, Suggestion


def _experiment() -> Experiment:
    return Experiment("e1", "n", (Parameter.parse({"name": "x", "type": "double", "bounds": [0, 1]}, 0),), Metric("y"))


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
