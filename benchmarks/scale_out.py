"""Scale-out: GP experiments on the local process pool vs a Dask LocalCluster, same run.

    nice -n 19 .venv/bin/python benchmarks/scale_out.py                      # the issue's size
    nice -n 19 .venv/bin/python benchmarks/scale_out.py --experiments 8 --duration-s 60

Per backend (`process`: tauopt's local process pool; `dask`: a Dask LocalCluster of
the same number of worker processes, one thread each), one engine, `--experiments`
GP experiments each seeded with `--history` observations, `--workers` asking
tasks per experiment (bandwidth = workers) that each evaluate for `--eval-s` and
observe, for `--duration-s`. Then, on the same executor, `--overhead-jobs`
sequential round trips of a job that carries a full request (history of
`--history` points) but does no fit (Sobol): the executor's per-job cost. On
Dask, the same job also goes as a plain Dask task (`client.submit`, then the
result gathered: the executor's path before its job runners), for comparison.

Prints one JSON object: per backend fits/s, asks, ask p50/p99 (ms), fallbacks,
per-job round trip (ms); `dask_overhead_ms` = dask minus process round trip
(means), and `dask_task_overhead_ms` the same for the plain task.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

import anyio
import numpy as np

from tauopt.compute import StrategyPool
from tauopt.engine import Engine
from tauopt.models import Metric, Observation
from tauopt.space import Space
from tauopt.strategies import StrategyJob, SuggestRequest, get
from tauopt.schema import parse_metric

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _progress import progress  # noqa: E402

SPACE = [{"name": f"x{i}", "type": "double", "bounds": (0.0, 1.0)} for i in range(4)]
METRIC = {"name": "loss", "objective": "minimize"}


def _loss(a: dict[str, Any]) -> float:
    return float(sum((a[f"x{i}"] - 0.2 * (i + 1)) ** 2 for i in range(4)))


def _pct(xs: list[float], q: float) -> float:
    return round(float(np.percentile(xs, q)) * 1000, 1) if xs else float("nan")


async def _seed(engine: Engine, exp_id: str, n: int, rng: np.random.Generator) -> None:
    for _ in range(n):
        a = {f"x{i}": float(v) for i, v in enumerate(rng.random(4))}
        await engine.observe(exp_id, assignments=a, value=_loss(a))


async def _load(engine: Engine, args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    exps = []
    for e in range(args.experiments):
        exp = await engine.create_experiment(f"e{e}", SPACE, METRIC, strategy="gp", parallel_bandwidth=args.workers)
        await _seed(engine, exp.id, args.history, rng)
        exps.append(exp.id)
    asks: list[float] = []
    stop_at = time.monotonic() + args.duration_s
    jobs0, fb0 = engine.pool.stats.jobs, engine.pool.stats.fallbacks

    async def worker(exp_id: str) -> None:
        while time.monotonic() < stop_at:
            t0 = time.monotonic()
            s = await engine.suggest(exp_id)
            asks.append(time.monotonic() - t0)
            await anyio.sleep(args.eval_s)
            await engine.observe(exp_id, s.id, value=_loss(s.assignments))

    t0 = time.monotonic()
    async with anyio.create_task_group() as tg:
        for exp_id in exps:
            for _ in range(args.workers):
                tg.start_soon(worker, exp_id)
    elapsed = time.monotonic() - t0
    jobs = engine.pool.stats.jobs - jobs0
    return {
        "fits_per_s": round(jobs / elapsed, 2),
        "jobs": jobs,
        "asks": len(asks),
        "ask_p50_ms": _pct(asks, 50),
        "ask_p99_ms": _pct(asks, 99),
        "fallbacks": engine.pool.stats.fallbacks - fb0,
        "elapsed_s": round(elapsed, 1),
    }


async def _round_trips(pool: StrategyPool, args: argparse.Namespace) -> dict[str, Any]:
    """Sequential jobs with a full request but no fit: what the executor itself costs."""
    rng = np.random.default_rng(1)
    history = []
    for i in range(args.history):
        a = {f"x{j}": float(v) for j, v in enumerate(rng.random(4))}
        history.append(Observation(str(i), "bench", None, a, _loss(a), False, 0.0, {}))
    request = SuggestRequest(Space.parse(SPACE), parse_metric(METRIC), tuple(history), (), 1, 0, args.history)
    job = StrategyJob(get("sobol").job_runner, request, None, None)
    # The load's last fits run on (until their deadline): the executor's own cost is
    # measured once they are done, not a job's wait behind them.
    with anyio.move_on_after(2 * args.fit_deadline_s):
        while pool.stats.in_flight:
            await anyio.sleep(0.1)
    await pool.executor.submit("overhead", job)  # first job: imports on the worker
    times = []
    for _ in range(args.overhead_jobs):
        t0 = time.monotonic()
        await pool.executor.submit("overhead", job)
        times.append(time.monotonic() - t0)
    out = {"round_trip_p50_ms": _pct(times, 50), "round_trip_mean_ms": round(statistics.fmean(times) * 1000, 2)}
    if pool.kind == "dask":
        out.update(await _task_round_trips(pool.executor.client, job, args.overhead_jobs))
    return out


async def _task_round_trips(client: Any, job: StrategyJob, n: int) -> dict[str, Any]:
    """The same job as a plain Dask task, pinned to one worker: submit, then gather."""
    from tauopt.compute._dask_task import run_on_worker

    home = sorted(await client.nthreads())[0]
    times = []
    for i in range(n + 1):
        t0 = time.monotonic()
        await client.submit(run_on_worker, job, "task", i, time.time(), workers=[home], pure=False)
        if i:  # the first one: the function's first unpickling on the worker
            times.append(time.monotonic() - t0)
    return {"task_round_trip_p50_ms": _pct(times, 50), "task_round_trip_mean_ms": round(statistics.fmean(times) * 1000, 2)}


async def run(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.monotonic()
    pool = StrategyPool(backend, size=args.pool_size)
    async with Engine(pool=pool, fit_deadline_s=args.fit_deadline_s, passivate_after_s=None) as engine:
        if backend == "process":
            await pool.executor.start()  # started (and warmed up) before the clock, as the dask workers are
        started = round(time.monotonic() - t0, 1)
        out = {"start_s": started, **await _load(engine, args), **await _round_trips(pool, args)}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--experiments", type=int, default=32)
    p.add_argument("--history", type=int, default=200)
    p.add_argument("--workers", type=int, default=8, help="asking tasks (and bandwidth) per experiment")
    p.add_argument("--eval-s", type=float, default=1.0)
    p.add_argument("--duration-s", type=float, default=60.0)
    p.add_argument("--pool-size", type=int, default=None, help="worker processes of each backend (default: cores)")
    p.add_argument("--fit-deadline-s", type=float, default=30.0)
    p.add_argument("--overhead-jobs", type=int, default=50)
    p.add_argument("--backends", default="process,dask")
    args = p.parse_args()
    results: dict[str, Any] = {"config": {k: v for k, v in vars(args).items()}, "cores": len(os.sched_getaffinity(0))}
    backends = args.backends.split(",")
    with progress(len(backends), "scale_out") as step:
        for backend in backends:
            results[backend] = anyio.run(run, backend, args)
            step(backend)
    if "process" in results and "dask" in results:
        results["dask_overhead_ms"] = round(
            results["dask"]["round_trip_mean_ms"] - results["process"]["round_trip_mean_ms"], 2
        )
        results["dask_task_overhead_ms"] = round(
            results["dask"]["task_round_trip_mean_ms"] - results["process"]["round_trip_mean_ms"], 2
        )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
