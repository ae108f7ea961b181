"""Where a batch lands in a rotated multimodal function's own coordinates: the GP
(`auto`) against Optuna's TPE, batches of W asked together as the engine's round
asks them at 0 s evaluations (every point of the last batch observed, none pending).

    .venv/bin/python benchmarks/gp_basins.py --functions styblinski_tang --d 10 --workers 4 --seeds 100,101

The suite's rotated instances are f(ystar + R (x - o)): in x no coordinate is
separable. In y, Styblinski-Tang is, with two basins per coordinate (the global
one left of the ridge at y_i = 0.157, a shallower one right of it). Per run (JSON,
one line each):
  final                    final log10 regret
  wrong_basins             Styblinski-Tang: coordinates (of y) of the best point in the shallower basin
  basin_share              the share of the best point's regret those account for (each costs
                           the two basins' difference in depth); the rest is the distance from
                           the bottoms of the basins it is in
  batch_basin_split        per batch, the share of y-coordinates on which the batch's points do
                           not all lie in one basin (median over the model's batches)
  batch_spread             per batch, the mean pairwise distance of its points (unit cube / sqrt(d))
  inc_dist                 per batch, the mean distance of its points to the incumbent
  tr_length                the trust region's side per GP batch (min, median, max)
  first_gp                 the evaluations before the first modelled batch (the design)

Methods: gp, a GP variant of _quality_drivers.GP_VARIANTS (GPConfig switches; the
design and budget ones are not applied here), gp_trNN (the trust region starting
at side NN/10 instead of tr.LENGTH_INIT), optuna_tpe and the other Optuna samplers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import fields
from typing import Any, Iterator

os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")

import numpy as np  # noqa: E402

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import _suite  # noqa: E402
from _quality_drivers import GP_VARIANTS, _optuna_sampler  # noqa: E402

RIDGE = 0.157  # Styblinski-Tang's per-coordinate local maximum between its two basins, in y
SHALLOW = 2.7468  # the shallower basin's minimizer per coordinate

Batches = Iterator[tuple[list[dict[str, Any]], bool, float | None]]


def _st1(t: float) -> float:
    return 0.5 * (t**4 - 16 * t**2 + 5 * t)


def _transform(name: str, d: int, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """R and o of the seed-th instance, drawn as _suite.make draws them."""
    _, lo, hi, ystar, _, _ = _suite.FUNCTIONS[name]
    if ystar is None:
        raise SystemExit(f"{name} is not of the rotated kind")
    rng = np.random.default_rng([seed, d, sum(map(ord, name))])
    rot = _suite._rotation(d, rng)
    o = lo + (0.2 + 0.6 * rng.random(d)) * (hi - lo)
    return rot, o, ystar


def _gp_batches(problem: _suite.Problem, budget: int, workers: int, seed: int, method: str) -> Batches:
    from tauopt.models import Metric, Observation, StrategyOptions
    from tauopt.strategies import _gp_trust_region as tr
    from tauopt.strategies import propose, resolve
    from tauopt.strategies._request import SuggestRequest
    from tauopt.strategies.gp import GPConfig, propose_gp

    names = {f.name for f in fields(GPConfig)}
    config = GPConfig(**{k: v for k, v in GP_VARIANTS.get(method, {}).items() if k in names})
    init = tr.TrustRegion.__init__.__defaults__
    if method.startswith("gp_tr"):
        tr.TrustRegion.__init__.__defaults__ = (int(method[5:]) / 10, *init[1:])
    options = StrategyOptions(seed=seed)
    history: list[Any] = []
    warm, drawn = None, 0
    try:
        while len(history) < budget:
            n = min(workers, budget - len(history))
            req = SuggestRequest(problem.space, Metric("y"), tuple(history), (), n, seed, drawn, options, budget=budget)
            if resolve("auto", req) == "gp":
                r = propose_gp(req, np.random.default_rng([seed, drawn]), warm, config=config)
                warm, batch, length, gp = r.state, r.candidates, r.info.tr_length, True
            else:  # the design, one point at a time as the engine draws it
                req = SuggestRequest(problem.space, Metric("y"), tuple(history), (), 1, seed, drawn, options, budget=budget)
                batch, length, gp = propose("auto", req, np.random.default_rng([seed, drawn])), None, False
            drawn += len(batch)
            yield batch, gp, length
            for a in batch:
                history.append(Observation(str(len(history)), "e", None, a, problem.f(a)))
    finally:
        tr.TrustRegion.__init__.__defaults__ = init


def _optuna_batches(problem: _suite.Problem, budget: int, workers: int, seed: int, method: str) -> Batches:
    import optuna
    from optuna.distributions import FloatDistribution

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    dists = {p.name: FloatDistribution(p.bounds[0], p.bounds[1]) for p in problem.space.parameters}  # type: ignore[index]
    study = optuna.create_study(sampler=_optuna_sampler(optuna, method, seed), direction="minimize")
    done = 0
    while done < budget:
        trials = [study.ask(dists) for _ in range(min(workers, budget - done))]
        yield [t.params for t in trials], done >= 10, None
        for t in trials:
            study.tell(t, problem.f(t.params))
        done += len(trials)


def diagnose(name: str, d: int, workers: int, seed: int, mult: int, method: str) -> dict[str, Any]:
    problem = _suite.make(name, d, seed)
    rot, o, ystar = _transform(name, d, seed)
    st = name == "styblinski_tang"
    budget = mult * d
    keys = [f"x{i}" for i in range(d)]
    gen = _optuna_batches if method.startswith("optuna") else _gp_batches
    xs: list[np.ndarray] = []
    vals: list[float] = []
    split, spread, inc, trs, first_gp = [], [], [], [], None
    for batch, modelled, length in gen(problem, budget, workers, seed, method):
        x = np.array([[a[k] for k in keys] for a in batch], dtype=float)
        if modelled and len(batch) > 1:
            first_gp = len(vals) if first_gp is None else first_gp
            side = (ystar + (x - o) @ rot.T) > RIDGE
            split.append(float(np.mean(side.any(0) & ~side.all(0))))
            u = (x - problem.lo) / (problem.hi - problem.lo)
            pair = np.sqrt(((u[:, None] - u[None]) ** 2).sum(-1))[np.triu_indices(len(u), 1)]
            spread.append(float(pair.mean() / np.sqrt(d)))
            best = (xs[int(np.argmin(vals))] - problem.lo) / (problem.hi - problem.lo)
            inc.append(float(np.linalg.norm(u - best, axis=1).mean() / np.sqrt(d)))
            if length is not None:
                trs.append(length)
        xs += list(x)
        vals += [problem.f(a) for a in batch]
    b = int(np.argmin(vals))
    regret = max(vals[b] - problem.optimum, 1e-12)
    wrong = int(((ystar + rot @ (xs[b] - o)) > RIDGE).sum())

    def med(v: list[float]) -> float | None:
        return round(float(np.median(v)), 3) if v else None

    return {
        "function": name, "d": d, "workers": workers, "seed": seed, "method": method, "budget": budget,
        "final": round(float(np.log10(regret)), 3),
        "wrong_basins": wrong if st else None,
        "basin_share": round(wrong * (_st1(SHALLOW) - _st1(ystar)) / regret, 2) if st else None,
        "batch_basin_split": med(split) if st else None, "batch_spread": med(spread), "inc_dist": med(inc),
        "tr_length": [round(min(trs), 3), med(trs), round(max(trs), 3)] if trs else None, "first_gp": first_gp,
    }  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--functions", default="styblinski_tang", help="rotated functions of benchmarks/_suite.py")
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--seeds", default="100,101")
    ap.add_argument("--budget", type=int, default=6, help="evaluations per dimension")
    ap.add_argument("--methods", default="gp,optuna_tpe", help="gp, a GP variant, gp_trNN, optuna_tpe, ...")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    for f in args.functions.split(","):
        for s in (int(x) for x in args.seeds.split(",")):
            for m in args.methods.split(","):
                print(json.dumps(diagnose(f, args.d, args.workers, s, args.budget, m)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
