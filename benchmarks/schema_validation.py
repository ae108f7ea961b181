"""What validating the worker loop's two request bodies costs: tauopt.schema's pydantic
models (what the REST door runs per ask and per observe) beside msgspec Structs of the
same fields, when msgspec is installed (it is not a tauopt dependency: the comparison
that chose pydantic).

    .venv/bin/python benchmarks/schema_validation.py
    PYTHONPATH=/tmp/msgspec .venv/bin/python benchmarks/schema_validation.py   # with msgspec (pip install --target /tmp/msgspec msgspec)

Prints one JSON line: microseconds per body, best of 5 repeats; `*_validate` from the
parsed dict (the door parses JSON first), `msgspec_decode` from the bytes in one step.
"""

from __future__ import annotations

import json
import timeit
from typing import Any, Callable, Union

from tauopt.schema import ObserveBody, SuggestBody

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
    print(json.dumps(out))


if __name__ == "__main__":
    main()
