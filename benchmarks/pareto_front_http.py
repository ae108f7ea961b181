"""What `GET .../pareto_front` costs over HTTP when the whole history is on the front.

A real `tauopt serve` over a SQLite file built directly: N two-objective observations,
each better in one objective and worse in the other (all on the front). Times, from a
client on the same machine: `cold_s` the first page (the experiment loaded, the front
computed, the page encoded), `warm_ms` the same page again (median of 10: the kept
bytes), `pages_ms` each page of the front asked once more, `client_s` the whole front
through `Client.pareto_front` (following the pages); and the same for the pages of
`observations/columns` (`columns`). Prints JSON.

    python benchmarks/pareto_front_http.py --observations 100000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_common import free_port, wait_health  # noqa: E402
from tauopt import Client  # noqa: E402
from tauopt.engine._auth import new_credential
from tauopt.models import Experiment, Observation, Parameter
from tauopt.store import PutExperiment, PutObservation
from tauopt.store._sqlite import SqliteStore
from tauopt.schema import parse_metrics, parse_parameter


async def _seed(db: Path, n: int) -> str:
    async with SqliteStore(db) as store:
        cred, token = new_credential("bench", suggestions_per_day=1_000_000, max_active_experiments=10)
        await store.put_credential(cred)
        metrics = parse_metrics(metrics=[{"name": "acc", "objective": "maximize"}, {"name": "lat", "objective": "minimize"}])
        params = (parse_parameter({"name": "x", "type": "double", "bounds": [0, 1]}),)
        exp = Experiment("front", "front", params, metrics[0], metrics=metrics, strategy="random", state="active",
                         created_at=1.0, owner=cred.id, observations=n)  # fmt: skip
        await store.write([PutExperiment(exp, 0)])
        for start in range(0, n, 5000):
            await store.write(
                [PutObservation(Observation(str(i + 1), "front", None, {"x": i / n}, i / n, False, 2.0 + i, {"lat": i / n}))
                 for i in range(start, min(n, start + 5000))]
            )  # fmt: skip
    return token


def _pages_again(http: httpx.Client, url: str | None) -> list[float]:
    """Each page from `url` on, read once, then timed when asked again (its bytes kept)."""
    times = []
    while url:
        got = http.get(url)
        t = time.perf_counter()
        http.get(url)
        times.append(time.perf_counter() - t)
        url = got.links.get("next", {}).get("url")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--observations", type=int, default=100_000)
    n = parser.parse_args().observations
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "tauopt.db"
        token = anyio.run(_seed, db, n)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "tauopt.cli", "serve", "--db", str(db), "--port", str(port), "--log-level", "warning",
             "--heavy-read-burst", "10000", "--heavy-read-rate", "10000"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            wait_health(url, proc, timeout_s=30)
            path, path_columns = "/v1/experiments/front/pareto_front", "/v1/experiments/front/observations/columns"
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=300) as http:
                t = time.perf_counter()
                first = http.get(path)
                cold = time.perf_counter() - t
                warm = []
                for _ in range(10):
                    t = time.perf_counter()
                    http.get(path)
                    warm.append(time.perf_counter() - t)
                pages = _pages_again(http, first.links.get("next", {}).get("url"))
                t = time.perf_counter()
                columns = http.get(path_columns)
                columns_cold = time.perf_counter() - t
                columns_pages = _pages_again(http, path_columns)
            with Client(driver="http", base_url=url, token=token) as c:
                t = time.perf_counter()
                size = len(c.pareto_front("front"))
                whole = time.perf_counter() - t
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(json.dumps({
        "observations": n, "front": size, "load": round(os.getloadavg()[0], 1), "page_rows": len(first.json()),
        "page_bytes": len(first.content), "cold_s": round(cold, 3), "warm_ms": round(statistics.median(warm) * 1000, 1),
        "pages_ms": [round(p * 1000, 1) for p in pages], "client_s": round(whole, 3),
        "columns": {"page_bytes": len(columns.content), "first_cold_s": round(columns_cold, 3),
                    "pages_again_ms": [round(p * 1000, 1) for p in columns_pages]},
    }))  # fmt: skip


if __name__ == "__main__":
    main()
