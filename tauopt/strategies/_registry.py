"""The registry of strategies: every name the engine accepts, and how each runs.

    register(Strategy("toy", propose=my_propose, pooled=True))

An entry declares its `propose(request, rng) -> candidates` function, whether
it runs inline in the actor (cheap: random, sobol, grid) or as a job on the
compute executor (slow: gp), and what it reads: `reads_history=False` lets the
actor skip copying history and pending into the request, `draws_random=False`
skips deriving a generator per ask (sobol and grid are deterministic). A pooled strategy may
give `run(job) -> StrategyOutcome` to use warm state and the deadline; by
default its `propose` is wrapped. A strategy with a model of the metric may
declare `importance` (how it explains which parameters matter: gp by its fitted
length-scales); `grids=True` says its points are a grid, so `grid_size` makes
continuous spaces finite. Validation, `auto`, the actor, importance and the
executors all read from here; nothing else lists strategy names.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..models import Metric, Observation, StrategyOptions, Value
from ..space import Space
from ._job import Run, StrategyJob, StrategyOutcome, request_rng
from ._request import SuggestRequest

__all__ = [
    "Strategy", "Propose", "Importance", "register", "get", "names", "resolve", "resolve_for", "warm_up_for", "uses_pool",
    "importance_for", "grids", "design", "design_size", "AUTO", "MODEL_FREE",
]  # fmt: skip

Propose = Callable[[SuggestRequest, np.random.Generator], list[dict[str, Value]]]
AUTO = "auto"  # not a strategy of its own: sobol for the initial design, then gp
# The plainest model-free strategy: for experiments whose points mostly come from
# elsewhere (a trial-based door's studies, where the client's sampler decides).
MODEL_FREE = "random"
_DESIGN = "sobol"  # the space-filling design: auto's and pooled strategies' first points, and their fallback


@dataclass(frozen=True)
class Importance:
    """How a strategy explains an experiment's parameters: `shares(space, metric,
    history, seed) -> {parameter: share}` (blocking; may raise, and the caller then
    falls back to a model-free estimate), named `method` on every answer."""

    method: str
    shares: Callable[[Space, Metric, Sequence[Observation], int], dict[str, float]]


@dataclass(frozen=True)
class Strategy:
    name: str
    propose: Propose
    pooled: bool = False
    reads_history: bool = True
    draws_random: bool = True
    run: Run | None = None
    available: Callable[[], bool] = lambda: True
    warm_up: Callable[[], None] | None = None  # slow imports, run off the event loop at engine start
    initial_design: bool = False  # Sobol for the first initial_points points, then this strategy
    importance: Importance | None = None  # its own account of which parameters matter
    grids: bool = False  # its points are a grid: `grid_size` per continuous dimension makes the space finite
    # pure: the request a pooled job carries to its worker, its history cut to what the
    # strategy models (`seen` keeps the whole count), so what is pickled stays bounded
    bound_history: Callable[[SuggestRequest], SuggestRequest] | None = None

    @property
    def job_runner(self) -> Run:
        """What a pooled job calls: `run`, or `propose` wrapped (module-level, picklable)."""
        if self.run is not None:
            return self.run
        return functools.partial(_run_propose, self.propose, self.name)  # type: ignore[return-value]


def _run_propose(propose: Propose, name: str, job: StrategyJob) -> StrategyOutcome:
    t0 = time.monotonic()
    candidates = propose(job.request, request_rng(job.request))
    return StrategyOutcome(tuple(candidates), name, None, time.monotonic() - t0, job.warm)


_REGISTRY: dict[str, Strategy] = {}


def register(strategy: Strategy) -> Strategy:
    """Add (or replace) a strategy by name; returns it."""
    if not strategy.name or strategy.name == AUTO:
        raise ValueError(f"a strategy needs a name other than {AUTO!r}, got {strategy.name!r}")
    _REGISTRY[strategy.name] = strategy
    return strategy


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def get(name: str) -> Strategy:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}; known: {names()}") from None


def warm_up_for(strategy: str) -> Callable[[], None] | None:
    """The warm-up an experiment of `strategy` needs in the engine's process, or None:
    its own for an inline strategy, sobol's for `auto` and for pooled strategies
    (gp: its initial design, and the fallback when a job fails or misses its
    deadline, are Sobol computed inline). Blocking; the engine runs it on a thread and waits for it before such
    an experiment's actor starts, so the first ask does not stall the event loop."""
    spec = _REGISTRY.get(strategy)
    if strategy == AUTO or (spec is not None and spec.pooled):
        spec = _REGISTRY.get(_DESIGN)
    return None if spec is None else spec.warm_up


def uses_pool(strategy: str) -> bool:
    """Whether an experiment of `strategy` will run pooled jobs (auto: when its
    post-initial-design strategy is pooled and available). Blocking: `available`
    may import a module; the engine calls this on a thread."""
    if strategy == AUTO:
        return any(s.pooled and s.initial_design and s.available() for s in _REGISTRY.values())
    spec = _REGISTRY.get(strategy)
    return spec is not None and spec.pooled and spec.available()


def design() -> Strategy:
    """The inline space-filling design (sobol): what an ask gets when a pooled job has
    no point for it, as in the initial design."""
    return _REGISTRY[_DESIGN]


def grids(strategy: str) -> bool:
    """Whether `strategy` draws from a grid (`grid_size` makes continuous spaces finite)."""
    spec = _REGISTRY.get(strategy)
    return spec is not None and spec.grids


def importance_for(strategy: str, space: Space, seen: int, options: StrategyOptions, budget: int | None = None) -> Importance | None:
    """How the strategy that proposes an experiment's points once `seen` points are
    used can explain its parameters, or None: it has no model of the metric (random,
    sobol, grid, or `auto` and gp in their initial design), or the model cannot run here."""
    spec = _REGISTRY.get(resolve_for(strategy, space, seen, options, budget))
    if spec is None or spec.importance is None or not spec.available():
        return None
    return spec.importance


def names() -> tuple[str, ...]:
    """Every name an experiment may ask for: auto, then the registered strategies."""
    return (AUTO, *_REGISTRY)


def resolve(strategy: str, request: SuggestRequest) -> str:
    """The concrete strategy `auto` stands for at this point of the experiment."""
    return resolve_for(strategy, request.space, request.history_size + len(request.pending), request.options, request.budget)


def design_size(d: int, options: StrategyOptions, budget: int | None = None) -> int:
    """How many Sobol points come before the model: `initial_points` when set, else
    max(5, 2*d), cut to 1/DESIGN_SHARE of the observation budget (at least d + 1)
    when there is one."""
    if options.initial_points:
        return options.initial_points
    full = max(5, 2 * d)
    if budget is None:
        return full
    return min(full, max(d + 1, budget // DESIGN_SHARE))


# 1: the budget does not cut the design: cutting it to a fifth of a 6*d budget or a
# third of a 3*d one lost Levy and Styblinski-Tang (docs/strategies/gp.md). A run's
# budget still reaches every strategy, so benchmarks can try other shares.
DESIGN_SHARE = 1


def resolve_for(strategy: str, space: Space, seen: int, options: StrategyOptions, budget: int | None = None) -> str:
    """`auto`, and strategies declaring `initial_design` (gp), are Sobol for the first
    `design_size` points (`initial_points`, by default max(5, 2*d)); then `auto` is gp
    (Sobol when torch/gpytorch are missing).

    Why a design first: a GP fitted on one or two points has nothing to say and its
    acquisition runs to the corners of the box; a space-filling design is what the
    model needs."""
    spec = _REGISTRY.get(strategy)
    if strategy != AUTO and (spec is None or not spec.initial_design):
        return strategy
    if seen < design_size(len(space.dims), options, budget):
        return _DESIGN
    if strategy != AUTO:
        return strategy
    gp = _REGISTRY.get("gp")
    return "gp" if gp is not None and gp.available() else _DESIGN
