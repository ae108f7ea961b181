"""GP latency: the fit per suggestion, the ask as workers see it, and Optuna's
GPSampler ask time at the same history sizes, in one run.

    .venv/bin/python benchmarks/gp_latency.py                         # 50, 200, 1000 observations
    .venv/bin/python benchmarks/gp_latency.py --sizes 50,200 --asks 24 --parts fit,optuna

Parts (6-D Hartmann objective, 8 suggestions open at a time):
  fit     tauopt's GP proposal as a pure function (one torch and one BLAS thread,
          warm-started from the previous fit as in the pool): p50/p99 seconds over
          --repeats; also asked for 8 points (the engine's job with 8 workers) from
          the same warm start, and what each point after the first adds.
  optuna  Optuna GPSampler: seconds per `study.ask()` with n finished and 8
          running trials (it reuses its previous fit too).
  engine  Engine(pool=--pool) with a `gp` experiment preloaded with n
          observations; 8 concurrent workers ask, evaluate for --eval seconds,
          observe (starts staggered over one evaluation time). Ask latency
          p50/p99 as the worker sees it, and the pool's fit
          seconds per suggestion. With 1 s evaluations the point is computed
          ahead while workers evaluate, so the ask itself should be ~1 ms.
          --policies: the compute-ahead policy (adaptive = default, ahead8, ahead1, fresh, demand;
          benchmarks/_quality_drivers.py), with the fraction of stale points served.
Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from typing import Any

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _progress import progress  # noqa: E402
from _suite import _hartmann6  # noqa: E402

from tauopt.models import Metric, Observation  # noqa: E402
from tauopt.space import Space  # noqa: E402
from tauopt.strategies._request import SuggestRequest  # noqa: E402

D = 6
SPACE = Space.parse([{"name": f"x{i}", "type": "double", "bounds": [0, 1]} for i in range(D)])


def objective(a: dict[str, Any]) -> float:
    return _hartmann6(np.array([a[f"x{i}"] for i in range(D)]))


def history(n: int, seed: int = 0) -> tuple[list[dict[str, Any]], list[float]]:
    rng = np.random.default_rng(seed)
    pts = [SPACE.from_unit(u) for u in rng.random((n, D))]
    return pts, [objective(a) for a in pts]


def pct(xs: list[float]) -> dict[str, float]:
    a = np.array(xs)
    return {"p50": float(f"{np.quantile(a, 0.5):.4g}"), "p99": float(f"{np.quantile(a, 0.99):.4g}"), "n": len(xs)}


def part_fit(n: int, repeats: int) -> dict[str, Any]:
    from tauopt.compute._workers import blas_pinned, torch_pinned

    with blas_pinned(), torch_pinned():  # one torch and one BLAS thread, as in the pool
        return _part_fit(n, repeats)


def _part_fit(n: int, repeats: int) -> dict[str, Any]:
    from tauopt.strategies.gp import propose_gp

    pts, vals = history(n + repeats + 8)
    obs = [Observation(str(i), "e", None, a, v) for i, (a, v) in enumerate(zip(pts, vals))]
    warm, times, acq, fits, cpu, cold, batch, refit, choose = None, [], [], [], [], None, [], [], []
    propose_gp(SuggestRequest(SPACE, Metric("y"), tuple(obs[:10])), np.random.default_rng(0))  # imports, first call
    for r in range(repeats + 1):
        req = SuggestRequest(SPACE, Metric("y"), tuple(obs[: n + r]), tuple(pts[n + r : n + r + 8]), 1, 0, n + r)
        t0, c0 = time.perf_counter(), time.process_time()
        res = propose_gp(req, np.random.default_rng(r), warm)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        assert res.info.fallback_reason is None, res.info.fallback_reason
        if r == 0:
            cold = dt
        else:
            times.append(dt)
            acq.append(res.info.acq_seconds)
            fits.append(dt - res.info.acq_seconds)
            cpu.append(dc)
            # the engine's job with 8 workers: 8 points from the same warm start (and fit)
            t0 = time.perf_counter()
            propose_gp(replace(req, n=8), np.random.default_rng(r), warm)
            batch.append(time.perf_counter() - t0)
            # the same call when it fits again (gp._standing_fit), and when it also
            # chooses the output warp again (two fits; gp._standing_warp)
            for out, again in ((refit, replace(warm, fitted_at=0)), (choose, replace(warm, warp=None, fitted_at=0))):
                t0 = time.perf_counter()
                propose_gp(req, np.random.default_rng(r), again)
                out.append(time.perf_counter() - t0)
        warm = res.state
    # warm_s is the whole call; fit_s its hyperparameter fit, acq_s its acquisition
    # (8 pending points, one suggestion: the cost per suggestion when asked one at a time);
    # cpu_s the call's CPU seconds (one thread): what it costs whatever else runs on the machine;
    # batch8_s the same call asked for 8 points, extra_point_s what each point after the first adds;
    # from GPConfig.large_history (256) observations a warm call reuses the last fit and
    # choice of warp (until the history grows by a tenth and a quarter): refit_s is the
    # call when it fits again (one fit), rechoose_s when it also chooses again (two fits);
    # below 256 every call is a rechoose_s call
    extra = (float(np.median(batch)) - float(np.median(times))) / 7
    return {"part": "fit", "n": n, "cold_s": round(cold or 0.0, 4), "warm_s": pct(times), "fit_s": pct(fits),
            "acq_s": pct(acq), "cpu_s": pct(cpu), "batch8_s": pct(batch), "extra_point_s": float(f"{extra:.3g}"),
            "refit_s": pct(refit), "rechoose_s": pct(choose)}


def part_optuna(n: int, repeats: int) -> dict[str, Any]:
    import optuna
    from optuna.distributions import FloatDistribution
    from optuna.trial import create_trial

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    dists = {f"x{i}": FloatDistribution(0.0, 1.0) for i in range(D)}
    study = optuna.create_study(sampler=optuna.samplers.GPSampler(seed=0))
    pts, vals = history(n)
    for a, v in zip(pts, vals):
        study.add_trial(create_trial(params=a, distributions=dists, value=v))
    running = [study.ask(dists) for _ in range(8)]
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        trial = study.ask(dists)
        times.append(time.perf_counter() - t0)
        # keep n finished: the oldest running trial fails (ignored by the sampler)
        study.tell(running.pop(0), state=optuna.trial.TrialState.FAIL)
        running.append(trial)
    return {"part": "optuna_gp_ask", "n": n, "ask_s": pct(times)}


async def part_engine(n: int, eval_s: float, asks: int, workers: int, pool: str, policy: str = "adaptive") -> dict[str, Any]:
    import anyio

    from _quality_drivers import ahead_policy

    from tauopt.engine import Engine

    async with Engine(pool=pool) as engine:
        exp = await engine.create_experiment(
            "latency", SPACE.parameters, {"name": "y"}, parallel_bandwidth=workers, strategy="gp"
        )
        pts, vals = history(n)
        for a, v in zip(pts, vals):
            await engine.observe(exp.id, assignments=a, value=v)
        # one warm-up round so worker start-up is not counted
        s = await engine.suggest(exp.id)
        await engine.observe(exp.id, s.id, value=objective(s.assignments))
        stats = engine.pool.stats if engine.pool is not None else None
        jobs0, fit0, c0 = (stats.jobs, stats.fit_seconds, stats.candidates) if stats else (0, 0.0, 0)
        lat: list[float] = []

        async def worker(i: int) -> None:
            # Workers start staggered over one evaluation time, as in a steady
            # state; started together they would ask in lockstep (the worst case).
            await anyio.sleep(eval_s * i / workers)
            while len(lat) < asks:
                t0 = time.perf_counter()
                s = await engine.suggest(exp.id)
                lat.append(time.perf_counter() - t0)
                await anyio.sleep(eval_s)
                await engine.observe(exp.id, s.id, value=objective(s.assignments))

        with ahead_policy(policy):
            async with anyio.create_task_group() as tg:
                for i in range(workers):
                    tg.start_soon(worker, i)
            served = await engine.inspect(exp.id)
        out: dict[str, Any] = {"part": "engine", "n": n, "eval_s": eval_s, "pool": pool, "policy": policy, "ask_s": pct(lat)}
        out["stale_frac"] = round(served.get("served_stale", 0) / max(served.get("served_pooled", 0), 1), 3)
        if stats:
            out["fit_s_per_suggestion"] = round((stats.fit_seconds - fit0) / max(stats.candidates - c0, 1), 4)
            out["fit_jobs"] = stats.jobs - jobs0
            out["fallbacks"] = stats.fallbacks
        return out


def _one_size(n: int, parts: list[str], evals: list[float], args: Any, rows: list[dict[str, Any]], step: Any) -> None:
    """Every part at history size n; each row on stderr as it lands."""
    if "fit" in parts:
        rows.append(part_fit(n, args.repeats))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        step(f"fit n={n}")
    if "optuna" in parts:
        try:
            rows.append(part_optuna(n, args.repeats))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        except ImportError:
            print("optuna not installed: skipping (pip install 'tauopt[bench]')", file=sys.stderr)
        step(f"optuna n={n}")
    if "engine" in parts:
        import anyio

        for e in evals:
            for pol in args.policies.split(","):
                rows.append(anyio.run(part_engine, n, e, args.asks, args.workers, args.pool, pol))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            step(f"engine n={n} eval={e:g}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="50,200,1000")
    ap.add_argument("--parts", default="fit,optuna,engine")
    ap.add_argument("--repeats", type=int, default=10, help="proposals timed per size (fit, optuna)")
    ap.add_argument("--asks", type=int, default=40, help="asks timed per engine configuration")
    ap.add_argument("--eval", default="0,1", help="simulated evaluation seconds (engine)")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--pool", default="process", choices=["process", "thread"])
    ap.add_argument("--policies", default="adaptive", help="engine compute-ahead policies (benchmarks/_quality_drivers.py POLICIES)")
    args = ap.parse_args(argv)
    parts = args.parts.split(",")
    rows: list[dict[str, Any]] = []
    sizes, evals = [int(x) for x in args.sizes.split(",")], [float(x) for x in args.eval.split(",")]
    units = len(sizes) * (("fit" in parts) + ("optuna" in parts) + ("engine" in parts) * len(evals))
    with progress(units, "gp_latency") as step:
        for n in sizes:
            _one_size(n, parts, evals, args, rows, step)
    print(json.dumps({"settings": vars(args), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
