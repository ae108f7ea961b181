"""`tauopt experiments create|list|show|update|archive|close-all` (issue 20),
as real processes, against a database file and against a running daemon."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from tauopt import Client
from test_http_daemon import Daemon, token_of

SPEC = {
    "name": "cli-spec",
    "parameters": [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}, {"name": "k", "type": "int", "bounds": [1, 4]}],
    "metric": {"name": "loss", "objective": "minimize"},
    "parallel_bandwidth": 2,
    "observation_budget": 20,
    "strategy": "random",
}
YAML_SPEC = """\
name: cli-yaml
parameters:
  - {name: x, type: double, bounds: [0.0, 1.0]}
metric: {name: loss, objective: maximize}
parallel_bandwidth: 3
"""


def tauopt(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("TAUOPT_")}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "tauopt.cli", *args], capture_output=True, text=True, timeout=60, env=full, cwd=cwd)


def created_id(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(r"[0-9a-f]{16}\n", r.stdout), f"the id alone on stdout, got {r.stdout!r}"
    return r.stdout.strip()


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    path = tmp_path / "cli.db"
    with Client(driver="local", store=str(path)):
        pass  # an empty database, as `tauopt serve` leaves it
    (tmp_path / "spec.json").write_text(json.dumps(SPEC))
    (tmp_path / "spec.yaml").write_text(YAML_SPEC)
    return path


def test_create_from_json_and_yaml_specs_prints_the_id_alone(db: Path) -> None:
    exp_id = created_id(tauopt("experiments", "create", "--spec", str(db.parent / "spec.json"), "--db", str(db)))
    yaml_id = created_id(tauopt("experiments", "create", "--spec", str(db.parent / "spec.yaml"), "--db", str(db)))
    with Client(driver="local", store=str(db)) as c:
        made, from_yaml = c.experiment(exp_id), c.experiment(yaml_id)
    assert (made.name, made.parallel_bandwidth, made.observation_budget, made.strategy) == ("cli-spec", 2, 20, "random")
    assert (from_yaml.name, from_yaml.metric.objective, from_yaml.parallel_bandwidth) == ("cli-yaml", "maximize", 3)


def test_a_bad_spec_is_refused_saying_what_the_keys_are_and_nothing_is_created(db: Path) -> None:
    bad = db.parent / "bad.json"
    bad.write_text(json.dumps(dict(SPEC, budget=3)))
    r = tauopt("experiments", "create", "--spec", str(bad), "--db", str(db))
    assert r.returncode == 2 and "unknown keys ['budget']" in r.stderr and "observation_budget" in r.stderr
    bad.write_text(json.dumps(dict(SPEC, parallel_bandwidth=0)))
    r = tauopt("experiments", "create", "--spec", str(bad), "--db", str(db))
    assert r.returncode == 1 and "invalid_request" in r.stderr and "parallel_bandwidth" in r.stderr
    listed = json.loads(tauopt("experiments", "list", "--db", str(db), "--json").stdout)
    assert listed == []
    r = tauopt("experiments", "list", "--db", str(db.parent / "nothing.db"))
    assert r.returncode == 1 and "no database at" in r.stderr and "--url" in r.stderr


def test_list_show_update_close_all_and_archive_on_a_file(db: Path) -> None:
    exp_id = created_id(tauopt("experiments", "create", "--spec", str(db.parent / "spec.json"), "--db", str(db)))
    with Client(driver="local", store=str(db)) as c:
        for i in range(3):
            s = c.suggest(exp_id, tag="w-1" if i else "w-2")
            c.observe(exp_id, suggestion_id=s.id, value=0.5 - i / 10 if i < 2 else None, failed=i == 2)
        c.suggest(exp_id, tag="w-1")  # one left open
        best = c.best(exp_id)
    assert best is not None
    out = tauopt("experiments", "list", "--db", str(db)).stdout.splitlines()
    assert out[0].split() == ["ID", "NAME", "STATE", "STRATEGY", "OBS/BUDGET", "OPEN/BW", "BEST", "LAST", "ACTIVITY"]
    assert out[1].split()[:7] == [exp_id, "cli-spec", "active", "random", "3/20", "1/2", "0.4"]
    assert out[1].endswith("ago")
    shown = tauopt("experiments", "show", exp_id, "--db", str(db)).stdout
    assert json.dumps(best.assignments, sort_keys=True) in shown
    assert "observed 3, open 1" in shown and "w-1 3, w-2 1" in shown
    assert "3 (1 failed)" in shown and "recent failures:" in shown
    as_json = json.loads(tauopt("experiments", "show", exp_id, "--db", str(db), "--json").stdout)
    assert as_json["best"]["value"] == pytest.approx(0.4) and as_json["suggestions_by_state"] == {"observed": 3, "open": 1}

    r = tauopt("experiments", "update", exp_id, "--parallel-bandwidth", "3", "--observation-budget", "none", "--db", str(db))
    assert r.returncode == 0 and r.stdout.strip() == exp_id, r.stderr
    r = tauopt("experiments", "close-all", exp_id, "--db", str(db))
    assert (r.returncode, r.stdout) == (0, "1\n"), r.stderr
    r = tauopt("experiments", "archive", exp_id, "--db", str(db))
    assert (r.returncode, r.stdout.strip()) == (0, exp_id), r.stderr
    row = tauopt("experiments", "list", "--db", str(db)).stdout.splitlines()[1].split()
    assert row[2:6] == ["archived", "random", "3/-", "0/3"]
    r = tauopt("experiments", "update", exp_id, "--db", str(db))
    assert r.returncode == 2 and "nothing to update" in r.stderr


def test_show_says_why_the_failure_cap_stopped_an_experiment_and_update_lifts_it(db: Path) -> None:
    spec = db.parent / "capped.json"
    spec.write_text(json.dumps(dict(SPEC, max_consecutive_failures=1)))
    exp_id = created_id(tauopt("experiments", "create", "--spec", str(spec), "--db", str(db)))
    with Client(driver="local", store=str(db)) as c:
        c.observe(exp_id, suggestion_id=c.suggest(exp_id).id, failed=True)
    shown = tauopt("experiments", "show", exp_id, "--db", str(db)).stdout
    assert "stopped      stopped after 1 consecutive failed runs" in shown and "--max-consecutive-failures" in shown
    r = tauopt("experiments", "update", exp_id, "--max-consecutive-failures", "none", "--db", str(db), "--json")
    assert r.returncode == 0, r.stderr
    assert (json.loads(r.stdout)["max_consecutive_failures"], json.loads(r.stdout)["stopped_reason"]) == (None, None)
    assert "stopped " not in tauopt("experiments", "show", exp_id, "--db", str(db)).stdout


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("cli") / "tauopt.db")
    yield d
    d.stop()


def test_the_same_commands_against_a_running_daemon(daemon: Daemon, tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    env = {"TAUOPT_BASE_URL": daemon.url, "TAUOPT_TOKEN": token_of(daemon)}
    exp_id = created_id(tauopt("experiments", "create", "--spec", str(spec), env=env))
    token_file = Path(str(daemon.db) + ".token")
    again = created_id(tauopt("experiments", "create", "--spec", str(spec), "--url", daemon.url, "--token-file", str(token_file)))
    with Client(driver="http", base_url=daemon.url, token=token_of(daemon)) as c:
        s = c.suggest(exp_id, tag="remote")
        c.observe(exp_id, suggestion_id=s.id, value=0.25)
    rows = {line.split()[0]: line.split() for line in tauopt("experiments", "list", env=env).stdout.splitlines()[1:]}
    assert rows[exp_id][2:7] == ["active", "random", "1/20", "0/2", "0.25"] and again in rows
    shown = json.loads(tauopt("experiments", "show", exp_id, "--json", env=env).stdout)
    assert shown["best"]["value"] == 0.25 and shown["suggestions_by_state"] == {"observed": 1}
    assert tauopt("experiments", "close-all", again, env=env).stdout == "0\n"
    assert tauopt("experiments", "archive", again, env=env).stdout.strip() == again
    # the file beside the daemon reads the same, and a change to it points at --url
    file_row = tauopt("experiments", "list", "--db", str(daemon.db)).stdout
    assert exp_id in file_row and "1/20" in file_row
    r = tauopt("experiments", "archive", exp_id, "--db", str(daemon.db))
    assert r.returncode == 1 and "--url" in r.stderr


def test_a_daemon_without_a_token_is_an_error_saying_what_to_set(daemon: Daemon) -> None:
    r = tauopt("experiments", "list", "--url", daemon.url)
    assert r.returncode == 2 and "TAUOPT_TOKEN" in r.stderr and "--token-file" in r.stderr
    r = tauopt("experiments", "list", "--url", "http://127.0.0.1:1", env={"TAUOPT_TOKEN": "tau_x"})
    assert r.returncode == 1 and "http://127.0.0.1:1" in r.stderr and "is `tauopt serve` running there?" in r.stderr


def _ctrl_c_default() -> None:
    """In the child before exec: SIGINT at its default, so Python turns it into
    KeyboardInterrupt even when the suite runs where SIGINT is ignored (a shell's
    background job: `make test &` without job control ignores it, and children
    inherit that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_watch_redraws_until_interrupted(daemon: Daemon) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAUOPT_")}
    env.update(TAUOPT_BASE_URL=daemon.url, TAUOPT_TOKEN=token_of(daemon))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tauopt.cli", "experiments", "list", "--watch", "--interval", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, preexec_fn=_ctrl_c_default,
    )
    assert proc.stdout is not None
    frames = 0
    for line in proc.stdout:  # bounded by the interval: a frame each 0.2 s
        if line.startswith("every 0.2s"):
            frames += 1
        if frames == 3:
            break
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert frames == 3 and proc.returncode == 0, err
    assert "Traceback" not in err


