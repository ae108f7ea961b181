"""The strategy boundary: a typed request in, candidate assignments out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ..models import Metric, Observation, StrategyOptions, Value
from ..space import Space

__all__ = ["SuggestRequest"]


@dataclass(slots=True)  # not frozen: an inline ask builds one, and a frozen __init__ costs ~8 bytecodes a field
class SuggestRequest:
    """Everything a strategy may look at. Picklable, so it can cross into a worker process.

    history: observations in arrival order (failed ones included, value None).
    pending: assignments of open suggestions (what parallel workers are evaluating now).
    drawn: how many points this experiment has drawn before; low-discrepancy
        sequences continue from there, so a restart does not replay them.
    seed: the experiment's seed; with `drawn` it makes every draw reproducible.
    budget: the experiment's observation_budget (None: open-ended); sizes the
        initial design (`_registry.design_size`).
    """

    space: Space
    metric: Metric
    history: Sequence[Observation] = ()  # a tuple, or the engine's view of its columns
    pending: tuple[dict[str, Value], ...] = ()
    n: int = 1
    seed: int = 0
    drawn: int = 0
    options: StrategyOptions = field(default_factory=StrategyOptions)
    # every metric (objectives first, then constraint metrics); empty means (metric,)
    metrics: tuple[Metric, ...] = ()
    budget: int | None = None
    # observations in the experiment's whole history when `history` is a cut of it
    # (a strategy's `bound_history`); 0: `history` is all of it
    seen: int = 0

    @property
    def history_size(self) -> int:
        """Observations in the whole history, cut or not."""
        return self.seen or len(self.history)

    @property
    def all_metrics(self) -> tuple[Metric, ...]:
        return self.metrics or (self.metric,)
