"""The sobol strategy: scrambled Sobol points, continuing the experiment's sequence from `drawn`."""

from __future__ import annotations

import numpy as np

from ..models import Value
from ._request import SuggestRequest
from ._sobol_points import sobol_points


def propose(request: SuggestRequest, rng: np.random.Generator) -> list[dict[str, Value]]:
    space = request.space
    d = len(space.dims)
    if d == 0:
        return [space.from_unit(()) for _ in range(request.n)]
    u = sobol_points(d, start=request.drawn, n=request.n, seed=request.seed)
    return [space.from_unit(row) for row in u]
