"""asyncpg against psycopg 3 on the PostgreSQL store's own workload, same run: prints JSON.

    .venv/bin/python benchmarks/pg_driver.py                 # a throwaway cluster (tests/postgres_support.py)
    .venv/bin/python benchmarks/pg_driver.py --pg-url postgresql://postgres@127.0.0.1:5432/postgres
    .venv/bin/python benchmarks/pg_driver.py --quick

The write path is the store's group commit: the batches an ask and an observe make
(PutSuggestion + PutExperiment; PutObservation + PutSuggestion + PutExperiment),
`--groups` of them gathered into one transaction by the store's own planner
(`_prepare`: one `INSERT ... SELECT FROM unnest(arrays) ON CONFLICT ... DO UPDATE`
per table), run as BEGIN, the statements, COMMIT on one connection with
`synchronous_commit = on`, by each driver in turn: asyncpg (what the store uses)
and psycopg 3's AsyncConnection (text and binary parameters), both with server-side
prepared statements. The read path is `load`'s heaviest query: an experiment's
observations (`--rows` of them). Rounds alternate the drivers, since the machine is
noisy; per configuration: transactions (or reads) per second over the median round,
latency p50/p99 over every round, and this process's CPU per transaction (the
driver's own cost, which load on the server does not inflate).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

import anyio

from tauopt.models import Experiment, Metric, Observation, Parameter, Suggestion
from tauopt.store import PutExperiment, PutObservation, PutSuggestion
from tauopt.store._postgresql import _prepare
from tauopt.store._postgresql_schema import migrate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_common import THROWAWAY, postgresql_server  # noqa: E402

PARAMETERS = [
    {"name": "lr", "type": "double", "bounds": [1e-5, 1.0], "scale": "log"},
    {"name": "layers", "type": "int", "bounds": [1, 8]},
    {"name": "act", "type": "categorical", "values": ["relu", "tanh", "gelu"]},
]
_LOAD = "SELECT id, suggestion_id, value, failed, created_at, assignments, metrics, stopped_at_step FROM observations WHERE experiment_id = $1 ORDER BY seq"
Run = Callable[[list[tuple[str, list[Any], bool]]], Awaitable[None]]


def experiment(eid: str) -> Experiment:
    return Experiment(eid, eid, tuple(Parameter.parse(p, i) for i, p in enumerate(PARAMETERS)), Metric("loss"), 64)


class Groups:
    """The store's plans for groups of `size` asks, then of `size` observes, alternately."""

    def __init__(self, exp: Experiment, prefix: str) -> None:
        self.exp, self.prefix, self.n = exp, prefix, 0

    def plans(self, size: int, count: int) -> list[list[tuple[str, list[Any], bool]]]:
        out = []
        for _ in range(count // 2):
            asks, observes = [], []
            for _ in range(size):
                self.n += 1
                s = Suggestion(f"{self.prefix}{self.n}", self.exp.id, {"lr": 0.01, "layers": 3, "act": "relu"}, tag="w", created_at=time.time())
                asks.append([PutSuggestion(s), PutExperiment(self.exp, self.n)])
                o = Observation(f"{self.prefix}{self.n}", self.exp.id, s.id, s.assignments, 0.5, created_at=time.time())
                observes.append([PutObservation(o), PutSuggestion(s.evolve(state="observed")), PutExperiment(self.exp, self.n)])
            for batches in (asks, observes):
                plan, errors = _prepare(batches)
                assert not any(errors), errors
                out.append(plan.statements)
        return out


class Asyncpg:
    name = "asyncpg"

    async def open(self, url: str, schema: str) -> None:
        import asyncpg

        self.conn = await asyncpg.connect(url, server_settings={"synchronous_commit": "on", "search_path": schema})

    async def transact(self, statements: list[tuple[str, list[Any], bool]]) -> None:
        async with self.conn.transaction():
            for sql, args, as_arrays in statements:
                if as_arrays:
                    await self.conn.execute(sql, *args)
                else:
                    await self.conn.executemany(sql, args)

    async def read(self, experiment_id: str) -> int:
        return len(await self.conn.fetch(_LOAD, experiment_id))

    async def close(self) -> None:
        await self.conn.close()


class Psycopg:
    def __init__(self, binary: bool) -> None:
        self.binary = binary
        self.name = "psycopg3_binary" if binary else "psycopg3_text"
        self._sql: dict[str, str] = {}

    async def open(self, url: str, schema: str) -> None:
        import psycopg

        self.conn = await psycopg.AsyncConnection.connect(
            url, autocommit=True, prepare_threshold=0, options=f"-c synchronous_commit=on -c search_path={schema}"
        )

    def sql(self, text: str) -> str:
        """The store's `$n` placeholders in psycopg's `%s` form (they are numbered in order)."""
        out = self._sql.get(text)
        if out is None:
            out = self._sql[text] = re.sub(r"\$\d+", "%s", text)
        return out

    async def transact(self, statements: list[tuple[str, list[Any], bool]]) -> None:
        async with self.conn.transaction():
            async with self.conn.cursor(binary=self.binary) as cur:
                for sql, args, as_arrays in statements:
                    if as_arrays:
                        await cur.execute(self.sql(sql), args, prepare=True)
                    else:
                        await cur.executemany(self.sql(sql), args)

    async def read(self, experiment_id: str) -> int:
        async with self.conn.cursor(binary=self.binary) as cur:
            await cur.execute(self.sql(_LOAD), (experiment_id,), prepare=True)
            return len(await cur.fetchall())

    async def close(self) -> None:
        await self.conn.close()


async def timed(n: int, fn: Callable[[int], Awaitable[Any]]) -> tuple[float, float, list[float]]:
    """(wall seconds, this process's CPU seconds, each call's seconds) for fn(0..n-1)."""
    each = []
    cpu0, t0 = time.process_time(), time.perf_counter()
    for i in range(n):
        a = time.perf_counter()
        await fn(i)
        each.append(time.perf_counter() - a)
    return time.perf_counter() - t0, time.process_time() - cpu0, each


async def bench(url: str, schema: str, sizes: list[int], transactions: int, rounds: int, rows: int) -> list[dict[str, Any]]:
    import asyncpg

    setup = await asyncpg.connect(url)
    try:
        await setup.execute(f"CREATE SCHEMA {schema}")
        await setup.execute(f"SET search_path TO {schema}")
        await migrate(setup, "pg_driver")
        for plan in Groups(experiment("read"), "r").plans(rows, 2):  # `rows` observations to read back
            async with setup.transaction():
                for sql, args, _ in plan:
                    await setup.execute(sql, *args)
        drivers: list[Any] = [Asyncpg(), Psycopg(binary=False), Psycopg(binary=True)]
        for i, d in enumerate(drivers):
            await d.open(url, schema)
            async with setup.transaction():  # each driver writes an experiment of its own
                plan, _ = _prepare([[PutExperiment(experiment(f"e{i}"), 0)]])
                for sql, args, _ in plan.statements:
                    await setup.execute(sql, *args)
        groups = {d.name: Groups(experiment(f"e{i}"), f"{d.name}-") for i, d in enumerate(drivers)}
        samples: dict[tuple[str, str], list[tuple[float, float, list[float]]]] = {}
        for r in range(rounds):
            for d in drivers if r % 2 == 0 else drivers[::-1]:
                for size in sizes:
                    plans = groups[d.name].plans(size, transactions)
                    samples.setdefault((d.name, f"write/group{size}"), []).append(
                        await timed(len(plans), lambda i, p=plans, d=d: d.transact(p[i]))  # type: ignore[misc]
                    )
                reads = max(5, transactions // 10)
                samples.setdefault((d.name, f"read/{rows}rows"), []).append(await timed(reads, lambda i, d=d: d.read("read")))
        for d in drivers:
            await d.close()
    finally:
        try:
            await setup.execute(f"DROP SCHEMA {schema} CASCADE")
        finally:
            await setup.close()
    out = []
    for (driver, what), runs in samples.items():
        n = len(runs[0][2])
        each = sorted(x for _, _, e in runs for x in e)
        median = sorted(runs, key=lambda r: r[0])[len(runs) // 2]
        row: dict[str, Any] = {
            "kind": "pg_driver", "driver": driver, "workload": what,
            "per_s": round(n / median[0], 1),
            "p50_ms": round(1000 * each[len(each) // 2], 3),
            "p99_ms": round(1000 * each[min(len(each) - 1, int(len(each) * 0.99))], 3),
            "client_cpu_ms": round(1000 * statistics.median(c for _, c, _ in runs) / n, 3),
        }
        if what.startswith("write/group"):
            row["pairs_per_s"] = round(row["per_s"] * int(what.removeprefix("write/group")) / 2, 1)
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pg-url", default=THROWAWAY, help="a server to use (default: a throwaway cluster of this machine)")
    parser.add_argument("--groups", default="1,16,64", help="batches per transaction (default %(default)s)")
    parser.add_argument("--transactions", type=int, default=200, help="per configuration and round (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating the drivers (default %(default)s)")
    parser.add_argument("--rows", type=int, default=1000, help="observations the read returns (default %(default)s)")
    parser.add_argument("--quick", action="store_true", help="--transactions 40 --rounds 3")
    args = parser.parse_args(argv)
    if args.quick:
        args.transactions, args.rounds = 40, 3
    import asyncpg
    import psycopg

    with postgresql_server(args.pg_url) as url:
        print(json.dumps({
            "kind": "machine", "cpus": os.cpu_count(), "load": [round(x, 2) for x in os.getloadavg()],
            "python": platform.python_version(), "asyncpg": asyncpg.__version__, "psycopg": psycopg.__version__,
            "psycopg_impl": psycopg.pq.__impl__, "server": args.pg_url or THROWAWAY,
        }), flush=True)  # fmt: skip
        sizes = [int(x) for x in args.groups.split(",") if x.strip()]
        rows = anyio.run(bench, url, f"bench_{os.getpid()}", sizes, args.transactions, args.rounds, args.rows)
        for row in rows:
            print(json.dumps(row), flush=True)
        print(json.dumps({"kind": "load_after", "load": [round(x, 2) for x in os.getloadavg()]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
