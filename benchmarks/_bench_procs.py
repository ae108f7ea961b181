"""Client processes that start together: load from several processes, so a
server's CPU is not also spent on its own clients' event loop.

Each child runs `main(spec, ready)` (an async function, module level so it
pickles under spawn): it connects and warms up, then `start_at = await ready()`
blocks until every child is ready and returns the common start time, then it
runs its workers and returns `Recorder.to_dict()`.
"""

from __future__ import annotations

import multiprocessing
import queue
import time
import traceback
from typing import Any, Awaitable, Callable

import anyio

ClientMain = Callable[[Any, Callable[[], Awaitable[float]]], Awaitable[dict[str, Any]]]


def _child(main: ClientMain, spec: Any, results: Any, go: Any, start: Any, index: int) -> None:
    async def ready() -> float:
        results.put(("ready", index, None))
        await anyio.to_thread.run_sync(go.wait)
        return float(start.value)

    try:
        out = anyio.run(main, spec, ready)
        results.put(("done", index, out))
    except BaseException as exc:  # reported to the parent, which raises
        results.put(("error", index, f"{exc!r}\n{traceback.format_exc()}"))


def run_client_processes(main: ClientMain, specs: list[Any], timeout_s: float = 120.0) -> list[dict[str, Any]]:
    """Start one process per spec, release them together, return their results."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    go = ctx.Event()
    start = ctx.Value("d", 0.0)
    procs = [ctx.Process(target=_child, args=(main, spec, results, go, start, i), daemon=True) for i, spec in enumerate(specs)]
    for p in procs:
        p.start()
    out: dict[int, dict[str, Any]] = {}
    try:
        deadline = time.time() + timeout_s
        ready = 0
        while ready < len(procs):
            kind, i, payload = results.get(timeout=max(0.1, deadline - time.time()))
            if kind == "error":
                raise RuntimeError(f"client process {i} failed: {payload}")
            ready += kind == "ready"
        start.value = time.time() + 0.2
        go.set()
        while len(out) < len(procs):
            kind, i, payload = results.get(timeout=max(0.1, deadline - time.time()))
            if kind == "error":
                raise RuntimeError(f"client process {i} failed: {payload}")
            if kind == "done":
                out[i] = payload
    except queue.Empty:
        raise TimeoutError(f"client processes did not finish within {timeout_s} s") from None
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()
    return [out[i] for i in range(len(procs))]
