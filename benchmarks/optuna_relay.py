"""What the Optuna door's relay between daemons costs a call, same run: prints JSON.

    .venv/bin/python benchmarks/optuna_relay.py              # a throwaway PostgreSQL cluster
    .venv/bin/python benchmarks/optuna_relay.py --pg-url postgresql://... --calls 400

Two `tauopt serve` daemons share one PostgreSQL database, each with its Optuna door;
a study is made at daemon A (so A owns it). One GrpcStorageProxy client calls A
directly, another calls B, which relays each call to A (`tauopt/transport/_relay.py`).
Two calls: `get_trial` (a read in the study's actor) and `set_trial_user_attr` (a
write, committed before the answer); the clients alternate in rounds, since the
machine is noisy. Per path and call: p50 and p99 of the call's wall time, and the
relay's added cost (relayed minus direct p50).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_common import THROWAWAY, free_port, postgresql_server  # noqa: E402


def start_daemon(pg_url: str, cwd: Path, lease_s: float) -> tuple[subprocess.Popen[bytes], int]:
    port, door = free_port(), free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tauopt.cli", "serve", "--db", pg_url, "--port", str(port), "--pool", "thread",
         "--log-level", "warning", "--advertise-url", f"http://127.0.0.1:{port}", "--lease-s", str(lease_s),
         "--optuna-port", str(door)],
        cwd=cwd, stdout=subprocess.DEVNULL, stderr=(cwd / f"daemon-{port}.log").open("w"),
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=1).status_code == 200:
                return proc, door
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"tauopt serve did not start; see {cwd}")
        time.sleep(0.05)


def timed(fn: Callable[[], Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pg-url", default=THROWAWAY, help="a server to use (default: a throwaway cluster of this machine)")
    parser.add_argument("--calls", type=int, default=200, help="per path, call and round (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    import optuna
    from optuna.storages import GrpcStorageProxy

    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    with postgresql_server(args.pg_url) as url, tempfile.TemporaryDirectory(prefix="tauopt-relay-") as tmp:
        daemons = [start_daemon(url, Path(tmp), 3.0) for _ in range(2)]
        try:
            print(json.dumps({"kind": "machine", "cpus": os.cpu_count(), "load": [round(x, 2) for x in os.getloadavg()]}), flush=True)
            direct, relayed = (GrpcStorageProxy(host="127.0.0.1", port=door) for _, door in daemons)
            study = optuna.create_study(study_name="relay", storage=direct)
            trial_id = direct.create_new_trial(study._study_id)
            samples: dict[tuple[str, str], list[float]] = {}
            for r in range(args.rounds):
                paths = [("direct", direct), ("relayed", relayed)]
                for path, storage in paths if r % 2 == 0 else paths[::-1]:
                    calls = {
                        "get_trial": lambda s=storage: s._stub.GetTrial(_get_trial(trial_id)),  # uncached: every call reaches the door
                        "set_trial_user_attr": lambda s=storage: s.set_trial_user_attr(trial_id, "k", r),
                    }
                    for name, fn in calls.items():
                        samples.setdefault((path, name), []).extend(timed(fn, args.calls))
            rows = []
            for (path, name), xs in samples.items():
                xs.sort()
                rows.append({"kind": "optuna_relay", "path": path, "call": name, "calls": len(xs),
                             "p50_ms": round(1000 * xs[len(xs) // 2], 3), "p99_ms": round(1000 * xs[int(len(xs) * 0.99)], 3)})  # fmt: skip
            for row in rows:
                print(json.dumps(row), flush=True)
            for name in ("get_trial", "set_trial_user_attr"):
                by = {r["path"]: r for r in rows if r["call"] == name}
                print(json.dumps({"kind": "relay_cost", "call": name,
                                  "added_p50_ms": round(by["relayed"]["p50_ms"] - by["direct"]["p50_ms"], 3)}), flush=True)  # fmt: skip
            print(json.dumps({"kind": "load_after", "load": [round(x, 2) for x in os.getloadavg()]}), flush=True)
        finally:
            for proc, _ in daemons:
                proc.terminate()
                proc.wait(timeout=30)
    return 0


def _get_trial(trial_id: int) -> Any:
    from optuna.storages._grpc.auto_generated import api_pb2

    return api_pb2.GetTrialRequest(trial_id=trial_id)


if __name__ == "__main__":
    sys.exit(main())
