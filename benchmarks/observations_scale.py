"""How cost grows with an experiment's history: 1,000, 10,000 and 100,000 observations.

Per history size, in a fresh child process each (so one size's memory does not
flatter the next):

- seeding: one experiment per strategy (random, sobol) filled through the store
  in batches (a suggestion and its observation per point, 4 parameters), not by
  asks one at a time, so 100,000 take seconds;
- memory: the engine process's RSS before and after the experiment's actor is
  rebuilt from the store (a 10-observation experiment rebuilt first, so the first
  actor's one-off costs are not counted; freed memory handed back with malloc_trim
  first, so the figure is what is held, not the allocator's high-water mark), per
  observation held; and the RSS each observation adds when it arrives live
  (LIVE_PAIRS ask + observe pairs on the loaded history); `--trace` adds tracemalloc's count of what stays allocated
  and its top lines (slower; the profile, not the figure);
- asks: p50/p99 of `pairs` ask + observe pairs on the full history, for the
  random and the Sobol strategy (each should stay flat as the history grows);
- listing: one full `observations` read through the engine;
- store: the SQLite file's bytes per observation (with its suggestion); with
  `--postgresql`, the two history tables' size in a throwaway PostgreSQL cluster;
- gp (`--gp`): GP proposals (pure `propose_gp`, what a pool worker runs) on the
  history as the engine sends it (cut by the strategy's `bound_history`), one BLAS
  thread as in a pool worker: cold (fitting hyperparameters) and warm (the engine's
  next proposal, the fit standing), wall and CPU seconds and L-BFGS-B iterations,
  the peak RSS growth while they run (sampled), the seconds the engine's cut takes,
  and the bytes and seconds to pickle the request to a pool worker; then GP asks
  through the engine's process pool as a daemon serves them (`gp_through_pool`): wall
  seconds, the workers' CPU seconds and the load average per ask, and the threads a
  pool worker runs on.

    python benchmarks/observations_scale.py --sizes 1000 10000 100000 --gp --out obs.json --png obs.png
    python benchmarks/observations_scale.py --quick        # small sizes, seconds (the smoke test runs this)

Prints one JSON document: {"benchmark": "observations_scale", "sizes": [...], "rows": [per size]}.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import pickle
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import anyio

PARAMETERS: list[dict[str, Any]] = [
    {"name": "learning_rate", "type": "double", "bounds": [1e-5, 1.0], "scale": "log"},
    {"name": "layers", "type": "int", "bounds": [1, 8]},
    {"name": "activation", "type": "categorical", "values": ["relu", "tanh", "gelu"]},
    {"name": "dropout", "type": "double", "bounds": [0.0, 0.5]},
]
METRIC = {"name": "loss", "objective": "minimize"}
STRATEGIES = ("random", "sobol")
_BATCH = 5000
LIVE_PAIRS = 5000  # at most this many ask + observe pairs (50 per timed pair) measure "live_rss_bytes_per_observation"
GP_POOL_ASKS = 4  # ask + observe pairs after the first (cold) GP ask through the pool


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _trim() -> None:
    """Collect, then hand freed heap back to the OS (glibc), so RSS shows what is held."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:  # not glibc: RSS then includes freed memory the allocator keeps
        pass


def _point(rng: random.Random) -> dict[str, Any]:
    return {
        "learning_rate": 10 ** rng.uniform(-5, 0),
        "layers": rng.randint(1, 8),
        "activation": rng.choice(["relu", "tanh", "gelu"]),
        "dropout": rng.uniform(0.0, 0.5),
    }


def _loss(a: dict[str, Any]) -> float:
    import math

    return (math.log10(a["learning_rate"]) + 2.5) ** 2 + 0.1 * a["layers"] + (0.3 if a["activation"] == "tanh" else 0.0) + a["dropout"]


async def seed(db: str, n: int, strategies: tuple[str, ...] = STRATEGIES) -> dict[str, str]:
    """One experiment per strategy with n observed suggestions, written through the store."""
    from tauopt.engine import Engine
    from tauopt.models import Observation, Suggestion
    from tauopt.store import PutCounters, PutObservation, PutSuggestion

    ids = {}
    async with Engine(store=db, pool=None) as engine:
        for strategy in strategies:
            exp = await engine.create_experiment(f"h-{strategy}", PARAMETERS, METRIC, parallel_bandwidth=8, strategy=strategy)
            ids[strategy] = exp.id
            rng, t = random.Random(n), time.time() - n
            for start in range(0, n, _BATCH):
                writes: list[Any] = []
                for i in range(start, min(n, start + _BATCH)):
                    a, sid = _point(rng), str(i + 1)
                    writes.append(PutSuggestion(Suggestion(sid, exp.id, a, "observed", None, t + i)))
                    failed = i % 37 == 5
                    writes.append(PutObservation(Observation(sid, exp.id, sid, a, None if failed else _loss(a), failed, t + i + 0.5)))
                writes.append(PutCounters(exp.id, 0, min(n, start + _BATCH), n if strategy == "sobol" else 0))
                await engine.store.write(writes)
    return ids


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


