"""KerasTuner proto <-> tauopt models, with every trap of keras-tuner 1.4.8 handled.

Inbound (a worker's space and values): malformed messages raise `ApiError`
`invalid_request` (the servicer answers INVALID_ARGUMENT and stores nothing);
well-formed hyperparameters tauopt cannot represent are skipped with a reason.

Outbound (anything a worker parses): Int/Float sampling is never NONE, every
Choice has a default, every Fixed a value, and each value sits in the oneof of
its parameter's type — one bad field kills the worker inside CreateTrial.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from ...errors import ApiError, invalid
from ...limits import MAX_CATEGORICAL_VALUES, check_count
from ...models import Condition, Parameter, Value
from ...schema import parse_parameter
from ...engine import Learned, assignments_for, default_value, merge_space
from ...space import Space
from ._generated import keras_tuner_pb2 as kt

__all__ = [
    "MAX_HPS",
    "MAX_NAME",
    "Learned",
    "value_to_proto",
    "value_from_proto",
    "values_to_proto",
    "fill_values",
    "values_from_proto",
    "space_from_proto",
    "space_to_proto",
    "hyperparameters_to_proto",
    "merge_space",
    "assignments_for",
    "check_kerastuner_space",
]

MAX_HPS = 2_000  # hyperparameters per message; beyond this is not a model, it is an attack
MAX_NAME = 512

_SAMPLING_IN = {kt.LINEAR: "linear", kt.LOG: "log", kt.REVERSE_LOG: "reverse_log"}
_SAMPLING_OUT = {v: k for k, v in _SAMPLING_IN.items()}


# -- values ---------------------------------------------------------------------


def value_to_proto(v: Value) -> kt.Value:
    """A Python value in the oneof KerasTuner would pick: bool before int (bool is an int)."""
    out = kt.Value()
    _set_value(out, v)
    return out


def _set_value(slot: kt.Value, v: Value) -> None:
    if isinstance(v, bool):
        slot.boolean_value = v
    elif isinstance(v, int):
        slot.int_value = v
    elif isinstance(v, float):
        slot.float_value = v
    elif isinstance(v, str):
        slot.string_value = v
    else:
        raise TypeError(f"cannot send {v!r} ({type(v).__name__}) to KerasTuner")


def value_from_proto(where: str, msg: kt.Value) -> Value:
    kind = msg.WhichOneof("kind")
    if kind is None:
        raise invalid(f"{where}: the Value has none of int_value, float_value, string_value, boolean_value set")
    v = getattr(msg, kind)
    if kind == "float_value" and not math.isfinite(v):
        raise invalid(f"{where}: {v!r} is not finite")
    return v


def _typed(p: Parameter | None, v: Value) -> Value:
    """The Python type the worker must see for p (the oneof decides it)."""
    if p is None:
        return v
    if p.type == "int" and not isinstance(v, bool):
        return int(v)
    if p.type == "double" and not isinstance(v, bool):
        return float(v)
    return v


def values_to_proto(values: Mapping[str, Value], space: Space | None = None) -> kt.HyperParameters.Values:
    out = kt.HyperParameters.Values()
    fill_values(out, values, space)
    return out


def fill_values(out: kt.HyperParameters.Values, values: Mapping[str, Value], space: Space | None) -> None:
    """Set `out`'s values in place, each in the oneof `value_to_proto` picks for its
    parameter's type (no Value message built and copied per value: trials are hot)."""
    by_name = space.by_name if space is not None else {}
    slots = out.values
    for name, v in values.items():
        _set_value(slots[name], _typed(by_name.get(name), v))


def values_from_proto(msg: kt.HyperParameters.Values) -> dict[str, Value]:
    if len(msg.values) > MAX_HPS:
        raise invalid(f"hyperparameters.values: {len(msg.values)} values; at most {MAX_HPS}")
    out: dict[str, Value] = {}
    for name, v in msg.values.items():
        _check_name("hyperparameters.values", name)
        out[name] = value_from_proto(f"hyperparameters.values[{name!r}]", v)
    return out


def _check_name(where: str, name: str) -> None:
    if not name or len(name) > MAX_NAME or not name.isprintable():
        raise invalid(f"{where}: hyperparameter names must be 1-{MAX_NAME} printable characters, got {name[:40]!r}")


# -- space: KerasTuner -> tauopt ----------------------------------------------------


