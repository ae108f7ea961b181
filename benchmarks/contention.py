"""Suggest latency under contention, door by door, side by side with Optuna.

    .venv/bin/python benchmarks/contention.py --quick     # `make bench`: every door + Optuna, < 3 min on 2 cores
    .venv/bin/python benchmarks/contention.py             # the full matrix (longer)
    .venv/bin/python benchmarks/contention.py --eval-s 0,0.05 --only inproc/
    .venv/bin/python benchmarks/contention.py --quick --only inproc/,optuna/memory,floor/mailbox   # issue 16's in-process goals
    .venv/bin/python benchmarks/contention.py --tiny --out /tmp/b   # the smoke test's run
    .venv/bin/python benchmarks/contention.py --pg-url throwaway --only /postgresql/ --no-optuna   # PostgreSQL's ask p99

Every worker loops: ask (suggest) -> evaluate (sleep --eval-s; 0 = pure
coordination overhead) -> observe, for --duration seconds. Per configuration:
ask latency p50/p95/p99/max, observe p50/p99, completed pairs per second,
errors by type, and the invariants it can see: no assignment handed out twice
(a Counter over every worker's assignments) and never more open than the
bandwidth (engine.inspect in process; rebuilt from the server's database for
the http and kerastuner doors).

Doors: inproc (AsyncClient(driver="local") tasks), http (a real `tauopt serve`
subprocess with a fresh SQLite db; client processes each running many async
workers with AsyncClient(driver="http"), or a raw HTTP/1.1 client), kerastuner
(a real `tauopt kerastuner chief`; raw grpc.aio clients, CreateTrial then
UpdateTrial + EndTrial). Optuna ask/tell on the same workload (in-memory with
threads, SQLite and JournalStorage with processes), the ratios tauopt/Optuna,
transport floors (the same request/reply with no engine), and the isolation
scenario (100 random experiments under 64 workers while a GP experiment fits).

Output: one JSON line per configuration on stdout, then a Markdown report
(also written to OUT/contention.md), OUT/contention.jsonl and a PNG of ask
latency CDFs per door (OUT/contention-cdf.png). OUT defaults to bench-out/.
Exit status 1 when an invariant failed or a configuration crashed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import traceback
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import postgresql_server  # noqa: E402
from _bench_doors import Config, close_servers, run_config  # noqa: E402
from _bench_report import floor_shares, markdown, plot_cdfs, ratios, targets  # noqa: E402
from _progress import progress  # noqa: E402

Job = tuple[str, Callable[[Path], dict[str, Any]]]


def _optuna_available() -> bool:
    try:
        import optuna  # noqa: F401
    except ImportError:
        return False
    return True


def head_to_head(d: float) -> list[Config]:
    """tauopt in memory on two floats, random sampling: 1, 8 and 64 workers (issue 16's goals)."""
    return [Config("inproc", "memory", "random", w, duration_s=d, space="float2") for w in (1, 8, 64)]


def optuna_head_to_head(d: float) -> list[Any]:
    """Optuna in memory on the same two floats: 1, 8 and 32 threads."""
    from _bench_optuna import OptunaConfig

    return [OptunaConfig("memory", t, duration_s=d, space="float2") for t in (1, 8, 32)]


def postgresql_plan(d: float, with_optuna: bool) -> list[Job]:
    """tauopt on PostgreSQL beside SQLite (in process and over HTTP: 1, 16, 64 workers over
    100 experiments) and Optuna's RDB storage on the same server (a process, so a
    connection, per worker, as Optuna users run it)."""
    from _bench_optuna import OptunaConfig, run_optuna

    configs = [
        Config(door, store, "random", w, procs=1 if door == "inproc" else min(w, 4), experiments=100, duration_s=d)
        for door in ("inproc", "http") for store in ("sqlite", "postgresql") for w in (1, 16, 64)
    ]  # fmt: skip
    jobs: list[Job] = [(c.name, (lambda wd, c=c: run_config(c, wd))) for c in configs]
    if with_optuna:
        optuna = [OptunaConfig(s, w, duration_s=d) for s in ("sqlite", "postgresql") for w in (1, 16)]
        jobs += [(o.name, (lambda wd, o=o: run_optuna(o, wd))) for o in optuna]
    return jobs


def plan(mode: str, duration: float, eval_list: list[float], with_optuna: bool) -> list[Job]:
    from _bench_floor import run_grpc_floor, run_http_floor, run_mailbox_floor
    from _bench_isolation import run_isolation
    from _bench_optuna import OptunaConfig, run_optuna

    d = duration
    configs: list[Config] = []
    optuna: list[OptunaConfig] = []
    extra: list[Job] = []
    if mode == "tiny":
        configs = [
            Config("inproc", "memory", "random", 8, duration_s=d),
            Config("http", "sqlite", "random", 2, procs=1, duration_s=d),
        ]
        optuna = [OptunaConfig("memory", 8, duration_s=d)]
        extra = [("floor/mailbox/w8", lambda wd: run_mailbox_floor(8, d))]
    elif mode == "quick":
        configs = [
            Config("inproc", "memory", "random", 1, duration_s=d),
            Config("inproc", "memory", "random", 64, duration_s=d),
            Config("inproc", "memory", "random", 64, experiments=100, duration_s=d),
            Config("inproc", "sqlite", "random", 64, duration_s=d),
            Config("inproc", "sqlite", "random", 64, experiments=100, duration_s=d),
            Config("inproc", "memory", "sobol", 8, duration_s=d),
            Config("inproc", "memory", "gp", 8, duration_s=d),
            Config("http", "sqlite", "random", 4, procs=4, duration_s=d),
            Config("http", "sqlite", "random", 64, procs=4, duration_s=d),
            Config("http", "sqlite", "random", 64, procs=4, duration_s=d, client="httpx-per-worker"),
            Config("http", "sqlite", "random", 64, procs=4, duration_s=d, client="raw"),
            Config("kerastuner", "sqlite", "random", 8, procs=2, duration_s=d),
            Config("kerastuner", "memory", "random", 8, procs=2, duration_s=d),  # the door's cost without the store's
            *head_to_head(d),
        ]
        optuna = [
            OptunaConfig("memory", 1, duration_s=d),
            OptunaConfig("memory", 64, duration_s=d),
            OptunaConfig("memory", 8, "gp", duration_s=d),
            OptunaConfig("sqlite", 4, duration_s=d),
            OptunaConfig("journal", 4, duration_s=d),
            *optuna_head_to_head(d),
        ]
        extra = [
            ("floor/mailbox/w1", lambda wd: run_mailbox_floor(1, d)),
            ("floor/mailbox/w8", lambda wd: run_mailbox_floor(8, d)),
            ("floor/mailbox/w64", lambda wd: run_mailbox_floor(64, d)),
            ("floor/http/w64/p4", lambda wd: run_http_floor(64, 4, d, "httpx", wd)),
            ("floor/http/w64/p4/raw", lambda wd: run_http_floor(64, 4, d, "raw", wd)),
            ("floor/kerastuner/w8/p2", lambda wd: run_grpc_floor(8, 2, d, wd)),
            ("isolation", lambda wd: run_isolation(64, 100, d, "process")),
        ]
    else:
        for store in ("memory", "sqlite"):
            for strategy in ("random", "sobol"):
                for w in (1, 8, 64):
                    for e in (1, 100):
                        configs.append(Config("inproc", store, strategy, w, experiments=e, duration_s=d))
        configs += [Config("inproc", "memory", "gp", w, duration_s=d) for w in (1, 8)]
        configs += [Config("inproc", "sqlite", "gp", 8, duration_s=d)]
        for w, p in ((1, 1), (4, 4), (8, 2), (64, 4)):
            for e in (1, 100):
                configs.append(Config("http", "sqlite", "random", w, procs=p, experiments=e, duration_s=d))
        configs += [
            Config("http", "sqlite", "sobol", 64, procs=4, duration_s=d),
            Config("http", "sqlite", "random", 64, procs=4, duration_s=d, client="httpx-per-worker"),
            Config("http", "sqlite", "random", 64, procs=4, duration_s=d, client="raw"),
            Config("http", "sqlite", "random", 64, procs=4, experiments=100, duration_s=d, client="raw"),
        ]
        configs += [Config("kerastuner", "sqlite", "random", w, procs=p, duration_s=d) for w, p in ((1, 1), (8, 2), (64, 4))]
        configs += [Config("kerastuner", "memory", "random", 8, procs=2, duration_s=d)]
        configs += head_to_head(d)
        optuna = [OptunaConfig("memory", w, duration_s=d) for w in (1, 8, 64)]
        optuna += [OptunaConfig("memory", 8, "sobol", duration_s=d), OptunaConfig("memory", 8, "gp", duration_s=d)]
        optuna += optuna_head_to_head(d)
        optuna += [OptunaConfig(s, 4, duration_s=d) for s in ("sqlite", "journal")]
        optuna += [OptunaConfig(s, 1, duration_s=d) for s in ("sqlite", "journal")]
        extra = [
            ("floor/mailbox/w1", lambda wd: run_mailbox_floor(1, d)),
            ("floor/mailbox/w8", lambda wd: run_mailbox_floor(8, d)),
            ("floor/mailbox/w64", lambda wd: run_mailbox_floor(64, d)),
            ("floor/http/w1/p1", lambda wd: run_http_floor(1, 1, d, "httpx", wd)),
            ("floor/http/w64/p4", lambda wd: run_http_floor(64, 4, d, "httpx", wd)),
            ("floor/http/w64/p4/httpx-per-worker", lambda wd: run_http_floor(64, 4, d, "httpx-per-worker", wd)),
            ("floor/http/w64/p4/raw", lambda wd: run_http_floor(64, 4, d, "raw", wd)),
            ("floor/kerastuner/w1/p1", lambda wd: run_grpc_floor(1, 1, d, wd)),
            ("floor/kerastuner/w64/p4", lambda wd: run_grpc_floor(64, 4, d, wd)),
            ("isolation/process", lambda wd: run_isolation(64, 100, d, "process")),
            ("isolation/thread", lambda wd: run_isolation(64, 100, d, "thread")),
        ]
    # evaluation times other than 0: the same shapes with a sleep between ask and observe
    for ev in eval_list:
        if ev > 0:
            configs += [
                Config("inproc", "sqlite", "random", 64, eval_s=ev, duration_s=max(d, 4 * ev)),
                Config("http", "sqlite", "random", 64, procs=4, eval_s=ev, duration_s=max(d, 4 * ev)),
            ]
            if with_optuna:
                optuna.append(OptunaConfig("memory", 64, eval_s=ev, duration_s=max(d, 4 * ev)))
    jobs: list[Job] = [(c.name, (lambda wd, c=c: run_config(c, wd))) for c in configs]
    if with_optuna:
        jobs += [(o.name, (lambda wd, o=o: run_optuna(o, wd))) for o in optuna]
    return jobs + extra


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {
        "kind": "machine",
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }
    try:
        import optuna

        info["optuna"] = optuna.__version__
    except ImportError:
        info["optuna"] = None
    return info


def _run_job(name: str, job: Any, workdir: Path) -> dict[str, Any]:
    """One configuration's result, or a `crash` row naming the error (the run goes on)."""
    try:
        return job(workdir)
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        return {"kind": "crash", "name": name, "door": name.split("/")[0], "error": repr(exc)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="a subset covering each door and the Optuna comparison (< 3 min)")
    size.add_argument("--tiny", action="store_true", help="the smallest run (the smoke test)")
    parser.add_argument("--duration", type=float, default=None, help="seconds per configuration (default 3; 2 with --quick; 0.5 with --tiny)")
    parser.add_argument("--eval-s", default="0", help="comma-separated evaluation times; each > 0 adds configurations")
    parser.add_argument(
        "--only", default=None, help="run only configurations whose name contains this (comma-separated: any of these)"
    )
    parser.add_argument("--no-optuna", action="store_true", help="skip the Optuna side")
    parser.add_argument(
        "--pg-url", default=None, metavar="postgresql://...",
        help="add the PostgreSQL rows (tauopt in process and over HTTP, Optuna's RDB) on this server, "
        "beside SQLite's, 100 experiments, 1/16/64 workers; each configuration in a schema of its own; "
        "`throwaway`: on a throwaway cluster of this machine (tests/postgres_support.py)",
    )
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("bench-out"), help="where the table, JSONL and PNG go (default bench-out/)")
    args = parser.parse_args(argv)

    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    duration = args.duration or {"tiny": 0.5, "quick": 2.0, "full": 3.0}[mode]
    eval_list = [float(x) for x in args.eval_s.split(",") if x.strip()]
    with_optuna = not args.no_optuna and _optuna_available()
    only = None if args.only is None else [x for x in args.only.split(",") if x]
    planned = plan(mode, duration, eval_list, with_optuna)
    if args.pg_url is not None:
        planned = postgresql_plan(duration, with_optuna) + planned
    jobs = [j for j in planned if only is None or any(x in j[0] for x in only)]
    with postgresql_server(args.pg_url) if args.pg_url is not None else nullcontext("") as pg_url:
        if pg_url:
            os.environ["TAUOPT_BENCH_PG_URL"] = pg_url  # the runners read it: one place, also in child processes
        return _run(args, jobs, argv)


