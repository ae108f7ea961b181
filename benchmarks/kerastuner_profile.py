"""Where the KerasTuner chief's time goes, per ask + observe pair (issue 16).

    .venv/bin/python benchmarks/kerastuner_profile.py --rounds 3           # CPU µs per pair: chief on SQLite, on memory, the floor
    .venv/bin/python benchmarks/kerastuner_profile.py --cprofile memory --top 30   # cProfile of the chief on the memory store

The shape is `contention.py --quick`'s kerastuner row: a real `tauopt kerastuner
chief` (random strategy, the mixed3 space), 2 client processes x 8 raw grpc.aio
workers (CreateTrial, UpdateTrial, EndTrial), for --duration seconds; the floor is
the same RPCs against a grpc.aio server answering canned trials (`_bench_floor.py`).

Default: the three servers run in turn, --rounds times, and for each the server
process's CPU seconds (user + system, from /proc) over the clients' run divided by
the pairs served: the server's CPU µs per pair. On a shared 2-core box that moves
less than pairs/s does, and the floor's figure beside it gives the share of the
floor the server's own cost allows (floor µs / chief µs). One JSON line per run,
then one with the medians.

--cprofile STORE: one run of the chief under cProfile; prints the functions with
the most own time (tottime) and cumulative time, per pair, and the share of the
process's profiled time by package.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import Recorder, _cpu_seconds, free_port, wait_port  # noqa: E402
from _bench_doors import ChiefProcess, Config, GrpcSpec, grpc_client_main, split_workers  # noqa: E402
from _bench_floor import FloorServer  # noqa: E402
from _bench_procs import run_client_processes  # noqa: E402

WORKERS, PROCS = 8, 2


def _drive(port: int, experiment_id: str, duration_s: float) -> Recorder:
    specs = [
        GrpcSpec(f"127.0.0.1:{port}", experiment_id, n, duration_s, 0.0, p) for p, n in enumerate(split_workers(WORKERS, PROCS))
    ]
    return Recorder.merge(run_client_processes(grpc_client_main, specs))


def _measure(pid: int, port: int, experiment_id: str, duration_s: float) -> dict[str, Any]:
    cpu0 = _cpu_seconds(pid)
    rec = _drive(port, experiment_id, duration_s)
    cpu = _cpu_seconds(pid) - cpu0
    window = max(rec.ended - rec.started, 1e-9)
    return {
        "pairs": rec.pairs,
        "pairs_per_s": round(rec.pairs / window, 1),
        "server_cpu_s": round(cpu, 3),
        "server_cpu_us_per_pair": round(1e6 * cpu / max(rec.pairs, 1), 1),
        "errors": dict(rec.errors),
    }


def run_once(side: str, duration_s: float, workdir: Path) -> dict[str, Any]:
    """side: sqlite | memory (the chief on that store) | floor."""
    if side == "floor":
        port = free_port()
        with FloorServer("grpc", port, workdir / "floor.log") as server:
            time.sleep(0.5)  # imports done
            out = _measure(server.proc.pid, port, "floor", duration_s)
    else:
        with ChiefProcess(workdir, Config("kerastuner", side, "random", WORKERS, procs=PROCS, duration_s=duration_s)) as chief:
            assert chief.proc is not None
            out = _measure(chief.proc.pid, chief.port, chief.experiment_id, duration_s)
    return {"kind": "kerastuner_cpu", "side": side, "loadavg": round(os.getloadavg()[0], 2), **out}


def _rows(stats: pstats.Stats, key: int, top: int) -> Iterator[tuple[str, float, float, int]]:
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    items = sorted(raw.items(), key=lambda kv: kv[1][key], reverse=True)[:top]
    for (path, line, name), (cc, nc, tt, ct, _callers) in items:
        short = path.split("/site-packages/")[-1].split("/lib/python3.11/")[-1]
        if "/tauopt/" in short:
            short = "tauopt/" + short.split("/tauopt/")[-1]
        yield f"{short}:{line}({name})", tt, ct, nc


def _package(path: str) -> str:
    if "/tauopt/" in path:
        rest = path.split("/tauopt/")[-1]
        return "tauopt/" + rest.rsplit("/", 1)[0] if "/" in rest else "tauopt"
    if "/site-packages/" in path:
        return path.split("/site-packages/")[-1].split("/")[0]
    if "/lib/python3" in path:
        return "stdlib:" + path.split("/lib/python3")[-1].split("/", 2)[1].removesuffix(".py")
    return path or "builtins"


# The chief with cProfile switched on by SIGUSR1 and off (stats written) by SIGUSR2, so
# only the clients' run is profiled: not start-up, imports or the exit.
_PROFILED = """
import cProfile, signal, sys, time
profiler = cProfile.Profile(time.thread_time)  # CPU of the loop's thread: waits and other threads are not counted
signal.signal(signal.SIGUSR1, lambda *_: profiler.enable())
signal.signal(signal.SIGUSR2, lambda *_: (profiler.disable(), profiler.dump_stats({out!r})))
"""
_PROFILED_CHIEF = _PROFILED + "from tauopt.cli import main\nsys.exit(main(sys.argv[1:]))\n"
_PROFILED_FLOOR = _PROFILED + "sys.path.insert(0, {here!r})\nfrom _bench_floor import serve_grpc\nserve_grpc(int(sys.argv[1]))\n"
_IDLE = ("~", 0, "<method 'poll' of 'select.epoll' objects>")  # the loop waiting: not the chief's work


def _drive_profiled(proc: Any, port: int, experiment_id: str, duration_s: float, out: Path) -> Recorder:
    proc.send_signal(signal.SIGUSR1)
    rec = _drive(port, experiment_id, duration_s)
    proc.send_signal(signal.SIGUSR2)
    deadline = time.time() + 30
    while not out.exists() and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # the dump is written
    return rec


def profile(side: str, duration_s: float, top: int, workdir: Path, save: Path | None = None) -> None:
    out = save or workdir / "chief.prof"
    cfg = Config("kerastuner", side, "random", WORKERS, procs=PROCS, duration_s=duration_s)
    if side == "floor":
        port = free_port()
        code = _PROFILED_FLOOR.format(out=str(out), here=str(Path(__file__).resolve().parent))
        proc = subprocess.Popen([sys.executable, "-c", code, str(port)])
        try:
            wait_port(port, alive=lambda: proc.poll() is None)
            rec = _drive_profiled(proc, port, "floor", duration_s, out)
        finally:
            proc.terminate()
            proc.wait()
    else:
        with ChiefProcess(workdir, cfg, python_argv=("-c", _PROFILED_CHIEF.format(out=str(out)))) as chief:
            rec = _drive_profiled(chief.proc, chief.port, chief.experiment_id, duration_s, out)
    stats = pstats.Stats(str(out))
    stats.stats.pop(_IDLE, None)  # type: ignore[attr-defined]
    pairs = max(rec.pairs, 1)
    total = sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
    by_pkg: dict[str, float] = {}
    for (path, _line, _name), v in stats.stats.items():  # type: ignore[attr-defined]
        by_pkg[_package(path)] = by_pkg.get(_package(path), 0.0) + v[2]
    print(json.dumps({"kind": "kerastuner_profile", "side": side, "pairs": rec.pairs, "profiled_s": round(total, 3),
                      "profiled_us_per_pair": round(1e6 * total / pairs, 1)}))  # fmt: skip
    print(f"\nown time by package (share of the profiled {total:.2f} s, {1e6 * total / pairs:.0f} µs a pair under cProfile):")
    for pkg, t in sorted(by_pkg.items(), key=lambda kv: kv[1], reverse=True)[:20]:
        print(f"  {100 * t / total:5.1f}%  {1e6 * t / pairs:7.1f} µs/pair  {pkg}")
    for title, key in (("own time (tottime)", 2), ("cumulative time", 3)):
        print(f"\ntop {top} by {title}, µs per pair:")
        print(f"  {'own':>7} {'cum':>7} {'calls/pair':>10}  function")
        for where, tt, ct, nc in _rows(stats, key, top):
            print(f"  {1e6 * tt / pairs:7.1f} {1e6 * ct / pairs:7.1f} {nc / pairs:10.2f}  {where}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--sides", default="sqlite,memory,floor", help="comma-separated: sqlite, memory, floor")
    parser.add_argument("--cprofile", choices=("sqlite", "memory", "floor"), default=None)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--save", type=Path, default=None, help="with --cprofile: keep the pstats file here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tauopt-ktprof-") as tmp:
        workdir = Path(tmp)
        if args.cprofile:
            profile(args.cprofile, args.duration, args.top, workdir, args.save)
            return 0
        sides = [s for s in args.sides.split(",") if s]
        runs: dict[str, list[dict[str, Any]]] = {s: [] for s in sides}
        for _ in range(args.rounds):
            for side in sides:
                r = run_once(side, args.duration, workdir)
                runs[side].append(r)
                print(json.dumps(r), flush=True)
    med = {s: {k: statistics.median(r[k] for r in rs) for k in ("pairs_per_s", "server_cpu_us_per_pair")} for s, rs in runs.items()}
    summary: dict[str, Any] = {"kind": "kerastuner_cpu_median", "rounds": args.rounds, **med}
    if "floor" in med:
        for s in ("sqlite", "memory"):
            if s in med:
                summary[f"{s}_cpu_share_of_floor"] = round(med["floor"]["server_cpu_us_per_pair"] / med[s]["server_cpu_us_per_pair"], 3)
                summary[f"{s}_pairs_share_of_floor"] = round(med[s]["pairs_per_s"] / med["floor"]["pairs_per_s"], 3)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
