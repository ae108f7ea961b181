"""Client CPU per ask+observe: W async workers sharing one HTTP client against
the engine-less floor server (`_bench_floor.py http`), so the figure is the
client's own cost (request building, framing, pooling, JSON).

    .venv/bin/python benchmarks/client_cpu.py                  # tauopt's AsyncClient(driver="http")
    .venv/bin/python benchmarks/client_cpu.py --client httpx   # a plain httpx.AsyncClient, for reference
    PYTHONPATH=/path/to/other/checkout .venv/bin/python benchmarks/client_cpu.py   # A/B another version

Prints one JSON line: CPU ms per pair (process time of the client process,
which runs nothing else), pairs, wall seconds.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_floor import FloorServer  # noqa: E402
from _progress import progress  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _pairs_tauopt(url: str, workers: int, pairs: int) -> float:
    from tauopt import AsyncClient

    async with AsyncClient(driver="http", base_url=url, token="t") as client:
        async def loop(n: int) -> None:
            for _ in range(n):
                s = await client.suggest("e")
                await client.observe("e", s.id, value=0.5)

        await loop(workers)  # warm: one connection at least
        with progress(workers, "client_cpu") as step:  # a step per worker done: no cost inside the loops

            async def worker(n: int) -> None:
                await loop(n)
                step("tauopt")

            start = time.process_time()
            async with anyio.create_task_group() as tg:
                for _ in range(workers):
                    tg.start_soon(worker, pairs // workers)
            return time.process_time() - start


async def _pairs_httpx(url: str, workers: int, pairs: int) -> float:
    import httpx

    async with httpx.AsyncClient(base_url=url, headers={"Authorization": "Bearer t"}) as client:
        async def loop(n: int) -> None:
            for _ in range(n):
                s = (await client.post("/v1/experiments/e/suggestions", json={"tag": None})).json()
                (await client.post("/v1/experiments/e/observations", json={"suggestion_id": s["id"], "value": 0.5})).json()

        await loop(workers)
        start = time.process_time()
        async with anyio.create_task_group() as tg:
            for _ in range(workers):
                tg.start_soon(loop, pairs // workers)
        return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", choices=["tauopt", "httpx"], default="tauopt")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--pairs", type=int, default=3200)
    args = parser.parse_args()
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp, FloorServer("http", port, Path(tmp) / "floor.log"):
        url = f"http://127.0.0.1:{port}"
        run: Any = _pairs_tauopt if args.client == "tauopt" else _pairs_httpx
        wall = time.perf_counter()
        cpu = anyio.run(run, url, args.workers, args.pairs)
        wall = time.perf_counter() - wall
    pairs = args.pairs // args.workers * args.workers
    print(json.dumps({
        "client": args.client, "workers": args.workers, "pairs": pairs,
        "cpu_ms_per_pair": round(cpu / pairs * 1000, 3), "wall_s": round(wall, 2),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