def test_owner_takes_a_credential_name_or_id(daemon: Daemon, tmp_path: Path) -> None:
    made = tauopt("token", "create", "--db", str(daemon.db), "--name", "alice")
    assert made.returncode == 0, made.stderr
    with Client(driver="http", base_url=daemon.url, token=made.stdout.strip()) as c:
        mine = c.create_experiment(**dict(SPEC, name="alice-owns")).id
    (alice,) = [r for r in json.loads(tauopt("token", "list", "--db", str(daemon.db), "--json").stdout) if r["name"] == "alice"]
    for who in ("alice", alice["id"]):
        listed = json.loads(tauopt("experiments", "list", "--db", str(daemon.db), "--owner", who, "--json").stdout)
        assert [e["id"] for e in listed] == [mine], who
    r = tauopt("experiments", "list", "--db", str(daemon.db), "--owner", "nobody")
    assert r.returncode == 1 and "no credential has that id or name" in r.stderr


def test_token_transfer_moves_a_revoked_credentials_experiments_to_another(tmp_path: Path) -> None:
    d = Daemon(tmp_path / "tauopt.db")
    try:
        leaked = tauopt("token", "create", "--db", str(d.db), "--name", "leaked").stdout.strip()
        with Client(driver="http", base_url=d.url, token=leaked) as c:
            exp = c.create_experiment(**SPEC)
            s = c.suggest(exp.id)
            c.observe(exp.id, suggestion_id=s.id, value=0.5)
        busy = tauopt("token", "transfer", "leaked", "default", "--db", str(d.db))
        assert busy.returncode == 1 and "stop `tauopt serve` first" in busy.stderr
    finally:
        d.stop()
    assert tauopt("token", "revoke", "leaked", "--db", str(d.db)).returncode == 0
    assert tauopt("token", "transfer", "leaked", "nobody", "--db", str(d.db)).returncode == 1
    refused = tauopt("token", "transfer", "default", "leaked", "--db", str(d.db))
    assert refused.returncode == 1 and "is revoked" in refused.stderr
    moved = tauopt("token", "transfer", "leaked", "default", "--db", str(d.db))
    assert (moved.returncode, moved.stdout) == (0, "1\n"), moved.stderr
    d2 = Daemon(d.db)
    try:
        with Client(driver="http", base_url=d2.url, token=token_of(d2)) as c:
            assert [e.id for e in c.experiments()] == [exp.id]
            assert c.best(exp.id).value == 0.5  # type: ignore[union-attr]
            c.suggest(exp.id)  # the search goes on under its new owner
    finally:
        d2.stop()


