"""Request bodies as JSON, strictly and within a nesting bound: the one parser the doors use.

A body nested 1,000 deep would otherwise reach code that recurses over it (or the
decoder itself would raise RecursionError); it is refused here with
`invalid_request` before any other work.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import invalid
from ..limits import MAX_JSON_DEPTH

__all__ = ["loads_body"]


def _reject_constant(name: str) -> Any:
    raise json.JSONDecodeError(f"{name} is not valid JSON", name, 0)


# One decoder for every body: json.loads with an option builds a new one per call.
_DECODE = json.JSONDecoder(parse_constant=_reject_constant).decode


def loads_body(body: bytes | str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The JSON value of body. NaN and Infinity raise json.JSONDecodeError (as JSON says);
    nesting deeper than max_depth raises ApiError invalid_request."""
    if isinstance(body, (bytes, bytearray)):  # as json.loads does: UTF-8/16/32, undecodable -> ValueError
        # an object whose second byte is not NUL is UTF-8 (detect_encoding's own answer, without its checks)
        utf8 = body[:1] == b"{" and body[1:2] != b"\x00"
        body = body.decode("utf-8" if utf8 else json.detect_encoding(body), "surrogatepass")
    elif body.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", body, 0)
    try:
        value = _DECODE(body)
    except RecursionError:  # the C decoder's own guard: deeper than Python's recursion limit
        raise _too_deep(max_depth) from None
    _check_depth(value, max_depth)
    return value


def _check_depth(value: Any, max_depth: int) -> None:
    """Iteratively (the point is not to recurse): only containers are visited."""
    if not isinstance(value, (dict, list)):
        return
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise _too_deep(max_depth)
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))


def _too_deep(max_depth: int) -> Exception:
    return invalid(f"body: JSON nested deeper than {max_depth} levels is refused; send a flatter body")
