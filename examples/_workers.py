"""What both parallel-worker examples share (stdlib only, so the REST example
still imports no tauopt): worker tags keyed by the batch job, and the checks
a run must pass.

Tags are `{job_id}-worker-{rank}`. The job id comes from the scheduler, so a
resubmitted array never finds the previous run's rows under its own tag:

    Slurm  SLURM_ARRAY_JOB_ID + SLURM_ARRAY_TASK_ID, else SLURM_JOB_ID
    PBS    PBS_ARRAY_ID + PBS_ARRAY_INDEX, else PBS_JOBID
    LSF    LSB_JOBID + LSB_JOBINDEX (0 outside an array)
    none   a random run id, `run-<8 hex>`

The rank is the array index (with `.<thread>` when a task runs several
threads), else the thread number.
"""

from __future__ import annotations

import secrets
import threading
from collections import Counter
from typing import Mapping

# (job id variable, array job id variable, array index variable), most specific first
_SCHEDULERS = (
    ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID"),
    ("PBS_JOBID", "PBS_ARRAY_ID", "PBS_ARRAY_INDEX"),
    ("LSB_JOBID", "LSB_JOBID", "LSB_JOBINDEX"),
)


def job_and_index(env: Mapping[str, str]) -> tuple[str, str | None]:
    """(job id, array index or None) from the scheduler's variables; a random run id outside any."""
    for job_var, array_var, index_var in _SCHEDULERS:
        index = env.get(index_var) or None
        if index == "0" and index_var == "LSB_JOBINDEX":  # LSF sets 0 outside an array
            index = None
        if index is not None and env.get(array_var):
            return _clean(env[array_var]), index
        if env.get(job_var):
            return _clean(env[job_var]), None
    return f"run-{secrets.token_hex(4)}", None


def _clean(job_id: str) -> str:
    # PBS ids look like "1234[].server" or "1234.server": keep the number part
    return job_id.split(".")[0].replace("[]", "") or job_id


def worker_tags(workers: int, env: Mapping[str, str], job_id: str | None = None) -> list[str]:
    """One tag per worker thread: `{job_id}-worker-{rank}`."""
    job, index = job_and_index(env)
    job = job_id or job
    if index is None:
        ranks = [str(r) for r in range(workers)]
    elif workers == 1:
        ranks = [index]
    else:
        ranks = [f"{index}.{r}" for r in range(workers)]
    return [f"{job}-worker-{rank}" for rank in ranks]


class Tally:
    """Every assignment seen (as a sorted tuple) and how many were open at once, under one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: Counter[tuple] = Counter()
        self.open_now = 0
        self.max_open = 0
        self.observed = 0

    def opened(self, assignments: Mapping[str, object]) -> None:
        with self.lock:
            self.seen[tuple(sorted(assignments.items()))] += 1
            self.open_now += 1
            self.max_open = max(self.max_open, self.open_now)

    def closing(self) -> None:
        # Before the observe leaves: the server can reuse the slot once it has the observation.
        with self.lock:
            self.open_now -= 1

    def observed_one(self) -> None:
        with self.lock:
            self.observed += 1

    def repeats(self) -> dict[tuple, int]:
        return {k: n for k, n in self.seen.items() if n > 1}


def violations(tally: Tally, bandwidth: int) -> list[str]:
    """What broke the contract, each line starting with its error type (empty: none)."""
    found = []
    repeats = tally.repeats()
    if repeats:
        first = next(iter(repeats))
        found.append(f"repeated_assignment: {len(repeats)} assignment(s) suggested more than once, e.g. {first}")
    if tally.max_open > bandwidth:
        found.append(f"bandwidth_exceeded: {tally.max_open} suggestions open at once > parallel_bandwidth={bandwidth}")
    return found
