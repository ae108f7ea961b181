"""Strategies: pure functions of a SuggestRequest and a random generator, and their registry.

    propose(request, rng) -> list of candidate assignments (may be fewer than n,
    may contain points already used: the engine dedups exactly).

Nothing here knows of actors, stores, processes or doors, and nothing imports
torch at module level. Which strategies exist, which run inline and which on
the compute executor is declared once, in the registry (`_registry`,
entries in `_builtin`). Adding a strategy: one module + one `register(...)`.
"""

from __future__ import annotations

import numpy as np

from ..models import Value
from ._builtin import lengthscale_importance  # importing it registers random, sobol, grid, gp
from ._job import Draws, StrategyJob, StrategyOutcome, request_rng, rng_for, run_job
from ._registry import (
    AUTO, MODEL_FREE, Importance, Strategy, design, design_size, get, grids, importance_for, names, register, resolve, resolve_for, unregister,
    uses_pool, warm_up_for,
)  # fmt: skip
from ._request import SuggestRequest

__all__ = [
    "Draws",
    "SuggestRequest",
    "Strategy",
    "Importance",
    "design",
    "grids",
    "importance_for",
    "StrategyJob",
    "StrategyOutcome",
    "AUTO",
    "MODEL_FREE",
    "get",
    "lengthscale_importance",
    "names",
    "propose",
    "register",
    "unregister",
    "request_rng",
    "rng_for",
    "resolve",
    "resolve_for",
    "design_size",
    "run_job",
    "warm_up_for",
    "uses_pool",
]


def propose(strategy: str, request: SuggestRequest, rng: np.random.Generator) -> list[dict[str, Value]]:
    """Candidates from `strategy` (`auto` resolved), computed here, whatever the strategy's placement."""
    return get(resolve(strategy, request)).propose(request, rng)

