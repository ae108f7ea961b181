"""metrics=[...]: objectives and constraint metrics; validation names the field; metric= unchanged."""

from __future__ import annotations

import pytest

from tauopt import ApiError
from tauopt.models import Constraint, Experiment, Metric, Parameter
from tauopt.schema import parse_metrics, parse_parameter


def _error(**kw) -> str:
    with pytest.raises(ApiError) as info:
        parse_metrics(**kw)
    assert info.value.error_type == "invalid_request"
    return str(info.value)


def test_metric_alone_means_what_it_means_today():
    assert parse_metrics(metric={"name": "loss"}) == (Metric("loss", "minimize"),)
    assert parse_metrics(metric={"name": "acc", "objective": "maximize"}) == (Metric("acc", "maximize"),)


def test_metrics_list_puts_objectives_first_in_the_order_given():
    ms = parse_metrics(metrics=[
        {"name": "mem", "constraint": {"<=": 512}},
        {"name": "acc", "objective": "maximize"},
        {"name": "latency", "objective": "minimize"},
    ])
    assert [m.name for m in ms] == ["acc", "latency", "mem"]
    assert ms[2] == Metric("mem", None, Constraint("<=", 512.0))


@pytest.mark.parametrize(
    "metrics, says",
    [
        ([{"name": "a", "objective": "minimize"}, {"name": "a", "objective": "maximize"}], "metrics[1].name: 'a' appears twice"),
        ([{"name": "mem", "constraint": {"<=": 1}}], "at least one objective"),
        ([{"name": f"m{i}", "objective": "minimize"} for i in range(5)], "5 objectives; at most 4"),
        ([{"name": "a", "objective": "minimize"}, {"name": "c", "constraint": {"<": 1}}], "metrics[1].constraint ('c')"),
        ([{"name": "a", "objective": "minimize"}, {"name": "c", "constraint": {"<=": 1, ">=": 0}}], "exactly one bound"),
        ([{"name": "a", "objective": "minimize"}, {"name": "c", "constraint": {"<=": float("inf")}}], "finite number"),
        ([{"name": "a", "objective": "minimize"}, {"name": "c", "constraint": {"<=": "1"}}], "finite number"),
        ([{"name": "a", "objective": "minimize", "constraint": {"<=": 1}}], "an objective or a constraint, not both"),
        ([{"name": "a", "objective": None}], "metrics[0] ('a'): give 'objective'"),
        ([{"name": "a", "objective": "up"}], "metrics[0].objective: 'up'"),
        ([{"name": "a", "objective": "minimize", "weight": 2}], "metrics[0]: unknown key(s) ['weight']"),
        ({"name": "a"}, "give a list"),
        ([], "at least one objective"),
    ],
)
def test_validation_errors_name_the_field(metrics, says):
    assert says in _error(metrics=metrics)


def test_metric_and_metrics_together_or_neither_are_refused():
    assert "not both" in _error(metric={"name": "a"}, metrics=[{"name": "a", "objective": "minimize"}])
    assert "give metric=" in _error()


def test_an_experiment_stored_before_metrics_existed_reads_with_its_one_metric():
    old = {
        "id": "e", "name": "old", "parameters": [{"name": "x", "type": "double", "bounds": [0, 1]}],
        "metric": {"name": "acc", "objective": "maximize"}, "parallel_bandwidth": 1,
    }
    exp = Experiment.from_dict(old)
    assert exp.metrics == (Metric("acc", "maximize"),)
    assert exp.objectives == exp.metrics and exp.constraints == ()
    assert exp.to_dict()["metrics"] == [{"name": "acc", "objective": "maximize"}]


def test_metrics_round_trip_through_the_wire_form():
    ms = parse_metrics(metrics=[{"name": "acc", "objective": "maximize"}, {"name": "mem", "constraint": {">=": 0}}])
    exp = Experiment("e", "n", (parse_parameter({"name": "x", "type": "double", "bounds": [0, 1]}),), ms[0], metrics=ms)
    assert Experiment.from_dict(exp.to_dict()) == exp


def test_a_metric_without_objective_minimizes_in_metrics_as_in_metric() -> None:
    assert parse_metrics(metrics=[{"name": "a"}]) == parse_metrics(metric={"name": "a"}) == (Metric("a", "minimize"),)
