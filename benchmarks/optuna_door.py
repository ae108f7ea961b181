"""The same Optuna workload against Optuna's own gRPC proxy and against tauopt's Optuna door.

    nice -n 10 .venv/bin/python benchmarks/optuna_door.py --quick      # 1 and 8 workers, random, 0 s
    nice -n 10 .venv/bin/python benchmarks/optuna_door.py              # 1, 8, 32 workers; 0 and 10 ms; tpe and random

Every worker is a process running an unmodified Optuna loop over
`GrpcStorageProxy(host, port)`: `study.ask()` plus three `suggest_*` calls (the
point), the objective (sleep --objective-ms), `study.tell()`, for --trials
trials. Backends, each a fresh server process: Optuna's `run_grpc_proxy_server`
over (a) RDBStorage on SQLite, (b) JournalStorage on a file, (c) InMemoryStorage
(not durable), and (d) `tauopt serve --optuna-port` (SQLite, durable). Workers
start together (after their imports) so trials/s is the study's rate.

Output: one JSON line per cell on stdout: backend, workers, sampler, objective_ms,
trials, trials_per_s, ask_p50_ms/ask_p99_ms (ask + suggests), tell_p50_ms/tell_p99_ms,
server_cpu_ms_per_trial (the server process's CPU, all its threads, over the run, per
trial: less sensitive to a loaded machine than trials/s), client_cpu_ms_per_trial (the
workers' own CPU in their loops, per trial), the 1-minute load average at the end, and the check that trial numbers are 0..n-1 without duplicates.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _bench_common import _cpu_seconds, free_port, wait_port

BACKENDS = ("optuna-rdb-sqlite", "optuna-journal", "optuna-inmemory", "tauopt")

_OPTUNA_SERVER = """
import sys, warnings
warnings.simplefilter("ignore")
import optuna
from optuna.storages import run_grpc_proxy_server
kind, path, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
optuna.logging.set_verbosity(optuna.logging.WARNING)
if kind == "optuna-rdb-sqlite":
    storage = optuna.storages.RDBStorage(f"sqlite:///{path}")
elif kind == "optuna-journal":
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(path))
else:
    storage = optuna.storages.InMemoryStorage()
run_grpc_proxy_server(storage, host="127.0.0.1", port=port)
"""

_WORKER = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
import optuna
from optuna.storages import GrpcStorageProxy
optuna.logging.set_verbosity(optuna.logging.WARNING)
port, name, trials, sampler, objective_s, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5]), int(sys.argv[6])
rpcs = {}
if len(sys.argv) > 7:  # --rpc-stats: count each RPC, its time and its reply's bytes, as the client sees them
    import grpc
    from optuna.storages._grpc import client as grpc_client

    class Count(grpc.UnaryUnaryClientInterceptor):
        def intercept_unary_unary(self, continuation, details, request):
            t = time.perf_counter()
            out = continuation(details, request)
            reply = out.result()
            row = rpcs.setdefault(details.method.rsplit("/", 1)[-1], [0, 0.0, 0])
            row[0] += 1; row[1] += time.perf_counter() - t; row[2] += reply.ByteSize()
            return out

    plain = grpc_client.create_insecure_channel
    grpc_client.create_insecure_channel = lambda h, p: grpc.intercept_channel(plain(h, p), Count())
s = optuna.samplers.TPESampler(seed=seed) if sampler == "tpe" else optuna.samplers.RandomSampler(seed=seed)
study = optuna.load_study(study_name=name, storage=GrpcStorageProxy(host="127.0.0.1", port=int(port)), sampler=s)
print("ready", flush=True)
sys.stdin.readline()
asks, tells, numbers = [], [], []
rpcs.clear()  # the loop's calls only, not load_study's
cpu0 = time.process_time()
for _ in range(trials):
    t0 = time.perf_counter()
    trial = study.ask()
    x = trial.suggest_float("x", -5, 5)
    y = trial.suggest_float("y", 1e-3, 1, log=True)
    k = trial.suggest_categorical("k", ["a", "b", "c"])
    t1 = time.perf_counter()
    if objective_s:
        time.sleep(objective_s)
    value = (x - 1) ** 2 + y + (k == "b")
    t2 = time.perf_counter()
    study.tell(trial, value)
    asks.append(t1 - t0); tells.append(time.perf_counter() - t2); numbers.append(trial.number)
print(json.dumps({"asks": asks, "tells": tells, "numbers": numbers, "cpu_s": time.process_time() - cpu0, "rpcs": rpcs}), flush=True)
"""


