"""ExperimentSpec: the spec create_experiment takes, its fields judged by the rules of
`tauopt.schema` (the messages users read) and documented as the spec's types; pydantic
is loaded by the first create, not by `import tauopt`."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from tauopt import ApiError
from tauopt.models import Metric, Parameter, StrategyOptions
from tauopt.schema import ExperimentSpec, ParameterSpec, parse_parameter
from tauopt.space import Space

X = {"name": "x", "type": "double", "bounds": [0, 1]}


def test_the_spec_holds_the_engines_values() -> None:
    spec = ExperimentSpec.model_validate(
        {"name": "e", "parameters": [X], "metric": {"name": "acc", "objective": "maximize"}, "strategy_options": {"seed": 3}}
    )
    assert isinstance(spec.parameters, Space) and spec.parameters.parameters == (parse_parameter(X),)
    assert spec.parameters.parameters[0] == Parameter("x", "double", (0.0, 1.0))
    assert spec.metrics == (Metric("acc", "maximize"),)
    assert spec.strategy_options == StrategyOptions(seed=3)
    assert (spec.parallel_bandwidth, spec.strategy, dict(spec.early_stopping)) == (1, "auto", {"rule": "none"})


@pytest.mark.parametrize(
    "change, message",
    [
        ({"name": ""}, "name: give a non-empty string"),
        ({"parameters": [dict(X, bounds=[1, 1])]}, "parameters[0] ('x').bounds: lo must be < hi"),
        ({"metric": {"name": "y", "goal": "min"}}, "metric: unknown key(s) ['goal']"),
        ({"metrics": [{"name": "y", "objective": "minimize"}]}, "give metric= (one objective) or metrics=[...], not both"),
        ({"parallel_bandwidth": 0}, "parallel_bandwidth: give an integer >= 1, got 0"),
        ({"strategy": "bayes"}, "strategy: 'bayes' is not one of"),
        ({"early_stopping": {"rule": "asha"}}, "max_step"),
    ],
)
def test_a_bad_field_is_refused_with_its_rules_message(change: dict, message: str) -> None:
    with pytest.raises(ApiError) as info:
        ExperimentSpec.model_validate({"name": "e", "parameters": [X], "metric": {"name": "y"}, **change})
    assert info.value.error_type == "invalid_request" and message in info.value.message, info.value.message


def test_the_fields_are_documented_as_the_spec_types() -> None:
    props = ExperimentSpec.model_json_schema()["properties"]
    variants = {ref["$ref"].rsplit("/", 1)[1] for ref in props["parameters"]["items"]["oneOf"]}
    assert variants == {"DoubleParameter", "IntParameter", "CategoricalParameter", "BooleanParameter", "FixedParameter"}
    assert props["parallel_bandwidth"]["minimum"] == 1
    assert "auto" in props["strategy"]["enum"]


def test_import_tauopt_loads_no_pydantic_and_the_first_create_does() -> None:
    program = (
        "import sys, anyio, tauopt\n"
        "before = 'pydantic' in sys.modules\n"
        "async def main():\n"
        "    async with tauopt.Engine() as e:\n"
        "        await e.create_experiment('e', [{'name': 'x', 'type': 'double', 'bounds': [0, 1]}], {'name': 'y'})\n"
        "anyio.run(main)\n"
        "print(before, 'pydantic' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["False", "True"]


# What the document says of a parameter and what the rules judge, side by side: the
# document must accept every parameter the rules accept (it may accept more, as it
# cannot relate two values: lo < hi, a default within the bounds).
_values = st.one_of(st.text(max_size=3), st.integers(-3, 3), st.floats(-3, 3, allow_nan=False), st.booleans())
_conditions = st.one_of(
    st.none(), st.just([]), st.fixed_dictionaries({"parent": st.just("p"), "values": st.lists(_values, min_size=1, max_size=2)}),
    st.lists(st.fixed_dictionaries({"parent": st.just("p"), "values": st.lists(_values, min_size=1, max_size=2)}), max_size=2),
)
_scale = st.sampled_from([None, "linear", "log", "reverse_log"])


def _kind(kind: str, **fields: st.SearchStrategy) -> st.SearchStrategy:
    return st.fixed_dictionaries(
        {"name": st.sampled_from(["x", "lr"]), "type": st.just(kind)}, optional={"conditions": _conditions, **fields}
    )


_parameters = st.one_of(
    _kind("double", bounds=st.tuples(st.floats(-5, 5), st.floats(-5, 5)).map(sorted), scale=_scale,
          step=st.one_of(st.none(), st.floats(0.01, 3), st.integers(1, 2)), default=st.one_of(st.none(), st.floats(-5, 5), st.integers(-5, 5))),
    _kind("int", bounds=st.tuples(st.integers(-5, 5), st.integers(-5, 5)).map(sorted), scale=_scale,
          step=st.one_of(st.none(), st.integers(1, 3)), default=st.one_of(st.none(), st.integers(-5, 5))),
    _kind("categorical", values=st.lists(_values, min_size=1, max_size=4), default=st.one_of(st.none(), _values)),
    _kind("boolean", default=st.one_of(st.none(), st.booleans())),
    _kind("fixed", value=_values),
)  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_parameters)
def test_the_document_accepts_every_parameter_the_rules_accept(raw: dict) -> None:
    try:
        parse_parameter(raw)
    except ApiError:
        return
    TypeAdapter(ParameterSpec).validate_python(raw)