def _conditions(where: str, conds: Iterable[kt.Condition]) -> tuple[Condition, ...]:
    out = []
    for i, c in enumerate(conds):
        if c.WhichOneof("kind") != "parent":
            raise invalid(f"{where}.conditions[{i}]: only Parent conditions exist; the parent field is unset")
        _check_name(f"{where}.conditions[{i}].name", c.parent.name)
        vals = tuple(value_from_proto(f"{where}.conditions[{i}].values", v) for v in c.parent.values)
        if not vals:
            raise invalid(f"{where}.conditions[{i}]: a Parent condition needs at least one value")
        out.append(Condition(c.parent.name, vals))
    return tuple(out)


def _sampling(where: str, s: kt.Sampling) -> str:
    if s not in _SAMPLING_IN:
        raise invalid(f"{where}.sampling: {s} is not LINEAR, LOG or REVERSE_LOG (KerasTuner rejects NONE too)")
    return _SAMPLING_IN[s]


def _numeric(where: str, kind: str, hp: Any) -> dict[str, Any]:
    lo, hi, step, default = hp.min_value, hp.max_value, hp.step, hp.default
    if kind == "double" and not all(math.isfinite(x) for x in (lo, hi, step, default)):
        raise invalid(f"{where}: min_value, max_value, step and default must be finite")
    scale = _sampling(where, hp.sampling)
    conds = [c.to_dict() for c in _conditions(where, hp.conditions)]
    if lo > hi:
        raise invalid(f"{where}: min_value {lo} > max_value {hi}")
    if step < 0:
        raise invalid(f"{where}: step {step} is negative")
    if lo == hi:
        return {"name": hp.name, "type": "fixed", "value": lo, "conditions": conds}
    raw: dict[str, Any] = {"name": hp.name, "type": kind, "bounds": [lo, hi], "conditions": conds}
    if scale != "linear" and step:
        # KerasTuner's step multiplies under log sampling (lo, lo*s, lo*s^2, ...):
        # tauopt's step adds, so spell the grid out as an ordered categorical.
        if step <= 1:
            raise invalid(f"{where}: a {scale} {kind} needs step > 1 (it multiplies), got {step}")
        if lo <= 0:
            raise invalid(f"{where}: {scale} sampling needs min_value > 0, got {lo}")
        n = int(math.log(hi / lo, step) + 1e-8) + 1
        check_count(f"{where}.step", n, MAX_CATEGORICAL_VALUES, f"values of a {scale} grid with step {step} over [{lo}, {hi}]")
        pts = [lo * step**k for k in range(n)]
        if scale == "reverse_log":
            pts = [hi + lo - x for x in pts][::-1]
        vals = [int(round(x)) if kind == "int" else float(x) for x in pts]
        vals = list(dict.fromkeys(vals))
        out: dict[str, Any] = {"name": hp.name, "type": "categorical", "values": vals, "conditions": conds}
        if any(default == v for v in vals):
            out["default"] = vals[[default == v for v in vals].index(True)]
        return out
    raw["scale"] = scale
    if step:
        raw["step"] = step
    if lo <= default <= hi:
        raw["default"] = default
    return raw


def _raw_parameters(space: kt.HyperParameters.Space) -> list[tuple[str, dict[str, Any]]]:
    """(where, raw tauopt parameter dict) in KerasTuner's merge order: Fixed, Float, Int, Choice, Boolean."""
    total = sum(len(x) for x in (space.fixed_space, space.float_space, space.int_space, space.choice_space, space.boolean_space))
    if total > MAX_HPS:
        raise invalid(f"hyperparameters.space: {total} hyperparameters; at most {MAX_HPS}")
    out: list[tuple[str, dict[str, Any]]] = []
    for i, hp in enumerate(space.fixed_space):
        where = f"fixed_space[{i}] ({hp.name!r})"
        _check_name(where, hp.name)
        if not hp.HasField("value"):
            raise invalid(f"{where}: a Fixed needs its value")
        value = value_from_proto(f"{where}.value", hp.value)
        out.append((where, {"name": hp.name, "type": "fixed", "value": value, "conditions": [c.to_dict() for c in _conditions(where, hp.conditions)]}))
    for i, hp in enumerate(space.float_space):
        where = f"float_space[{i}] ({hp.name!r})"
        _check_name(where, hp.name)
        out.append((where, _numeric(where, "double", hp)))
    for i, hp in enumerate(space.int_space):
        where = f"int_space[{i}] ({hp.name!r})"
        _check_name(where, hp.name)
        out.append((where, _numeric(where, "int", hp)))
    for i, hp in enumerate(space.choice_space):
        where = f"choice_space[{i}] ({hp.name!r})"
        _check_name(where, hp.name)
        if not hp.values:
            raise invalid(f"{where}: a Choice needs at least one value")
        values = [value_from_proto(f"{where}.values", v) for v in hp.values]
        raw = {"name": hp.name, "type": "categorical", "values": values, "conditions": [c.to_dict() for c in _conditions(where, hp.conditions)]}
        if hp.HasField("default"):
            raw["default"] = value_from_proto(f"{where}.default", hp.default)
        out.append((where, raw))
    for i, hp in enumerate(space.boolean_space):
        where = f"boolean_space[{i}] ({hp.name!r})"
        _check_name(where, hp.name)
        out.append((where, {"name": hp.name, "type": "boolean", "default": hp.default, "conditions": [c.to_dict() for c in _conditions(where, hp.conditions)]}))
    return out


