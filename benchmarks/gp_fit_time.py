"""The GP's hyperparameter fit, timed alone and inside a proposal, at d = 5.

    PYTHONPATH=$PWD nice -n 10 .venv/bin/python benchmarks/gp_fit_time.py --sizes 50,200,1000 --repeats 7

Per history size n (Sobol-free random points of a 5-D Hartmann-like sum of
bumps, plus noise-free values; one torch and one BLAS thread, as in the pool):
  cold_ms    `_gp_model.fit` from the prior (at most COLD_ITERS L-BFGS-B iterations)
             on the points the strategy fits (at most SUBSET_FIT)
  warm_ms    the same, warm-started from the fit on n - 1 points (WARM_ITERS), as
             every proposal after the first does
  propose_ms `propose_gp` for one point with that warm state (both warps fitted and
             chosen below GPConfig.large_history; from it the last fit stands)
p50 over --repeats, of the process's CPU time (one thread, so the wall time on an
idle machine; on a shared one it leaves out the waits for a core). Runs against whichever tauopt is on PYTHONPATH (it prints
`tauopt.__file__`), so the same script times two trees.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")

import numpy as np  # noqa: E402


def _objective(x: np.ndarray) -> np.ndarray:
    centers = np.array([[0.2, 0.7, 0.4, 0.9, 0.1], [0.8, 0.3, 0.6, 0.2, 0.5], [0.5, 0.5, 0.5, 0.5, 0.5]])
    return -sum(np.exp(-8.0 * ((x - c) ** 2).sum(1)) * w for c, w in zip(centers, (1.0, 1.2, 0.8)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="50,200,1000")
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    import tauopt
    from tauopt.models import Metric, Observation
    from tauopt.space import Space
    from tauopt.strategies._gp_model import GPState, fit
    from tauopt.strategies._request import SuggestRequest
    from tauopt.strategies.gp import SUBSET_FIT, _subset, propose_gp

    space = Space.parse([{"name": f"x{i}", "type": "double", "bounds": [0, 1]} for i in range(5)])
    out: dict = {"tauopt": tauopt.__file__, "d": 5, "sizes": {}}
    for n in [int(s) for s in args.sizes.split(",")]:
        cold, warm, prop = [], [], []
        for r in range(args.repeats):
            rng = np.random.default_rng(r)
            x = rng.random((n, 5))
            v = _objective(x)
            y = (v - v.mean()) / v.std()
            keep = _subset(y, SUBSET_FIT, rng)
            t0 = time.process_time()
            h0, _ = fit(x[keep][:-1], y[keep][:-1])
            cold.append(time.process_time() - t0)
            state = GPState(5, h0, len(keep) - 1, fitted_at=n - 1)
            t0 = time.process_time()
            fit(x[keep], y[keep], state)
            warm.append(time.process_time() - t0)
            hist = tuple(Observation(str(i), "e", None, {f"x{j}": float(x[i, j]) for j in range(5)}, float(v[i])) for i in range(n))
            req = SuggestRequest(space, Metric("y"), hist)
            t0 = time.process_time()
            res = propose_gp(req, np.random.default_rng(r), state)
            prop.append(time.process_time() - t0)
            assert res.info.fallback_reason is None, res.info.fallback_reason
        p50 = lambda v: round(1000 * float(np.median(v)), 1)  # noqa: E731
        out["sizes"][n] = {"cold_ms": p50(cold), "warm_ms": p50(warm), "propose_ms": p50(prop)}
        print(json.dumps({n: out["sizes"][n]}), file=sys.stderr)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
