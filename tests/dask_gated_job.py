"""A pooled strategy for the Dask tests, imported by the Dask workers the tests start
(their PYTHONPATH holds tests/): each run marks `started-<pid>-<drawn>` in the gate
directory ($TAUOPT_TEST_GATE) and waits for the file `go`, so a test can kill the
worker running it mid-job; then it answers Sobol points as strategy "gated"."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tauopt.strategies import StrategyJob, StrategyOutcome, propose, request_rng

GATE_WAIT_S = 60.0  # bounded: a test that never opens the gate fails instead of hanging


def gated_run(job: StrategyJob) -> StrategyOutcome:
    gate = Path(os.environ["TAUOPT_TEST_GATE"])
    (gate / f"started-{os.getpid()}-{job.request.drawn}").write_text("")
    deadline = time.monotonic() + GATE_WAIT_S
    while not (gate / "go").exists():
        if time.monotonic() > deadline:
            raise RuntimeError("the test never opened the gate")
        time.sleep(0.02)
    cands = propose("sobol", job.request, request_rng(job.request))
    return StrategyOutcome(tuple(cands), "gated", None, 0.0)


def failing_run(job: StrategyJob) -> StrategyOutcome:
    raise ZeroDivisionError("model blew up")
