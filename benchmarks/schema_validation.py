"""What validating the worker loop's two request bodies costs: tauopt.schema's pydantic
models (what the REST door runs per ask and per observe) beside msgspec Structs of the
same fields, when msgspec is installed (it is not a tauopt dependency: the comparison
that chose pydantic); and, in process, what the engine's checks cost: the rule functions
an ask and an observe run (`rules_us`), and a create's spec through `ExperimentSpec`
against the same rules called one by one (`create`).

    .venv/bin/python benchmarks/schema_validation.py
    PYTHONPATH=/tmp/msgspec .venv/bin/python benchmarks/schema_validation.py   # with msgspec (pip install --target /tmp/msgspec msgspec)

Prints one JSON line: microseconds per body, best of 5 repeats; `*_validate` from the
parsed dict (the door parses JSON first), `msgspec_decode` from the bytes in one step.
"""

from __future__ import annotations

import json
import timeit
from typing import Any, Callable, Union

from tauopt.models import Experiment, Metric
from tauopt.schema import (
    ExperimentSpec,
    ObserveBody,
    SuggestBody,
    check_bandwidth,
    check_budget,
    check_description,
    check_early_stopping,
    check_max_failures,
    check_name,
    check_observation,
    check_strategy,
    check_tag,
    check_ttl,
    check_wait,
    parse_metrics,
    parse_strategy_options,
)
from tauopt.space import Space
from tauopt.strategies import names

N = 100_000
BODIES: dict[str, tuple[Any, dict[str, Any]]] = {
    "suggest": (SuggestBody, {"tag": "job-17-worker-3"}),
    "observe": (ObserveBody, {"suggestion_id": "123", "value": 0.25}),
}


def _us(fn: Callable[[], Any]) -> float:
    return round(min(timeit.repeat(fn, number=N, repeat=5)) / N * 1e6, 3)


def _msgspec_types() -> dict[str, Any] | None:
    try:
        import msgspec
    except ImportError:
        return None

    class Suggest(msgspec.Struct, forbid_unknown_fields=True):
        tag: Union[str, None] = None
        wait_s: Union[float, None] = None

    class Observe(msgspec.Struct, forbid_unknown_fields=True):
        suggestion_id: Union[str, int, None] = None
        assignments: Union[dict[str, Any], None] = None
        value: Union[float, None] = None
        failed: bool = False
        metrics: Union[dict[str, float], None] = None
        values: Union[dict[str, float], None] = None
        stopped: bool = False

    return {"suggest": Suggest, "observe": Observe}


EXPERIMENT = Experiment("e", "e", (), Metric("loss"))
CREATE: dict[str, Any] = {
    "name": "resnet", "parameters": [
        {"name": "lr", "type": "double", "bounds": [1e-4, 1e-1], "scale": "log"},
        {"name": "depth", "type": "int", "bounds": [2, 8]},
        {"name": "opt", "type": "categorical", "values": ["sgd", "adam"]},
    ], "metric": {"name": "loss", "objective": "minimize"}, "metrics": None, "parallel_bandwidth": 8,
    "suggestion_ttl_s": 600, "observation_budget": 200, "strategy": "auto", "strategy_options": None,
    "early_stopping": None, "max_consecutive_failures": None, "description": None,
}  # fmt: skip


def _create_by_rules() -> None:
    c = CREATE
    parse_metrics(c["metric"], c["metrics"]), parse_strategy_options(c["strategy_options"])
    check_early_stopping(c["early_stopping"]), Space.parse(c["parameters"]), check_strategy(c["strategy"], names())
    check_name(c["name"]), check_bandwidth(c["parallel_bandwidth"]), check_ttl(c["suggestion_ttl_s"])
    check_budget(c["observation_budget"]), check_max_failures(c["max_consecutive_failures"])
    check_description(c["description"])


def main() -> None:
    out: dict[str, Any] = {"kind": "schema_validation", "n": N}
    structs = _msgspec_types()
    for name, (model, body) in BODIES.items():
        row = {"pydantic_validate_us": _us(lambda: model.model_validate(body))}
        if structs is not None:
            import msgspec

            raw, decoder = json.dumps(body).encode(), msgspec.json.Decoder(structs[name])
            row["msgspec_validate_us"] = _us(lambda: msgspec.convert(body, structs[name]))
            row["msgspec_decode_us"] = _us(lambda: decoder.decode(raw))
        out[name] = row
    out["suggest"]["rules_us"] = _us(lambda: (check_tag("job-17-worker-3"), check_wait(None)))
    out["observe"]["rules_us"] = _us(lambda: check_observation(EXPERIMENT, 0.25, False, None, None))
    n = N // 100
    out["create"] = {
        "spec_model_us": round(min(timeit.repeat(lambda: ExperimentSpec.model_validate(CREATE), number=n, repeat=5)) / n * 1e6, 1),
        "rules_us": round(min(timeit.repeat(_create_by_rules, number=n, repeat=5)) / n * 1e6, 1),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
