"""`tauopt serve` as a real process: first-start token file, the token
commands, both examples with 4 workers, a light client, graceful SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterator

import httpx
import pytest

from test_http_support import free_port, wait_health

ROOT = Path(__file__).resolve().parent.parent


def tauopt(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tauopt.cli", *args], capture_output=True, text=True, timeout=60, cwd=cwd
    )


class Daemon:
    def __init__(
        self, db: Path | str, *extra: str, cwd: Path | None = None, port: int | None = None, log: Path | None = None,
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:  # fmt: skip
        """`log`: stderr goes to that file instead of a pipe nobody reads while the daemon runs
        (a daemon that logs a lot would block on a full pipe)."""
        self.db = db
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        sink = subprocess.PIPE if log is None else log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tauopt.cli", "serve", "--db", str(db), "--port", str(self.port), "--pool", "thread",
             "--log-level", "warning", *extra],
            stdout=subprocess.PIPE, stderr=sink, text=True, cwd=cwd, preexec_fn=preexec_fn,
        )
        if not isinstance(sink, int):
            sink.close()  # the daemon has its own descriptor
        wait_health(self.url, self.proc, timeout_s=30)

    @classmethod
    def shared(cls, store_url: str, lease_s: float, cwd: Path) -> "Daemon":
        """A daemon sharing a postgresql:// store with others (--advertise-url)."""
        port = free_port()
        return cls(store_url, "--advertise-url", f"http://127.0.0.1:{port}", "--lease-s", str(lease_s), cwd=cwd, port=port)

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str, str]:
        self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, out, err


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("serve") / "tauopt.db")
    yield d
    if d.proc.poll() is None:
        d.stop()


def token_of(daemon: Daemon) -> str:
    return Path(str(daemon.db) + ".token").read_text().strip()


