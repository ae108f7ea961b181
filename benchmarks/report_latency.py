"""Report latency under contention: 64 workers reporting intermediate values.

    .venv/bin/python benchmarks/report_latency.py                 # 64 workers, 5 s, SQLite, ASHA
    .venv/bin/python benchmarks/report_latency.py --workers 8 --duration 1 --store memory

Every worker loops: suggest -> report steps 1..--steps (stopping when told) ->
observe (stopped=True when stopped), against one in-process Engine on a fresh
SQLite file (group commit) or in memory. Each report is a durable write and a
rule decision from the actor's per-step statistics. Prints one JSON object:
report latency p50/p95/p99/max (ms), reports per second, how many trials were
stopped, and the same for the rule `none` (the cost of deciding).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from tauopt.engine import Engine

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _progress import progress  # noqa: E402

X = [{"name": "x", "type": "double", "bounds": (0.0, 1.0)}, {"name": "y", "type": "double", "bounds": (0.0, 1.0)}]


def curve(a: dict[str, Any], t: int) -> float:
    x, y = a["x"], a["y"]
    return 0.1 + (x - 0.3) ** 2 + (y - 0.7) ** 2 + (0.3 + y) * t ** -(0.1 + 1.5 * x)


async def run(rule: dict[str, Any], workers: int, duration: float, steps: int, store: str | None) -> dict[str, Any]:
    latencies: list[float] = []
    stopped = trials = 0
    async with Engine(store=store, pool=None) as engine:
        exp = await engine.create_experiment(
            "reports", X, {"name": "loss", "objective": "minimize"}, parallel_bandwidth=workers,
            strategy="random", early_stopping=rule,
        )
        deadline = time.perf_counter() + duration

        async def worker() -> None:
            nonlocal stopped, trials
            while time.perf_counter() < deadline:
                s = await engine.suggest(exp.id)
                value, stop = 0.0, False
                for step in range(1, steps + 1):
                    value = curve(s.assignments, step)
                    t0 = time.perf_counter()
                    stop = (await engine.report(exp.id, s.id, step, value)).should_stop
                    latencies.append(time.perf_counter() - t0)
                    if stop:
                        break
                await engine.observe(exp.id, suggestion_id=s.id, value=value, stopped=stop)
                trials += 1
                stopped += stop

        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(workers):
                tg.start_soon(worker)
        elapsed = time.perf_counter() - started
    ms = np.array(latencies) * 1000
    return {
        "rule": rule["rule"],
        "workers": workers,
        "reports": len(latencies),
        "reports_per_s": round(len(latencies) / elapsed, 1),
        "report_ms": {k: round(float(np.percentile(ms, q)), 3) for k, q in (("p50", 50), ("p95", 95), ("p99", 99))}
        | {"max": round(float(ms.max()), 3)},
        "trials": trials,
        "stopped": stopped,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--steps", type=int, default=27)
    parser.add_argument("--store", choices=("sqlite", "memory"), default="sqlite")
    args = parser.parse_args(argv)
    out = []
    rules = ({"rule": "none"}, {"rule": "asha", "max_step": args.steps}, {"rule": "median"})
    with tempfile.TemporaryDirectory() as tmp, progress(len(rules), "report_latency") as step:
        for i, rule in enumerate(rules):
            store = str(Path(tmp) / f"r{i}.db") if args.store == "sqlite" else None
            result = anyio.run(run, rule, args.workers, args.duration, args.steps, store)
            result["store"] = args.store
            print(json.dumps(result), flush=True)
            out.append(result)
            step(str(rule["rule"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
