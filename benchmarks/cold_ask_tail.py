"""Where the first ask of an idle experiment waits: the app driven over ASGI in this
process (no socket, no client process) on a SQLite store of --experiments idle
experiments, started as `tauopt serve` starts it (a thread pool, start-up objects
frozen), then --cold experiments asked once each, one after the other.

Per ask: wall time, the garbage collections that overlapped it, and every store read
or write that overlapped it (which connection, which job, how long: a read queued
behind another on the same connection shows here). Prints one JSON line: p50/p99/max,
the process's CPU per ask (background work included), and the worst asks with those
details.

    nice -n 10 .venv/bin/python benchmarks/cold_ask_tail.py --experiments 100000 --cold 200
    PYTHONPATH=/path/to/other/checkout .venv/bin/python benchmarks/cold_ask_tail.py ...   # A/B another version

The seeded store is kept in --workdir (seeded once, copied fresh for each run).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from door_asgi import _call  # noqa: E402
from experiments_scale import _seed  # noqa: E402

_gcs: list[tuple[float, float, int]] = []
_trips: list[tuple[float, float, str]] = []


def _watch() -> None:
    """Time every garbage collection and every job on a SQLite connection's thread."""
    started = [0.0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            _gcs.append((started[0], time.perf_counter(), info["generation"]))

    gc.callbacks.append(on_gc)
    from tauopt.store import _sqlite_thread

    call = _sqlite_thread.SqliteThread.call

    async def timed(self: Any, fn: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await call(self, fn)
        finally:
            name = getattr(fn, "__qualname__", "job").replace(".<locals>.<lambda>", "").replace(".<locals>", "")
            _trips.append((t0, time.perf_counter(), f"{self.role}:{name}"))

    _sqlite_thread.SqliteThread.call = timed  # type: ignore[method-assign]


async def _asks(db: Path, token: str, ids: list[str]) -> tuple[list[tuple[float, dict[str, Any]]], float]:
    from tauopt.transport.http._server import create_app

    app = create_app(db=str(db), engine_options={"pool": "thread", "warm_pool": False}, freeze_at_start=True)
    out = []
    async with app.router.lifespan_context(app) as state:
        cpu0 = time.process_time()
        for eid in ids:
            t0 = time.perf_counter()
            status, body = await _call(app, state, "POST", f"/v1/experiments/{eid}/suggestions", b"{}", token)
            t1 = time.perf_counter()
            assert status == 201, body
            overlap = {
                "gc_ms": round(1000 * sum(min(b, t1) - max(a, t0) for a, b, _ in _gcs if b > t0 and a < t1), 1),
                "store_jobs": [(name, round(1000 * (b - a), 1)) for a, b, name in _trips if b > t0 and a < t1],
            }
            out.append((t1 - t0, overlap))
        cpu = (time.process_time() - cpu0) / max(len(ids), 1)
    return out, cpu


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--experiments", type=int, default=100_000)
    p.add_argument("--cold", type=int, default=200)
    p.add_argument("--seed", type=int, default=1, help="which experiments are asked")
    p.add_argument("--workdir", default="/tmp/tauopt-cold-ask")
    p.add_argument("--worst", type=int, default=3, help="worst asks printed with their details")
    args = p.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    seeded, db = work / f"seeded-{args.experiments}.db", work / f"run-{args.experiments}.db"
    token_file = Path(str(seeded) + ".token")
    if not token_file.exists():
        token = anyio.run(_seed, seeded, args.experiments)
        with sqlite3.connect(seeded) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        token_file.write_text(token)
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    shutil.copy(seeded, db)
    ids = [f"{i:016x}" for i in random.Random(args.seed).sample(range(100, args.experiments), args.cold)]
    _watch()
    load0 = os.getloadavg()[0]
    asks, cpu = anyio.run(_asks, db, token_file.read_text().strip(), ids)
    wall = sorted(a for a, _ in asks)

    def q(f: float) -> float:
        return round(1000 * wall[min(len(wall) - 1, int(f * (len(wall) - 1)))], 2)

    worst = sorted(asks, key=lambda a: -a[0])[: args.worst]
    print(json.dumps({
        "experiments": args.experiments, "cold_asks": len(asks), "cold_ask_ms": {"p50": q(0.5), "p99": q(0.99), "max": q(1.0)},
        "cpu_ms_per_ask": round(1000 * cpu, 2), "load_average": [round(load0, 1), round(os.getloadavg()[0], 1)],
        "worst": [dict(ms=round(1000 * w, 1), **o) for w, o in worst],
    }))  # fmt: skip


if __name__ == "__main__":
    main()
