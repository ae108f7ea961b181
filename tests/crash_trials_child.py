"""The child of the trial crash test: an Engine on a SQLite file, 8 concurrent Optuna-like workers.

    python tests/crash_trials_child.py DB_PATH [STUDY_ID]

Without a study id it creates a study. Each worker loops: a new RUNNING trial, two
parameters, a system attribute, then COMPLETE with a value, reporting every
acknowledged call on stdout (one JSON object per line, one os.write each):

    {"kind": "study", "id": ...}
    {"kind": "new", "trial": ...}
    {"kind": "param", "trial": ..., "name": ..., "value": ...}
    {"kind": "attr", "trial": ..., "key": ..., "value": ...}
    {"kind": "end", "trial": ..., "value": ...}

It runs until the parent kills the process with SIGKILL.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio

from tauopt.engine import Engine, NewTrial, SetParam, SetState, SetTrialAttr

WORKERS = 8
FLOAT = json.dumps({"name": "FloatDistribution", "attributes": {"low": 0.0, "high": 1.0, "log": False, "step": None}})


def report(**record: Any) -> None:
    os.write(1, (json.dumps(record, separators=(",", ":")) + "\n").encode())


async def main(path: str, study_id: int | None) -> None:
    async with Engine(store=path, pool=None) as engine:
        if study_id is None:
            study_id = await engine.create_study("crash-trials", ["MINIMIZE"])
        report(kind="study", id=study_id)
        study: int = study_id

        async def worker(w: int) -> None:
            n = 0
            while True:
                trial = await engine.study_call(study, NewTrial())
                report(kind="new", trial=trial)
                for name in ("x", "y"):
                    value = ((w * 7919 + n * 104729 + len(name)) % 1000) / 1000
                    await engine.trial_call(trial, SetParam(trial, name, value, FLOAT))
                    report(kind="param", trial=trial, name=name, value=value)
                attr = json.dumps(f"w{w}-{n}")
                await engine.trial_call(trial, SetTrialAttr(trial, True, "worker", attr))
                report(kind="attr", trial=trial, key="worker", value=attr)
                await engine.trial_call(trial, SetState(trial, "COMPLETE", (float(n),)))
                report(kind="end", trial=trial, value=float(n))
                n += 1

        async with anyio.create_task_group() as tg:
            for w in range(WORKERS):
                tg.start_soon(worker, w)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else None)
