"""One engine per SQLite file (issue 10 item 1): a second engine, in another
process or the same one, is refused at open; the lock dies with its holder
(close or SIGKILL); the token and experiments commands work beside a running
daemon, and a token made that way works against it at once."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from tauopt import ApiError, Client, Engine
from test_http_daemon import Daemon, token_of, tauopt

X = [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}]
Y = {"name": "y", "objective": "minimize"}

# The holder: opens the file, stores N observations, says so, then waits for a line
# on stdin (the gate) before storing N more and closing.
HOLDER = textwrap.dedent(
    """
    import json, sys
    from tauopt import Client
    db, n = sys.argv[1], int(sys.argv[2])
    with Client(driver="local", store=db) as c:
        exp = c.create_experiment("held", %r, %r, parallel_bandwidth=4, strategy="sobol")
        for _ in range(n):
            s = c.suggest(exp.id)
            c.observe(exp.id, suggestion_id=s.id, value=s.assignments["x"])
        print(json.dumps({"pid": __import__("os").getpid(), "id": exp.id}), flush=True)
        sys.stdin.readline()
        for _ in range(n):
            s = c.suggest(exp.id)
            c.observe(exp.id, suggestion_id=s.id, value=s.assignments["x"])
    print("closed", flush=True)
    """
) % (X, Y)

# The intruder: tries to open the same file and reports what it got.
INTRUDER = textwrap.dedent(
    """
    import json, sys
    from tauopt import ApiError, Client
    try:
        with Client(driver="local", store=sys.argv[1]) as c:
            c.create_experiment("intruder", %r, %r)
        print(json.dumps({"opened": True}))
    except ApiError as e:
        print(json.dumps({"opened": False, "type": e.error_type, "message": e.message, "details": e.details}))
    """
) % (X, Y)


def _python(code: str, *args: str, **kw) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code, *args], text=True, stdout=subprocess.PIPE, **kw)


def _integrity(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]


def _observations(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT count(*) FROM observations").fetchone()[0]


def test_a_second_process_is_refused_and_nothing_of_the_first_is_lost(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    holder = _python(HOLDER, str(db), "50", stdin=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdin is not None
    held = json.loads(holder.stdout.readline())
    intruder = _python(INTRUDER, str(db))
    out, _ = intruder.communicate(timeout=60)
    seen = json.loads(out)
    holder.stdin.write("go\n")
    holder.stdin.flush()
    rest, _ = holder.communicate(timeout=60)
    assert holder.returncode == 0 and rest.strip() == "closed"
    assert seen["opened"] is False and seen["type"] == "store_in_use", seen
    message = seen["message"]
    assert str(db) in message and f"pid {held['pid']}" in message and socket.gethostname() in message
    assert f"tauopt serve --db {db}" in message and 'driver="http"' in message
    assert seen["details"]["pid"] == str(held["pid"])
    assert _observations(db) == 100 and _integrity(db) == "ok"
    with Client(driver="local", store=db) as c:  # free again after the holder closed
        assert [e.name for e in c.experiments()] == ["held"]
    assert not (tmp_path / "shared.db.lock").exists()  # a clean close leaves no sidecar


@pytest.mark.anyio
async def test_a_second_engine_in_the_same_process_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "one.db"
    async with Engine(store=db) as first:
        exp = await first.create_experiment("e", X, Y)
        with pytest.raises(ApiError) as info:
            async with Engine(store=db):
                pass
        err = info.value
        assert (err.status_code, err.error_type) == (409, "store_in_use")
        assert f"pid {os.getpid()}" in err.message and str(db) in err.message
        # the refused open did not disturb the owner
        s = await first.suggest(exp.id)
        await first.observe(exp.id, suggestion_id=s.id, value=1.0)
    async with Engine(store=db) as again:
        assert len(await again.observations(exp.id)) == 1
    assert _integrity(db) == "ok"


def test_sigkill_of_the_holder_frees_the_file_at_once(tmp_path: Path) -> None:
    db = tmp_path / "killed.db"
    holder = _python(HOLDER, str(db), "20", stdin=subprocess.PIPE)
    assert holder.stdout is not None
    held = json.loads(holder.stdout.readline())
    os.kill(held["pid"], signal.SIGKILL)
    holder.communicate(timeout=30)  # also closes its pipes
    assert (tmp_path / "killed.db.lock").exists()  # the sidecar outlives it; its lock does not
    with Client(driver="local", store=db) as c:
        assert len(c.observations(held["id"])) == 20
    assert _integrity(db) == "ok"


def test_token_and_experiments_commands_work_beside_a_running_daemon(tmp_path: Path) -> None:
    d = Daemon(tmp_path / "served.db")
    try:
        admin = {"Authorization": f"Bearer {token_of(d)}"}
        r = httpx.post(d.url + "/v1/experiments", headers=admin, json={"name": "live", "parameters": X, "metric": Y})
        assert r.status_code == 201
        made = tauopt("token", "create", "--db", str(d.db), "--name", "colleague")
        assert made.returncode == 0, made.stderr
        token = made.stdout.strip()
        r = httpx.get(d.url + "/v1/experiments", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200 and r.json() == []  # the new token works at once
        listed = tauopt("experiments", "list", "--db", str(d.db))
        assert listed.returncode == 0 and "live" in listed.stdout, listed.stderr
        second = subprocess.run(
            [sys.executable, "-m", "tauopt.cli", "serve", "--db", str(d.db), "--port", "1"],
            capture_output=True, text=True, timeout=60,
        )
        assert second.returncode != 0 and "already open in another engine" in second.stderr
        assert httpx.get(d.url + "/v1/experiments", headers=admin).json()[0]["name"] == "live"
    finally:
        code, _, err = d.stop()
    assert code == 0, err
    assert _integrity(d.db) == "ok"
