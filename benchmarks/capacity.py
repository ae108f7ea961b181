"""Workers per daemon: how one `tauopt serve` on SQLite holds 100 to 10,000 workers.

Each worker is an asyncio task holding one keep-alive HTTP/1.1 connection (raw
framing: the load generator must cost far less than the daemon, so it is not a
tauopt client), looping ask -> sleep an evaluation time (drawn uniformly in
[0.5, 1.5] x --eval-s) -> observe, over --experiments random-strategy experiments.
Workers start spread over one evaluation time, as real ones do; a size is measured
over --duration seconds after that ramp. Workers run in several processes, and
connect from several loopback addresses (127.0.0.2, 127.0.0.3, ...), as workers on
several machines would: the daemon caps connections per client address (a
quarter of --max-connections).

Per size (JSON on stdout): pairs/s (and the offered rate, workers / eval_s), ask and
observe p50/p99/max, errors by type (HTTP status with the catalogue's error_type, or
the exception class: ConnectionResetError, IncompleteReadError, ...), reconnects, and
the daemon's CPU (share of one core over the window), peak RSS and open file
descriptors, and the load generator's CPU.

    nice -n 10 .venv/bin/python benchmarks/capacity.py --sizes 100,1000,5000,10000 --duration 60
    .venv/bin/python benchmarks/capacity.py --smoke      # 300 workers, 1 s evaluations, ~10 s
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Awaitable, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _bench_common import _cpu_seconds, free_port, quantile, wait_port  # noqa: E402
from _bench_procs import run_client_processes  # noqa: E402
from _scale_plot import emit, measure_sizes  # noqa: E402

REQUEST_TIMEOUT_S = 30.0  # an answer not read by then counts as a TimeoutError
IDLE_REOPEN_S = 60.0  # as tauopt's client: a connection idle this long is reopened, not reused (the daemon closes at 75 s)
PARAMETERS = [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}, {"name": "y", "type": "double", "bounds": [0.0, 1.0]}]


# -- one load process -------------------------------------------------------------------


class Conn:
    """One worker's keep-alive connection, reopened when the server closes it."""

    def __init__(self, port: int, source: str, token: str, stats: dict[str, Any]) -> None:
        self.port, self.source, self.stats = port, source, stats
        self.auth = f"Authorization: Bearer {token}\r\n"
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.opened = False
        self.idle_since = 0.0

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port, local_addr=(self.source, 0))
        self.stats["connects"] += 1
        self.opened = True

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        stale = time.monotonic() - self.idle_since > IDLE_REOPEN_S
        if self.writer is None or self.reader is None or self.reader.at_eof() or stale:
            if self.writer is not None:
                self.stats["reconnects"] += 1
            self.close()
            await self.open()
        assert self.reader is not None and self.writer is not None
        self.writer.write(
            f"POST {path} HTTP/1.1\r\nHost: x\r\n{self.auth}Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode() + body
        )
        async with asyncio.timeout(REQUEST_TIMEOUT_S):
            answer = await self._answer()
        self.idle_since = time.monotonic()
        return answer

    async def _answer(self) -> tuple[int, bytes]:
        assert self.reader is not None
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        length, close = 0, False
        for h in lines[1:]:
            name, _, value = h.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"connection" and value.strip().lower() == b"close":
                close = True
        data = await self.reader.readexactly(length)
        if close:
            self.close()
        return status, data


def _error_of(status: int, data: bytes) -> str:
    try:
        return f"{status} {json.loads(data)['error']['type']}"
    except Exception:
        return str(status)


async def _worker(spec: dict[str, Any], w: int, rec: dict[str, Any], start_at: float, stop_at: float) -> None:
    rng = random.Random(spec["seed"] * 100_003 + w)
    eid = spec["experiments"][w % len(spec["experiments"])]
    conn = Conn(spec["port"], f"127.0.0.{2 + w % spec['addresses']}", spec["token"], rec["stats"])
    eval_s = spec["eval_s"]
    await asyncio.sleep(max(0.0, start_at - time.time()) + rng.uniform(0, eval_s))  # the ramp
    measured_from = start_at + eval_s
    ask_path, obs_path = f"/v1/experiments/{eid}/suggestions", f"/v1/experiments/{eid}/observations"
    while time.time() < stop_at:
        try:
            t0 = time.perf_counter()
            status, data = await conn.post(ask_path, b"{}")
            t1 = time.perf_counter()
            if status != 201 and status != 200:
                rec["errors"][_error_of(status, data)] += time.time() >= measured_from
                await asyncio.sleep(min(eval_s, 1.0) * rng.uniform(0.5, 1.5))  # a worker backs off, then asks again
                continue
            if time.time() >= measured_from:
                rec["ask"].append(t1 - t0)
            sid = json.loads(data)["id"]
            await asyncio.sleep(eval_s * rng.uniform(0.5, 1.5))
            body = json.dumps({"suggestion_id": sid, "value": rng.random()}).encode()
            t2 = time.perf_counter()
            status, data = await conn.post(obs_path, body)
            t3 = time.perf_counter()
            now = time.time()
            if status != 201 and status != 200:
                rec["errors"][_error_of(status, data)] += now >= measured_from
            elif now >= measured_from:
                rec["observe"].append(t3 - t2)
                rec["pairs"] += now < stop_at
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, TimeoutError) as exc:
            rec["errors"][type(exc).__name__] += time.time() >= measured_from
            conn.close()
            await asyncio.sleep(rng.uniform(0.1, 1.0))
    rec["connected"] += conn.opened
    conn.close()


