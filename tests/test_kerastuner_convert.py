"""KerasTuner proto <-> tauopt conversions: every trap of keras-tuner 1.4.8 (§4.2, §7)."""

from __future__ import annotations

import pytest

from tauopt.errors import ApiError
from tauopt.models import Parameter
from tauopt.space import Space
from tauopt.transport.grpc import _convert as c
from tauopt.transport.grpc._generated import keras_tuner_pb2 as kt
from tauopt.schema import parse_parameter


def parent(name: str, *values: kt.Value) -> kt.Condition:
    return kt.Condition(parent=kt.Condition.Parent(name=name, values=list(values)))


def worker_space() -> kt.HyperParameters.Space:
    """What a worker sends at EndTrial for Int, log Float, Choice, Boolean, Fixed and a conditional Float."""
    return kt.HyperParameters.Space(
        int_space=[kt.Int(name="units", min_value=4, max_value=64, step=4, sampling=kt.LINEAR, default=4)],
        float_space=[
            kt.Float(name="lr", min_value=1e-4, max_value=0.1, sampling=kt.LOG, default=1e-4),
            kt.Float(name="momentum", min_value=0.0, max_value=0.9, step=0.1, sampling=kt.LINEAR, default=0.0,
                     conditions=[parent("optimizer", kt.Value(string_value="sgd"))]),
        ],
        choice_space=[kt.Choice(name="optimizer", values=[kt.Value(string_value="adam"), kt.Value(string_value="sgd")],
                                default=kt.Value(string_value="adam"))],
        boolean_space=[kt.Boolean(name="batchnorm")],
        fixed_space=[kt.Fixed(name="epochs", value=kt.Value(int_value=1))],
    )


def test_a_worker_space_becomes_tauopt_parameters_with_conditions() -> None:
    learned = c.space_from_proto(worker_space())
    assert learned.skipped == ()
    space, skipped = c.merge_space(Space(()), learned.parameters)
    assert skipped == []
    p = space.by_name
    assert p["units"].type == "int" and p["units"].bounds == (4, 64) and p["units"].step == 4
    assert p["lr"].scale == "log"
    assert p["momentum"].conditions[0].parent == "optimizer" and p["momentum"].conditions[0].values == ("sgd",)
    assert p["momentum"].step == pytest.approx(0.1)
    assert p["optimizer"].values == ("adam", "sgd")
    assert p["batchnorm"].type == "boolean" and p["epochs"].value == 1


def test_log_sampling_with_a_step_multiplies_so_it_becomes_an_explicit_grid() -> None:
    hp = kt.HyperParameters.Space(int_space=[kt.Int(name="n", min_value=2, max_value=64, step=2, sampling=kt.LOG, default=2)])
    (p,) = c.space_from_proto(hp).parameters
    assert p.type == "categorical" and p.values == (2, 4, 8, 16, 32, 64) and p.default == 2


def test_reverse_log_float_keeps_its_scale() -> None:
    hp = kt.HyperParameters.Space(float_space=[kt.Float(name="b", min_value=0.9, max_value=0.999, sampling=kt.REVERSE_LOG, default=0.9)])
    (p,) = c.space_from_proto(hp).parameters
    assert p.scale == "reverse_log"


@pytest.mark.parametrize(
    "space",
    [
        kt.HyperParameters.Space(int_space=[kt.Int(name="x", min_value=0, max_value=3, sampling=kt.NONE)]),
        kt.HyperParameters.Space(fixed_space=[kt.Fixed(name="x")]),
        kt.HyperParameters.Space(choice_space=[kt.Choice(name="x")]),
        kt.HyperParameters.Space(boolean_space=[kt.Boolean(name="x", conditions=[kt.Condition()])]),
        kt.HyperParameters.Space(float_space=[kt.Float(name="x", min_value=1, max_value=0, sampling=kt.LINEAR)]),
        kt.HyperParameters.Space(float_space=[kt.Float(name="x", min_value=0, max_value=float("inf"), sampling=kt.LINEAR)]),
        kt.HyperParameters.Space(boolean_space=[kt.Boolean(name="")]),
    ],
    ids=["sampling-NONE", "fixed-without-value", "empty-choice", "condition-without-parent", "min>max", "infinite", "no-name"],
)
def test_malformed_hyperparameters_are_refused(space: kt.HyperParameters.Space) -> None:
    with pytest.raises(ApiError) as err:
        c.space_from_proto(space)
    assert err.value.error_type == "invalid_request"


