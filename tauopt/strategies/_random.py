"""Uniform random sampling (log scales in log space, conditional parameters only when active)."""

from __future__ import annotations

import numpy as np

from ..models import Value
from ._request import SuggestRequest


def propose(request: SuggestRequest, rng: np.random.Generator) -> list[dict[str, Value]]:
    space = request.space
    u = rng.random((request.n, len(space.dims))).tolist()  # Python floats: cheaper per value than numpy's
    return [space.from_unit(row) for row in u]
