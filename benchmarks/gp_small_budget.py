"""Why the GP does what it does at small budgets with parallel workers: one run
of `auto` driven as benchmarks/quality.py's strategy runs are (W suggestions
open, the oldest observed next), with what each GP proposal saw and chose.

    .venv/bin/python benchmarks/gp_small_budget.py --functions rastrigin,ackley --d 10 --workers 4 --seeds 100,101

Per run (JSON, one line each):
  n_init, init_share     the Sobol design's size and its share of the budget
  best_after_init        log10 regret when the design ends, and at the end
  tr_length              the trust region's side at each GP proposal (None: no region)
  pend_dist, obs_dist    each GP pick's distance (unit cube, / sqrt(d)) to the nearest
                         pending point and to the nearest observed point: how far apart
                         a batch is, and how much of each pick is new ground
  inc_dist               each GP pick's distance to the incumbent
  ls_drift               mean |change of log lengthscale| between consecutive fits
  ls_median              the median lengthscale (features are unit-cube coordinates)
  half_rank              the share of fits whose half-rank warped model was kept
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from typing import Any

os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")

import numpy as np  # noqa: E402

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import _suite  # noqa: E402


def diagnose(fname: str, d: int, workers: int, seed: int, mult: int, initial_points: int | None) -> dict[str, Any]:
    from tauopt.models import Metric, Observation, StrategyOptions
    from tauopt.strategies import propose, resolve
    from tauopt.strategies._request import SuggestRequest
    from tauopt.strategies.gp import propose_gp

    problem = _suite.make(fname, d, seed)
    space, budget = problem.space, mult * d
    options = StrategyOptions(initial_points=initial_points)
    history: list[Observation] = []
    pending: collections.deque[dict[str, Any]] = collections.deque()
    warm, drawn = None, 0
    lo, hi = problem.lo, problem.hi
    unit = lambda a: (np.array([a[f"x{i}"] for i in range(d)]) - lo) / (hi - lo)  # noqa: E731
    trace: dict[str, list[Any]] = collections.defaultdict(list)
    n_init = None

    def ask() -> None:
        nonlocal warm, drawn, n_init
        req = SuggestRequest(space, Metric("y"), tuple(history), tuple(pending), 1, seed, drawn, options)
        rng = np.random.default_rng([seed, drawn])
        if resolve("auto", req) == "gp":
            n_init = len(history) + len(pending) if n_init is None else n_init
            prev = warm
            r = propose_gp(req, rng, warm)
            warm, a = r.state, r.candidates[0]
            u = unit(a)
            if pending:
                trace["pend_dist"].append(min(np.linalg.norm(u - unit(p)) for p in pending) / np.sqrt(d))
            obs = np.array([unit(o.assignments) for o in history])
            trace["obs_dist"].append(float(np.linalg.norm(obs - u, axis=1).min() / np.sqrt(d)))
            inc = obs[int(np.argmin([o.value for o in history]))]
            trace["inc_dist"].append(float(np.linalg.norm(inc - u) / np.sqrt(d)))
            trace["tr_length"].append(r.info.tr_length)
            trace["half_rank"].append(r.info.half_rank)
            if warm is not None:
                ls = np.log(warm.hyper.lengthscale)
                trace["ls_median"].append(float(np.exp(np.median(ls))))
                if prev is not None:
                    trace["ls_drift"].append(float(np.abs(ls - np.log(prev.hyper.lengthscale)).mean()))
        else:
            a = propose("auto", req, rng)[0]
        drawn += 1
        pending.append(a)

    while len(pending) < workers:
        ask()
    values: list[float] = []
    while len(values) < budget:
        a = pending.popleft()
        values.append(problem.f(a))
        history.append(Observation(str(len(history)), "e", None, a, values[-1]))
        if len(values) + len(pending) < budget:
            ask()
    reg = np.log10(np.maximum(np.minimum.accumulate(values) - problem.optimum, 1e-12))
    n0 = n_init or budget
    med = lambda k: round(float(np.median(trace[k])), 3) if trace[k] else None  # noqa: E731
    tr = [t for t in trace["tr_length"] if t is not None]
    return {
        "function": fname, "d": d, "workers": workers, "seed": seed, "budget": budget,
        "n_init": n0, "init_share": round(n0 / budget, 2),
        "best_after_init": round(float(reg[n0 - 1]), 3), "final": round(float(reg[-1]), 3),
        "tr_length": [round(min(tr), 3), round(float(np.median(tr)), 3), round(max(tr), 3)] if tr else None,
        "pend_dist": med("pend_dist"), "obs_dist": med("obs_dist"), "inc_dist": med("inc_dist"),
        "ls_drift": med("ls_drift"), "ls_median": med("ls_median"),
        "half_rank": round(float(np.mean(trace["half_rank"])), 2) if trace["half_rank"] else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--functions", default="rastrigin,ackley,levy,styblinski_tang")
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--seeds", default="100,101")
    ap.add_argument("--budget", type=int, default=6, help="evaluations per dimension")
    ap.add_argument("--initial-points", type=int, default=None, help="the Sobol design's size (default: the strategy's)")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    for f in args.functions.split(","):
        for s in (int(x) for x in args.seeds.split(",")):
            print(json.dumps(diagnose(f, args.d, args.workers, s, args.budget, args.initial_points)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