def test_a_second_definition_of_a_name_is_skipped_with_the_reason() -> None:
    hp = kt.HyperParameters.Space(
        boolean_space=[kt.Boolean(name="x"), kt.Boolean(name="x", conditions=[parent("y", kt.Value(int_value=1))])]
    )
    learned = c.space_from_proto(hp)
    assert len(learned.parameters) == 1 and "second definition" in learned.skipped[0]


def test_a_child_whose_parent_is_unknown_is_skipped_not_fatal() -> None:
    (child,) = c.space_from_proto(
        kt.HyperParameters.Space(boolean_space=[kt.Boolean(name="x", conditions=[parent("ghost", kt.Value(int_value=1))])])
    ).parameters
    space, skipped = c.merge_space(Space(()), [child])
    assert space.parameters == () and "unknown parent" in skipped[0]


def test_merge_adds_only_new_names_and_keeps_the_known_definition() -> None:
    known = Space((parse_parameter({"name": "units", "type": "int", "bounds": [1, 2]}),))
    learned = c.space_from_proto(worker_space()).parameters
    space, _ = c.merge_space(known, learned)
    assert space.by_name["units"].bounds == (1, 2)
    assert len(space.parameters) == 6


@pytest.mark.parametrize(
    ("ptype", "raw", "field"),
    [("int", 3, "int_value"), ("double", 3, "float_value"), ("boolean", True, "boolean_value"), ("categorical", "a", "string_value")],
)
def test_each_value_sits_in_the_oneof_of_its_parameter_type(ptype: str, raw, field: str) -> None:
    p = {"int": {"type": "int", "bounds": [0, 9]}, "double": {"type": "double", "bounds": [0, 9]},
         "boolean": {"type": "boolean"}, "categorical": {"type": "categorical", "values": ["a", "b"]}}[ptype]
    space = Space((parse_parameter({"name": "x", **p}),))
    values = c.values_to_proto({"x": raw}, space)
    assert values.values["x"].WhichOneof("kind") == field


def test_a_bool_is_never_sent_as_an_int() -> None:
    assert c.value_to_proto(True).WhichOneof("kind") == "boolean_value"
    assert c.value_to_proto(1).WhichOneof("kind") == "int_value"


def test_an_unset_value_is_refused() -> None:
    with pytest.raises(ApiError):
        c.values_from_proto(kt.HyperParameters.Values(values={"x": kt.Value()}))


def test_the_space_sent_obeys_keras_tuner_parsing_rules() -> None:
    space = Space(tuple(parse_parameter(p) for p in [
        {"name": "i", "type": "int", "bounds": [1, 5]},
        {"name": "f", "type": "double", "bounds": [0.1, 1.0], "scale": "log"},
        {"name": "c", "type": "categorical", "values": [1, 2.5]},
        {"name": "s", "type": "categorical", "values": ["a", "b"], "conditions": [{"parent": "i", "values": [1, 2]}]},
        {"name": "b", "type": "boolean"},
        {"name": "x", "type": "fixed", "value": "v"},
    ]))
    out = c.space_to_proto(space)
    assert all(hp.sampling != kt.NONE for hp in list(out.int_space) + list(out.float_space))
    assert all(ch.HasField("default") for ch in out.choice_space)
    assert all(fx.HasField("value") for fx in out.fixed_space)
    (num, txt) = out.choice_space
    assert {v.WhichOneof("kind") for v in num.values} == {"float_value"} and num.default.WhichOneof("kind") == "float_value"
    assert num.ordered and not txt.ordered
    assert [v.int_value for v in txt.conditions[0].parent.values] == [1, 2]
    # The round trip gives the same space back.
    back, _ = c.merge_space(Space(()), c.space_from_proto(out).parameters)
    assert {p.name for p in back.parameters} == {p.name for p in space.parameters}


def test_a_mixed_type_categorical_cannot_be_a_keras_tuner_choice() -> None:
    with pytest.raises(ApiError):
        c.check_kerastuner_space(Space((parse_parameter({"name": "x", "type": "categorical", "values": ["a", 1]}),)))


def test_worker_values_become_a_valid_point_inactive_dropped_missing_defaulted() -> None:
    space, _ = c.merge_space(Space(()), c.space_from_proto(worker_space()).parameters)
    point = c.assignments_for(space, {"units": 8, "optimizer": "adam", "momentum": 0.5, "lr": 7.0, "unknown": 1})
    assert point == {"epochs": 1, "lr": 1e-4, "units": 8, "optimizer": "adam", "batchnorm": False}
