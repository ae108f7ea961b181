"""A fixed engine workload, for timing a whole process (CPU seconds) before and after a change.

    farm-bench -n 3 --vs 'env PYTHONPATH=<before> .venv/bin/python benchmarks/engine_workload.py sqlite random' \\
        -- env PYTHONPATH=. .venv/bin/python benchmarks/engine_workload.py sqlite random

64 tasks x 50 ask+observe pairs on one experiment (bandwidth 64), Engine(pool=None),
store `memory` or `sqlite` (a temp file), any strategy. Prints one JSON line.
CPU time is far less exposed to other load on a shared machine than wall time.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import anyio

from tauopt.engine import Engine

SPACE = [{"name": "x", "type": "double", "bounds": (0, 1)}, {"name": "n", "type": "int", "bounds": (1, 64)}]


async def main(store_kind: str, strategy: str, workers: int = 64, pairs: int = 50) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as d:
        store = None if store_kind == "memory" else str(Path(d) / "w.db")
        async with Engine(store=store, pool=None) as engine:
            exp = await engine.create_experiment("w", SPACE, {"name": "y"}, parallel_bandwidth=workers, strategy=strategy)

            async def worker() -> None:
                for _ in range(pairs):
                    s = await engine.suggest(exp.id)
                    await engine.observe(exp.id, suggestion_id=s.id, value=0.5)

            t0 = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for _ in range(workers):
                    tg.start_soon(worker)
            elapsed = time.perf_counter() - t0
    return {"benchmark": "engine_workload", "store": store_kind, "strategy": strategy, "pairs": workers * pairs, "wall_s": round(elapsed, 3)}


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else "memory", sys.argv[2] if len(sys.argv) > 2 else "random")))
