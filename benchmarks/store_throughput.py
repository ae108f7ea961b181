"""Durable vs in-memory throughput, in the same run: prints JSON.

    .venv/bin/python benchmarks/store_throughput.py            # engine asks/observes, 64 workers
    .venv/bin/python benchmarks/store_throughput.py --mode store  # raw store batches, 64 producers
    .venv/bin/python benchmarks/store_throughput.py --quick

Mode `engine` (default) drives real `Engine(store=...)` asks and observes: each
of `--workers` tasks loops suggest -> observe on one experiment (bandwidth =
workers, random strategy), or spread over `--experiments` experiments. Mode
`store` submits the write batches an ask and an observe make (PutSuggestion +
PutExperiment; then PutObservation + PutSuggestion + PutExperiment) straight to
the store. Stores: memory, sqlite durability="os", sqlite durability="fsync",
and with `--pg-url postgresql://...` PostgreSQL (each round in a schema of its
own, dropped after); rounds are interleaved (memory, os, fsync, postgresql,
memory, ...) and the median round is reported, since the machine is noisy. One
op = one ask + one observe.

    .venv/bin/python benchmarks/store_throughput.py --stores memory,sqlite_os,postgresql \
        --pg-url postgresql://postgres@127.0.0.1:5432/postgres --experiments 100 --workers 16
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from tauopt.engine import Engine, MemoryStore, Store
from tauopt.store import PutExperiment, PutObservation, PutSuggestion
from tauopt.models import Experiment, Metric, Observation, Parameter, Suggestion
from tauopt.schema import parse_parameter

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _progress import progress  # noqa: E402

STORES = ("memory", "sqlite_os", "sqlite_fsync", "postgresql")
PARAMETERS = [
    {"name": "lr", "type": "double", "bounds": [1e-5, 1.0], "scale": "log"},
    {"name": "layers", "type": "int", "bounds": [1, 8]},
    {"name": "act", "type": "categorical", "values": ["relu", "tanh", "gelu"]},
]


def make_store(kind: str, directory: Path, n: int, gather_turns: int | None = None, pg_url: str | None = None) -> Store:
    if kind == "memory":
        return MemoryStore()
    if kind == "postgresql":
        from tauopt.store._postgresql import PostgresStore

        if pg_url is None:
            raise SystemExit("the postgresql store needs --pg-url postgresql://...")
        return PostgresStore(pg_url, **({} if gather_turns is None else {"gather_turns": gather_turns}))
    from tauopt.store._sqlite import SqliteStore

    extra = {} if gather_turns is None else {"gather_turns": gather_turns}
    return SqliteStore(directory / f"bench-{kind}-{n}.db", durability="os" if kind == "sqlite_os" else "fsync", **extra)


def store_stats(store: Store) -> dict[str, Any]:
    tx = getattr(store, "transactions", None)
    if not tx:
        return {}
    return {"transactions": tx, "batches_per_transaction": round(store.batches / tx, 1)}  # type: ignore[attr-defined]


async def run_engine(store: Store, workers: int, experiments: int, ops: int) -> dict[str, Any]:
    async with Engine(store=store, pool=None) as engine:
        ids = [
            (
                await engine.create_experiment(
                    f"bench-{i}", PARAMETERS, {"name": "loss"}, parallel_bandwidth=workers, strategy="random"
                )
            ).id
            for i in range(experiments)
        ]
        per_worker = ops // workers
        latencies: list[float] = []

        async def worker(w: int) -> None:
            eid = ids[w % experiments]
            for _ in range(per_worker):
                t0 = time.perf_counter()
                s = await engine.suggest(eid, tag=f"w{w}")
                await engine.observe(eid, s.id, value=float(s.assignments["lr"]))
                latencies.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for w in range(workers):
                tg.start_soon(worker, w)
        elapsed = time.perf_counter() - t0
        stats = store_stats(store)
    latencies.sort()
    return {
        "ops_per_s": round(per_worker * workers / elapsed, 1),
        "p50_ms": round(1000 * latencies[len(latencies) // 2], 2),
        "p99_ms": round(1000 * latencies[int(len(latencies) * 0.99)], 2),
        **stats,
    }


async def run_store(store: Store, workers: int, ops: int) -> dict[str, Any]:
    exp = Experiment("bench", "bench", tuple(parse_parameter(p, i) for i, p in enumerate(PARAMETERS)), Metric("loss"), workers)
    per_worker = ops // workers
    async with store:
        await store.write([PutExperiment(exp)])

        async def producer(w: int) -> None:
            for i in range(per_worker):
                s = Suggestion(f"{w}-{i}", "bench", {"lr": 0.01, "layers": 3, "act": "relu"}, tag=f"w{w}", created_at=time.time())
                await store.write([PutSuggestion(s), PutExperiment(exp, i)])
                o = Observation(f"{w}-{i}", "bench", s.id, s.assignments, 0.5, created_at=time.time())
                await store.write([PutObservation(o), PutSuggestion(s.evolve(state="observed")), PutExperiment(exp, i)])

        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for w in range(workers):
                tg.start_soon(producer, w)
        elapsed = time.perf_counter() - t0
        stats = store_stats(store)
    return {"ops_per_s": round(per_worker * workers / elapsed, 1), **stats}


async def _pg_schema(url: str, name: str, drop: bool = False) -> str:
    """Create (or drop) a schema of its own for one round's tables."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f"DROP SCHEMA {name} CASCADE" if drop else f"CREATE SCHEMA {name}")
    finally:
        await conn.close()
    return name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("engine", "store"), default="engine")
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--experiments", type=int, default=1)
    parser.add_argument("--ops", type=int, default=None, help="asks+observes per round (default 6400; 1920 with --quick)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per store (default 3; 1 with --quick)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--gather-turns", type=int, default=None, help="SqliteStore(gather_turns=...); default the store's")
    parser.add_argument("--stores", default=",".join(STORES), help="comma-separated subset of " + ",".join(STORES))
    parser.add_argument("--dir", type=Path, default=None, help="where the SQLite files go (default: a temp dir)")
    parser.add_argument("--pg-url", default=None, help="a PostgreSQL database for the postgresql store")
    args = parser.parse_args()
    if args.pg_url is None:
        args.stores = ",".join(k for k in args.stores.split(",") if k != "postgresql")
    ops = args.ops or (1920 if args.quick else 6400)
    rounds = args.rounds or (1 if args.quick else 3)

    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        directory = Path(d)
        kinds = [k for k in STORES if k in args.stores.split(",")]
        runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
        with progress(rounds * len(kinds), "store_throughput") as step:
            for r in range(rounds):
                for kind in kinds:
                    schema = anyio.run(_pg_schema, args.pg_url, f"bench_{os.getpid()}_{r}") if kind == "postgresql" else None
                    pg_url = None if schema is None else f"{args.pg_url}{'&' if '?' in args.pg_url else '?'}search_path={schema}"
                    store = make_store(kind, directory, r, args.gather_turns, pg_url)
                    try:
                        if args.mode == "engine":
                            result = anyio.run(run_engine, store, args.workers, args.experiments, ops)
                        else:
                            result = anyio.run(run_store, store, args.workers, ops)
                    finally:
                        if schema is not None:
                            anyio.run(_pg_schema, args.pg_url, schema, True)
                    runs[kind].append(result)
                    print(f"round {r} {kind}: {result}", file=sys.stderr)
                    step(f"round {r} {kind}")
        fs = os.statvfs(directory)

    def median_run(results: list[dict[str, Any]]) -> dict[str, Any]:
        med = statistics.median_low([x["ops_per_s"] for x in results])
        return next(x for x in results if x["ops_per_s"] == med)

    summary = {k: median_run(v) for k, v in runs.items()}
    base = summary["memory"]["ops_per_s"] if "memory" in summary else float("nan")
    others = [k for k in kinds if k != "memory"]
    print(
        json.dumps(
            {
                "benchmark": "store_throughput",
                "mode": args.mode,
                "workers": args.workers,
                "experiments": args.experiments if args.mode == "engine" else 1,
                "ops_per_round": ops,
                "rounds": rounds,
                "op": "one ask + one observe",
                "results": summary,
                "all_rounds_ops_per_s": {k: [x["ops_per_s"] for x in v] for k, v in runs.items()},
                "gather_turns": args.gather_turns,
                "ratio_vs_memory": {k: round(summary[k]["ops_per_s"] / base, 3) for k in others},
                # Each round runs memory, os, fsync back to back: the per-round ratio is
                # less exposed to other load on the machine than the ratio of medians.
                "paired_ratio_median": {
                    k: round(statistics.median(x["ops_per_s"] / m["ops_per_s"] for x, m in zip(runs[k], runs["memory"])), 3)
                    for k in others
                    if "memory" in runs
                },
                "machine": {
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "loadavg_1m_at_end": round(os.getloadavg()[0], 2),
                    "fs_block": fs.f_bsize,
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
