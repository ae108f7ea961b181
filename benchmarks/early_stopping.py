"""Early stopping: steps spent and final regret for tauopt's rules (none, median,
ASHA) next to Optuna's MedianPruner, SuccessiveHalvingPruner and HyperbandPruner,
on the same synthetic learning curves, trials and parallelism.

    nice -n 19 .venv/bin/python benchmarks/early_stopping.py                 # 64 workers, 512 trials, 5 seeds
    nice -n 19 .venv/bin/python benchmarks/early_stopping.py --trials 128 --seeds 2

The problem (x in [0, 1]^2, t = 1..T steps, T = --max-step, default 81):

    y(x, t) = floor(x) + gap(x) * t ** -rate(x) + noise,   noise ~ N(0, 0.02)
    floor(x) = 0.1 + (x0 - 0.3)**2 + (x1 - 0.7)**2
    gap(x)   = 0.3 + x1
    rate(x)  = 0.1 + 1.5 * x0

Configurations with a large x0 converge fast (they look best after a few
steps) but their floor is high: some start well and end badly.

Parallelism is simulated exactly, on a step clock: 64 workers each run one
trial a step at a time; after every step the trial reports its value and the
method answers stop or continue; a worker whose trial ends (full budget or
stopped) takes the next trial at once. Every method runs the same trials (the
same configurations and noise, in the same order); only the decisions differ.
tauopt's rules are `tauopt.strategies.stopping.CurveStats`, the code the
engine's `report` runs; Optuna's pruners run through `study.ask()`,
`trial.report()`, `trial.should_prune()` and `study.tell()`.

Regret = the noise-free final value y(x, T) of the trial whose observed final
value is best among trials run to T, minus the best y(x, T) over a dense grid.
Prints one JSON object: per method, the mean over seeds of steps spent, the
ratio to no stopping, and final regret.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import numpy as np

from tauopt.strategies.stopping import AshaRule, CurveStats, MedianRule, NoStopping, StoppingRule

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _progress import progress, say  # noqa: E402

# -- the problem ---------------------------------------------------------------


def true_curve(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    floor = 0.1 + (x[..., 0] - 0.3) ** 2 + (x[..., 1] - 0.7) ** 2
    gap = 0.3 + x[..., 1]
    rate = 0.1 + 1.5 * x[..., 0]
    return floor[..., None] + gap[..., None] * t ** -rate[..., None]


def optimum(max_step: int) -> float:
    g = np.linspace(0, 1, 401)
    grid = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    return float(true_curve(grid, np.array([float(max_step)])).min())


@dataclass(frozen=True)
class Trials:
    x: np.ndarray  # (n, 2)
    observed: np.ndarray  # (n, T): what workers report
    final: np.ndarray  # (n,): noise-free y(x, T)


def make_trials(n: int, max_step: int, seed: int) -> Trials:
    rng = np.random.default_rng(seed)
    x = rng.random((n, 2))
    t = np.arange(1, max_step + 1, dtype=float)
    clean = true_curve(x, t)
    return Trials(x, clean + rng.normal(0, 0.02, clean.shape), clean[:, -1])


# -- the methods ----------------------------------------------------------------


class Method(Protocol):
    def start(self, i: int) -> None: ...
    def report(self, i: int, step: int, value: float) -> bool: ...
    def end(self, i: int, value: float, stopped: bool) -> None: ...


class TauoptMethod:
    def __init__(self, rule: StoppingRule) -> None:
        self.stats = CurveStats(rule)

    def start(self, i: int) -> None:
        pass

    def report(self, i: int, step: int, value: float) -> bool:
        return self.stats.report(str(i), step, value).should_stop

    def end(self, i: int, value: float, stopped: bool) -> None:
        self.stats.complete(str(i), stopped=stopped)


class OptunaMethod:
    def __init__(self, pruner: Any, seed: int) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.ERROR)
        self.optuna = optuna
        self.study = optuna.create_study(pruner=pruner, sampler=optuna.samplers.RandomSampler(seed=seed))
        self.trials: dict[int, Any] = {}

    def start(self, i: int) -> None:
        self.trials[i] = self.study.ask()

    def report(self, i: int, step: int, value: float) -> bool:
        trial = self.trials[i]
        trial.report(value, step)
        return bool(trial.should_prune())

    def end(self, i: int, value: float, stopped: bool) -> None:
        trial = self.trials.pop(i)
        if stopped:
            self.study.tell(trial, state=self.optuna.trial.TrialState.PRUNED)
        else:
            self.study.tell(trial, value)


def methods(max_step: int, seed: int) -> dict[str, Callable[[], Method]]:
    def optuna_pruners() -> Any:
        import optuna

        return optuna.pruners

    return {
        "tauopt none": lambda: TauoptMethod(NoStopping()),
        "tauopt median": lambda: TauoptMethod(MedianRule(min_trials=5, grace_steps=5)),
        "tauopt asha": lambda: TauoptMethod(AshaRule(min_step=1, max_step=max_step, reduction_factor=3)),
        "tauopt asha min_step=9": lambda: TauoptMethod(AshaRule(min_step=9, max_step=max_step, reduction_factor=3)),
        "optuna MedianPruner": lambda: OptunaMethod(
            optuna_pruners().MedianPruner(n_startup_trials=5, n_warmup_steps=5), seed
        ),
        "optuna SuccessiveHalvingPruner": lambda: OptunaMethod(
            optuna_pruners().SuccessiveHalvingPruner(min_resource=1, reduction_factor=3), seed
        ),
        "optuna SuccessiveHalvingPruner min_resource=9": lambda: OptunaMethod(
            optuna_pruners().SuccessiveHalvingPruner(min_resource=9, reduction_factor=3), seed
        ),
        "optuna HyperbandPruner": lambda: OptunaMethod(
            optuna_pruners().HyperbandPruner(min_resource=1, max_resource=max_step, reduction_factor=3), seed
        ),
    }


# -- the simulation --------------------------------------------------------------


def simulate(method: Method, trials: Trials, workers: int) -> tuple[int, int | None]:
    """Run every trial over `workers` parallel workers on a step clock.
    Returns (steps spent, index of the best trial run to the end)."""
    n, max_step = trials.observed.shape
    nxt = 0
    slots: list[list[int]] = []  # [trial, next step]
    steps = 0
    best: tuple[float, int] | None = None
    while nxt < n or slots:
        while len(slots) < workers and nxt < n:
            method.start(nxt)
            slots.append([nxt, 1])
            nxt += 1
        still: list[list[int]] = []
        for slot in slots:
            i, step = slot
            value = float(trials.observed[i, step - 1])
            steps += 1
            stop = method.report(i, step, value)
            if step == max_step or stop:
                full = step == max_step
                method.end(i, value, stopped=not full)
                if full and (best is None or value < best[0]):
                    best = (value, i)
            else:
                slot[1] = step + 1
                still.append(slot)
        slots = still
    return steps, (best[1] if best else None)


def run(args: argparse.Namespace) -> dict[str, Any]:
    opt = optimum(args.max_step)
    results: dict[str, dict[str, list[float]]] = {}
    with progress(args.seeds * len(methods(args.max_step, 0)), "early_stopping") as step:
        for seed in range(args.seeds):
            trials = make_trials(args.trials, args.max_step, seed)
            for name, factory in methods(args.max_step, seed).items():
                steps, best = simulate(factory(), trials, args.workers)
                regret = float(trials.final[best]) - opt if best is not None else math.inf
                entry = results.setdefault(name, {"steps": [], "regret": []})
                entry["steps"].append(steps)
                entry["regret"].append(regret)
                say(f"seed {seed} {name}: steps {steps} regret {regret:.4f}")
                step(f"seed {seed} {name}")
    none_steps = float(np.mean(results["tauopt none"]["steps"]))
    summary = {
        name: {
            "steps_mean": round(float(np.mean(r["steps"])), 1),
            "steps_vs_none": round(float(np.mean(r["steps"])) / none_steps, 3),
            "regret_mean": round(float(np.mean(r["regret"])), 4),
            "regret_median": round(float(np.median(r["regret"])), 4),
        }
        for name, r in results.items()
    }
    return {
        "benchmark": "early_stopping",
        "workers": args.workers,
        "trials": args.trials,
        "max_step": args.max_step,
        "seeds": args.seeds,
        "methods": summary,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--trials", type=int, default=512)
    parser.add_argument("--max-step", type=int, default=81)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args(argv)
    print(json.dumps(run(args), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
