"""A pooled strategy job and its outcome: the picklable boundary between the
engine's compute executor and a strategy (vizier's SuggestRequest/SuggestDecision).

A job carries the strategy's `run` function itself (a module-level function,
pickled by reference), so a worker process runs strategies registered in any
importable module, not only the built-in ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..models import Value
from ._request import SuggestRequest

__all__ = ["StrategyJob", "StrategyOutcome", "Run", "request_rng", "rng_for", "run_job"]


@dataclass(frozen=True)
class StrategyOutcome:
    """candidates: proposed assignments (the engine dedups them exactly).
    strategy_used: what produced them (e.g. "gp", or "sobol" after a fallback).
    fallback_reason: why the requested strategy was not used (None when it was).
    fit_seconds: time spent fitting/optimizing. state: warm state for the next job
    of the same experiment (None for stateless strategies)."""

    candidates: tuple[dict[str, Value], ...]
    strategy_used: str
    fallback_reason: str | None = None
    fit_seconds: float = 0.0
    state: Any = None


@dataclass(frozen=True)
class StrategyJob:
    """What crosses into a worker: the strategy's run function, the request, the
    warm state of the experiment's previous job, and the time left to answer."""

    run: "Run"
    request: SuggestRequest
    warm: Any = None
    deadline_s: float | None = None

    def with_warm(self, warm: Any, deadline_s: float | None) -> "StrategyJob":
        return StrategyJob(self.run, self.request, warm, deadline_s)


Run = Callable[[StrategyJob], StrategyOutcome]


def rng_for(seed: int, drawn: int) -> np.random.Generator:
    """The one generator of a draw: reproducible from (seed, drawn), so a restarted
    experiment draws what it would have, whichever executor runs the job."""
    return np.random.default_rng([seed, drawn])


def request_rng(request: SuggestRequest) -> np.random.Generator:
    return rng_for(request.seed, request.drawn)


def run_job(job: StrategyJob) -> StrategyOutcome:
    """Run one job (module level, so it pickles into worker processes)."""
    return job.run(job)
