"""Optuna's default sampler alone against the same script served by tauopt.

    .venv/bin/python benchmarks/optuna_served.py --problems branin:2,hartmann6:6 --workers 4,8 --seeds 3 --budget 40

One `tauopt serve --optuna-port` (SQLite, thread pool). For each problem of the
quality suite (`_suite.make`), worker count W and seed: two studies run the same
unmodified script through `GrpcStorageProxy`, with Optuna's default sampler
(`TPESampler(seed=seed)`): `tpe` as it is, `served` with the study's user
attribute `tauopt:serve_suggestions` = "auto" (Sobol, then tauopt's GP, served as
WAITING trials with `fixed_params`). W workers are simulated in one process, as
the quality suite does (`_quality_drivers.run_optuna`): W trials are open at any
time, the oldest is evaluated (after --eval-s, the time a worker computes) and
told, then one more is asked. A served point is claimed only when one is ready
(the daemon never makes an ask wait for a fit): `served_frac` is the share of
trials that ran tauopt's point.

Output: one JSON line per run (problem, d, workers, seed, method, best, regret,
served_frac), then one per (problem, workers) with the median regret of each method.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _suite import make  # noqa: E402
from optuna_door import _free_port, _wait_ready  # noqa: E402


def run(storage: Any, name: str, problem: Any, workers: int, seed: int, budget: int, eval_s: float, served: bool) -> dict[str, Any]:
    import optuna
    from optuna.distributions import FloatDistribution

    study = optuna.create_study(study_name=name, storage=storage, sampler=optuna.samplers.TPESampler(seed=seed))
    if served:
        study.set_user_attr("tauopt:serve_suggestions", "auto")
    dists = {p.name: FloatDistribution(p.bounds[0], p.bounds[1]) for p in problem.space.parameters}
    open_trials: deque[Any] = deque()
    values: list[float] = []
    while len(open_trials) < workers:
        open_trials.append(study.ask(dists))
    while len(values) < budget:
        trial = open_trials.popleft()
        time.sleep(eval_s)
        v = float(problem.f(trial.params))
        values.append(v)
        study.tell(trial, v)
        if len(values) + len(open_trials) < budget:
            open_trials.append(study.ask(dists))
    ran_served = sum(1 for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE" and "tauopt:served" in t.system_attrs)
    best = min(values)
    return {"best": best, "regret": best - problem.optimum, "served_frac": round(ran_served / budget, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", default="branin:2,hartmann6:6", help="name:d, comma-separated (benchmarks/_suite.py)")
    ap.add_argument("--workers", default="4,8")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--budget", type=int, default=40)
    ap.add_argument("--eval-s", type=float, default=0.2, help="seconds a simulated worker computes per trial")
    args = ap.parse_args()

    import warnings

    import optuna
    from optuna.storages import GrpcStorageProxy

    warnings.simplefilter("ignore")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    results: dict[tuple[str, int, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="optuna-served-") as d:
        port = _free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "tauopt.cli", "serve", "--db", str(Path(d) / "tauopt.db"), "--port", str(_free_port()),
             "--pool", "thread", "--log-level", "warning", "--optuna-port", str(port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            _wait_ready(port, server)
            storage = GrpcStorageProxy(host="127.0.0.1", port=port)
            storage.wait_server_ready(timeout=60)
            for spec in args.problems.split(","):
                pname, dim = spec.split(":")
                for workers in (int(w) for w in args.workers.split(",")):
                    for seed in range(args.seeds):
                        problem = make(pname, int(dim), seed)
                        for method in ("tpe", "served"):
                            name = f"{pname}{dim}-w{workers}-s{seed}-{method}"
                            t0 = time.perf_counter()
                            out = run(storage, name, problem, workers, seed, args.budget, args.eval_s, method == "served")
                            row = {"problem": pname, "d": int(dim), "workers": workers, "seed": seed, "method": method, **out,
                                   "seconds": round(time.perf_counter() - t0, 1)}  # fmt: skip
                            print(json.dumps(row), flush=True)
                            results.setdefault((spec, workers, method), []).append(out["regret"])
        finally:
            server.terminate()
            server.wait(timeout=30)
    for (spec, workers, method), regrets in sorted(results.items()):
        print(json.dumps({"summary": spec, "workers": workers, "method": method, "median_regret": statistics.median(regrets),
                          "runs": len(regrets)}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
