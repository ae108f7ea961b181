"""The job-array examples' own checks: tags keyed by the scheduler's job, and
the failure branch (a daemon that repeats an assignment makes them exit 1
naming `repeated_assignment`)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from tauopt import Client
from test_http_support import ServerThread

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
import _workers  # noqa: E402  (the examples' shared module, stdlib only)

SCRIPTS = ["parallel_workers.py", "parallel_workers_rest.py"]


@pytest.mark.parametrize(
    "env, workers, tags",
    [
        ({"SLURM_ARRAY_JOB_ID": "900", "SLURM_ARRAY_TASK_ID": "3", "SLURM_JOB_ID": "903"}, 1, ["900-worker-3"]),
        ({"SLURM_ARRAY_JOB_ID": "900", "SLURM_ARRAY_TASK_ID": "3"}, 2, ["900-worker-3.0", "900-worker-3.1"]),
        ({"SLURM_JOB_ID": "77"}, 2, ["77-worker-0", "77-worker-1"]),
        ({"PBS_ARRAY_ID": "1234[].pbs01", "PBS_ARRAY_INDEX": "8", "PBS_JOBID": "1234[8].pbs01"}, 1, ["1234-worker-8"]),
        ({"PBS_JOBID": "555.pbs01"}, 1, ["555-worker-0"]),
        ({"LSB_JOBID": "31", "LSB_JOBINDEX": "4"}, 1, ["31-worker-4"]),
        ({"LSB_JOBID": "31", "LSB_JOBINDEX": "0"}, 1, ["31-worker-0"]),
    ],
)
def test_worker_tags_are_keyed_by_the_schedulers_job_and_rank(env: dict, workers: int, tags: list) -> None:
    assert _workers.worker_tags(workers, env) == tags


def test_outside_a_scheduler_each_run_gets_its_own_random_run_id() -> None:
    first, second = _workers.worker_tags(2, {}), _workers.worker_tags(2, {})
    assert first[0].startswith("run-") and first[0].endswith("-worker-0") and first[1].endswith("-worker-1")
    assert first[0].rsplit("-worker-", 1)[0] == first[1].rsplit("-worker-", 1)[0]
    assert first != second  # a resubmitted run never shares the previous run's tags
    assert _workers.worker_tags(1, {"SLURM_JOB_ID": "1"}, job_id="sweep") == ["sweep-worker-0"]


def test_violations_name_their_error_type() -> None:
    tally = _workers.Tally()
    tally.opened({"x": 1})
    tally.opened({"x": 2})
    assert _workers.violations(tally, bandwidth=2) == []
    broken = _workers.violations(tally, bandwidth=1)
    assert len(broken) == 1 and broken[0].startswith("bandwidth_exceeded: 2 suggestions open at once")
    tally.closing()
    tally.closing()
    tally.opened({"x": 1})
    broken = _workers.violations(tally, bandwidth=2)
    assert len(broken) == 1 and broken[0].startswith("repeated_assignment: 1 assignment(s)")


class RepeatingDaemon:
    """A broken server: every suggestion carries the same assignments (what the examples must catch)."""

    def __init__(self, experiment: dict[str, Any]) -> None:
        self.experiment = experiment
        self.ids = itertools.count()
        self.assignments = {"lr": 0.01, "layers": 2, "act": "relu", "x": 0.1, "n": 4}

    def answer(self, method: str, path: str) -> tuple[int, Any]:
        exp = self.experiment
        if method == "POST" and path == "/v1/experiments":
            return 201, exp
        if method == "GET" and path == f"/v1/experiments/{exp['id']}":
            return 200, exp
        if method == "POST" and path.endswith("/suggestions"):
            sid = f"s{next(self.ids)}"
            return 201, {"id": sid, "experiment_id": exp["id"], "assignments": self.assignments, "state": "open",
                         "tag": None, "created_at": 0.0}
        if method == "POST" and path.endswith("/observations"):
            return 201, {"id": f"o{next(self.ids)}", "experiment_id": exp["id"], "suggestion_id": None,
                         "assignments": self.assignments, "value": 1.0, "failed": False, "created_at": 0.0, "metrics": {}}
        return 404, {"error": {"type": "not_found", "message": path, "details": {}}}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                await send({"type": msg["type"] + ".complete"})
                if msg["type"] == "lifespan.shutdown":
                    return
        while (await receive()).get("more_body"):
            pass
        status, payload = self.answer(scope["method"], scope["path"])
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


@pytest.fixture(scope="module")
def repeating() -> Iterator[tuple[str, str]]:
    with Client(driver="local") as client:
        exp = client.create_experiment("broken", [{"name": "x", "type": "double", "bounds": (0, 1)}], {"name": "y"},
                                       parallel_bandwidth=2)
    with ServerThread(RepeatingDaemon(exp.to_dict())) as server:
        yield server.url, exp.id


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize("join", [False, True])
def test_examples_exit_1_naming_repeated_assignment(repeating: tuple[str, str], script: str, join: bool) -> None:
    url, exp_id = repeating
    args = ["--workers", "2", "--rounds", "2", "--deadline-s", "30"]
    if join:
        args += ["--experiment-id", exp_id]
    env = dict(os.environ, TAUOPT_BASE_URL=url, TAUOPT_TOKEN="t0k")
    p = subprocess.run([sys.executable, str(ROOT / "examples" / script), *args],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "repeated_assignment" in p.stderr
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["repeats"] == 1 and report["suggestions"] == 4

