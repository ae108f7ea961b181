"""Where a GP batch's open points land with W parallel workers (issue 17, fourth
round): one JSON line per (function, seed, method), strategy-only as in
quality.py (W suggestions open, the oldest observed next).

    PYTHONPATH=$PWD nice -n 10 .venv/bin/python benchmarks/gp_batch_spread.py \\
        --functions hartmann6,levy,ackley --methods gp,gp_cw --seeds 100,101,102 --workers 8

Per GP ask, over the W open points (the new one and the W-1 pending): `spread`,
the median over asks of their mean pairwise distance in the unit cube;
`to_inc`, the median distance of the new point to the incumbent, and
`to_inc_lt01`, the share of asks placing it within 0.1 of it; `basins`, at every
W-th ask, the number of distinct end points (0.05 apart) of L-BFGS-B descents
of the true function from the open points (1: the batch sits in one basin),
averaged; `final`, the final log10 regret.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys

os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")

import numpy as np  # noqa: E402

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import _suite  # noqa: E402
from _quality_drivers import GP_VARIANTS  # noqa: E402

from tauopt.models import Metric, Observation  # noqa: E402
from tauopt.strategies import propose, resolve  # noqa: E402
from tauopt.strategies._request import SuggestRequest  # noqa: E402


def basins(problem: _suite.Problem, pts: np.ndarray) -> int:
    from scipy.optimize import minimize

    def f(t: np.ndarray) -> float:
        return problem.f({f"x{i}": problem.lo + (problem.hi - problem.lo) * t[i] for i in range(problem.d)})

    ends: list[np.ndarray] = []
    for u in pts:
        x = minimize(f, u, method="L-BFGS-B", bounds=[(0.0, 1.0)] * problem.d).x
        if not any(np.linalg.norm(x - e) < 0.05 for e in ends):
            ends.append(x)
    return len(ends)


def run(fname: str, d: int, seed: int, method: str, workers: int, mult: int) -> dict:
    from tauopt.strategies.gp import GPConfig, propose_gp

    problem = _suite.make(fname, d, seed)
    config = GPConfig(**GP_VARIANTS[method])

    def unit(a: dict) -> np.ndarray:
        return (np.array([a[f"x{i}"] for i in range(d)]) - problem.lo) / (problem.hi - problem.lo)

    history: list[Observation] = []
    pending: collections.deque = collections.deque()
    values: list[float] = []
    rec: list[tuple[float, float, np.ndarray]] = []
    warm, drawn = None, 0
    while len(values) < mult * d:
        while len(pending) < workers and len(values) + len(pending) < mult * d:
            req = SuggestRequest(problem.space, Metric("y"), tuple(history), tuple(pending), 1, seed, drawn)
            rng = np.random.default_rng([seed, drawn])
            if values and resolve("auto", req) == "gp":
                r = propose_gp(req, rng, warm, config=config)
                warm, cand = r.state, r.candidates[0]
                z = np.array([unit(a) for a in [*pending, cand]])
                pd = np.sqrt(((z[:, None] - z[None]) ** 2).sum(-1))[np.triu_indices(len(z), 1)]
                inc = unit(history[int(np.argmin(values))].assignments)
                rec.append((float(pd.mean()) if len(pd) else 0.0, float(np.linalg.norm(z[-1] - inc)), z))
            else:
                cand = propose("auto", req, rng)[0]
            drawn += 1
            pending.append(cand)
        a = pending.popleft()
        values.append(problem.f(a))
        history.append(Observation(str(len(history)), "e", None, a, values[-1]))
    spread, to_inc = (np.array([r[i] for r in rec]) for i in (0, 1))
    return {
        "function": fname, "d": d, "seed": seed, "method": method, "workers": workers,
        "final": round(float(np.log10(max(min(values) - problem.optimum, 1e-12))), 3),
        "spread": round(float(np.median(spread)), 4), "to_inc": round(float(np.median(to_inc)), 4),
        "to_inc_lt01": round(float(np.mean(to_inc < 0.1)), 3),
        "basins": round(float(np.mean([basins(problem, r[2]) for r in rec[::workers]])), 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--functions", default="hartmann6,levy,ackley")
    ap.add_argument("--methods", default="gp,gp_cw")
    ap.add_argument("--seeds", default="100,101,102")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--dim", type=int, default=2, help="d for functions defined in several dimensions")
    ap.add_argument("--budget", type=int, default=20, help="evaluations per dimension")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    for fname in args.functions.split(","):
        dims = _suite.dims_for(fname)
        d = args.dim if args.dim in dims else dims[0]
        for method in args.methods.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                print(json.dumps(run(fname, d, seed, method, args.workers, args.budget)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
