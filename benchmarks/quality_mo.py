"""Quality with several metrics: hypervolume on multi-objective problems and best
feasible value on constrained ones, tauopt's gp / sobol / random next to Optuna's
NSGA-II, TPE and GPSampler (each in its multi-objective / constrained mode),
driven through ask/tell with the same simulated parallelism as quality.py.

    .venv/bin/python benchmarks/quality_mo.py                   # full: 10 seeds, budget 80, 1 and 8 workers
    nice -n 19 .venv/bin/python benchmarks/quality_mo.py --seeds 3 --workers 1 --budget 40 --report 40
    # separate processes, one log each, summarized together:
    .venv/bin/python benchmarks/quality_mo.py --methods optuna_gp --log a.jsonl --out '' &
    .venv/bin/python benchmarks/quality_mo.py --methods gp,sobol --log b.jsonl --out ''
    .venv/bin/python benchmarks/quality_mo.py --merge a.jsonl b.jsonl --report 40,80

Problems (d = 6 for the multi-objective ones):
- ZDT1, ZDT2: Zitzler, Deb & Thiele (2000), "Comparison of multiobjective
  evolutionary algorithms: empirical results", Evol. Comput. 8(2). f1 = x1,
  g = 1 + 9/(d-1) sum_{i>=2} x_i, f2 = g (1 - sqrt(f1/g)) (ZDT1) or g (1 - (f1/g)^2)
  (ZDT2). Reference point (1.1, 11) (f2 <= 10 on the box).
- DTLZ2, 3 objectives: Deb, Thiele, Laumanns & Zitzler (2002), "Scalable
  multi-objective optimization test problems", CEC. g = sum_{i>=3} (x_i - 0.5)^2,
  f1 = (1+g) cos(x1 pi/2) cos(x2 pi/2), f2 = (1+g) cos(x1 pi/2) sin(x2 pi/2),
  f3 = (1+g) sin(x1 pi/2). Reference point (2.1, 2.1, 2.1) (f <= 2 on the box).
- gardner: Gardner, Kusner, Xu, Weinberger & Cunningham (2014), "Bayesian
  optimization with inequality constraints", ICML, section 4.1: minimize
  cos(2x) cos(y) + sin(x) subject to cos(x) cos(y) - sin(x) sin(y) <= 0.5, x, y in [0, 6].
- branin_disk: the constrained Branin of the same paper (section 4.1): minimize
  Branin subject to (x1 - 2.5)^2 + (x2 - 7.5)^2 <= 50.

Reported per cell: median (and quartiles) over seeds of the hypervolume of the
feasible observations at each --report budget (multi-objective), or of the best
feasible value (constrained; None when a run found nothing feasible) and the
fraction of infeasible evaluations. Prints JSON; writes a PNG.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from tauopt.models import Metric, Observation
from tauopt.pareto import hypervolume
from tauopt.space import Space
from tauopt.strategies import propose, resolve
from tauopt.strategies._request import SuggestRequest
from tauopt.schema import parse_metrics

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _progress import progress, say  # noqa: E402

# -- problems --------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    name: str
    space: Space
    f: Callable[[dict[str, Any]], tuple[tuple[float, ...], tuple[float, ...]]]  # objectives, constraint values
    metrics: tuple[Metric, ...]
    reference: tuple[float, ...] | None = None  # hypervolume reference (multi-objective only)


def _unit(d: int) -> Space:
    return Space.parse([{"name": f"x{i}", "type": "double", "bounds": [0, 1]} for i in range(d)])


def _x(a: dict[str, Any], d: int) -> np.ndarray:
    return np.array([a[f"x{i}"] for i in range(d)], dtype=float)


def _zdt(power: float) -> Callable[[dict[str, Any]], tuple[tuple[float, ...], tuple[float, ...]]]:
    def f(a: dict[str, Any]) -> tuple[tuple[float, ...], tuple[float, ...]]:
        x = _x(a, 6)
        g = 1 + 9 * x[1:].sum() / 5
        f1 = float(x[0])
        return (f1, float(g * (1 - (f1 / g) ** power))), ()

    return f


def _dtlz2(a: dict[str, Any]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    x = _x(a, 6)
    g = float(((x[2:] - 0.5) ** 2).sum())
    c1, s1 = math.cos(x[0] * math.pi / 2), math.sin(x[0] * math.pi / 2)
    c2, s2 = math.cos(x[1] * math.pi / 2), math.sin(x[1] * math.pi / 2)
    return ((1 + g) * c1 * c2, (1 + g) * c1 * s2, (1 + g) * s1), ()


def _gardner(a: dict[str, Any]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    x, y = a["x"], a["y"]
    return (math.cos(2 * x) * math.cos(y) + math.sin(x),), (math.cos(x) * math.cos(y) - math.sin(x) * math.sin(y),)


def _branin_disk(a: dict[str, Any]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    x1, x2 = a["x1"], a["x2"]
    b, c, t = 5.1 / (4 * math.pi**2), 5 / math.pi, 1 / (8 * math.pi)
    v = (x2 - b * x1**2 + c * x1 - 6) ** 2 + 10 * (1 - t) * math.cos(x1) + 10
    return (v,), ((x1 - 2.5) ** 2 + (x2 - 7.5) ** 2,)


def _mo(k: int) -> tuple[Metric, ...]:
    return parse_metrics(metrics=[{"name": f"f{i}", "objective": "minimize"} for i in range(k)])


def _con(bound: float) -> tuple[Metric, ...]:
    return parse_metrics(metrics=[{"name": "f0", "objective": "minimize"}, {"name": "c0", "constraint": {"<=": bound}}])


PROBLEMS = {
    "zdt1": Problem("zdt1", _unit(6), _zdt(0.5), _mo(2), (1.1, 11.0)),
    "zdt2": Problem("zdt2", _unit(6), _zdt(2.0), _mo(2), (1.1, 11.0)),
    "dtlz2": Problem("dtlz2", _unit(6), _dtlz2, _mo(3), (2.1, 2.1, 2.1)),
    "gardner": Problem(
        "gardner",
        Space.parse([{"name": "x", "type": "double", "bounds": [0, 6]}, {"name": "y", "type": "double", "bounds": [0, 6]}]),
        _gardner,
        _con(0.5),
    ),
    "branin_disk": Problem(
        "branin_disk",
        Space.parse([{"name": "x1", "type": "double", "bounds": [-5, 10]}, {"name": "x2", "type": "double", "bounds": [0, 15]}]),
        _branin_disk,
        _con(50.0),
    ),
}

Result = list[tuple[tuple[float, ...], bool]]  # per evaluation: objectives, feasible


def _feasible(problem: Problem, cons: tuple[float, ...]) -> bool:
    bounds = [m.constraint.bound for m in problem.metrics if m.constraint is not None]  # type: ignore[union-attr]
    return all(c <= b for c, b in zip(cons, bounds))


# -- drivers ---------------------------------------------------------------------


def _gp_config(method: str) -> Any:
    """gp: the default GPConfig; gp_<mode>: GPConfig(multi_objective=<mode>), e.g. gp_parego, gp_ehvi."""
    from tauopt.strategies.gp import DEFAULT, GPConfig

    return DEFAULT if method == "gp" else GPConfig(multi_objective=method.removeprefix("gp_"))


def run_tauopt(problem: Problem, method: str, budget: int, workers: int, seed: int) -> Result:
    from tauopt.strategies.gp import propose_gp

    names = [m.name for m in problem.metrics]
    history: list[Observation] = []
    pending: collections.deque[dict[str, Any]] = collections.deque()
    warm, drawn, out = None, 0, []

    def ask() -> None:
        nonlocal warm, drawn
        req = SuggestRequest(problem.space, problem.metrics[0], tuple(history), tuple(pending), 1, seed, drawn, metrics=problem.metrics)
        rng = np.random.default_rng([seed, drawn])
        strategy = "auto" if method.startswith("gp") else method
        if resolve(strategy, req) == "gp":
            r = propose_gp(req, rng, warm, config=_gp_config(method))
            warm, cands = r.state, r.candidates
        else:
            cands = propose(strategy, req, rng)
        drawn += 1
        pending.append(cands[0])

    while len(pending) < workers:
        ask()
    while len(out) < budget:
        a = pending.popleft()
        objs, cons = problem.f(a)
        vals = dict(zip(names, objs + cons))
        history.append(Observation(str(len(history)), "e", None, a, vals[names[0]], False, 0.0, {k: v for k, v in vals.items() if k != names[0]}))
        out.append((objs, _feasible(problem, cons)))
        if len(out) + len(pending) < budget:
            ask()
    return out


def run_optuna(problem: Problem, method: str, budget: int, workers: int, seed: int) -> Result:
    import optuna
    from optuna.distributions import FloatDistribution

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    dists = {p.name: FloatDistribution(p.bounds[0], p.bounds[1]) for p in problem.space.parameters}  # type: ignore[index]
    n_obj = len([m for m in problem.metrics if m.objective is not None])
    bounds = [m.constraint.bound for m in problem.metrics if m.constraint is not None]  # type: ignore[union-attr]
    kw: dict[str, Any] = {"seed": seed}  # constraints: Trial.set_constraint (Optuna 5's form of constraints_func)
    if method == "optuna_nsga2":
        sampler = optuna.samplers.NSGAIISampler(**kw)
    elif method == "optuna_gp":
        sampler = optuna.samplers.GPSampler(**kw)
    else:
        sampler = optuna.samplers.TPESampler(**kw)
    study = optuna.create_study(sampler=sampler, directions=["minimize"] * n_obj)
    open_trials: collections.deque[Any] = collections.deque()
    out: Result = []
    while len(open_trials) < workers:
        open_trials.append(study.ask(dists))
    while len(out) < budget:
        trial = open_trials.popleft()
        objs, cons = problem.f(trial.params)
        for i, (c, b) in enumerate(zip(cons, bounds)):
            trial.set_constraint(f"c{i}", c - b)  # feasible when <= 0
        study.tell(trial, list(objs))
        out.append((objs, _feasible(problem, cons)))
        if len(out) + len(open_trials) < budget:
            open_trials.append(study.ask(dists))
    return out


# -- figures ---------------------------------------------------------------------


def curve(problem: Problem, result: Result) -> np.ndarray:
    """Per evaluation count: hypervolume so far (multi-objective) or best feasible value (nan before any)."""
    out = np.full(len(result), np.nan)
    best = math.inf
    for i in range(len(result)):
        if problem.reference is not None:
            pts = np.array([o for o, ok in result[: i + 1] if ok])
            out[i] = hypervolume(pts, problem.reference) if len(pts) else 0.0
        else:
            objs, ok = result[i]
            if ok:
                best = min(best, objs[0])
            out[i] = best if math.isfinite(best) else np.nan
    return out


def _summary(values: np.ndarray) -> dict[str, float | None]:
    finite = values[np.isfinite(values)]
    if len(finite) == 0:
        return {"median": None, "q1": None, "q3": None, "runs_with_value": 0}
    q1, med, q3 = np.quantile(finite, [0.25, 0.5, 0.75])
    return {"median": float(f"{med:.4g}"), "q1": float(f"{q1:.4g}"), "q3": float(f"{q3:.4g}"), "runs_with_value": int(len(finite))}


def one_run(pname: str, workers: int, method: str, budget: int, seed: int) -> dict[str, Any]:
    """One seed of one cell: its curve (per evaluation) and its infeasible flags, as a log line."""
    problem = PROBLEMS[pname]
    t0 = time.monotonic()
    driver = run_optuna if method.startswith("optuna") else run_tauopt
    r = driver(problem, method, budget, workers, seed)
    c = curve(problem, r)
    return {
        "problem": pname, "workers": workers, "method": method, "seed": seed, "seconds": round(time.monotonic() - t0, 2),
        "curve": [None if not math.isfinite(v) else float(f"{v:.6g}") for v in c],
        "infeasible": [int(not ok) for _, ok in r],
    }


def summarize(lines: list[dict[str, Any]], report: list[int]) -> dict[str, Any]:
    """Per cell (problem, workers, method): the summary at each report budget over
    the seeds logged for it, and per (problem, workers, budget) which method has
    the best median over the seeds every method of that cell has (a fair race)."""
    cells: dict[tuple[str, int, str], dict[int, dict[str, Any]]] = collections.defaultdict(dict)
    for ln in lines:
        cells[(ln["problem"], ln["workers"], ln["method"])][ln["seed"]] = ln  # a re-run seed replaces the older line
    rows = []
    for (pname, w, method), by_seed in cells.items():
        problem = PROBLEMS[pname]
        kind = "hypervolume" if problem.reference is not None else "best_feasible"
        row: dict[str, Any] = {"problem": pname, "workers": w, "method": method, "seeds": sorted(by_seed),
                               "seconds": round(sum(ln["seconds"] for ln in by_seed.values()), 1)}
        for b in report:
            vals = np.array([np.nan if ln["curve"][b - 1] is None else ln["curve"][b - 1] for ln in by_seed.values() if len(ln["curve"]) >= b])
            row[f"{kind}@{b}"] = _summary(vals)
            if problem.reference is None:
                row[f"infeasible_fraction@{b}"] = float(f"{np.mean([ln['infeasible'][:b] for ln in by_seed.values()]):.3g}")
        rows.append(row)
    return {"runs": rows, "best_median": _winners(cells, report)}


def _winners(cells: dict[tuple[str, int, str], dict[int, dict[str, Any]]], report: list[int]) -> list[dict[str, Any]]:
    out = []
    for pname, w in sorted({(p, w) for p, w, _ in cells}, key=lambda k: (list(PROBLEMS).index(k[0]), k[1])):
        sign = 1.0 if PROBLEMS[pname].reference is not None else -1.0  # hypervolume: higher; best value: lower
        for b in report:
            # the methods run to budget b (a log may hold shorter runs), on the seeds all of them have
            methods = [m for p, ww, m in cells if (p, ww) == (pname, w) and all(len(ln["curve"]) >= b for ln in cells[(p, ww, m)].values())]
            if not methods:
                continue
            common = sorted(set.intersection(*(set(cells[(pname, w, m)]) for m in methods)))
            med, quart = {}, {}
            for m in methods:
                v = np.array([np.nan if (c := cells[(pname, w, m)][s]["curve"][b - 1]) is None else c for s in common])
                finite = v[np.isfinite(v)]
                med[m] = float(np.median(finite)) if len(finite) * 2 > len(v) else None  # a median needs most runs feasible
                quart[m] = [float(f"{q:.5g}") for q in np.quantile(finite, [0.25, 0.75])] if len(finite) else None
            scored = {m: sign * v for m, v in med.items() if v is not None}
            top = max(scored.values()) if scored else None
            best = sorted(m for m, v in scored.items() if top is not None and v >= top - 1e-9 * abs(top))
            out.append({"problem": pname, "workers": w, "budget": b, "common_seeds": len(common),
                        "medians": {m: None if v is None else float(f"{v:.5g}") for m, v in med.items()}, "quartiles": quart, "best": best})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", default=",".join(PROBLEMS))
    ap.add_argument("--methods", default="gp,sobol,random,optuna_nsga2,optuna_tpe,optuna_gp",
                    help="gp is what users get (auto); gp_parego / gp_ehvi force GPConfig(multi_objective=...)")
    ap.add_argument("--workers", default="1,8")
    ap.add_argument("--budget", type=int, default=80)
    ap.add_argument("--report", default="40,80", help="budgets to report (<= --budget)")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1")
    ap.add_argument("--log", default="", help="append one JSON line per finished (cell, seed) run here")
    ap.add_argument("--merge", nargs="+", default=None, metavar="LOG",
                    help="run nothing: summarize the lines of these --log files (seeds of separate processes together)")
    ap.add_argument("--out", default="quality_mo.png", help="PNG of the curves ('' to skip)")
    args = ap.parse_args(argv)
    report = [b for b in (int(x) for x in args.report.split(",")) if b <= args.budget]
    if args.merge:
        lines = [json.loads(t) for path in args.merge for t in open(path) if t.strip()]
        print(json.dumps({"settings": vars(args), **summarize(lines, report)}, indent=1))
        if args.out:
            plot(lines, args.out)
        return 0

    import torch

    torch.set_num_threads(1)
    methods = args.methods.split(",")
    cells = [(pname, w, method) for pname in args.problems.split(",") for w in (int(x) for x in args.workers.split(",")) for method in methods]
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    lines = []
    # Seeds outermost: a run stopped early has the same seeds in every cell.
    with progress(len(cells) * len(seeds), "quality_mo") as step:
        for seed in seeds:
            for pname, w, method in cells:
                ln = one_run(pname, w, method, args.budget, seed)
                lines.append(ln)
                if args.log:
                    with open(args.log, "a") as f:
                        f.write(json.dumps(ln) + "\n")
                say(json.dumps({k: ln[k] for k in ("problem", "workers", "method", "seed", "seconds")}))
                step(f"seed {seed} {pname} W={w} {method}")
    print(json.dumps({"settings": vars(args), **summarize(lines, report)}, indent=1))
    if args.out:
        plot(lines, args.out)
    return 0


def plot(lines: list[dict[str, Any]], out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves: dict[tuple[str, int, str], list[list[float]]] = collections.defaultdict(list)
    for ln in lines:
        curves[(ln["problem"], ln["workers"], ln["method"])].append([np.nan if v is None else v for v in ln["curve"]])
    cells = sorted({(p, w) for p, w, _ in curves}, key=lambda k: (k[1], list(PROBLEMS).index(k[0])))
    fig, axes = plt.subplots(1, len(cells), figsize=(3.8 * len(cells), 3.2), squeeze=False)
    for ax, (p, w) in zip(axes[0], cells):
        for (pp, ww, m), cs in curves.items():
            if (pp, ww) == (p, w):
                c = np.array([x[: min(map(len, cs))] for x in cs])
                x = np.arange(1, c.shape[1] + 1)
                with warnings.catch_warnings():  # a cell where no run is feasible yet has an all-nan column
                    warnings.simplefilter("ignore", RuntimeWarning)
                    ax.plot(x, np.nanmedian(c, axis=0), label=m)
        ax.set_title(f"{p}, {w} worker{'s' if w > 1 else ''}", fontsize=9)
        ax.set_xlabel("evaluations")
        ax.set_ylabel("hypervolume" if PROBLEMS[p].reference is not None else "best feasible (median)")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=100)


if __name__ == "__main__":
    raise SystemExit(main())