def _server(backend: str, tmp: Path, port: int) -> subprocess.Popen[Any]:
    if backend == "tauopt":
        args = [sys.executable, "-m", "tauopt.cli", "serve", "--db", str(tmp / "tauopt.db"), "--port", str(free_port()),
                "--pool", "thread", "--log-level", "warning", "--optuna-port", str(port)]  # fmt: skip
    else:
        path = tmp / ("optuna.db" if "rdb" in backend else "journal.log")
        args = [sys.executable, "-c", _OPTUNA_SERVER, backend, str(path), str(port)]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _rpc_stats(outs: list[dict[str, Any]], total: int) -> dict[str, Any]:
    """Per RPC method, over every worker: calls per trial, mean ms as the client waited, reply bytes per call."""
    merged: dict[str, list[float]] = {}
    for o in outs:
        for method, (n, s, b) in o["rpcs"].items():
            row = merged.setdefault(method, [0, 0.0, 0])
            row[0] += n
            row[1] += s
            row[2] += b
    return {
        m: {"per_trial": round(n / total, 2), "mean_ms": round(s * 1000 / n, 2), "reply_bytes": round(b / n)}
        for m, (n, s, b) in sorted(merged.items())
    }


def run_cell(
    backend: str, workers: int, sampler: str, objective_ms: float, trials: int, rpc_stats: bool = False
) -> dict[str, Any]:
    import warnings

    import optuna
    from optuna.storages import GrpcStorageProxy

    warnings.simplefilter("ignore")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="optuna-door-") as d:
        port = free_port()
        server = _server(backend, Path(d), port)
        try:
            wait_port(port, 60, alive=lambda: server.poll() is None)
            storage = GrpcStorageProxy(host="127.0.0.1", port=port)
            storage.wait_server_ready(timeout=60)
            optuna.create_study(study_name="bench", storage=storage)
            procs = [
                subprocess.Popen(
                    [sys.executable, "-c", _WORKER, str(port), "bench", str(trials), sampler, str(objective_ms / 1000), str(i)]
                    + (["rpc-stats"] if rpc_stats else []),
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                )  # fmt: skip
                for i in range(workers)
            ]
            for p in procs:
                assert p.stdout is not None and p.stdout.readline().strip() == "ready"
            cpu0 = _cpu_seconds(server.pid)
            t0 = time.perf_counter()
            for p in procs:
                assert p.stdin is not None
                p.stdin.write("go\n")
                p.stdin.flush()
            outs = [json.loads(p.communicate(timeout=1800)[0].strip().splitlines()[-1]) for p in procs]
            wall = time.perf_counter() - t0
            cpu1 = _cpu_seconds(server.pid)
        finally:
            server.terminate()
            server.wait(timeout=30)
    asks = np.array([a for o in outs for a in o["asks"]]) * 1000
    tells = np.array([t for o in outs for t in o["tells"]]) * 1000
    numbers = sorted(n for o in outs for n in o["numbers"])
    total = workers * trials
    extra = {"rpcs": _rpc_stats(outs, total)} if rpc_stats else {}
    return extra | {
        "backend": backend, "durable": backend != "optuna-inmemory", "workers": workers, "sampler": sampler,
        "objective_ms": objective_ms, "trials": total, "trials_per_s": round(total / wall, 1),
        "ask_p50_ms": round(float(np.percentile(asks, 50)), 2), "ask_p99_ms": round(float(np.percentile(asks, 99)), 2),
        "tell_p50_ms": round(float(np.percentile(tells, 50)), 2), "tell_p99_ms": round(float(np.percentile(tells, 99)), 2),
        "server_cpu_ms_per_trial": round((cpu1 - cpu0) * 1000 / total, 2),
        "client_cpu_ms_per_trial": round(sum(o["cpu_s"] for o in outs) * 1000 / total, 2),
        "load_average": round(os.getloadavg()[0], 1),
        "numbers_ok": numbers == list(range(total)),
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 and 8 workers, random sampler, 0 ms, 20 trials each")
    parser.add_argument("--workers", default="1,8,32")
    parser.add_argument("--samplers", default="tpe,random")
    parser.add_argument("--objective-ms", default="0,10")
    parser.add_argument("--trials", type=int, default=40, help="trials per worker")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--rpc-stats", action="store_true",
                        help="count every RPC in the workers (calls per trial, client-side ms, reply bytes); costs client CPU")  # fmt: skip
    args = parser.parse_args()
    if args.quick:
        args.workers, args.samplers, args.objective_ms, args.trials = "1,8", "random", "0", 20
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    failed = False
    for sampler in args.samplers.split(","):
        for objective_ms in [float(x) for x in args.objective_ms.split(",")]:
            for workers in [int(x) for x in args.workers.split(",")]:
                for backend in args.backends.split(","):
                    row = run_cell(backend, workers, sampler, objective_ms, args.trials, args.rpc_stats)
                    failed |= not row["numbers_ok"]
                    print(json.dumps(row), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
