"""The built-in strategies' registry entries. gp's module is imported only when
a job runs (torch stays out of the engine's process); its availability is
checked without importing torch."""

from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from ..models import Metric, Observation, Value
from ..space import Space
from . import _grid, _random, _sobol, _sobol_points
from ._job import StrategyJob, StrategyOutcome
from ._registry import Importance, Strategy, register
from ._request import SuggestRequest


def _gp_propose(request: SuggestRequest, rng: np.random.Generator) -> list[dict[str, Value]]:
    from .gp import propose

    return propose(request, rng)


def _gp_run(job: StrategyJob) -> StrategyOutcome:
    from .gp import run

    return run(job)


def _gp_bound_history(request: SuggestRequest) -> SuggestRequest:
    from .gp import bound_history

    return bound_history(request)


def lengthscale_importance(space: Space, metric: Metric, history: Sequence[Observation], seed: int = 0) -> dict[str, float]:
    """Parameter importance from the GP's fitted length-scales (see `_gp_importance`);
    imported on call, so importing the strategies loads no torch."""
    from ._gp_importance import lengthscale_importance as run

    return run(space, metric, history, seed)


@functools.cache
def _gp_available() -> bool:
    try:
        from . import gp
    except ImportError:
        return False
    return gp.available()


register(Strategy("random", _random.propose, reads_history=False))
register(Strategy("sobol", _sobol.propose, reads_history=False, draws_random=False, warm_up=_sobol_points.warm_up))
register(Strategy("grid", _grid.propose, draws_random=False, grids=True))
register(Strategy(
    "gp", _gp_propose, pooled=True, run=_gp_run, available=_gp_available, initial_design=True,
    bound_history=_gp_bound_history, importance=Importance("gp_lengthscales", lengthscale_importance),
))  # fmt: skip