async def load_main(spec: dict[str, Any], ready: Callable[[], Awaitable[float]]) -> dict[str, Any]:
    """One load process: its workers, from the common start."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    start_at = await ready()
    rec: dict[str, Any] = {
        "ask": [], "observe": [], "pairs": 0, "errors": Counter(), "connected": 0,
        "stats": Counter(connects=0, reconnects=0),
    }  # fmt: skip
    stop_at = start_at + spec["eval_s"] + spec["duration_s"]
    cpu0 = time.process_time()
    await asyncio.gather(*(_worker(spec, w, rec, start_at, stop_at) for w in spec["workers"]))
    rec["cpu_s"] = time.process_time() - cpu0
    rec["start_at"] = start_at
    rec["errors"] = dict(rec["errors"])
    rec["stats"] = dict(rec["stats"])
    return rec


# -- the daemon -----------------------------------------------------------------------


def _proc_status(pid: int) -> dict[str, float]:
    out: dict[str, float] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1]) / 1024
        out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        pass
    return out


class Daemon:
    def __init__(self, workdir: Path, workers: int) -> None:
        self.port = free_port()
        extra = ["--max-connections", str(workers + 100)] if workers + 100 > 10_000 else []  # else the default
        db = workdir / f"capacity-{workers}.db"
        for suffix in ("", "-wal", "-shm", ".token"):
            Path(str(db) + suffix).unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tauopt.cli", "serve", "--db", str(db), "--port", str(self.port), "--pool", "thread",
             "--no-warm-pool", "--log-level", "warning", "--suggestions-per-day", "1000000000",
             "--max-active-experiments", "100000", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=workdir,
        )  # fmt: skip
        wait_port(self.port, alive=lambda: self.proc.poll() is None)
        self.token = Path(str(db) + ".token").read_text().strip()

    def create_experiments(self, n: int, bandwidth: int) -> list[str]:
        import httpx

        headers = {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{self.port}", headers=headers, timeout=30) as c:
            return [
                c.post("/v1/experiments", json={
                    "name": f"cap-{i}", "parameters": PARAMETERS, "metric": {"name": "loss", "objective": "minimize"},
                    "strategy": "random", "parallel_bandwidth": bandwidth,
                }).raise_for_status().json()["id"]
                for i in range(n)
            ]  # fmt: skip

    def stop(self) -> str:
        self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return str(err)


def _pct(xs: list[float]) -> dict[str, float | None]:
    s = sorted(xs)
    return {k: (round(1000 * quantile(s, q), 2) if s else None) for k, q in (("p50", 0.5), ("p99", 0.99), ("max", 1.0))}


def run_size(workers: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    daemon = Daemon(workdir, workers)
    try:
        per_exp = -(-workers // args.experiments)
        ids = daemon.create_experiments(args.experiments, per_exp + 4)
        processes = args.processes or max(1, min(4, -(-workers // 2500)))
        specs = [
            {"port": daemon.port, "token": daemon.token, "experiments": ids, "eval_s": args.eval_s,
             "duration_s": args.duration, "seed": p, "addresses": args.addresses, "workers": list(range(p, workers, processes))}
            for p in range(processes)
        ]  # fmt: skip
        samples: list[dict[str, float]] = []
        done = threading.Event()

        def sample() -> None:  # the daemon's CPU, RSS and fds, every second
            while not done.is_set():
                samples.append(dict(_proc_status(daemon.proc.pid), t=time.time(), cpu=_cpu_seconds(daemon.proc.pid)))
                done.wait(1.0)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            results = run_client_processes(load_main, specs, timeout_s=args.eval_s * 3 + args.duration + 4 * REQUEST_TIMEOUT_S + 300)
        finally:
            done.set()
            sampler.join()
    finally:
        err = daemon.stop()
    ask = [x for r in results for x in r["ask"]]
    obs = [x for r in results for x in r["observe"]]
    errors: Counter[str] = Counter()
    stats: Counter[str] = Counter()
    for r in results:
        errors.update({k: v for k, v in r["errors"].items() if v})
        stats.update(r["stats"])
    pairs = sum(r["pairs"] for r in results)
    t0 = results[0]["start_at"] + args.eval_s  # the measured window: after the ramp, for --duration
    inside = [s for s in samples if t0 <= s["t"] <= t0 + args.duration] or samples[-2:]
    cpu_s = inside[-1]["cpu"] - inside[0]["cpu"]
    window = max(inside[-1]["t"] - inside[0]["t"], 1e-9)
    return {
        "workers": workers,
        "experiments": args.experiments,
        "eval_s": args.eval_s,
        "duration_s": args.duration,
        "load_processes": processes,
        "addresses": args.addresses,
        "connected": sum(r["connected"] for r in results),
        "pairs": pairs,
        "pairs_per_s": round(pairs / args.duration, 1),
        "offered_pairs_per_s": round(workers / args.eval_s, 1),
        "ask_ms": _pct(ask),
        "observe_ms": _pct(obs),
        "errors": dict(sorted(errors.items())),
        "connects": stats["connects"],
        "reconnects": stats["reconnects"],
        "daemon": {
            "cpu_share": round(cpu_s / window, 3),
            "cpu_ms_per_pair": round(1000 * (cpu_s / window) / max(pairs / args.duration, 1e-9), 2),
            "rss_mb": round(max((s.get("VmRSS", 0) for s in samples), default=0), 1),
            "peak_rss_mb": round(max((s.get("VmHWM", 0) for s in samples), default=0), 1),
            "open_fds": max((int(s.get("fds", 0)) for s in samples), default=0),
        },
        "load_cpu_s": round(sum(r["cpu_s"] for r in results), 1),
        "load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)],  # the machine's, before and after
        "daemon_stderr_tail": err.strip().splitlines()[-3:] if errors else [],
    }


def plot(out: dict[str, Any], png: str) -> None:
    from _scale_plot import plot_curves

    rows = out["sizes"]
    xs = [r["workers"] for r in rows]

    def line(get: Any) -> list[tuple[float, float]]:
        return [(x, get(r)) for x, r in zip(xs, rows)]

    plot_curves(png, f"One daemon, workers with ~{rows[0]['eval_s']:g} s evaluations ({out['date']}, {out['machine']['cpus']} cores, shared)", "workers", [
        ("latency (ms)", {"ask p50": line(lambda r: r["ask_ms"]["p50"]), "ask p99": line(lambda r: r["ask_ms"]["p99"]),
                          "observe p99": line(lambda r: r["observe_ms"]["p99"])}, 100.0),
        ("pairs/s", {"served": line(lambda r: r["pairs_per_s"]), "offered": line(lambda r: r["offered_pairs_per_s"])}, None),
        ("daemon", {"RSS (MB)": line(lambda r: r["daemon"]["rss_mb"]), "open fds": line(lambda r: r["daemon"]["open_fds"]),
                    "CPU ms per pair": line(lambda r: r["daemon"]["cpu_ms_per_pair"])}, 1024.0),
    ])  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="100,1000,5000,10000", help="worker counts, comma-separated")
    p.add_argument("--experiments", type=int, default=100)
    p.add_argument("--eval-s", type=float, default=10.0, help="mean evaluation time (uniform in [0.5, 1.5] x this)")
    p.add_argument("--duration", type=float, default=60.0, help="seconds measured per size, after a ramp of one eval_s")
    p.add_argument("--processes", type=int, default=0, help="load processes (default: one per 2,500 workers, 1-4)")
    p.add_argument(
        "--addresses", type=int, default=8,
        help="loopback source addresses the workers connect from (127.0.0.2, ...; default %(default)d)",
    )
    p.add_argument("--workdir", default=None)
    p.add_argument("--out", default=None, help="also write the JSON here")
    p.add_argument("--png", default=None, help="draw the curves here (matplotlib)")
    p.add_argument("--replot", default=None, metavar="JSON", help="only draw --png from this earlier output")
    p.add_argument(
        "--smoke", action="store_true", help="300 workers from one address, 10 experiments, 1 s evaluations, 3 s"
    )
    args = p.parse_args()
    if args.replot:
        plot(json.loads(Path(args.replot).read_text()), args.png)
        return
    if args.smoke:
        args.sizes, args.experiments, args.eval_s, args.duration, args.processes, args.addresses = "300", 10, 1.0, 3.0, 2, 1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the daemon raises its own; this is for its parent's children
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.workdir or tmp)
        sizes = measure_sizes(args.sizes, lambda n: run_size(n, args, workdir))
    emit("capacity", sizes, args.out, args.png, plot)


if __name__ == "__main__":
    main()
