"""Which bounded model the GP should use on a long history, chosen by quality at n = 2,000.

    PYTHONPATH=$PWD nice -n 10 .venv/bin/python benchmarks/gp_bounded_model.py \\
        --functions hartmann6:6,rosenbrock:5,levy:5 --seeds 4 --history 2000 --asks 30 --out bounded.json
    PYTHONPATH=$PWD .venv/bin/python benchmarks/gp_bounded_model.py --quick     # seconds: the smoke run (tests/test_bench_gp_bounded.py)

Past SUBSET_POSTERIOR observations the GP conditions on a subset of the history,
and fits its hyperparameters on a smaller one (SUBSET_FIT); what the subset is
decides what the model knows. Per function and seed: a history of `--history`
scrambled Sobol points of a benchmarks/_suite.py instance, then `--asks` GP
proposals one at a time (each observed before the next, the warm state handed
on as the engine does), once per way of choosing the subsets:

  subsample  the best fifth by value plus a uniform draw of the rest (the rule
             before; defined here)
  local      what tauopt ships (`gp._model_subset`): a local trust-region subset,
             the half nearest the incumbent (unit-cube distance over the encoded
             features) plus the best fifth and a uniform draw of the rest, for the
             posterior and (once the posterior's points are cut) the fit alike

Variants alternate per seed (ABAB, then BABA), so a drift in the machine's load
falls on both. Reported per function and variant: median and quartiles of log10
regret after the asks (best of history and asks minus the known optimum), the
share of seeds where the variant's regret is the lower, and CPU seconds per ask.
Prints one JSON document; --out writes it too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from typing import Any, Callable, Iterator

os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")  # as in the pool's workers

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _suite  # noqa: E402

from tauopt.models import Metric, Observation  # noqa: E402
from tauopt.strategies._request import SuggestRequest  # noqa: E402

VARIANTS = ("subsample", "local")


def _subsample(x: np.ndarray, raw: np.ndarray, cap: int, rng: np.random.Generator) -> np.ndarray:
    """The rule before the local subset: the best fifth plus a uniform draw of the rest."""
    from tauopt.strategies import gp

    return gp._subset(raw, cap, rng)


@contextlib.contextmanager
def variant(name: str) -> Iterator[None]:
    from tauopt.strategies import gp

    shipped: Callable[..., np.ndarray] = gp._model_subset
    if name == "subsample":
        gp._model_subset = _subsample  # type: ignore[assignment]
    try:
        yield
    finally:
        gp._model_subset = shipped  # type: ignore[assignment]


def _sobol_history(problem: _suite.Problem, n: int, seed: int) -> list[Observation]:
    from scipy.stats import qmc

    units = qmc.Sobol(problem.d, scramble=True, rng=seed).random_base2(max(0, (n - 1).bit_length()))[:n]
    points = [problem.space.from_unit(u) for u in units]
    return [Observation(str(i), "e", None, a, problem.f(a)) for i, a in enumerate(points)]


def run(problem: _suite.Problem, history: list[Observation], asks: int, seed: int) -> dict[str, Any]:
    import torch

    from tauopt.strategies.gp import propose_gp

    torch.set_num_threads(1)
    hist, warm = list(history), None
    c0, fallbacks = time.process_time(), 0
    for i in range(asks):
        request = SuggestRequest(problem.space, Metric("y"), tuple(hist), (), 1, seed, len(hist))
        r = propose_gp(request, np.random.default_rng([seed, i]), warm)
        warm, fallbacks = r.state, fallbacks + (r.info.fallback_reason is not None)
        a = r.candidates[0]
        hist.append(Observation(str(len(hist)), "e", None, a, problem.f(a)))
    best = min(o.value for o in hist if o.value is not None)
    return {
        "log10_regret": float(np.log10(max(best - problem.optimum, 1e-12))),
        "cpu_s_per_ask": (time.process_time() - c0) / asks,
        "fallbacks": fallbacks,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--functions", default="hartmann6:6,rosenbrock:5,levy:5", help="name:d, comma-separated")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1")
    ap.add_argument("--history", type=int, default=2000)
    ap.add_argument("--asks", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="branin, one seed, a history of 1,100 (past the posterior's cap), 2 asks")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    if args.quick:
        args.functions, args.seeds, args.history, args.asks = "branin:2", 1, 1100, 2
    cells = [(f.split(":")[0], int(f.split(":")[1])) for f in args.functions.split(",")]
    rows = []
    for name, d in cells:
        per: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            problem = _suite.make(name, d, seed)
            history = _sobol_history(problem, args.history, seed)
            order = VARIANTS if seed % 2 == 0 else VARIANTS[::-1]
            for v in order:
                with variant(v):
                    per[v].append(run(problem, history, args.asks, seed))
                print(f"{name}:{d} seed {seed} {v}: {per[v][-1]}", file=sys.stderr, flush=True)
        row: dict[str, Any] = {"function": name, "d": d}
        for v in VARIANTS:
            regrets = [r["log10_regret"] for r in per[v]]
            others = [r["log10_regret"] for u in VARIANTS if u != v for r in per[u]]
            row[v] = {
                "log10_regret_median": round(float(np.median(regrets)), 3),
                "log10_regret_quartiles": [round(float(q), 3) for q in np.percentile(regrets, [25, 75])],
                "lower_regret_share": round(float(np.mean([a < b for a, b in zip(regrets, others)])), 2),
                "cpu_s_per_ask": round(float(np.median([r["cpu_s_per_ask"] for r in per[v]])), 3),
                "fallbacks": sum(r["fallbacks"] for r in per[v]),
                "log10_regret_per_seed": [round(x, 3) for x in regrets],
            }
        rows.append(row)
    doc = {
        "benchmark": "gp_bounded_model",
        "command": " ".join([os.path.basename(sys.argv[0]), *(argv if argv is not None else sys.argv[1:])]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end",
        "history": args.history, "asks": args.asks, "seeds": args.seeds,
        "rows": rows,
    }
    text = json.dumps(doc, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
