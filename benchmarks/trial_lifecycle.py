"""The engine's trial lifecycle without a wire: CPU per trial of both trial-based doors' engine calls.

    nice -n 10 .venv/bin/python benchmarks/trial_lifecycle.py                # 2,000 trials per door, SQLite
    nice -n 10 .venv/bin/python benchmarks/trial_lifecycle.py --trials 200   # quick

In one process, on a SQLite store (durable, as the doors run), no gRPC:
- optuna: what one Optuna worker's trial costs the engine through the Optuna door's
  calls: the incremental read of the trials (ReadTrials above the last id seen),
  a new RUNNING trial, three parameters, the end (COMPLETE with its value);
- kerastuner: the KerasTuner door's trial queue: a claim (a random-strategy
  suggestion), a report of the score, the end (COMPLETED).
The doors' wire costs are benchmarks/optuna_door.py's and kerastuner_profile.py's;
this isolates the engine's share, which a change of the lifecycle moves. Compare two
trees by running this file from each (PYTHONPATH=tree) in turn, e.g. under
farm-bench --vs. Output: one JSON line per door: trials, cpu_us_per_trial (process
CPU over the loop / trials), wall_s.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import anyio

from tauopt.engine import Engine, NewTrial, ReadTrials, SetParam, SetState, TrialPolicy, TrialQueue
from tauopt.schema import parse_parameter

FLOAT = json.dumps({"name": "FloatDistribution", "attributes": {"low": 0.0, "high": 1.0, "log": False, "step": None}})


async def optuna_trials(db: Path, n: int) -> dict[str, object]:
    async with Engine(store=str(db), pool=None) as engine:
        study = await engine.create_study("lifecycle", ["MINIMIZE"])
        last = -1
        cpu, wall = time.process_time(), time.perf_counter()
        for i in range(n):
            await engine.study_call(study, ReadTrials(last))
            trial = await engine.study_call(study, NewTrial())
            for name in ("x", "y", "z"):
                await engine.trial_call(trial, SetParam(trial, name, 0.5, FLOAT))
            await engine.trial_call(trial, SetState(trial, "COMPLETE", (float(i),)))
            last = trial
        return _row("optuna", n, cpu, wall)


async def kerastuner_trials(db: Path, n: int) -> dict[str, object]:
    space = tuple(parse_parameter({"name": name, "type": "double", "bounds": [0.0, 1.0]}) for name in ("x", "y", "z"))
    policy = TrialPolicy("lifecycle", (("score", "min"),), "score", False, max_trials=n, strategy="random", space=space)
    async with Engine(store=str(db), pool=None) as engine:
        queue = TrialQueue(engine, policy)
        await queue.start()
        cpu, wall = time.process_time(), time.perf_counter()
        for i in range(n):
            trial = await queue.claim("w", 1.0)
            assert trial is not None and not isinstance(trial, str), trial
            await queue.report(trial.trial_id, {"score": float(i)}, 0)
            await queue.end(trial.trial_id, "COMPLETED", {}, None)
        return _row("kerastuner", n, cpu, wall)


def _row(door: str, n: int, cpu: float, wall: float) -> dict[str, object]:
    cpu_s, wall_s = time.process_time() - cpu, time.perf_counter() - wall
    return {"kind": "trial_lifecycle", "door": door, "trials": n, "cpu_us_per_trial": round(cpu_s / n * 1e6, 1), "wall_s": round(wall_s, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000, help="trials per door")
    parser.add_argument("--doors", default="optuna,kerastuner")
    args = parser.parse_args()
    runs = {"optuna": optuna_trials, "kerastuner": kerastuner_trials}
    with tempfile.TemporaryDirectory() as tmp:
        for door in args.doors.split(","):
            row = anyio.run(runs[door], Path(tmp) / f"{door}.db", args.trials, backend="asyncio")
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
