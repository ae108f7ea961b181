"""Numbers are numbers: numpy scalars, 0-d arrays and anything with `__float__`
(a torch scalar tensor, a Decimal) become plain ints and floats at every door's
boundary, so `client.observe(exp, value=np.float32(0.3))` just works.

Only exact kinds are converted: an integral scalar (one with `__index__`) stays
an int, anything else with `__float__` becomes a float. Arrays with a shape, and
strings, are left as they are, for the validation to refuse with "pass float(x)".
"""

from __future__ import annotations

from typing import Any

__all__ = ["plain_number", "plain_json", "shown", "integral", "PASS_FLOAT"]

PASS_FLOAT = "pass float(x)"
_PLAIN = frozenset({type(None), bool, int, float, str})  # JSON leaves as they are


def integral(v: Any) -> Any:
    """An integral float as its int (JSON has one number type: 940.0 is the integer 940, as
    JSON Schema's "integer" says); anything else as it is, for the rule to judge."""
    return int(v) if type(v) is float and v.is_integer() else v


def plain_number(v: Any) -> Any:
    """`v` as an int or float when it is a number of another type, else `v` unchanged."""
    if v is None or type(v) in (bool, int, float, str):
        return v
    if isinstance(v, (str, bytes)):
        return v
    if isinstance(v, bool):
        return bool(v)
    if isinstance(v, int):
        return int(v)  # an int subclass (numpy's are not, but IntEnum is)
    if isinstance(v, float):
        return float(v)  # numpy.float64 is a float subclass
    if getattr(v, "ndim", 0) != 0:
        return v  # an array of several values is not a number, whatever float() would say
    kind = getattr(getattr(v, "dtype", None), "kind", None)
    if kind == "b":
        return bool(v)  # numpy.bool_: a boolean, not the number 1
    if kind in ("i", "u"):
        return int(v)
    try:
        if kind is None and hasattr(type(v), "__index__"):
            return int(v.__index__())
    except (TypeError, ValueError):
        pass  # a float tensor has __index__ and refuses it
    try:
        if hasattr(type(v), "__float__"):
            return float(v)
    except (TypeError, ValueError, OverflowError):
        pass
    return v


def plain_json(obj: Any, where: str = "") -> Any:
    """A JSON-ready copy of `obj` with every number-like leaf made plain (the HTTP
    client's request bodies: `json.dumps` refuses numpy.float32). A leaf JSON
    cannot carry is refused here, with the local door's words, not json's."""
    # Plain leaves are taken as they are, without a call or a path string each
    # (every request body goes through here).
    if isinstance(obj, dict):
        return {k: v if type(v) in _PLAIN else plain_json(v, f"{where}.{k}" if where else str(k)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [v if type(v) in _PLAIN else plain_json(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    plain = plain_number(obj)
    if plain is None or isinstance(plain, (bool, int, float, str)):
        return plain
    from .errors import invalid

    raise invalid(f"{where or 'body'}: give a number, got {shown(plain)}; {PASS_FLOAT}")


def shown(v: Any) -> str:
    """A refused value as a message shows it: its repr, cut short (a tensor's can be long)."""
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."
