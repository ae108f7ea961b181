"""Where an in-process ask + observe spends its Python: bytecodes per pair, by function,
for the engine (AsyncClient(driver="local"), memory store, random strategy) and for the
mailbox floor (the same request/reply with no engine), and the difference.

    .venv/bin/python benchmarks/engine_profile.py                 # 8 workers x 50 pairs
    .venv/bin/python benchmarks/engine_profile.py --workers 64 --pairs 10 --top 40
    .venv/bin/python benchmarks/engine_profile.py --workers 64 --pairs 200 --cpu 3   # CPU µs per pair instead

Bytecodes are counted with sys.settrace opcode events: the count is the same on a
quiet and on a loaded machine (wall and CPU time on a shared 2-core box move by 2x),
so a change to the hot path shows as a number that does not drift. It leaves out
what runs in C (numpy, hashing); `valgrind --tool=callgrind` counts that, slowly.
Prints one JSON line, then the table. With --cpu R: no tracing; the engine and the floor
run R times in turn and the JSON line gives each one's median CPU µs per pair (process
time, so other processes on the machine count less than in wall-clock figures).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import re
import statistics
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any, Iterator

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import FLOAT2, METRIC, objective  # noqa: E402
from _progress import progress  # noqa: E402

Counts = collections.Counter[str]


def _where(frame: FrameType) -> str:
    code = frame.f_code
    path = re.sub(r".*/lib/python3\.\d+/(site-packages/)?", "", code.co_filename)  # stdlib and packages: short
    if "/tauopt/" in path:
        path = "tauopt/" + path.split("/tauopt/")[-1]
    if path == "<string>":  # dataclass-generated __init__: name the class
        return f"{type(frame.f_locals.get('self')).__name__}.__init__ (dataclass)"
    return f"{path}:{code.co_name}"


@contextlib.contextmanager
def _measured(counts: Counts | None, cpu_s: list[float]) -> Iterator[None]:
    """Count the bytecodes run inside (counts given) or else time the CPU they take."""
    if counts is not None:
        sys.settrace(_tracer(counts))
    start = time.process_time()
    try:
        yield
    finally:
        sys.settrace(None)
        cpu_s.append(time.process_time() - start)


def _tracer(counts: Counts) -> Any:
    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        if event == "opcode":
            counts[_where(frame)] += 1
        return trace

    return trace


async def _engine(workers: int, pairs: int, counts: Counts | None, cpu_s: list[float]) -> None:
    from tauopt import AsyncClient

    async with AsyncClient(driver="local") as client:
        eid = (await client.create_experiment("p", FLOAT2, METRIC, parallel_bandwidth=workers, strategy="random")).id
        s = await client.suggest(eid)  # the actor is live before counting
        await client.observe(eid, s.id, value=1.0)

        async def worker(w: int) -> None:
            for _ in range(pairs):
                s = await client.suggest(eid, tag=f"w{w}")
                await client.observe(eid, s.id, value=objective(s.assignments))

        with _measured(counts, cpu_s):
            async with anyio.create_task_group() as tg:
                for w in range(workers):
                    tg.start_soon(worker, w)


async def _mailbox(workers: int, pairs: int, counts: Counts | None, cpu_s: list[float]) -> None:
    from tauopt.actors import ActorRef, Request, mailbox, reply, serve

    send, receive = mailbox(1024)
    ref = ActorRef(send)

    async def handle(request: Request[Any]) -> None:
        reply(request, request.message)

    async def worker() -> None:
        for i in range(pairs):
            await ref.ask(i)
            await ref.ask(None)

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve, receive, handle)
        with _measured(counts, cpu_s):
            async with anyio.create_task_group() as inner:
                for _ in range(workers):
                    inner.start_soon(worker)
        send.close()


def _optuna(pairs: int, counts: Counts) -> None:
    """Optuna's ask/tell on the same two floats, in memory, random sampling, one thread."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    study.tell(study.ask(), 1.0)  # the same warm start as the engine's
    sys.settrace(_tracer(counts))
    try:
        for _ in range(pairs):
            trial = study.ask()
            a = {"x": trial.suggest_float("x", 0.0, 1.0), "y": trial.suggest_float("y", 0.0, 1.0)}
            study.tell(trial, objective(a))
    finally:
        sys.settrace(None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--pairs", type=int, default=50, help="ask + observe pairs per worker")
    parser.add_argument("--top", type=int, default=30, help="rows of the table (largest differences)")
    parser.add_argument("--optuna", action="store_true", help="also count Optuna's ask/tell (1 thread, same space)")
    parser.add_argument("--cpu", type=int, default=0, metavar="R", help="time CPU per pair instead, R runs of each in turn")
    args = parser.parse_args(argv)
    n = args.workers * args.pairs
    if args.cpu:
        return _cpu(args.workers, args.pairs, args.cpu)
    engine: Counts = collections.Counter()
    floor: Counts = collections.Counter()
    with progress(2, "engine_profile") as step:  # a step per traced run, never inside one
        anyio.run(_engine, args.workers, args.pairs, engine, [])
        step("engine")
        anyio.run(_mailbox, args.workers, args.pairs, floor, [])
        step("mailbox floor")
    e, f = sum(engine.values()) / n, sum(floor.values()) / n
    head: dict[str, Any] = {
        "benchmark": "engine_profile", "workers": args.workers, "pairs": n,
        "engine_bytecodes_per_pair": round(e), "floor_bytecodes_per_pair": round(f), "floor_over_engine": round(f / e, 3),
    }  # fmt: skip
    if args.optuna:
        theirs: Counts = collections.Counter()
        _optuna(n, theirs)
        head["optuna_bytecodes_per_pair"] = round(sum(theirs.values()) / n)
    print(json.dumps(head))
    print(f"\n| function | engine | floor | engine - floor |  (bytecodes per pair; {args.workers} workers)\n|---|---:|---:|---:|")
    diff = sorted(set(engine) | set(floor), key=lambda k: floor[k] - engine[k])
    for k in diff[: args.top]:
        print(f"| {k} | {engine[k] / n:.0f} | {floor[k] / n:.0f} | {(engine[k] - floor[k]) / n:+.0f} |")
    print(f"| **total** | {e:.0f} | {f:.0f} | {e - f:+.0f} |")
    return 0


def _cpu(workers: int, pairs: int, rounds: int) -> int:
    """CPU µs per pair of the engine and of the floor, untraced, alternated `rounds` times."""
    engine_s: list[float] = []
    floor_s: list[float] = []
    with progress(2 * rounds, "engine_profile --cpu") as step:
        for _ in range(rounds):
            anyio.run(_engine, workers, pairs, None, engine_s)
            step("engine")
            anyio.run(_mailbox, workers, pairs, None, floor_s)
            step("mailbox floor")
    e, f = (sorted(round(t / (workers * pairs) * 1e6, 1) for t in ts) for ts in (engine_s, floor_s))
    print(json.dumps({
        "benchmark": "engine_profile_cpu", "workers": workers, "pairs": workers * pairs, "rounds": rounds,
        "engine_cpu_us_per_pair": statistics.median(e), "floor_cpu_us_per_pair": statistics.median(f),
        "floor_over_engine": round(statistics.median(f) / statistics.median(e), 3), "engine_runs": e, "floor_runs": f,
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
