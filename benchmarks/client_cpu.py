"""Client CPU per ask+observe: W async workers sharing one HTTP client against
the engine-less floor server (`_bench_floor.py http`), so the figure is the
client's own cost (request building, framing, pooling, JSON).

    .venv/bin/python benchmarks/client_cpu.py                  # tauopt's AsyncClient(driver="http")
    .venv/bin/python benchmarks/client_cpu.py --client httpx   # a plain httpx.AsyncClient, for reference
    PYTHONPATH=/path/to/other/checkout .venv/bin/python benchmarks/client_cpu.py   # A/B another version
    .venv/bin/python benchmarks/client_cpu.py --sample-profile   # ... and where the client's CPU goes

Prints one JSON line: CPU ms per pair (process time of the client process,
which runs nothing else), pairs, wall seconds. With --sample-profile, a second
line: the share of CPU samples (SIGPROF every 0.3 ms of process time, the
interrupted Python frame) by the package of the running function and by
function. Unlike cProfile, which adds a cost to every call and so inflates
code made of many small calls (h11's), sampling leaves the run's figures
about as they are; a C call's time goes to the Python function that called it.

Instructions per pair, which the load of a shared box does not move: run it
under `valgrind --tool=cachegrind --cache-sim=no` with --pairs 320 and 1920
and divide the difference of the two `I refs` by 1600.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import free_port  # noqa: E402
from _bench_floor import FloorServer  # noqa: E402
from _progress import progress  # noqa: E402


class _Sampler:
    """SIGPROF samples of the running Python frame: shares by package and by function."""

    PACKAGES = ("h11", "httpx", "anyio", "sniffio", "asyncio", "selectors", "json", "tauopt")

    def __init__(self) -> None:
        self.by_package: collections.Counter[str] = collections.Counter()
        self.by_function: collections.Counter[str] = collections.Counter()

    def __enter__(self) -> "_Sampler":
        signal.signal(signal.SIGPROF, self._sample)
        signal.setitimer(signal.ITIMER_PROF, 0.0003, 0.0003)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)

    def _sample(self, signum: int, frame: Any) -> None:
        if frame is None:
            return
        path = frame.f_code.co_filename
        package = next((p for p in self.PACKAGES if f"/{p}/" in path or path.endswith(f"/{p}.py")), "other")
        if package == "tauopt":
            package = "tauopt/" + path.rsplit("/tauopt/", 1)[-1]
        self.by_package[package] += 1
        self.by_function["/".join(path.split("/")[-2:]) + ":" + frame.f_code.co_name] += 1

    def report(self) -> dict[str, Any]:
        n = sum(self.by_package.values()) or 1
        share = lambda c: {k: round(100 * v / n, 1) for k, v in c.most_common(25)}  # noqa: E731
        return {"samples": n, "percent_by_package": share(self.by_package), "percent_by_function": share(self.by_function)}


async def _pairs_tauopt(url: str, workers: int, pairs: int, sampler: _Sampler | None = None) -> float:
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
            with sampler or contextlib.nullcontext():
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
    parser.add_argument("--sample-profile", action="store_true", help="also print where the tauopt client's CPU goes")
    args = parser.parse_args()
    sampler = _Sampler() if args.sample_profile and args.client == "tauopt" else None
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp, FloorServer("http", port, Path(tmp) / "floor.log"):
        url = f"http://127.0.0.1:{port}"
        wall = time.perf_counter()
        if args.client == "tauopt":
            cpu = anyio.run(_pairs_tauopt, url, args.workers, args.pairs, sampler)
        else:
            cpu = anyio.run(_pairs_httpx, url, args.workers, args.pairs)
        wall = time.perf_counter() - wall
    pairs = args.pairs // args.workers * args.workers
    print(json.dumps({
        "client": args.client, "workers": args.workers, "pairs": pairs,
        "cpu_ms_per_pair": round(cpu / pairs * 1000, 3), "wall_s": round(wall, 2),
    }))  # fmt: skip
    if sampler is not None:
        print(json.dumps({"client": args.client, "profile": sampler.report()}))


if __name__ == "__main__":
    main()
