"""Grid search over a finite space, in enumeration order, skipping used points."""

from __future__ import annotations

import numpy as np

from ..models import Value
from ._request import SuggestRequest


def propose(request: SuggestRequest, rng: np.random.Generator) -> list[dict[str, Value]]:
    space = request.space
    used = {space.key(o.assignments) for o in request.history}
    used.update(space.key(a) for a in request.pending)
    out: list[dict[str, Value]] = []
    for point in space.grid(request.options.grid_size):
        if space.key(point) not in used:
            out.append(point)
            if len(out) == request.n:
                break
    return out
