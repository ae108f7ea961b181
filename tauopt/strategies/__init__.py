"""Strategies: pure functions of a SuggestRequest and a random generator.

    propose(request, rng) -> list of candidate assignments (may be fewer than n,
    may contain points already used: the engine dedups exactly).

random, sobol and grid run inline in the actor; gp runs in the StrategyPool.
Nothing here imports torch at module level.
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from ..models import StrategyOptions, Value
from ..space import Space
from ._request import SuggestRequest

__all__ = ["SuggestRequest", "propose", "resolve", "resolve_for", "INLINE"]

Propose = Callable[[SuggestRequest, np.random.Generator], list[dict[str, Value]]]
INLINE = ("random", "sobol", "grid")


def resolve(strategy: str, request: SuggestRequest) -> str:
    """The concrete strategy `auto` stands for at this point of the experiment."""
    return resolve_for(strategy, request.space, len(request.history) + len(request.pending), request.options)


def resolve_for(strategy: str, space: Space, seen: int, options: StrategyOptions) -> str:
    """`auto` and `gp` are Sobol for the first `initial_points` (default max(5, 2*d))
    points, then gp (`auto` stays on Sobol when torch/gpytorch are missing).

    Why `gp` too: a GP fitted on one or two points has nothing to say and its
    acquisition runs to the corners of the box; a space-filling design first is
    what the model needs."""
    if strategy not in ("auto", "gp"):
        return strategy
    initial = options.initial_points or max(5, 2 * len(space.dims))
    if seen < initial:
        return "sobol"
    if strategy == "auto" and not _gp_available():
        return "sobol"
    return "gp"


@functools.cache
def _gp_available() -> bool:
    try:
        from . import gp  # noqa: F401  (lazy: torch is imported inside gp's functions)
    except ImportError:
        return False
    return gp.available()


def propose(strategy: str, request: SuggestRequest, rng: np.random.Generator) -> list[dict[str, Value]]:
    name = resolve(strategy, request)
    if name == "random":
        from ._random import propose as fn
    elif name == "sobol":
        from ._sobol_strategy import propose as fn
    elif name == "grid":
        from ._grid import propose as fn
    elif name == "gp":
        from .gp import propose as fn
    else:
        raise ValueError(f"unknown strategy {name!r}")
    return fn(request, rng)
