"""A fresh daemon's first ask: `tauopt serve` on a new SQLite file (its defaults: a
process pool, warmed in the background), `/v1/health` answering, then --after seconds,
then one experiment (one parameter, `auto`) and its first ask, a Sobol point.
--runs daemons one after the other; prints one JSON line: each run's first ask in
ms and the load average.

    nice -n 10 .venv/bin/python benchmarks/first_ask.py --after 0,3 --runs 3
    PYTHONPATH=/path/to/other/checkout .venv/bin/python benchmarks/first_ask.py ...   # A/B another version
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

import httpx
from _bench_common import free_port, wait_health

SPACE = {"parameters": [{"name": "x", "type": "double", "bounds": [0, 1]}], "metric": {"name": "loss"}}


def first_ask_ms(after_s: float) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "tauopt.db"
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        # -P: tauopt from PYTHONPATH or the venv, not from the current directory (A/B runs)
        cmd = [sys.executable, "-P", "-m", "tauopt.cli", "serve", "--db", str(db), "--port", str(port)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_health(url, proc, timeout_s=120)
            time.sleep(after_s)
            headers = {"Authorization": "Bearer " + Path(f"{db}.token").read_text().strip()}
            with httpx.Client(base_url=url, headers=headers, timeout=120) as c:
                exp = c.post("/v1/experiments", json={"name": "a", **SPACE}).json()
                started = time.perf_counter()
                c.post(f"/v1/experiments/{exp['id']}/suggestions", json={}).raise_for_status()
                return (time.perf_counter() - started) * 1000
        finally:
            proc.terminate()
            proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--after", default="0,3", help="seconds between health and the ask, comma-separated")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    out: dict[str, object] = {}
    for after in (float(a) for a in args.after.split(",")):
        out[f"after_{after:g}s_first_ask_ms"] = [round(first_ask_ms(after), 1) for _ in range(args.runs)]
    out["load"] = round(os.getloadavg()[0], 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