def test_list_over_http_reads_no_history_so_the_listing_rate_limit_never_bites(tmp_path: Path) -> None:
    # a budget of two history listings (one `show`): `list` needs none (best and summary are light reads)
    d = Daemon(tmp_path / "tauopt.db", "--heavy-read-rate", "0.01", "--heavy-read-burst", "2")
    try:
        env = {"TAUOPT_BASE_URL": d.url, "TAUOPT_TOKEN": token_of(d)}
        with Client(driver="http", base_url=d.url, token=token_of(d)) as c:
            ids = [c.create_experiment(**dict(SPEC, name=f"e{i}")).id for i in range(4)]
            s = c.suggest(ids[0], tag="w")
            c.observe(ids[0], suggestion_id=s.id, value=0.5)
            c.suggest(ids[1])
        for _ in range(2):
            r = tauopt("experiments", "list", "--json", env=env)
            assert r.returncode == 0, r.stderr
            listed = json.loads(r.stdout)
            assert [e["id"] for e in listed] == ids
            assert listed[0]["best"]["value"] == 0.5 and listed[0]["suggestions_by_state"] == {"observed": 1}
            assert listed[1]["best"] is None and listed[1]["suggestions_by_state"] == {"open": 1}
        shown = tauopt("experiments", "show", ids[0], env=env)  # reads the history: observations and suggestions
        assert shown.returncode == 0 and "by tag       w 1" in shown.stdout, shown.stderr
    finally:
        d.stop()