async def measure(db: str, ids: dict[str, str], n: int, pairs: int, trace: bool) -> dict[str, Any]:
    from tauopt.engine import Engine

    out: dict[str, Any] = {}
    async with Engine(store=db, pool=None) as engine:
        await engine.summary(ids["warm"])  # a small experiment first: the first actor's one-off costs are not the history's
        _trim()
        before = _rss()
        if trace:
            tracemalloc.start(1)
        t0, c0 = time.perf_counter(), time.process_time()
        await engine.summary(ids["random"])  # rebuilds the actor from the store
        out["load_s"] = round(time.perf_counter() - t0, 3)
        out["load_cpu_s"] = round(time.process_time() - c0, 3)  # every thread's: less exposed to other load
        _trim()
        if trace:
            held, _ = tracemalloc.get_traced_memory()
            top = tracemalloc.take_snapshot().statistics("lineno")[:12]
            tracemalloc.stop()
            out["traced_bytes_per_observation"] = round(held / n, 1)
            out["traced_top"] = [
                {"where": f"{Path(s.traceback[0].filename).name}:{s.traceback[0].lineno}", "bytes_per_observation": round(s.size / n, 1), "objects": s.count}
                for s in top
            ]
        grown = _rss() - before
        out["rss_bytes_per_observation"] = round(grown / n, 1)
        t0 = time.perf_counter()
        listed = await engine.observations(ids["random"])
        out["list_observations_s"] = round(time.perf_counter() - t0, 4)
        assert len(listed) == n, (len(listed), n)
        del listed
        for strategy in STRATEGIES:
            eid = ids[strategy]
            await engine.summary(eid)
            asks, observes = [], []
            for _ in range(pairs):
                t0 = time.perf_counter()
                s = await engine.suggest(eid)
                t1 = time.perf_counter()
                await engine.observe(eid, suggestion_id=s.id, value=_loss(dict(s.assignments)))
                t2 = time.perf_counter()
                asks.append(t1 - t0)
                observes.append(t2 - t1)
            out[strategy] = {
                "ask_p50_ms": round(1e3 * statistics.median(asks), 3),
                "ask_p99_ms": round(1e3 * _pct(asks, 0.99), 3),
                "observe_p50_ms": round(1e3 * statistics.median(observes), 3),
                "observe_p99_ms": round(1e3 * _pct(observes, 0.99), 3),
            }
        # what each observation arriving live adds, the history already loaded (on the Sobol
        # experiment: the GP's cost below is measured on the random one's history, its size kept)
        eid, live = ids["sobol"], min(LIVE_PAIRS, 50 * pairs)
        _trim()
        before = _rss()
        for _ in range(live):
            s = await engine.suggest(eid)
            await engine.observe(eid, suggestion_id=s.id, value=_loss(dict(s.assignments)))
        _trim()
        out["live_rss_bytes_per_observation"] = round((_rss() - before) / live, 1)
        out["live_pairs"] = live
    return out


def store_bytes(db: str, n_total: int) -> dict[str, Any]:
    import sqlite3

    with sqlite3.connect(db) as conn:
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    used = (pages - free) * page
    return {"sqlite_bytes": used, "sqlite_bytes_per_observation": round(used / max(1, n_total), 1)}


