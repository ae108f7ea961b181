"""What the trust region (on by default from 10 continuous coordinates) costs
per GP proposal: CPU seconds of one proposal (one torch thread, warm-started,
8 pending points) with GPConfig(trust_region=True) and False, alternating, on
a rotated 10-D ellipsoid (benchmarks/_suite.py) with n random observations.
gp_latency.py's 6-D Hartmann never enters the trust region, so this is the
before/after for the default changed in issue 17's third round.

    .venv/bin/python benchmarks/gp_tr_cost.py                 # n = 50, 200, 1000
    .venv/bin/python benchmarks/gp_tr_cost.py --sizes 50 --repeats 3

CPU seconds (time.process_time), not wall: they do not move with the load of
a shared machine. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")

import numpy as np  # noqa: E402

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import _suite  # noqa: E402

D, PENDING = 10, 8


def measure(n: int, repeats: int) -> dict[str, Any]:
    from tauopt.models import Metric, Observation
    from tauopt.strategies._request import SuggestRequest
    from tauopt.strategies.gp import GPConfig, propose_gp

    problem = _suite.make("ellipsoid", D, 7)
    rng = np.random.default_rng(7)
    pts = [problem.space.from_unit(u) for u in rng.random((n + repeats + PENDING + 1, D))]
    obs = [Observation(str(i), "e", None, a, problem.f(a)) for i, a in enumerate(pts)]
    cpu: dict[bool, list[float]] = {True: [], False: []}
    tr_length: dict[bool, float | None] = {}
    warm: dict[bool, Any] = {True: None, False: None}
    for r in range(repeats + 1):  # r = 0: the cold fit, not counted
        for on in (True, False):
            m = n + r
            req = SuggestRequest(problem.space, Metric("y"), tuple(obs[:m]), tuple(pts[m : m + PENDING]), 1, 0, m)
            c0 = time.process_time()
            out = propose_gp(req, np.random.default_rng(r), warm[on], config=GPConfig(trust_region=on))
            dc = time.process_time() - c0
            assert out.info.fallback_reason is None, out.info.fallback_reason
            warm[on], tr_length[on] = out.state, out.info.tr_length
            if r:
                cpu[on].append(dc)
    return {
        "n": n,
        "cpu_s_p50": {"trust_region": round(float(np.median(cpu[True])), 4), "none": round(float(np.median(cpu[False])), 4)},
        "tr_length": tr_length[True],
        "repeats": repeats,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="50,200,1000")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    rows = [measure(int(n), args.repeats) for n in args.sizes.split(",")]
    print(json.dumps({"d": D, "pending": PENDING, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
