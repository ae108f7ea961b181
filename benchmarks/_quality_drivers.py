"""Drivers for benchmarks/quality.py: one run = one method on one problem
instance with W parallel workers, returning the values in observation order
and the seconds spent choosing points.

  run_strategy  tauopt's strategies called directly (exact simulated parallelism:
                W suggestions open at all times, the oldest observed first;
                tauopt sees the other W-1 as pending points)
  run_optuna    Optuna's samplers through ask/tell with the same parallelism
  run_engine    the real ask path: an AsyncClient (local Engine, process pool,
                compute-ahead, deadline fallback) with W concurrent worker
                tasks that each evaluate for `eval_s` seconds
"""

from __future__ import annotations

import collections
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from _suite import Problem

from tauopt.models import Metric, Observation, StrategyOptions
from tauopt.strategies import propose, resolve
from tauopt.strategies._request import SuggestRequest

# name -> GPConfig switches; "gp" is the default model, the others switch one of its choices off
GP_VARIANTS: dict[str, dict[str, Any]] = {
    "gp": {},
    "gp_notr": {"trust_region": False},  # no trust region at any d
    "gp_cw": {"min_separation": 0.0},  # the warp chosen, half-rank batches not separated
    "gp_nocw": {"choose_warp": False},  # standardized outputs only
    # every proposal fits and chooses the warp, at any history size (the default
    # reuses both from GPConfig.large_history = 256 observations until the history grows)
    "gp_everyfit": {"large_history": 10**9},
    # settings tried for small budgets ("initial_points" is the experiment's strategy option,
    # "budget" whether the request carries the run's budget (the design is sized from it),
    # "design_share" the budget's share for the design (registry.DESIGN_SHARE), "lhs" a
    # Latin hypercube design instead of the experiment's scrambled Sobol points; not GPConfig's)
    "gp_i10": {"initial_points": 10},
    "gp_i20": {"initial_points": 20},
    "gp_i10_notr": {"initial_points": 10, "trust_region": False},
    "gp_nob": {"budget": False},  # the design as before the budget was passed: max(5, 2d)
    "gp_share5": {"design_share": 5},  # a fifth of the budget (the default: the whole design)
    "gp_share4": {"design_share": 4},
    "gp_share3": {"design_share": 3},
    # the next two on gp_share5's design, as they were measured
    "gp_lhs": {"lhs": True, "design_share": 5},
    # hyperparameters reused at any history size until it grows by a tenth (the posterior
    # still conditions on every point): a fit per batch or so instead of per ask
    "gp_reuse": {"large_history": 1, "design_share": 5},
    # every pick of a batch in the trust region (GPConfig.global_pick off)
    "gp_noglobal": {"global_pick": False},
}


# Compute-ahead policies of the engine's actor (tauopt/engine/_ahead.py), set for a
# measurement by patching its module-level knobs: how many points a job computes
# ahead (MAX_AHEAD), how many observations a point may be behind when served
# (stale_bound; past it an ask waits for the fit in flight, bounded by the fit
# deadline), and whether an ask a landing job had no point for waits for the next
# job (PARK_LEFTOVERS).
#   adaptive the engine's default: as many ahead as asks are expected during one
#           job, W x job s / evaluation s (1 to min(W, 8)); leftovers wait for the
#           next job when evaluations are _ahead.PARK_LONG jobs long or more, else
#           take Sobol points; with evaluations under a quarter of a job none ahead,
#           a job waits for the round's observations (_ahead.ROUND_SHARE)
#   adaptive_park  the same, leftovers always wait for the next job (as demand)
#   ahead8  the default before: up to min(W, 8) ahead, served while <= max(2, W)
#           behind, leftover asks answered from Sobol
#   ahead1  one point ahead, same staleness, leftovers from Sobol
#   fresh   never serve a point computed before the latest observation: every ask
#           that finds none waits for a fresh proposal (the "short bounded wait")
#   demand  one point ahead, and an ask the landing job had no point for waits for
#           the next job (sized for every parked ask) instead of taking a Sobol point
#           (_ahead.PARK_LEFTOVERS): the batch follows the asks that are waiting
#   adaptive_ahead  adaptive without the round (ROUND_SHARE = 0): with short
#           evaluations up to min(W, 8) ahead, served a round behind their values
POLICIES: dict[str, tuple[int, int | None, bool, bool, float]] = {  # MAX_AHEAD, stale bound, PARK_LEFTOVERS, ADAPT_AHEAD, ROUND_SHARE
    "adaptive": (8, None, False, True, 0.25),
    "adaptive_ahead": (8, None, False, True, 0.0),
    "adaptive_park": (8, None, True, True, 0.25),
    "ahead8": (8, None, False, False, 0.0),
    "ahead1": (1, None, False, False, 0.0),
    "fresh": (1, 0, False, False, 0.0),
    "demand": (1, None, True, False, 0.0),
}
DEFAULT_POLICY = "adaptive"  # quality.py names its rows engine@Es, the others engine@Es/<policy>