def gp_cost(db: str, eid: str) -> dict[str, Any]:
    """One GP proposal on the stored history, as a pool worker runs it."""
    import numpy as np

    from tauopt.space import Space
    from tauopt.store import open_store
    from tauopt.strategies import SuggestRequest, get
    from tauopt.strategies.gp import propose_gp

    async def load() -> Any:
        async with open_store(db) as store:
            return await store.load(eid)

    snap = anyio.run(load)
    exp = snap.experiment
    whole = SuggestRequest(Space(exp.parameters), exp.metric, tuple(snap.observations), (), 1, 0, 0, exp.strategy_options)
    t0 = time.perf_counter()
    request = get("gp").bound_history(whole) if get("gp").bound_history else whole  # the engine's cut (StrategyPool.propose)
    cut_s = time.perf_counter() - t0
    blob = pickle.dumps(request)  # what crosses to a pool worker
    pickle.loads(blob)
    pickle_s = time.perf_counter() - t0 - cut_s
    del whole
    del snap
    import torch

    torch.set_num_threads(1)  # as a pool worker runs it (tauopt/compute/_workers.py)
    propose_gp(request, np.random.default_rng(99))  # imports and first-call costs paid
    _trim()
    base, peak = _rss(), [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.01):
            peak[0] = max(peak[0], _rss())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out: dict[str, Any] = {}
    warm = None
    for phase in ("cold", "warm"):  # cold: fits its hyperparameters; warm: an engine's next proposal (the fit stands)
        q0, load = _runqueue_s(), os.getloadavg()[0]
        t0, c0 = time.perf_counter(), time.process_time()
        # no fit deadline (the engine's is 30 s): on a loaded machine it would cut the fit whose cost this measures
        result = propose_gp(request, np.random.default_rng(1), warm=warm)
        out[f"gp_{phase}_s"] = round(time.perf_counter() - t0, 3)
        out[f"gp_{phase}_cpu_s"] = round(time.process_time() - c0, 3)  # less exposed to other load than wall time
        # what the rest of the wall time is: waiting for a core (the scheduler's run queue)
        out[f"gp_{phase}_runqueue_s"] = round(_runqueue_s() - q0, 3)
        out[f"gp_{phase}_load"] = round(load, 1)
        out[f"gp_{phase}_fallback"] = result.info.fallback_reason
        out[f"gp_{phase}_iterations"] = result.info.iterations  # L-BFGS-B iterations, over every fit it made
        warm = result.state
    stop.set()
    sampler.join()
    out["gp_peak_rss_growth_mb"] = round(max(0, peak[0] - base) / 2**20, 1)
    out["request_pickle_bytes"] = len(blob)
    out["request_pickle_s"] = round(pickle_s, 4)
    out["request_observations"] = len(request.history)
    out["request_cut_s"] = round(cut_s, 4)
    return out


def _runqueue_s(path: str = "/proc/thread-self/schedstat") -> float:
    """Seconds this thread (a process's main thread with a pid's path) has waited on the
    scheduler's run queue for a core (Linux schedstat); 0.0 where it is not available."""
    try:
        with open(path) as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


async def gp_through_pool(db: str, n: int, asks: int) -> dict[str, Any]:
    """GP asks as a daemon serves them: a GP experiment with n observations, the engine's
    process pool (its default size), the first ask cold (the fit, no warm state), then
    `asks` ask + observe pairs. Per ask: wall seconds, the pool workers' CPU seconds, the
    load average; and what the worker runs on (torch, BLAS/OpenMP and OS threads)."""
    from tauopt.compute import thread_report
    from tauopt.engine import Engine

    eid = (await seed(db, n, ("gp",)))["gp"]
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, Any] = {}
    async with Engine(store=db, pool="process") as engine:
        executor = engine.pool.executor
        out["gp_pool_worker_threads"] = await executor.call(eid, thread_report)  # starts the workers
        pids = executor.pids
        rows = []
        for i in range(1 + asks):
            load = os.getloadavg()[0]
            queued = [f"/proc/{pid}/schedstat" for pid in pids]
            q0 = sum(map(_runqueue_s, queued))
            w0, c0, t0 = sum(map(_cpu_ticks, pids)), time.process_time(), time.perf_counter()
            s = await engine.suggest(eid)
            wall = time.perf_counter() - t0
            rows.append({
                "wall_s": round(wall, 3), "workers_cpu_s": round((sum(map(_cpu_ticks, pids)) - w0) / tick, 2),
                "workers_runqueue_s": round(sum(map(_runqueue_s, queued)) - q0, 2),
                "engine_cpu_s": round(time.process_time() - c0, 3), "load": round(load, 1),
            })  # fmt: skip
            await engine.observe(eid, suggestion_id=s.id, value=_loss(dict(s.assignments)))
        out["gp_pool_asks"] = rows
        out["gp_pool_fallbacks"] = engine.pool.stats.fallbacks
    return out


