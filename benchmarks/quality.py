"""Optimization quality: simple regret of tauopt's gp / sobol / random, next to
Optuna's GPSampler and TPESampler driven through ask/tell with the same parallelism.

    .venv/bin/python benchmarks/quality.py                      # full: 10 seeds, budget 80, 1 and 8 workers
    .venv/bin/python benchmarks/quality.py --seeds 3 --budget 40 --out /tmp/quality.png

Parallel workers are simulated exactly: with W workers, W suggestions are open
at all times; each step the oldest one is observed and a new one asked with the
other W-1 still open (tauopt sees them as pending points; Optuna sees them as
running trials). Regret = best value so far - known optimum, reported (median
and quartiles over seeds) at every budget in --report (default 40 and 80).

gp here is `auto` as users get it: Sobol for the first max(5, 2d) points, then
the GP (warm-started across asks, as in the pool). Prints JSON; writes a PNG
of regret curves. Each run uses one torch thread, like a pool worker.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from tauopt.models import Metric, Observation
from tauopt.space import Space
from tauopt.strategies import propose, resolve
from tauopt.strategies._request import SuggestRequest

# -- problems --------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    name: str
    space: Space
    f: Callable[[dict[str, Any]], float]
    optimum: float


def _branin(a: dict[str, Any]) -> float:
    x1, x2 = a["x1"], a["x2"]
    b, c, t = 5.1 / (4 * math.pi**2), 5 / math.pi, 1 / (8 * math.pi)
    return (x2 - b * x1**2 + c * x1 - 6) ** 2 + 10 * (1 - t) * math.cos(x1) + 10


_H_A = np.array([[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14], [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]])
_H_P = 1e-4 * np.array(
    [[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991], [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]]
)
_H_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])


def _hartmann6(a: dict[str, Any]) -> float:
    x = np.array([a[f"x{i}"] for i in range(6)])
    return float(-(_H_ALPHA * np.exp(-(_H_A * (x - _H_P) ** 2).sum(1))).sum())


_CAT = {"a": 0.4, "b": 0.0, "c": 0.8, "d": 1.5}


def _mixed8(a: dict[str, Any]) -> float:
    """Five doubles, an int, a log-scaled double and a categorical; minimum 0 at
    x = 0.3, n = 7, lr = 1e-2, kind = "b"."""
    x = np.array([a[f"x{i}"] for i in range(5)])
    v = float(((x - 0.3) ** 2).sum()) + 0.5 * float(np.sin(3 * (x[0] - 0.3)) ** 2)
    v += 0.25 * (math.log10(a["lr"]) + 2) ** 2 + ((a["n"] - 7) / 10) ** 2 + _CAT[a["kind"]]
    return v


PROBLEMS = {
    "branin": Problem(
        "branin",
        Space.parse([{"name": "x1", "type": "double", "bounds": [-5, 10]}, {"name": "x2", "type": "double", "bounds": [0, 15]}]),
        _branin,
        0.397887,
    ),
    "hartmann6": Problem(
        "hartmann6", Space.parse([{"name": f"x{i}", "type": "double", "bounds": [0, 1]} for i in range(6)]), _hartmann6, -3.32237
    ),
    "mixed8": Problem(
        "mixed8",
        Space.parse(
            [{"name": f"x{i}", "type": "double", "bounds": [0, 1]} for i in range(5)]
            + [
                {"name": "n", "type": "int", "bounds": [1, 20]},
                {"name": "lr", "type": "double", "bounds": [1e-4, 1.0], "scale": "log"},
                {"name": "kind", "type": "categorical", "values": list(_CAT)},
            ]
        ),
        _mixed8,
        0.0,
    ),
}

# -- drivers ---------------------------------------------------------------------


def run_tauopt(problem: Problem, method: str, budget: int, workers: int, seed: int) -> list[float]:
    from tauopt.strategies.gp import propose_gp

    space, metric = problem.space, Metric("y")
    history: list[Observation] = []
    pending: collections.deque[dict[str, Any]] = collections.deque()
    warm = None
    drawn = 0
    values: list[float] = []

    def ask() -> None:
        nonlocal warm, drawn
        req = SuggestRequest(space, metric, tuple(history), tuple(pending), 1, seed, drawn)
        rng = np.random.default_rng([seed, drawn])
        strategy = "auto" if method == "gp" else method
        if resolve(strategy, req) == "gp":
            r = propose_gp(req, rng, warm)
            warm, cands = r.state, r.candidates
        else:
            cands = propose(strategy, req, rng)
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
    return values


def run_optuna(problem: Problem, method: str, budget: int, workers: int, seed: int) -> list[float]:
    import optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    dists: dict[str, Any] = {}
    for p in problem.space.parameters:
        if p.type == "double":
            dists[p.name] = FloatDistribution(p.bounds[0], p.bounds[1], log=p.scale == "log")  # type: ignore[index]
        elif p.type == "int":
            dists[p.name] = IntDistribution(int(p.bounds[0]), int(p.bounds[1]))  # type: ignore[index]
        else:
            dists[p.name] = CategoricalDistribution(list(p.values or ()))
    sampler = optuna.samplers.GPSampler(seed=seed) if method == "optuna_gp" else optuna.samplers.TPESampler(seed=seed)
    study = optuna.create_study(sampler=sampler, direction="minimize")
    open_trials: collections.deque[Any] = collections.deque()
    values: list[float] = []
    while len(open_trials) < workers:
        open_trials.append(study.ask(dists))
    while len(values) < budget:
        trial = open_trials.popleft()
        v = problem.f(trial.params)
        values.append(v)
        study.tell(trial, v)
        if len(values) + len(open_trials) < budget:
            open_trials.append(study.ask(dists))
    return values


def regret_curve(values: list[float], optimum: float) -> np.ndarray:
    return np.maximum(np.minimum.accumulate(np.array(values)) - optimum, 1e-12)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", default="branin,hartmann6,mixed8")
    ap.add_argument("--methods", default="gp,sobol,random,optuna_gp,optuna_tpe")
    ap.add_argument("--workers", default="1,8")
    ap.add_argument("--budget", type=int, default=80)
    ap.add_argument("--report", default="40,80", help="budgets to report (<= --budget)")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--out", default="quality.png", help="PNG of regret curves ('' to skip)")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    methods = args.methods.split(",")
    try:
        import optuna  # noqa: F401
    except ImportError:
        methods = [m for m in methods if not m.startswith("optuna")]
        print("optuna not installed: skipping its samplers (pip install 'tauopt[bench]')", file=sys.stderr)
    report = [b for b in (int(x) for x in args.report.split(",")) if b <= args.budget]
    results: dict[str, Any] = {"settings": vars(args), "runs": []}
    curves: dict[tuple[str, int, str], np.ndarray] = {}
    for pname in args.problems.split(","):
        problem = PROBLEMS[pname]
        for w in (int(x) for x in args.workers.split(",")):
            for method in methods:
                t0 = time.monotonic()
                runs = []
                for seed in range(args.seeds):
                    driver = run_optuna if method.startswith("optuna") else run_tauopt
                    runs.append(regret_curve(driver(problem, method, args.budget, w, seed), problem.optimum))
                curve = np.array(runs)
                curves[(pname, w, method)] = curve
                row: dict[str, Any] = {"problem": pname, "workers": w, "method": method, "seconds": round(time.monotonic() - t0, 1)}
                for b in report:
                    q1, med, q3 = np.quantile(curve[:, b - 1], [0.25, 0.5, 0.75])
                    row[f"regret@{b}"] = {"median": float(f"{med:.4g}"), "q1": float(f"{q1:.4g}"), "q3": float(f"{q3:.4g}")}
                results["runs"].append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    print(json.dumps(results, indent=1))
    if args.out:
        plot(curves, args.out)
    return 0


def plot(curves: dict[tuple[str, int, str], np.ndarray], out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    problems = [p for p in PROBLEMS if any(k[0] == p for k in curves)]
    workers = sorted({w for _, w, _ in curves})
    fig, axes = plt.subplots(len(workers), len(problems), figsize=(4.2 * len(problems), 3.3 * len(workers)), squeeze=False)
    for r, w in enumerate(workers):
        for c, p in enumerate(problems):
            ax = axes[r][c]
            for (pp, ww, m), curve in curves.items():
                if (pp, ww) != (p, w):
                    continue
                x = np.arange(1, curve.shape[1] + 1)
                q1, med, q3 = np.quantile(curve, [0.25, 0.5, 0.75], axis=0)
                ax.plot(x, med, label=m)
                ax.fill_between(x, q1, q3, alpha=0.15)
            ax.set_yscale("log")
            ax.set_title(f"{p}, {w} worker{'s' if w > 1 else ''}", fontsize=9)
            if r == len(workers) - 1:
                ax.set_xlabel("evaluations")
            if c == 0:
                ax.set_ylabel("simple regret (median, IQR)")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