def _run(args: argparse.Namespace, jobs: list[Job], argv: list[str] | None) -> int:
    info = machine()
    print(json.dumps(info), flush=True)
    results: list[dict[str, Any]] = []
    ask_s: dict[str, list[float]] = {}
    failed = False
    t_start = time.time()
    with tempfile.TemporaryDirectory(prefix="tauopt-bench-") as tmp:
        workdir = Path(tmp)
        with progress(len(jobs), "contention") as step:
            for name, job in jobs:
                r = _run_job(name, job, workdir)
                failed = failed or r.get("kind") == "crash"
                ask_s[r["name"]] = r.pop("_ask_s", [])
                if not (r.get("invariants") or {"ok": True}).get("ok", True):
                    failed = True
                results.append(r)
                print(json.dumps(r), flush=True)
                step(name)
        close_servers()
    rs = ratios(results)
    shares = [
        {"kind": "share", "name": name, "floor": floor, "share": round(share, 3)}
        for name, (share, floor) in floor_shares(results).items()
    ]
    for r in [*rs, *shares, *targets(results, rs)]:
        print(json.dumps(r), flush=True)

    command = "benchmarks/contention.py " + " ".join(argv if argv is not None else sys.argv[1:])
    report = markdown(results, rs, command.strip(), info)
    report += f"\nTotal wall time: {time.time() - t_start:.0f} s.\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "contention.md").write_text(report)
    with open(args.out / "contention.jsonl", "w") as f:
        for r in [info, *results, *rs, *shares, *targets(results, rs)]:
            f.write(json.dumps(r) + "\n")
    if not args.no_plot:
        plot_cdfs(results, ask_s, args.out / "contention-cdf.png")
    print()
    print(report)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
