"""tauopt's Ray Tune searcher beside Ray's OptunaSearch and Tune's default random
search, on cells of the quality suite (benchmarks/_suite.py), 4 trials at a time.

Each (function, d, seed) cell runs `--trials` Tune trials per searcher on one local
Ray (`ray.init(num_cpus=4)`), each trial one evaluation of the shifted/rotated test
function. Printed as JSON: per cell and searcher the regret (best value found minus
the known optimum) at equal trials, and the searcher's own time per trial (suggest +
on_trial_complete, measured around the searcher inside Tune; None for Tune's random
search, which is no Searcher).

    python benchmarks/ray_tune.py --cells sphere:2,branin:2 --seeds 0 --trials 20
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _suite  # noqa: E402
import ray  # noqa: E402
from ray import tune  # noqa: E402
from ray.tune.search import BasicVariantGenerator, ConcurrencyLimiter, Searcher  # noqa: E402
from ray.tune.search.optuna import OptunaSearch  # noqa: E402

from tauopt import Client  # noqa: E402
from tauopt.integrations.ray import TauoptSearch  # noqa: E402

CONCURRENCY = 4


class Timed(Searcher):  # type: ignore[misc]
    """The searcher's own time inside Tune: suggest and on_trial_complete."""

    def __init__(self, inner: Searcher) -> None:
        super().__init__(metric=inner.metric, mode=inner.mode)
        self.inner, self.seconds, self.suggested = inner, 0.0, 0

    def set_search_properties(self, metric: Any, mode: Any, config: Any, **spec: Any) -> bool:
        return bool(self.inner.set_search_properties(metric, mode, config, **spec))

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        return bool(self.inner.set_max_concurrency(max_concurrent))

    def suggest(self, trial_id: str) -> Any:
        t = time.perf_counter()
        try:
            config = self.inner.suggest(trial_id)
        finally:
            self.seconds += time.perf_counter() - t
        self.suggested += config not in (None, Searcher.FINISHED)
        return config

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        self.inner.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: Any = None, error: bool = False) -> None:
        t = time.perf_counter()
        self.inner.on_trial_complete(trial_id, result=result, error=error)
        self.seconds += time.perf_counter() - t


def evaluate(config: dict[str, Any]) -> None:
    problem = _suite.make(config["fn"], config["d"], config["seed"])
    tune.report({"value": problem.f({k: v for k, v in config.items() if k.startswith("x")})})


def run_cell(name: str, d: int, seed: int, method: str, trials: int, client: Client, storage: str) -> dict[str, Any]:
    problem = _suite.make(name, d, seed)
    space: dict[str, Any] = {f"x{i}": tune.uniform(problem.lo, problem.hi) for i in range(d)}
    space.update(fn=name, d=d, seed=seed)
    timed: Timed | None = None
    if method == "random":
        search: Any = BasicVariantGenerator(max_concurrent=CONCURRENCY, random_state=seed)
    else:
        inner = TauoptSearch(client=client, name=f"{name}-{d}-{seed}") if method == "tauopt" else OptunaSearch(seed=seed)
        timed = Timed(inner)
        search = ConcurrencyLimiter(timed, max_concurrent=CONCURRENCY)
    results = tune.Tuner(
        evaluate, param_space=space,
        tune_config=tune.TuneConfig(search_alg=search, metric="value", mode="min", num_samples=trials, reuse_actors=True),
        run_config=tune.RunConfig(storage_path=storage, verbose=0),
    ).fit()  # fmt: skip
    values = [r.metrics["value"] for r in results if r.metrics and "value" in r.metrics]
    return {
        "cell": f"{name}/d{d}/seed{seed}", "searcher": method, "trials": len(values),
        "regret": min(values) - problem.optimum,
        "searcher_ms_per_trial": None if timed is None else 1000 * timed.seconds / max(1, timed.suggested),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cells", default="sphere:2,branin:2", help="function:d,... from benchmarks/_suite.py")
    p.add_argument("--seeds", default="0")
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--searchers", default="tauopt,optuna,random")
    args = p.parse_args(argv)
    ray.init(num_cpus=CONCURRENCY, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.cloudpickle.register_pickle_by_value(_suite)  # Ray's workers do not have benchmarks/ on their path
    rows = []
    # Tune prints its run tables on stdout: stdout carries only this program's JSON
    with contextlib.redirect_stdout(sys.stderr), Client(driver="local") as client, tempfile.TemporaryDirectory() as storage:
        for cell in args.cells.split(","):
            name, d = cell.split(":")
            for seed in map(int, args.seeds.split(",")):
                for method in args.searchers.split(","):
                    rows.append(run_cell(name, int(d), seed, method, args.trials, client, storage))
                    print(json.dumps(rows[-1]), file=sys.stderr)
    ray.shutdown()
    print(json.dumps({"concurrency": CONCURRENCY, "trials": args.trials, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