@contextlib.contextmanager
def ahead_policy(name: str) -> Iterator[None]:
    from tauopt.engine import _ahead

    ahead, stale, park, adapt, round_share = POLICIES[name]
    saved = _ahead.MAX_AHEAD, _ahead.ComputeAhead.__dict__["stale_bound"], _ahead.PARK_LEFTOVERS, _ahead.ADAPT_AHEAD, _ahead.ROUND_SHARE
    _ahead.MAX_AHEAD, _ahead.PARK_LEFTOVERS, _ahead.ADAPT_AHEAD, _ahead.ROUND_SHARE = ahead, park, adapt, round_share
    if stale is not None:
        _ahead.ComputeAhead.stale_bound = staticmethod(lambda bandwidth: stale)  # type: ignore[method-assign]
    try:
        yield
    finally:
        _ahead.MAX_AHEAD, _ahead.ComputeAhead.stale_bound, _ahead.PARK_LEFTOVERS, _ahead.ADAPT_AHEAD, _ahead.ROUND_SHARE = saved  # type: ignore[method-assign]


@dataclass
class Run:
    values: list[float]
    suggest_s: float  # seconds choosing points, per suggestion
    extra: dict[str, Any] = field(default_factory=dict)


def run_strategy(problem: Problem, method: str, budget: int, workers: int, seed: int) -> Run:
    """`budget` is also the run's observation budget, passed in every request as the
    engine passes an experiment's (variants with "budget": False leave it out)."""
    from tauopt.strategies.gp import GPConfig

    space, metric = problem.space, Metric("y")
    switches = dict(GP_VARIANTS.get(method, {}))
    options = StrategyOptions(initial_points=switches.pop("initial_points", None))
    known = budget if switches.pop("budget", True) else None
    with _design_share(switches.pop("design_share", None)):
        lhs = _lhs(problem, options, known, seed) if switches.pop("lhs", False) else None
        config = GPConfig(**switches) if method in GP_VARIANTS else None
        return _run_strategy(problem, method, budget, workers, seed, options, known, config, lhs)


@contextlib.contextmanager
def _design_share(share: int | None) -> Iterator[None]:
    """A variant's design share (registry.DESIGN_SHARE), set for one run."""
    from tauopt.strategies import _registry

    saved = _registry.DESIGN_SHARE
    _registry.DESIGN_SHARE = share or saved
    try:
        yield
    finally:
        _registry.DESIGN_SHARE = saved


def _lhs(problem: Problem, options: StrategyOptions, budget: int | None, seed: int) -> list[dict[str, Any]]:
    """A Latin hypercube of the design's size (scipy, seeded): the design points in order."""
    from scipy.stats import qmc

    from tauopt.strategies import design_size

    n = design_size(problem.d, options, budget)
    u = qmc.LatinHypercube(problem.d, rng=seed).random(n)
    return [problem.space.from_unit(tuple(row)) for row in u]


def _run_strategy(
    problem: Problem, method: str, budget: int, workers: int, seed: int, options: StrategyOptions, known: int | None,
    config: Any, lhs: list[dict[str, Any]] | None,
) -> Run:
    from tauopt.strategies.gp import propose_gp

    space, metric = problem.space, Metric("y")
    history: list[Observation] = []
    pending: collections.deque[dict[str, Any]] = collections.deque()
    warm, drawn, spent, fits, half_rank = None, 0, 0.0, 0, 0
    values: list[float] = []

    def ask() -> None:
        nonlocal warm, drawn, spent, fits, half_rank
        t0 = time.perf_counter()
        req = SuggestRequest(space, metric, tuple(history), tuple(pending), 1, seed, drawn, options, budget=known)
        rng = np.random.default_rng([seed, drawn])
        strategy = "auto" if config is not None else method
        if lhs is not None and drawn < len(lhs):
            cands = [lhs[drawn]]
        elif config is not None and resolve(strategy, req) == "gp":
            r = propose_gp(req, rng, warm, config=config)
            warm, cands = r.state, r.candidates
            fits += r.info.fallback_reason is None
            half_rank += r.info.half_rank
        else:
            cands = propose(strategy, req, rng)
        spent += time.perf_counter() - t0
        drawn += 1
        pending.append(cands[0])

    while len(pending) < workers:
        ask()
    while len(values) < budget:
        a = pending.popleft()
        v = problem.f(a)
        values.append(v)
        history.append(Observation(str(len(history)), "e", None, a, v))
        if len(values) + len(pending) < budget:
            ask()
    return Run(values, spent / budget, {"half_rank_frac": half_rank / fits} if fits else {})


