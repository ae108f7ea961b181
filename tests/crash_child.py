"""The child of the crash test: an Engine on a SQLite file serving 16 concurrent workers.

    python tests/crash_child.py DB_PATH [EXPERIMENT_ID]

Without an experiment id it creates one. It reports every acknowledged reply on
stdout, one JSON object per line, written with one os.write (atomic on a pipe)
right after the reply arrives:

    {"kind": "experiment", "id": ..., "bandwidth": ...}
    {"kind": "suggest", "id": ..., "tag": ..., "assignments": {...}}
    {"kind": "observe", "suggestion_id": ..., "id": ..., "value": ..., "assignments": {...}}
    {"kind": "close", "suggestion_id": ...}

Workers first take over the open suggestions a killed run left behind (observe
them), then loop ask -> observe (or, one time in six, close). They run until
the parent kills the process with SIGKILL.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio

from tauopt.engine import Engine
from tauopt.errors import ApiError

WORKERS = 16
BANDWIDTH = 8  # fewer slots than workers: asks meet bandwidth_full all the time
PARAMETERS = [
    {"name": "x", "type": "int", "bounds": [0, 299]},
    {"name": "c", "type": "categorical", "values": ["a", "b", "c", "d"]},
]  # 1,200 points: small enough that dedup is exercised


def report(**record: Any) -> None:
    os.write(1, (json.dumps(record, separators=(",", ":")) + "\n").encode())


def objective(assignments: dict[str, Any]) -> float:
    return float(assignments["x"]) + "abcd".index(assignments["c"]) / 10


async def main(path: str, experiment_id: str | None) -> None:
    async with Engine(store=path, pool=None) as engine:
        if experiment_id is None:
            exp = await engine.create_experiment("crash", PARAMETERS, {"name": "loss"}, parallel_bandwidth=BANDWIDTH, strategy="random")
            experiment_id = exp.id
        report(kind="experiment", id=experiment_id, bandwidth=BANDWIDTH)
        eid: str = experiment_id
        leftovers = await engine.suggestions(eid, state="open")

        async def finish(w: int, n: int, sid: str, assignments: dict[str, Any]) -> None:
            if n % 6 == 5:
                await engine.close_suggestion(eid, sid)
                report(kind="close", suggestion_id=sid)
            else:
                obs = await engine.observe(eid, sid, value=objective(assignments))
                report(kind="observe", suggestion_id=sid, id=obs.id, value=obs.value, assignments=obs.assignments)

        async def worker(w: int) -> None:
            for s in leftovers[w::WORKERS]:
                obs = await engine.observe(eid, s.id, value=objective(s.assignments))
                report(kind="observe", suggestion_id=s.id, id=obs.id, value=obs.value, assignments=obs.assignments)
            n = 0
            while True:
                try:
                    s = await engine.suggest(eid, tag=f"w{w}")
                except ApiError as exc:
                    if exc.error_type == "space_exhausted":
                        return
                    if exc.error_type != "bandwidth_full":
                        raise
                    await anyio.sleep(0.002)
                    continue
                report(kind="suggest", id=s.id, tag=s.tag, assignments=s.assignments)
                await anyio.sleep(0.001 * (w % 4))  # "evaluate"
                await finish(w, n, s.id, s.assignments)
                n += 1

        async with anyio.create_task_group() as tg:
            for w in range(WORKERS):
                tg.start_soon(worker, w)
        report(kind="exhausted")
        await anyio.sleep_forever()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