def test_first_start_writes_a_0600_token_file_and_prints_only_its_path(tmp_path: Path) -> None:
    d = Daemon(tmp_path / "first.db")
    token_file = Path(str(d.db) + ".token")
    mode = stat.S_IMODE(token_file.stat().st_mode)
    token = token_file.read_text().strip()
    r = httpx.get(d.url + "/v1/experiments", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200 and r.json() == []
    code, out, err = d.stop(signal.SIGTERM)
    assert code == 0
    assert mode == 0o600
    assert out.strip() == str(token_file.resolve())
    assert token not in out + err
    # a second start on the same database creates nothing and prints nothing
    d = Daemon(tmp_path / "first.db")
    code, out, _ = d.stop(signal.SIGINT)
    assert code == 0 and out == ""
    assert token_file.read_text().strip() == token


def test_token_create_list_revoke(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    stray = tauopt("token", "create", "--db", db, "--name", "ci")
    assert stray.returncode == 1 and stray.stdout == "" and "--create" in stray.stderr and "no database at" in stray.stderr
    assert not Path(db).exists(), "no stray database whose token no daemon accepts"
    made = tauopt("token", "create", "--db", db, "--name", "ci", "--suggestions-per-day", "5", "--create")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert made.stdout == token + "\n" and token.startswith("tau_")
    listed = tauopt("token", "list", "--db", db, "--json")
    rows = json.loads(listed.stdout)
    assert [(r["name"], r["suggestions_per_day"], r["revoked_at"]) for r in rows] == [("ci", 5, None)]
    assert token not in listed.stdout and token not in Path(db).read_bytes().decode("latin-1")
    assert tauopt("token", "revoke", "ci", "--db", db).returncode == 0
    assert json.loads(tauopt("token", "list", "--db", db, "--json").stdout)[0]["revoked_at"] is not None
    assert tauopt("token", "revoke", "nobody", "--db", db).returncode == 1
    bad = tauopt("token", "create", "--db", db, "--name", "x", "--suggestions-per-day", "0")
    assert bad.returncode == 2 and bad.stdout == ""


def test_a_token_created_while_serving_works_at_once(daemon: Daemon) -> None:
    token = tauopt("token", "create", "--db", str(daemon.db), "--name", "late").stdout.strip()
    r = httpx.get(daemon.url + "/v1/experiments", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200


def run_example(daemon: Daemon, script: str, *args: str, env: dict[str, str] | None = None) -> dict:
    env = dict(os.environ, TAUOPT_BASE_URL=daemon.url, TAUOPT_TOKEN=token_of(daemon), **(env or {}))
    p = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_parallel_workers_example_with_4_workers(daemon: Daemon) -> None:
    report = run_example(daemon, "parallel_workers.py", "--workers", "4", "--rounds", "8", "--deadline-s", "60",
                         "--strategy", "sobol")
    assert report["repeats"] == 0 and report["errors"] == []
    assert report["suggestions"] == report["observations"] == 32
    assert 1 <= report["max_open"] <= 4


def test_parallel_workers_example_joins_an_experiment_like_a_job_array(daemon: Daemon) -> None:
    first = run_example(daemon, "parallel_workers.py", "--workers", "2", "--rounds", "3", "--bandwidth", "4", "--strategy", "sobol")
    again = run_example(
        daemon, "parallel_workers.py", "--workers", "4", "--rounds", "3", "--experiment-id", first["experiment_id"],
        "--job-id", "job-7", "--strategy", "sobol",
    )
    assert again["experiment_id"] == first["experiment_id"] and again["repeats"] == 0
    r = httpx.get(
        f"{daemon.url}/v1/experiments/{first['experiment_id']}/suggestions",
        params={"tag": "job-7-worker-3"}, headers={"Authorization": f"Bearer {token_of(daemon)}"},
    )
    assert len(r.json()) == 3


def test_rest_example_joins_an_experiment_from_a_slurm_array_task(daemon: Daemon) -> None:
    first = run_example(daemon, "parallel_workers_rest.py", "--workers", "1", "--rounds", "2", "--bandwidth", "3")
    slurm = {"SLURM_ARRAY_JOB_ID": "4242", "SLURM_ARRAY_TASK_ID": "5", "SLURM_JOB_ID": "4247"}
    again = run_example(
        daemon, "parallel_workers_rest.py", "--workers", "1", "--rounds", "2", "--experiment-id", first["experiment_id"],
        env=slurm,
    )
    assert again["experiment_id"] == first["experiment_id"] and again["tags"] == ["4242-worker-5"]
    assert again["repeats"] == 0 and again["observations"] == 2
    r = httpx.get(
        f"{daemon.url}/v1/experiments/{first['experiment_id']}/suggestions",
        params={"tag": "4242-worker-5"}, headers={"Authorization": f"Bearer {token_of(daemon)}"},
    )
    assert len(r.json()) == 2
    assert len(httpx.get(f"{daemon.url}/v1/experiments/{first['experiment_id']}/observations",
                         headers={"Authorization": f"Bearer {token_of(daemon)}"}).json()) == 4


def test_rest_example_with_4_workers_waits_out_bandwidth_full(daemon: Daemon) -> None:
    report = run_example(daemon, "parallel_workers_rest.py", "--workers", "4", "--rounds", "6", "--bandwidth", "2")
    assert report["repeats"] == 0 and report["errors"] == [] and report["suggestions"] == 24
    assert 1 <= report["max_open"] <= 2 and report["observations"] == 24


def test_the_http_client_loads_no_server_store_or_ml_modules(daemon: Daemon) -> None:
    code = f"""
import sys, tauopt
c = tauopt.Client(base_url={daemon.url!r}, token={token_of(daemon)!r})
assert c.driver == "http"
exp = c.create_experiment("light", [{{"name": "x", "type": "double", "bounds": [0, 1]}}], {{"name": "y"}})
s = c.suggest(exp.id)
c.observe(exp.id, suggestion_id=s.id, value=1.0)
c.close()
heavy = sorted(m for m in ("fastapi", "starlette", "uvicorn", "pydantic", "aiosqlite", "asyncpg", "torch", "gpytorch", "grpc") if m in sys.modules)
print(heavy)
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


def test_experiments_command_lists_what_the_daemon_stored(daemon: Daemon) -> None:
    headers = {"Authorization": f"Bearer {token_of(daemon)}"}
    exp = httpx.post(
        daemon.url + "/v1/experiments", headers=headers,
        json={"name": "listed", "parameters": [{"name": "x", "type": "int", "bounds": [0, 3]}], "metric": {"name": "y"}},
    ).json()
    listed = json.loads(tauopt("experiments", "list", "--db", str(daemon.db), "--json").stdout)
    assert exp["id"] in [e["id"] for e in listed]
    shown = json.loads(tauopt("experiments", "show", exp["id"], "--db", str(daemon.db), "--json").stdout)
    assert shown["name"] == "listed" and shown["best"] is None


def test_no_access_log_leaves_out_the_line_per_request(tmp_path: Path) -> None:
    outs = []
    for extra in ((), ("--no-access-log",)):
        d = Daemon(tmp_path / f"a{len(outs)}.db", "--log-level", "info", *extra)
        assert httpx.get(d.url + "/v1/health").status_code == 200
        code, out, err = d.stop()
        assert code == 0, err
        outs.append(out)
    assert '"GET /v1/health HTTP/1.1" 200' in outs[0] and "/v1/health" not in outs[1], outs
