"""Experiments per store: one `tauopt serve` on a SQLite file holding 1,000 to 100,000
idle experiments.

Each store is seeded directly through the store (one `PutExperiment` per experiment,
written in large batches; not one HTTP call each), owned by one credential; the
experiments have no history (idle ones that were created and never run). Then a real
`tauopt serve` (--pool thread: no GP pool) is started on it and measured:

- start: seconds from the process start until GET /v1/health answers (it must not
  load idle experiments), and the daemon's RSS then; RSS per idle experiment is the
  growth over the empty store (size 0), divided by the count;
- list: GET /v1/experiments pages of 1,000 (the first, one from the middle by cursor,
  the last), and a name filter (a scan of the names), p50/p99 over --repeats;
- cold ask: the first ask of --cold experiments never touched since the start (each
  one's actor is rebuilt from the store), p50/p99, the daemon's CPU per ask (on a
  loaded machine the latencies wait for a core; the CPU is the ask's own cost), and
  the RSS after them;
- dashboard: the experiment list's first page as the dashboard reads it (a page of
  100, then each row's summary, 6 at a time as a browser does), wall time;
- GET /metrics (no metrics token: the aggregate gauges), p50/p99 and the daemon's CPU
  per scrape;
- a KerasTuner chief's project lookup: after the daemon stopped, an engine on the same
  file starts a trial queue, as the chief does before its first answer: 3 times for a
  new project (finds none of that name, creates it) and 3 times for an existing one
  (finds and resumes it), after one to warm up (--lookups).

    nice -n 10 .venv/bin/python benchmarks/experiments_scale.py --sizes 0,1000,10000,100000
    .venv/bin/python benchmarks/experiments_scale.py --smoke     # 300 experiments, a few seconds
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _bench_common import _cpu_seconds, free_port, quantile, wait_health  # noqa: E402
from _scale_plot import emit, measure_sizes  # noqa: E402

PARAMETERS = [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}, {"name": "y", "type": "double", "bounds": [0.0, 1.0]}]
BATCH = 5_000  # experiments per store write while seeding
LIST_PAGE = 1_000
DASHBOARD_PAGE = 100


async def _seed(db: Path, n: int) -> str:
    """`n` idle experiments in a new store at `db`, owned by one credential: its token."""
    from tauopt import Engine
    from tauopt.engine._auth import new_credential
    from tauopt.store import PutExperiment, open_store

    cred, token = new_credential("bench")
    async with Engine(store=str(db)) as engine:
        await engine.store.put_credential(cred)
        template = await engine.as_owner(cred.id).create_experiment(
            "exp-0", PARAMETERS, {"name": "loss", "objective": "minimize"}, strategy="random"
        )
    if n > 1:
        async with open_store(str(db)) as store:
            now = time.time()
            for lo in range(1, n, BATCH):
                await store.write([
                    PutExperiment(replace(template, id=f"{i:016x}", name=f"exp-{i}", created_at=now + i * 1e-6))
                    for i in range(lo, min(n, lo + BATCH))
                ])  # fmt: skip
    if n == 0:
        async with open_store(str(db)) as store:  # the empty store keeps only the credential
            from tauopt.store import DeleteExperiment

            await store.write([DeleteExperiment(template.id)])
    return token


async def _project_lookup(db: Path, project: str) -> float:
    """Seconds a KerasTuner chief's trial queue takes to find its project in the store at
    `db` and resume it, or to find none and create it: what the chief does before its
    first answer."""
    from tauopt import Engine
    from tauopt.engine._trialqueue import TrialPolicy, TrialQueue

    policy = TrialPolicy(project=project, objectives=(("loss", "min"),), score="loss", maximize=False, max_trials=10)
    async with Engine(store=str(db), pool=None) as engine:
        t0 = time.perf_counter()
        await TrialQueue(engine, policy).start()
        return time.perf_counter() - t0


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _ms(xs: list[float]) -> dict[str, float | None]:
    s = sorted(xs)
    return {k: (round(1000 * quantile(s, q), 2) if s else None) for k, q in (("p50", 0.5), ("p99", 0.99), ("max", 1.0))}


def _timed(http: httpx.Client, method: str, path: str, repeats: int, **kw: Any) -> tuple[list[float], Any]:
    out, answer = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        r = http.request(method, path, **kw)
        out.append(time.perf_counter() - t0)
        r.raise_for_status()
        answer = r
    return out, answer


def measure(n: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    db = workdir / f"scale-{n}.db"
    for suffix in ("", "-wal", "-shm", ".token"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    t0 = time.perf_counter()
    token = anyio.run(_seed, db, n)
    seed_s = time.perf_counter() - t0
    size_mb = sum(Path(str(db) + s).stat().st_size for s in ("", "-wal") if Path(str(db) + s).exists()) / 2**20
    port = free_port()
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tauopt.cli", "serve", "--db", str(db), "--port", str(port), "--pool", "thread",
         "--log-level", "warning", "--heavy-read-rate", "100000", "--heavy-read-burst", "100000"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=workdir,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_health(url, proc, timeout_s=600)
        start_s = time.perf_counter() - started
        time.sleep(1.0)  # settle (the metrics registry, the first writer commit)
        rss_idle = _rss_mb(proc.pid)
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
            cpu0 = _cpu_seconds(proc.pid)
            first, r = _timed(http, "GET", f"/v1/experiments?limit={LIST_PAGE}", args.repeats)
            page_cpu_ms = 1000 * (_cpu_seconds(proc.pid) - cpu0) / args.repeats
            listed = len(r.json())
            mid_id = f"{max(n // 2, 1):016x}"
            middle, _ = _timed(http, "GET", f"/v1/experiments?limit={LIST_PAGE}&after={mid_id}", args.repeats) if n > 2 else ([], None)
            last_id = f"{max(n - LIST_PAGE // 2, 1):016x}"
            last, _ = _timed(http, "GET", f"/v1/experiments?limit={LIST_PAGE}&after={last_id}", args.repeats) if n > LIST_PAGE else ([], None)
            named, _ = _timed(http, "GET", f"/v1/experiments?limit={LIST_PAGE}&name=exp-{n - 1}", args.repeats)
            # the dashboard's first page: its list, then each row's summary (a browser's 6 at a time)
            t0 = time.perf_counter()
            page = http.get(f"/v1/experiments?limit={DASHBOARD_PAGE}").raise_for_status().json()
            with ThreadPoolExecutor(6) as pool:
                list(pool.map(lambda e: http.get(f"/v1/experiments/{e['id']}/summary").raise_for_status(), page))
            dashboard_s = time.perf_counter() - t0
            # the first ask of experiments nobody touched since the start (not the dashboard's page)
            rng = random.Random(n)
            cold_ids = [f"{i:016x}" for i in rng.sample(range(DASHBOARD_PAGE, n), min(args.cold, max(n - DASHBOARD_PAGE, 0)))]
            cold = []
            cpu0 = _cpu_seconds(proc.pid)
            for eid in cold_ids:
                t0 = time.perf_counter()
                http.post(f"/v1/experiments/{eid}/suggestions", json={}).raise_for_status()
                cold.append(time.perf_counter() - t0)
            cold_cpu_ms = 1000 * (_cpu_seconds(proc.pid) - cpu0) / max(len(cold), 1)
            warm, _ = _timed(http, "GET", f"/v1/experiments/{cold_ids[0]}", args.repeats) if cold_ids else ([], None)
            cpu0 = _cpu_seconds(proc.pid)
            scrapes, _ = _timed(http, "GET", "/metrics", args.repeats)
            scrape_cpu_ms = 1000 * (_cpu_seconds(proc.pid) - cpu0) / args.repeats
        rss_after = _rss_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    anyio.run(_project_lookup, db, "kt-0")  # imports what a create needs
    creates = [anyio.run(_project_lookup, db, f"kt-{i}") for i in range(1, 1 + args.lookups)]
    resumes = [anyio.run(_project_lookup, db, "kt-0") for _ in range(args.lookups)]
    return {
        "experiments": n,
        "load_average": round(os.getloadavg()[0], 1),
        "seed_s": round(seed_s, 2),
        "store_mb": round(size_mb, 1),
        "start_s": round(start_s, 3),
        "rss_idle_mb": round(rss_idle, 1),
        "list_page_ms": {"first": _ms(first), "middle": _ms(middle), "last": _ms(last), "name_filter": _ms(named)},
        "listed_first_page": listed,
        "first_page_daemon_cpu_ms": round(page_cpu_ms, 1),  # the daemon's CPU per first page: the load does not inflate it as much
        "dashboard_first_page_s": round(dashboard_s, 3),
        "cold_asks": len(cold),
        "cold_ask_ms": _ms(cold),
        "cold_ask_daemon_cpu_ms": round(cold_cpu_ms, 2),
        "warm_read_ms": _ms(warm),
        "rss_after_cold_asks_mb": round(rss_after, 1),
        "metrics_scrape_ms": _ms(scrapes),
        "metrics_scrape_daemon_cpu_ms": round(scrape_cpu_ms, 2),
        "kerastuner_project_create_ms": _ms(creates),  # a chief's first start: no project of that name yet
        "kerastuner_project_resume_ms": _ms(resumes),  # a chief restarted: its project found by name
    }


def plot(out: dict[str, Any], png: str) -> None:
    from _scale_plot import plot_curves

    rows = [r for r in out["sizes"] if r["experiments"]]
    xs = [r["experiments"] for r in rows]

    def line(get: Any) -> list[tuple[float, float]]:
        return [(x, get(r)) for x, r in zip(xs, rows)]

    lists = {k: line(lambda r, k=k: r["list_page_ms"][k]["p50"]) for k in ("first", "middle", "last", "name_filter")}
    lists["first, daemon CPU"] = line(lambda r: r.get("first_page_daemon_cpu_ms"))
    plot_curves(png, f"One daemon, idle experiments in its SQLite store ({out['date']}, {out['machine']['cpus']} cores, shared)", "experiments", [
        ("start (s)", {"daemon start": line(lambda r: r["start_s"]), "dashboard first page": line(lambda r: r["dashboard_first_page_s"])}, None),
        ("RSS", {"KB per idle experiment": line(lambda r: r.get("rss_kb_per_idle_experiment")),
                 "RSS idle (MB)": line(lambda r: r["rss_idle_mb"])}, None),
        ("GET /v1/experiments page of 1,000, p50 (ms)", lists, None),
        ("first ask of a cold experiment (ms)", {"p50": line(lambda r: r["cold_ask_ms"]["p50"]),
                                                 "p99": line(lambda r: r["cold_ask_ms"]["p99"]),
                                                 "daemon CPU per ask": line(lambda r: r.get("cold_ask_daemon_cpu_ms"))}, 50.0),
    ])  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="0,1000,10000,100000", help="experiments per store (0: the baseline)")
    p.add_argument("--repeats", type=int, default=20, help="requests per listing measured")
    p.add_argument("--cold", type=int, default=200, help="cold experiments asked once each")
    p.add_argument("--workdir", default=None)
    p.add_argument("--out", default=None, help="also write the JSON here")
    p.add_argument("--png", default=None, help="draw the curves here (matplotlib)")
    p.add_argument("--replot", default=None, metavar="JSON", help="only draw --png from this earlier output")
    p.add_argument("--lookups", type=int, default=3, help="KerasTuner project lookups measured, each kind")
    p.add_argument("--smoke", action="store_true", help="300 experiments, 3 repeats, 20 cold asks, 1 lookup")
    args = p.parse_args()
    if args.replot:
        plot(json.loads(Path(args.replot).read_text()), args.png)
        return
    if args.smoke:
        args.sizes, args.repeats, args.cold, args.lookups = "300", 3, 20, 1
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.workdir or tmp)
        sizes = measure_sizes(args.sizes, lambda n: measure(n, args, workdir))
    base = next((s for s in sizes if s["experiments"] == 0), None)
    if base is not None:
        for s in sizes:
            if s["experiments"]:
                s["rss_kb_per_idle_experiment"] = round(1024 * (s["rss_idle_mb"] - base["rss_idle_mb"]) / s["experiments"], 2)
                s["rss_kb_per_cold_asked_experiment"] = (
                    round(1024 * (s["rss_after_cold_asks_mb"] - s["rss_idle_mb"]) / (s["cold_asks"] + DASHBOARD_PAGE), 1)
                )
    emit("experiments_scale", sizes, args.out, args.png, plot)


if __name__ == "__main__":
    main()
