"""What a StrategyPool answers: the boundary type between actor and pool."""

from __future__ import annotations

from dataclasses import dataclass

from ..models import Value

__all__ = ["ProposeResult"]


@dataclass(frozen=True)
class ProposeResult:
    """candidates: proposed assignments (the engine dedups them exactly).
    strategy_used: what actually produced them ("gp", or "sobol" after a fallback).
    fallback_reason: why the requested strategy was not used (None when it was, and
        when there was nothing to model yet: the initial design is not a failure).
    fit_seconds: time spent fitting/optimizing in the worker."""

    candidates: tuple[dict[str, Value], ...]
    strategy_used: str
    fallback_reason: str | None = None
    fit_seconds: float = 0.0