def postgresql_bytes(n: int) -> dict[str, Any]:
    """The same histories seeded into a throwaway PostgreSQL cluster (the tests' own,
    tests/postgres_support.py): the two history tables' total size, indexes included."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from postgres_support import start_cluster

    cluster = start_cluster()
    try:
        database = cluster.new_database()
        anyio.run(seed, cluster.url(database), n)
        cluster.psql("VACUUM ANALYZE", database)
        used = int(cluster.psql("SELECT pg_total_relation_size('suggestions') + pg_total_relation_size('observations')", database))
    finally:
        cluster.destroy()
    return {"postgresql_bytes": used, "postgresql_bytes_per_observation": round(used / (n * len(STRATEGIES)), 1)}


def child(n: int, pairs: int, trace: bool, gp: bool, postgresql: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        db = str(Path(d) / "history.db")
        t0 = time.perf_counter()
        ids = anyio.run(seed, db, n)
        ids["warm"] = anyio.run(seed, db, 10, ("random",))["random"]
        row: dict[str, Any] = {"observations": n, "seed_s": round(time.perf_counter() - t0, 2)}
        row.update(store_bytes(db, n * len(STRATEGIES)))
        row.update(anyio.run(measure, db, ids, n, pairs, trace))
        if gp:
            row.update(gp_cost(db, ids["random"]))
            row.update(anyio.run(gp_through_pool, db, n, GP_POOL_ASKS))
    if postgresql:
        row.update(postgresql_bytes(n))
    return row


def run_size(n: int, pairs: int, trace: bool, gp: bool, postgresql: bool) -> dict[str, Any]:
    flags = [f for f, on in (("--trace", trace), ("--gp", gp), ("--postgresql", postgresql)) if on]
    cmd = [sys.executable, __file__, "--child", str(n), "--pairs", str(pairs), *flags]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"size {n} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def plot(doc: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = doc["rows"]
    ns = [r["observations"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    ax = axes[0]
    ax.plot(ns, [r["rss_bytes_per_observation"] for r in rows], "o-", label="engine RSS, after a rebuild")
    if all("live_rss_bytes_per_observation" in r for r in rows):
        ax.plot(ns, [r["live_rss_bytes_per_observation"] for r in rows], "x-", label="engine RSS, arriving live")
    ax.plot(ns, [r["sqlite_bytes_per_observation"] for r in rows], "s-", label="SQLite file")
    if all("postgresql_bytes_per_observation" in r for r in rows):
        ax.plot(ns, [r["postgresql_bytes_per_observation"] for r in rows], "d-", label="PostgreSQL tables")
    ax.axhline(512, color="grey", ls="--", lw=1, label="goal: 0.5 KB (RSS)")
    ax.set(xscale="log", title="bytes per observation", xlabel="observations in the history")
    ax.legend(fontsize=8)
    ax = axes[1]
    for s in STRATEGIES:
        ax.plot(ns, [r[s]["ask_p99_ms"] for r in rows], "o-", label=f"{s} ask p99")
        ax.plot(ns, [r[s]["ask_p50_ms"] for r in rows], ".--", label=f"{s} ask p50")
    ax.set(xscale="log", yscale="log", title="ask latency (ms), in process", xlabel="observations in the history")
    ax.legend(fontsize=8)
    ax = axes[2]
    ax.plot(ns, [r["load_cpu_s"] for r in rows], "o-", label="actor rebuild (CPU s)")
    ax.plot(ns, [r["list_observations_s"] for r in rows], "s-", label="full listing (s)")
    if all("gp_cold_cpu_s" in r for r in rows):
        ax.plot(ns, [r["gp_cold_cpu_s"] for r in rows], "^-", label="GP proposal, fitting (CPU s)")
        ax.plot(ns, [r["gp_warm_cpu_s"] for r in rows], "v-", label="GP proposal, fit standing (CPU s)")
        ax.axhline(2.0, color="grey", ls="--", lw=1, label="goal: GP 2 s")
    ax.set(xscale="log", yscale="log", title="seconds", xlabel="observations in the history")
    ax.legend(fontsize=8)
    fig.suptitle(f"tauopt, histories of {', '.join(f'{n:,}' for n in ns)} observations ({doc['machine']}, {doc['date']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--pairs", type=int, default=300, help="ask+observe pairs timed per strategy and size")
    parser.add_argument("--quick", action="store_true", help="sizes 100 and 400, 20 pairs: a smoke run")
    parser.add_argument("--trace", action="store_true", help="tracemalloc profile of what the actor holds")
    parser.add_argument("--gp", action="store_true", help="time GP proposals per size")
    parser.add_argument("--postgresql", action="store_true", help="store bytes in a throwaway PostgreSQL cluster too")
    parser.add_argument("--out", help="write the JSON here too")
    parser.add_argument("--png", help="draw the curves here")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        if args.gp:  # one BLAS thread, as a pool worker sets before loading numpy (tauopt/compute/_workers.py):
            # idle OpenBLAS threads spinning on a shared box add up to as much CPU time again
            os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        print(json.dumps(child(args.child, args.pairs, args.trace, args.gp, args.postgresql)))
        return
    sizes, pairs = ([100, 400], 20) if args.quick else (args.sizes, args.pairs)
    doc = {
        "benchmark": "observations_scale",
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "sizes": sizes,
        "rows": [run_size(n, pairs, args.trace, args.gp, args.postgresql) for n in sizes],
    }
    text = json.dumps(doc, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    if args.png:
        plot(doc, args.png)
    print(text)


if __name__ == "__main__":
    main()
