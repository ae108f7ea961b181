"""Interop with real, unmodified KerasTuner workers (keras-tuner 1.4.8, KERAS_BACKEND=torch).

The chief runs as `python -m tauopt.cli kerastuner chief` and the workers as
`tests/kerastuner_workers/worker.py`, each its own process: keras-tuner is
never imported here (its `keras_tuner.*` protos would clash with ours). The
workers are forked from one process per test worker that imported keras,
torch and keras_tuner once (`kerastuner_workers/zygote.py`): their imports
cost each worker seconds of CPU otherwise.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import anyio
import pytest

pytestmark = pytest.mark.slow

WORKER = Path(__file__).parent / "kerastuner_workers" / "worker.py"
ZYGOTE = Path(__file__).parent / "kerastuner_workers" / "zygote.py"
pytest.importorskip("grpc")
if __import__("importlib").util.find_spec("keras_tuner") is None:
    pytest.skip("keras-tuner is not installed", allow_module_level=True)


class Forked:
    """A worker forked by the zygote: the part of `subprocess.Popen` these tests use (its output
    is a file; the zygote, its parent, writes its exit status beside it when it ends)."""

    stdout = None

    def __init__(self, pid: int, out: Path) -> None:
        self.pid, self.out, self.returncode = pid, out, None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                self.returncode = int(Path(f"{self.out}.exit").read_text())
            except FileNotFoundError:
                pass
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0)
            time.sleep(0.05)
        assert self.returncode is not None
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, None]:
        self.wait(timeout)
        return self.out.read_text(errors="replace"), None

    def kill(self) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


Proc = subprocess.Popen[str] | Forked
_STARTED: list[Proc] = []

_ZYGOTE: list[subprocess.Popen[str]] = []


@pytest.fixture(scope="session", autouse=True)
def _zygote_ends_with_the_session() -> Iterator[None]:
    yield
    for zygote in _ZYGOTE:
        zygote.stdin.close()  # type: ignore[union-attr]  # it kills what it still runs, and exits
        zygote.wait(30)
        zygote.stdout.close()  # type: ignore[union-attr]


def fork_worker(script: Path, args: list[str], env: dict[str, str], out: Path, home: Path) -> Forked:
    """`python SCRIPT ARGS` with `env`, forked from this test worker's zygote (started at the first call)."""
    if not _ZYGOTE:
        _ZYGOTE.append(subprocess.Popen([sys.executable, str(ZYGOTE), str(home)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    zygote = _ZYGOTE[0]
    zygote.stdin.write(json.dumps({"script": str(script), "argv": args, "env": env, "out": str(out)}) + "\n")  # type: ignore[union-attr]
    zygote.stdin.flush()  # type: ignore[union-attr]
    line = zygote.stdout.readline()  # type: ignore[union-attr]
    assert line, f"the zygote exited ({zygote.wait()})"
    return Forked(json.loads(line)["pid"], out)


@pytest.fixture(autouse=True)
def _no_process_outlives_its_test() -> Iterator[None]:
    """A test that fails midway leaves no chief or worker running (they would keep a
    test worker's CPU and, under pytest-xdist, slow every file after it)."""
    yield
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Chief:
    proc: subprocess.Popen[str]
    port: int
    db: Path
    ready: dict[str, Any]
    stderr: Path

    def wait(self, timeout: float) -> tuple[int, dict[str, Any]]:
        out, _ = self.proc.communicate(timeout=timeout)
        lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        exits = [x for x in lines if x.get("event") == "exit"]
        return self.proc.returncode, (exits[-1] if exits else {})

    def log(self) -> str:
        return self.stderr.read_text()


def start_chief(tmp_path: Path, *args: str, max_trials: int, objective: str = "score", objectives: tuple[str, ...] = ()) -> Chief:
    db = tmp_path / "chief.db"
    for _ in range(3):  # a free port can be taken between probe and bind
        port = free_port()
        env = {**os.environ, "KERASTUNER_ORACLE_IP": "127.0.0.1", "KERASTUNER_ORACLE_PORT": str(port), "KERASTUNER_TUNER_ID": "chief"}
        stderr = tmp_path / "chief.err"
        with stderr.open("w") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tauopt.cli", "kerastuner", "chief",
                 *([x for o in objectives for x in ("--objective", o)] or ["--objective", objective, "--direction", "min"]),
                 "--max-trials", str(max_trials), "--db", str(db), "--seed", "7", *args],
                env=env, stdout=subprocess.PIPE, stderr=err, text=True,
            )
        _STARTED.append(proc)
        line = proc.stdout.readline()  # type: ignore[union-attr]
        if line:
            return Chief(proc, port, db, json.loads(line), stderr)
        proc.wait(10)
    raise AssertionError(f"the chief did not start: {stderr.read_text()}")


def worker_env(chief: Chief, tmp_path: Path, tuner_id: str, **extra_env: str) -> dict[str, str]:
    return {
        **os.environ,
        **extra_env,
        "KERAS_BACKEND": "torch",
        "KERASTUNER_ORACLE_IP": "127.0.0.1",
        "KERASTUNER_ORACLE_PORT": str(chief.port),
        "KERASTUNER_TUNER_ID": tuner_id,
        "KERAS_HOME": str(tmp_path / "keras-home"),
        "OMP_NUM_THREADS": "1",
    }


def start_script(script: Path, args: list[str], env: dict[str, str], tmp_path: Path, tuner_id: str) -> Proc:
    proc = fork_worker(script, args, env, tmp_path / f"{tuner_id}.out", tmp_path.parent / "keras-home")
    _STARTED.append(proc)
    return proc


def start_worker(chief: Chief, tmp_path: Path, tuner_id: str, mode: str = "normal", **extra_env: str) -> tuple[Proc, Path]:
    results = tmp_path / f"{tuner_id}.jsonl"
    env = worker_env(chief, tmp_path, tuner_id, **extra_env)
    return start_script(WORKER, [str(results), mode], env, tmp_path, tuner_id), results


def finish(proc: Proc, timeout: float = 90) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        raise AssertionError(f"worker still running after {timeout} s:\n{out[-3000:]}") from None
    return proc.returncode, out


def start_together(chief: Chief, tmp_path: Path, tuner_ids: list[str], mode: str = "normal", trial_s: str = "0") -> list[tuple[Proc, Path]]:
    """Workers whose searches begin at the same moment (keras imports take seconds)."""
    go = tmp_path / "go"
    workers = [start_worker(chief, tmp_path, t, mode, WORKER_GO_FILE=str(go), WORKER_TRIAL_S=trial_s) for t in tuner_ids]
    deadline = time.monotonic() + 90
    while not all(Path(str(r) + ".ready").exists() for _, r in workers):
        assert time.monotonic() < deadline, "workers did not start"
        assert all(p.poll() is None for p, _ in workers), [finish(p)[1][-2000:] for p, _ in workers if p.poll() is not None]
        time.sleep(0.1)
    go.touch()
    return workers


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def stored(db: Path) -> tuple[Any, list[Any], list[Any]]:
    """The experiment, its observations and suggestions as the chief left them in SQLite."""
    from tauopt.engine import Engine

    async def read() -> tuple[Any, list[Any], list[Any]]:
        async with Engine(store=str(db), pool=None) as engine:
            (exp,) = await engine.experiments()
            return exp, await engine.observations(exp.id), await engine.suggestions(exp.id)

    return anyio.run(read)


def assert_in_space(values: dict[str, Any]) -> None:
    assert set(values) >= {"units", "lr", "optimizer", "batchnorm", "epochs"}
    assert isinstance(values["units"], int) and 4 <= values["units"] <= 64 and values["units"] % 4 == 0
    assert isinstance(values["lr"], float) and 1e-4 <= values["lr"] <= 1e-1
    assert values["optimizer"] in ("adam", "sgd")
    assert isinstance(values["batchnorm"], bool)
    assert values["epochs"] == 1
    if values["optimizer"] == "sgd":  # the conditional child is active exactly when its parent says so
        m = values["momentum"]
        assert isinstance(m, float) and 0.0 <= m <= 0.9 + 1e-9 and abs(m * 10 - round(m * 10)) < 1e-6
    else:
        assert "momentum" not in values


def test_two_real_workers_run_ten_trials_to_stopped_and_the_chief_exits(tmp_path: Path) -> None:
    chief = start_chief(tmp_path, "--workers", "2", max_trials=10)
    workers = start_together(chief, tmp_path, ["tuner0", "tuner1"], trial_s="0.2")
    started = time.monotonic()
    codes = [finish(p) for p, _ in workers]
    workers_done = time.monotonic()
    assert [c for c, _ in codes] == [0, 0], [out[-2000:] for _, out in codes]
    code, summary = chief.wait(timeout=30)
    chief_lag = time.monotonic() - workers_done
    assert code == 0, chief.log()

    runs = [records(r) for _, r in workers]
    ids = [{r["trial_id"] for r in rs} for rs in runs]
    assert ids[0] and ids[1], "both workers ran trials"
    assert not ids[0] & ids[1], "trial ids are disjoint"
    everything = runs[0] + runs[1]
    assert len(everything) == 10 and all(r["status"] == "COMPLETED" for r in everything)
    for r in everything:
        assert_in_space(r["values"])

    exp, observations, _ = stored(chief.db)
    assert len([o for o in observations if not o.failed]) == 10
    best_seen = min(r["score"] for r in everything)
    best_stored = min(o.value for o in observations)
    assert math.isclose(best_stored, best_seen, rel_tol=1e-12)
    assert math.isclose(summary["best"]["value"], best_seen, rel_tol=1e-12)
    assert {p.name for p in exp.parameters} == {"units", "lr", "optimizer", "batchnorm", "epochs", "momentum"}
    assert all("aux" in o.metrics for o in observations), "every reported metric is kept"
    assert exp.state == "completed", "the chief marks its experiment completed when the search ends"
    assert chief_lag < 5, f"the chief exited {chief_lag:.1f} s after the last worker"
    print(f"two workers, 10 trials: {workers_done - started:.1f} s; chief exit lag {chief_lag:.2f} s")


def test_two_real_workers_with_an_objective_list_score_as_kerastuner_and_keep_the_pareto_front(tmp_path: Path) -> None:
    from tauopt.pareto import pareto_front

    chief = start_chief(tmp_path, "--workers", "2", max_trials=8, objectives=("score:min", "size:max"))
    workers = start_together(chief, tmp_path, ["tuner0", "tuner1"], mode="two_objectives")
    codes = [finish(p) for p, _ in workers]
    assert [c for c, _ in codes] == [0, 0], [out[-2000:] for _, out in codes]
    code, summary = chief.wait(timeout=30)
    assert code == 0, chief.log()
    runs = [r for _, path in workers for r in records(path)]
    assert len(runs) == 8 and all(r["status"] == "COMPLETED" for r in runs)
    by_id = {r["trial_id"]: r for r in runs}
    # KerasTuner's MultiObjective: min objectives add, max ones subtract; the chief's score is that
    kt_score = {tid: r["score"] - r["size"] for tid, r in by_id.items()}
    assert math.isclose(summary["best"]["value"], min(kt_score.values()), rel_tol=1e-9, abs_tol=1e-12)
    for _, path in workers:  # the workers' own oracle view ranks by the same score (sent as a float32 there)
        best = json.loads(Path(str(path) + ".best").read_text())
        assert math.isclose(best["score"], min(kt_score.values()), rel_tol=1e-6)

    exp, observations, _ = stored(chief.db)
    assert [m.to_dict() for m in exp.metrics] == [{"name": "score", "objective": "minimize"}, {"name": "size", "objective": "maximize"}]
    assert len(observations) == 8
    # tauopt keeps each metric, and KerasTuner's score beside them (the baseline trial has no suggestion id)
    kept = sorted((o.value, o.metrics["size"], o.metrics["multi_objective"]) for o in observations)
    want = sorted((r["score"], r["size"], r["score"] - r["size"]) for r in runs)
    assert [x for row in kept for x in row] == pytest.approx([x for row in want for x in row], rel=1e-6)
    front = sorted((o.value, o.metrics["size"]) for o in pareto_front(exp, observations))
    expected = sorted({(r["score"], r["size"]) for r in runs if not any(
        q["score"] <= r["score"] and q["size"] >= r["size"] and (q["score"] < r["score"] or q["size"] > r["size"]) for q in runs)})
    assert front and [x for row in front for x in row] == pytest.approx([x for row in expected for x in row], rel=1e-6)


def test_a_tiny_real_keras_model_fit_over_the_chief(tmp_path: Path) -> None:
    chief = start_chief(tmp_path, "--workers", "1", max_trials=2, objective="val_loss")
    proc, results = start_worker(chief, tmp_path, "tuner0", mode="keras")
    code, out = finish(proc, timeout=120)
    assert code == 0, out[-3000:]
    assert chief.wait(timeout=30)[0] == 0, chief.log()
    runs = records(results)
    assert len(runs) == 2
    _, observations, _ = stored(chief.db)
    assert sorted(o.value for o in observations) == pytest.approx(sorted(r["score"] for r in runs), rel=1e-6)


def test_a_worker_killed_mid_trial_has_its_trial_expire_and_another_finishes_the_search(tmp_path: Path) -> None:
    chief = start_chief(tmp_path, "--trial-ttl-s", "2", "--linger-s", "3", max_trials=4)
    dying, dying_results = start_worker(chief, tmp_path, "tuner-dies", mode="hang")
    deadline = time.monotonic() + 60
    while not records(dying_results) and time.monotonic() < deadline:
        time.sleep(0.2)
    (started,) = records(dying_results)
    os.kill(dying.pid, signal.SIGKILL)
    dying.communicate(timeout=10)

    survivor, survivor_results = start_worker(chief, tmp_path, "tuner-lives")
    code, out = finish(survivor)
    assert code == 0, out[-2000:]
    code, summary = chief.wait(timeout=30)
    assert code == 0, chief.log()
    runs = records(survivor_results)
    assert started["trial_id"] in {r["trial_id"] for r in runs}, "the expired trial was handed out again"
    assert len(runs) == 4 and all(r["status"] == "COMPLETED" for r in runs)
    assert "expired" in chief.log()
    assert summary["workers_stopped"] == ["tuner-lives"]


def test_a_late_joining_worker_gets_stopped_at_once(tmp_path: Path) -> None:
    chief = start_chief(tmp_path, "--workers", "2", "--linger-s", "60", max_trials=3)
    first, _ = start_worker(chief, tmp_path, "early")
    assert finish(first)[0] == 0
    assert chief.proc.poll() is None, "the chief waits for the expected second worker"
    late, late_results = start_worker(chief, tmp_path, "late")
    t0 = time.monotonic()
    code, out = finish(late)
    assert code == 0, out[-2000:]
    assert records(late_results) == [], "the late worker ran nothing"
    code, summary = chief.wait(timeout=10)
    assert code == 0 and summary["workers_stopped"] == ["early", "late"]
    assert time.monotonic() - t0 < 30


def test_invalid_trials_are_retried_with_the_same_id_and_failed_ones_free_their_place(tmp_path: Path) -> None:
    chief = start_chief(tmp_path, "--max-retries-per-trial", "1", "--max-consecutive-failures", "50", "--workers", "1", max_trials=4)
    proc, results = start_worker(chief, tmp_path, "tuner0", mode="invalid_fail")
    code, out = finish(proc)
    assert code == 0, out[-2000:]
    code, _ = chief.wait(timeout=30)
    assert code == 0, chief.log()
    runs = records(results)
    by_trial: dict[str, list[str]] = {}
    for r in runs:
        by_trial.setdefault(r["trial_id"], []).append(r["status"])
    assert all(statuses[0] == "INVALID" and len(statuses) == 2 for statuses in by_trial.values()), by_trial
    completed = [t for t, s in by_trial.items() if s[1] == "COMPLETED"]
    failed = [t for t, s in by_trial.items() if s[1] == "FAILED"]
    assert len(completed) == 4, "failed trials freed their place for replacements"
    _, observations, _ = stored(chief.db)
    assert len([o for o in observations if o.failed]) == len(failed)
    assert len([o for o in observations if not o.failed]) == 4


def test_consecutive_failures_end_the_search_with_a_message_to_every_worker(tmp_path: Path) -> None:
    chief = start_chief(tmp_path, "--max-consecutive-failures", "2", "--workers", "2", max_trials=10)
    workers = start_together(chief, tmp_path, ["tuner0", "tuner1"], mode="fail_all")
    outs = [finish(p) for p, _ in workers]
    for code, out in outs:
        assert code != 0
        assert "consecutive failed trials" in out
    code, summary = chief.wait(timeout=15)
    assert code == 1 and "consecutive failed trials" in summary["failure"]
    assert summary["workers_stopped"] == ["tuner0", "tuner1"]


HYPERBAND_WORKER = Path(__file__).parent / "kerastuner_workers" / "hyperband_worker.py"


def _trial_of(checkpoint: str) -> str:
    (part,) = [p for p in Path(checkpoint).parts if p.startswith("trial_")]
    return part[len("trial_"):]


def test_real_hyperband_workers_follow_keras_tuners_brackets_and_promoted_trials_resume_from_the_parent(tmp_path: Path) -> None:
    # max_epochs 3, factor 3: bracket 1 = three 1-epoch trials, then the best continues to 3 epochs;
    # bracket 0 = two 3-epoch trials. Six trials, one promotion.
    chief = start_chief(
        tmp_path, "--algorithm", "hyperband", "--max-epochs", "3", "--factor", "3", "--workers", "2",
        max_trials=6, objective="val_loss",
    )
    project = tmp_path / "kt"
    workers = []
    for tuner_id in ("tuner0", "tuner1"):
        results = tmp_path / f"{tuner_id}.jsonl"
        proc = start_script(HYPERBAND_WORKER, [str(results), str(project)], worker_env(chief, tmp_path, tuner_id), tmp_path, tuner_id)
        workers.append((proc, results))
    codes = [finish(p, timeout=240) for p, _ in workers]
    (tmp_path / "workers.out").write_text("\n".join(out for _, out in codes))
    assert [c for c, _ in codes] == [0, 0], [out[-3000:] for _, out in codes]
    code, summary = chief.wait(timeout=60)
    assert code == 0, chief.log()
    assert summary["workers_stopped"] == ["tuner0", "tuner1"], "the search ends with STOPPED to every worker"

    fits = records(workers[0][1]) + records(workers[1][1])
    by_trial = {_trial_of(f["checkpoint"]): f for f in fits}
    assert len(fits) == len(by_trial) == 6
    new = sorted((f["values"]["tuner/bracket"], f["initial_epoch"], f["epochs"]) for f in fits if f["values"]["tuner/round"] == 0)
    assert new == [(0, 0, 3), (0, 0, 3), (1, 0, 1), (1, 0, 1), (1, 0, 1)]
    (promoted,) = [f for f in fits if f["values"]["tuner/round"] == 1]
    assert (promoted["initial_epoch"], promoted["epochs"]) == (1, 3)
    # KerasTuner labels a promotion with the bracket being filled at that moment (0 or 1 here).
    assert promoted["values"]["tuner/bracket"] in (0, 1)
    (child,) = [f for f in fits if "tuner/trial_id" in f["values"]]
    parent = by_trial[child["values"]["tuner/trial_id"]]
    assert parent["values"]["tuner/round"] == 0 and parent["values"]["tuner/bracket"] == 1
    round0 = [f for f in fits if f["values"]["tuner/bracket"] == 1 and f["values"]["tuner/round"] == 0]
    assert parent["score"] == min(f["score"] for f in round0), "the best of round 0 is promoted"
    assert {k: v for k, v in child["values"].items() if not k.startswith("tuner/")} == {
        k: v for k, v in parent["values"].items() if not k.startswith("tuner/")
    }
    # The promoted trial starts from the weights its parent saved, not from a fresh build.
    assert child["start"] == pytest.approx(parent["ends"][-1], rel=1e-9)
    assert len(child["ends"]) == 2  # epochs 1 -> 3

    exp, observations, _ = stored(chief.db)
    assert len([o for o in observations if not o.failed]) == 6
    assert {p.name for p in exp.parameters} == {"units", "lr"}, "tuner/* values are not parameters"
    assert sorted(o.value for o in observations) == pytest.approx(sorted(f["score"] for f in fits), rel=1e-6)
