"""Slot hand-off over HTTP: how long after an observe frees the only slot does a
worker that wanted it get its suggestion? Two workers, parallel_bandwidth=1, a
real uvicorn server on 127.0.0.1 (memory store, no auth):

    wait    the worker asks with wait_s=30 (the engine parks it; the observe answers it)
    retry   the worker asks without wait_s: the client's own retry loop waits out
            429 bandwidth_full (Retry-After: 1) and asks again

    .venv/bin/python benchmarks/slot_handoff.py [--rounds 30]

Prints one JSON line per mode: hand-off latency (observe sent -> suggestion
received) median and p90 in ms.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import uvicorn

from tauopt import AsyncClient
from tauopt.store import MemoryStore
from tauopt.transport.http._server import create_app

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _progress import progress  # noqa: E402

X = [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}]


class _Server:
    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(create_app(db=MemoryStore(), auth=False), log_level="warning", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> "_Server":
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(15)


async def _mode(url: str, mode: str, rounds: int, rng: random.Random) -> dict[str, Any]:
    lat: list[float] = []
    async with AsyncClient(driver="http", base_url=url) as holder, AsyncClient(driver="http", base_url=url) as waiter:
        exp = await holder.create_experiment(f"handoff-{mode}", X, {"name": "y"}, parallel_bandwidth=1, strategy="random")
        held = await holder.suggest(exp.id)
        with progress(rounds, f"slot_handoff {mode}") as step:
            for _ in range(rounds):
                got: list[Any] = []

                async def want_the_slot() -> None:
                    s = await waiter.suggest(exp.id, wait_s=30 if mode == "wait" else None)
                    got.append((time.perf_counter(), s))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(want_the_slot)
                    await anyio.sleep(0.05 + rng.random() * 0.5)  # the holder's evaluation ends at a random moment
                    sent = time.perf_counter()
                    await holder.observe(exp.id, suggestion_id=held.id, value=1.0)
                at, held = got[0]
                lat.append(at - sent)
                step(mode)
    lat.sort()
    return {
        "mode": mode,
        "rounds": rounds,
        "handoff_ms_median": round(lat[len(lat) // 2] * 1e3, 2),
        "handoff_ms_p90": round(lat[min(len(lat) - 1, int(0.9 * len(lat)))] * 1e3, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    with _Server() as server:
        for mode in ("wait", "retry"):
            print(json.dumps(anyio.run(_mode, server.url, mode, args.rounds, random.Random(args.seed))), flush=True)


if __name__ == "__main__":
    main()
