"""The PostgreSQL store's hot queries at scale: prints JSON.

    .venv/bin/python benchmarks/postgresql_scale.py --pg-url postgresql://postgres@127.0.0.1:PORT/postgres

Fills a schema of its own with `--experiments` experiments and `--observations`
observations and as many suggestions (spread evenly; rows made by SQL on the
server, from one real experiment's header), then times what the store does on
the hot paths, each the median of `--repeat` calls: `load` (an actor's rebuild),
`list_experiments`, `credential_by_hash`, `suggestion_times` (the daily quota),
one group commit of an ask's writes, and the start-up scan of every active
experiment's strategy (`active_strategies`, beside the generic fallback that
decodes each page of a listing); and the scan nodes of each query's plan
(EXPLAIN). The schema is dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any, Awaitable, Callable

import anyio

from tauopt.models import Experiment, Metric, Parameter, Suggestion
from tauopt.store import CredentialRecord, PutCounters, PutExperiment, PutSuggestion, Store
from tauopt.store._postgresql import PostgresStore
from tauopt.schema import parse_parameter


async def _median_ms(fn: Callable[[], Awaitable[Any]], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - t0)
    return round(1000 * statistics.median(times), 3)


async def _scans(conn: Any, sql: str, *args: Any) -> list[str]:
    """The plan's scan nodes (e.g. "Index Scan using suggestions_by_experiment on suggestions")."""
    lines = [r[0] for r in await conn.fetch("EXPLAIN " + sql, *args)]
    return [line.strip(" ->").split("  (")[0] for line in lines if "Scan" in line]


async def _scan(store: Store, read: Callable[[Store, str | None, int], Awaitable[tuple[list[str], str | None]]]) -> None:
    """Every active experiment's strategy, 100 at a time (the daemon's start-up scan)."""
    after: str | None = None
    while True:
        _, after = await read(store, after, 100)
        if after is None:
            return


async def run(url: str, experiments: int, observations: int, repeat: int) -> dict[str, Any]:
    import asyncpg

    schema = f"scale_{os.getpid()}"
    admin = await asyncpg.connect(url)
    await admin.execute(f"CREATE SCHEMA {schema}")
    store_url = f"{url}{'&' if '?' in url else '?'}search_path={schema}"
    try:
        async with PostgresStore(store_url) as store:
            head = Experiment("e0", "scale", (parse_parameter({"name": "x", "type": "double", "bounds": [0, 1]}),),
                              Metric("y"), parallel_bandwidth=64, created_at=1.0, owner="c0")  # fmt: skip
            await store.write([PutExperiment(head)])
            await store.put_credential(CredentialRecord("c0", "owner", "h0", 1.0))
            per = observations // experiments
            t0 = time.perf_counter()
            conn = await asyncpg.connect(store_url)
            try:
                await conn.execute(  # each body with its own id: a listing's cursor is the last one's
                    "INSERT INTO experiments (id, owner, state, name, created_at, open_suggestions, observations, drawn, body) "
                    "SELECT 'e' || i, 'c0', 'active', 'scale', i, 0, $1, $1, jsonb_set(body::jsonb, '{id}', to_jsonb('e' || i))::text "
                    "FROM experiments, "
                    "generate_series(1, $2 - 1) AS i WHERE id = 'e0'",
                    per, experiments,
                )  # fmt: skip
                for table, extra_cols, extra_vals in (
                    ("suggestions", "state, tag, assignments", "'observed', NULL, '{\"x\":0.5}'"),
                    ("observations", "suggestion_id, value, failed, assignments, metrics",
                     "'s' || i, i * 1e-6, 0, '{\"x\":0.5}', '{}'"),
                ):  # fmt: skip
                    await conn.execute(
                        f"INSERT INTO {table} (experiment_id, id, created_at, {extra_cols}) "
                        f"SELECT 'e' || (i % $2), 's' || i, i, {extra_vals} FROM generate_series(0, $1 - 1) AS i",
                        observations, experiments,
                    )
                await conn.execute("ANALYZE")
                fill_s = time.perf_counter() - t0
                plans = {
                    "load (suggestions)": await _scans(
                        conn, "SELECT * FROM suggestions WHERE experiment_id = $1 ORDER BY seq", "e7"),
                    "load (observations)": await _scans(
                        conn, "SELECT * FROM observations WHERE experiment_id = $1 ORDER BY seq", "e7"),
                    "credential_by_hash": await _scans(conn, "SELECT * FROM credentials WHERE token_hash = $1", "h0"),
                    "suggestion_times": await _scans(
                        conn, "SELECT s.created_at FROM experiments e JOIN suggestions s ON s.experiment_id = e.id "
                        "WHERE e.owner IS NOT DISTINCT FROM $1 AND s.created_at >= $2 ORDER BY s.created_at",
                        "c0", float(observations - 100)),
                }  # fmt: skip
            finally:
                await conn.close()

            n = [0]

            async def commit() -> None:
                n[0] += 1
                s = Suggestion(f"new{n[0]}", "e7", {"x": 0.25}, "open", None, 5.0)
                await store.write([PutSuggestion(s), PutCounters("e7", 1, per, per + n[0])])

            timings = {
                "load_ms": await _median_ms(lambda: store.load("e7"), repeat),
                "list_experiments_ms": await _median_ms(lambda: store.list_experiments("active", "c0"), repeat),
                "credential_by_hash_ms": await _median_ms(lambda: store.credential_by_hash("h0"), repeat),
                "suggestion_times_last_100_ms": await _median_ms(
                    lambda: store.suggestion_times("c0", float(observations - 100)), repeat),
                "commit_one_ask_ms": await _median_ms(commit, repeat),
                # the start-up scan for pooled experiments: the store's JSON read, and the
                # generic fallback (each page decoded from a listing) it replaces
                "active_strategies_scan_ms": await _median_ms(lambda: _scan(store, PostgresStore.active_strategies), repeat),
                "active_strategies_scan_by_listing_ms": await _median_ms(lambda: _scan(store, Store.active_strategies), repeat),
            }  # fmt: skip
    finally:
        await admin.execute(f"DROP SCHEMA {schema} CASCADE")
        await admin.close()
    return {
        "benchmark": "postgresql_scale",
        "experiments": experiments,
        "observations": observations,
        "suggestions": observations,
        "rows_per_experiment": per,
        "fill_s": round(fill_s, 1),
        "median_of": repeat,
        **timings,
        "plan_scans": plans,
        "loadavg_1m_at_end": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pg-url", required=True)
    parser.add_argument("--experiments", type=int, default=1000)
    parser.add_argument("--observations", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=21)
    args = parser.parse_args()
    print(json.dumps(anyio.run(run, args.pg_url, args.experiments, args.observations, args.repeat), indent=2))


if __name__ == "__main__":
    main()