def _optuna_sampler(optuna: Any, method: str, seed: int) -> Any:
    if method == "optuna_gp":
        return optuna.samplers.GPSampler(seed=seed)
    if method == "optuna_tpe":
        return optuna.samplers.TPESampler(seed=seed, multivariate=True)
    if method == "optuna_tpe_nocl":  # Optuna 5 defaults to constant_liar=True (running trials as liars); this is without
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=False)
    if method == "optuna_cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed)
    raise ValueError(method)


def run_optuna(problem: Problem, method: str, budget: int, workers: int, seed: int) -> Run:
    import optuna
    from optuna.distributions import FloatDistribution

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    dists = {p.name: FloatDistribution(p.bounds[0], p.bounds[1]) for p in problem.space.parameters}  # type: ignore[index]
    study = optuna.create_study(sampler=_optuna_sampler(optuna, method, seed), direction="minimize")
    open_trials: collections.deque[Any] = collections.deque()
    values: list[float] = []
    spent = 0.0

    def ask() -> None:
        nonlocal spent
        t0 = time.perf_counter()
        open_trials.append(study.ask(dists))
        spent += time.perf_counter() - t0

    while len(open_trials) < workers:
        ask()
    while len(values) < budget:
        trial = open_trials.popleft()
        v = problem.f(trial.params)
        values.append(v)
        t0 = time.perf_counter()
        study.tell(trial, v)
        spent += time.perf_counter() - t0
        if len(values) + len(open_trials) < budget:
            ask()
    return Run(values, spent / budget)


class SimClock:
    """Simulated evaluation time for run_engine: the engine's clock (pass the instance
    as Engine's `clock`) runs with real time, and jumps ahead to the next evaluation's
    end whenever every worker is evaluating and the experiment has no job running.
    Nothing happens in the engine meanwhile, so the run is the one real sleeps would
    give (fits and asks still take their real time), without waiting for them."""

    def __init__(self) -> None:
        self.skipped = 0.0
        self._sleepers: dict[int, tuple[float, Any]] = {}

    def __call__(self) -> float:
        return time.time() + self.skipped

    async def sleep(self, seconds: float) -> None:
        import anyio

        done = anyio.Event()
        key = id(done)
        self._sleepers[key] = (self() + seconds, done)
        await done.wait()

    async def drive(self, client: Any, experiment_id: str, active: list[int]) -> None:
        """Wake workers whose evaluation ended; skip idle time. Returns when no worker is active."""
        import anyio

        while active[0]:
            now = self()
            for key, (wake, done) in list(self._sleepers.items()):
                if wake <= now:
                    del self._sleepers[key]
                    done.set()
            if self._sleepers and len(self._sleepers) == active[0]:
                stats = await client.engine.inspect(experiment_id)
                if not stats["job_running"] and len(self._sleepers) == active[0]:
                    self.skipped += max(0.0, min(w for w, _ in self._sleepers.values()) - self())
                    continue
            await anyio.sleep(0.002)


async def run_engine(
    client: Any, problem: Problem, budget: int, workers: int, seed: int, eval_s: float, clock: SimClock | None = None
) -> Run:
    """`auto` through the engine as users get it. Workers start staggered over
    one evaluation time (a steady state, not lockstep). With `clock` (the engine's
    clock too), evaluations take simulated time (SimClock)."""
    import anyio

    sleep = anyio.sleep if clock is None else clock.sleep

    exp = await client.create_experiment(
        f"{problem.name}-{problem.d}-{seed}",
        problem.space.parameters,
        {"name": "y"},
        parallel_bandwidth=workers,
        observation_budget=budget,
        strategy="auto",
        strategy_options={"seed": seed},
    )
    values: list[float] = []
    asks: list[float] = []
    issued = 0

    active = [workers]

    async def worker(i: int) -> None:
        nonlocal issued
        try:
            await sleep(eval_s * i / workers)
            while issued < budget:
                issued += 1
                t0 = time.perf_counter()
                s = await client.suggest(exp.id)
                asks.append(time.perf_counter() - t0)
                v = problem.f(s.assignments)
                await sleep(eval_s)
                values.append(v)
                await client.observe(exp.id, s.id, value=v)
        finally:
            active[0] -= 1

    async with anyio.create_task_group() as tg:
        for i in range(workers):
            tg.start_soon(worker, i)
        if clock is not None:
            tg.start_soon(clock.drive, client, exp.id, active)
    stats = await client.engine.inspect(exp.id)
    served = max(int(stats.get("served_pooled", 0)), 1)
    extra = {
        "fallback_frac": stats.get("served_fallback", 0) / budget,
        "stale_frac": stats.get("served_stale", 0) / budget,
        "gp_served": stats.get("served_pooled", 0),
        "stale_of_gp": stats.get("served_stale", 0) / served,
        "ask_p50_s": float(np.quantile(asks, 0.5)),
        "ask_p99_s": float(np.quantile(asks, 0.99)),
    }
    return Run(values, float(np.mean(asks)), extra)