def space_from_proto(space: kt.HyperParameters.Space) -> Learned:
    """Parse a worker's space. Raises on malformed messages; skips (with a reason) what
    is valid KerasTuner but not representable, e.g. one name under two condition sets."""
    params: list[Parameter] = []
    skipped: list[str] = []
    seen: set[str] = set()
    for where, raw in _raw_parameters(space):
        if raw["name"] in seen:
            skipped.append(f"{where}: a second definition of {raw['name']!r} (tauopt names are unique); the first is kept")
            continue
        if raw.get("type") == "categorical" and raw.get("default") is not None:
            if not any(_same(raw["default"], v) for v in raw["values"]):
                raw = {k: v for k, v in raw.items() if k != "default"}
        try:
            params.append(parse_parameter(raw))
        except ApiError as exc:
            skipped.append(f"{where}: {exc.message}")
            continue
        seen.add(raw["name"])
    return Learned(tuple(params), tuple(skipped))


def _same(a: Value, b: Value) -> bool:
    from ...models import same_value

    return same_value(a, b)


# -- space: tauopt -> KerasTuner ------------------------------------------------------


def check_kerastuner_space(space: Space) -> None:
    """Refuse tauopt spaces a KerasTuner worker cannot parse (a Choice holds one type)."""
    for p in space.parameters:
        if p.type == "categorical":
            kinds = {_kind(v) for v in p.values or ()}
            if len(kinds) > 1:
                raise invalid(
                    f"parameter {p.name!r}: KerasTuner's Choice holds values of one type, got {sorted(kinds)}; "
                    "split it or use strings"
                )


def _kind(v: Value) -> str:
    return "bool" if isinstance(v, bool) else "str" if isinstance(v, str) else "number"


def _conditions_out(p: Parameter) -> list[kt.Condition]:
    return [
        kt.Condition(parent=kt.Condition.Parent(name=c.parent, values=[value_to_proto(v) for v in c.values]))
        for c in p.conditions
    ]


def space_to_proto(space: Space) -> kt.HyperParameters.Space:
    out = kt.HyperParameters.Space()
    for p in space.parameters:
        conds = _conditions_out(p)
        if p.type == "double":
            lo, hi = p.bounds  # type: ignore[misc]
            out.float_space.append(
                kt.Float(
                    name=p.name, min_value=lo, max_value=hi, step=float(p.step or 0.0),
                    sampling=_SAMPLING_OUT[p.scale], default=float(p.default if p.default is not None else lo),
                    conditions=conds,
                )
            )
        elif p.type == "int":
            lo, hi = p.bounds  # type: ignore[misc]
            out.int_space.append(
                kt.Int(
                    name=p.name, min_value=int(lo), max_value=int(hi), step=int(p.step or 0),
                    sampling=_SAMPLING_OUT[p.scale], default=int(p.default if p.default is not None else lo),
                    conditions=conds,
                )
            )
        elif p.type == "categorical":
            vals = list(p.values or ())
            numeric = all(_kind(v) == "number" for v in vals)
            if numeric and any(isinstance(v, float) for v in vals):
                vals = [float(v) for v in vals]  # one oneof for the whole Choice, as KerasTuner sends it
            default = default_value(p)
            default = float(default) if numeric and isinstance(vals[0], float) else default
            out.choice_space.append(
                kt.Choice(
                    name=p.name, values=[value_to_proto(v) for v in vals], default=value_to_proto(default),
                    ordered=numeric, conditions=conds,
                )
            )
        elif p.type == "boolean":
            out.boolean_space.append(kt.Boolean(name=p.name, default=bool(p.default), conditions=conds))
        else:
            out.fixed_space.append(kt.Fixed(name=p.name, value=value_to_proto(p.value), conditions=conds))  # type: ignore[arg-type]
    return out


def hyperparameters_to_proto(values: Mapping[str, Value], space: Space | None, with_space: bool = False) -> kt.HyperParameters:
    """Values typed by their parameter; the space only when asked (GetSpace). A trial
    sent with values only is what workers handle best: they register their own space."""
    hp = kt.HyperParameters(values=values_to_proto(values, space))
    if with_space and space is not None:
        hp.space.CopyFrom(space_to_proto(space))
    return hp
