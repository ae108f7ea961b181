"""Isolation: does one experiment's GP fitting slow everyone else's asks?

One Engine (memory store, GP fits in its StrategyPool): 100 random-strategy
experiments asked by 64 workers, first with a GP experiment idle (the pool
already warm), then with `gp_workers` tasks asking and observing the GP
experiment with no evaluation time, so fits run back to back. Reported: the
random experiments' ask p99 in both phases and their ratio, and the GP fits
done while measuring.
"""

from __future__ import annotations

import random
import time
from typing import Any, Mapping

import anyio

from _bench_common import METRIC, PARAMETERS, Recorder, api_ask_tell, invariants, objective, run_workers, summarize


async def _isolation(workers: int, experiments: int, duration_s: float, pool: str, gp_workers: int, preload: int) -> dict[str, Any]:
    from tauopt import Engine

    async with Engine(pool=pool) as engine:
        ids = [
            (await engine.create_experiment(f"r{i}", PARAMETERS, METRIC, parallel_bandwidth=workers, strategy="random")).id
            for i in range(experiments)
        ]
        gp = (
            await engine.create_experiment(
                "gp", PARAMETERS, METRIC, parallel_bandwidth=gp_workers, strategy="gp", strategy_options={"initial_points": 5}
            )
        ).id
        rnd = random.Random(1)
        for _ in range(preload):
            a = {"lr": 10 ** rnd.uniform(-5, 0), "layers": rnd.randint(1, 8), "act": rnd.choice(["relu", "tanh", "gelu"])}
            await engine.observe(gp, assignments=a, value=objective(a))
        s = await engine.suggest(gp)  # warm: the first fit loads torch in the pool
        await engine.observe(gp, s.id, value=objective(s.assignments))

        ask, tell = api_ask_tell(lambda w: engine, ids)
        idle = await run_workers(workers, ask, tell, duration_s, 0.0)
        before = (await engine.inspect(gp))["proposals"]
        gp_rec = Recorder()
        loaded = Recorder()

        async def gp_load(stop: anyio.Event) -> None:
            async def one(w: int) -> None:
                while not stop.is_set():
                    t0 = time.perf_counter()
                    s = await engine.suggest(gp, tag=f"gp{w}")
                    gp_rec.ask_s.append(time.perf_counter() - t0)
                    await engine.observe(gp, s.id, value=objective(s.assignments))
                    gp_rec.pairs += 1

            async with anyio.create_task_group() as tg:
                for w in range(gp_workers):
                    tg.start_soon(one, w)

        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(gp_load, stop)
            await anyio.sleep(0.5)  # fits under way before measuring
            loaded = await run_workers(workers, ask, tell, duration_s, 0.0)
            stop.set()
        fits = (await engine.inspect(gp))["proposals"] - before
        peak = max([(await engine.inspect(e))["max_open_seen"] for e in ids])
    a, b = summarize(idle), summarize(loaded)
    p99_idle, p99_loaded = a["ask_ms"]["p99"], b["ask_ms"]["p99"]
    gp_ask = sorted(gp_rec.ask_s)
    return {
        "kind": "isolation",
        "name": f"isolation/gp-{pool}-pool/w{workers}/e{experiments}",
        "door": "inproc",
        "store": "memory",
        "strategy": "random+gp",
        "workers": workers,
        "procs": 1,
        "experiments": experiments,
        "eval_s": 0.0,
        "duration_s": duration_s,
        "pool": pool,
        "gp_workers": gp_workers,
        "gp_preloaded_observations": preload,
        "without_gp": a,
        "with_gp": b,
        "p99_ratio_with_over_without": round(p99_loaded / p99_idle, 2) if p99_idle else None,
        "pairs_per_s_ratio_with_over_without": round(b["pairs_per_s"] / a["pairs_per_s"], 2) if a["pairs_per_s"] else None,
        "gp_fits_while_measured": fits,
        "gp_ask_ms_p50": round(1000 * gp_ask[len(gp_ask) // 2], 1) if gp_ask else None,
        # headline figures, for the table
        **b,
        "invariants": invariants(idle.keys + loaded.keys, peak, workers, "engine.inspect"),
        "_ask_s": loaded.ask_s,
    }


def run_isolation(workers: int, experiments: int, duration_s: float, pool: str = "process", gp_workers: int = 4, preload: int = 40) -> dict[str, Any]:
    return anyio.run(_isolation, workers, experiments, duration_s, pool, gp_workers, preload)
