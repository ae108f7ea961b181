"""`tauopt serve` operations safety, against a real daemon process: the store's
file watched (503 `store_unavailable`), the token file created exclusively,
connection limits (header deadline, header bounds, connection cap) over real
sockets, and stored names printed escaped by the CLI."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from test_http_daemon import Daemon, tauopt, token_of
from test_http_support import free_port

SPACE = {"parameters": [{"name": "x", "type": "double", "bounds": [0, 1]}], "metric": {"name": "loss"}}


def auth(daemon: Daemon) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_of(daemon)}"}


def serve_once(db: Path) -> subprocess.CompletedProcess[str]:
    """`tauopt serve` expected to refuse at start (bounded by the timeout)."""
    return subprocess.run(
        [sys.executable, "-m", "tauopt.cli", "serve", "--db", str(db), "--port", str(free_port())],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


# -- the store's file ---------------------------------------------------------------


def test_deleting_the_database_under_the_daemon_answers_503_and_a_restart_refuses_to_rewrite_the_token(
    tmp_path: Path,
) -> None:
    d = Daemon(tmp_path / "gone.db")
    token_file = Path(str(d.db) + ".token")
    token = token_file.read_text()
    try:
        # the first ask starts the experiment's actor, which may wait for the initial
        # design's imports when it comes right after start: more than httpx's 5 s on a busy machine
        exp = httpx.post(d.url + "/v1/experiments", headers=auth(d), json={"name": "a", **SPACE}, timeout=60).json()
        d.db.unlink()
        created = httpx.post(d.url + "/v1/experiments", headers=auth(d), json={"name": "b", **SPACE}, timeout=60)
        asked = httpx.post(d.url + f"/v1/experiments/{exp['id']}/suggestions", headers=auth(d), json={}, timeout=60)
        health = httpx.get(d.url + "/v1/health")
    finally:
        code, _, err = d.stop()
    assert created.status_code == 503 and created.json()["error"]["type"] == "store_unavailable"
    assert "was deleted" in created.json()["error"]["message"]
    assert asked.status_code == 503 and asked.json()["error"]["type"] == "store_unavailable"
    assert health.status_code == 200  # the process lives; reads still answer
    assert code == 0 and "ERROR" in err and "was deleted while the store was open" in err
    # A restart finds the deleted file's -wal, and refuses rather than replay it into a new file.
    again = serve_once(d.db)
    assert again.returncode != 0 and "Traceback" not in again.stderr and again.stderr.count("\n") == 1
    assert "is missing but its write-ahead log" in again.stderr and not d.db.exists()
    # Without the -wal: an empty database beside an existing token file; it says so and writes nothing.
    for leftover in (Path(f"{d.db}-wal"), Path(f"{d.db}-shm")):
        leftover.unlink(missing_ok=True)
    again = serve_once(d.db)
    assert again.returncode != 0 and "Traceback" not in again.stderr
    assert f"{token_file} already exists" in again.stderr and "restore it" in again.stderr
    assert token_file.read_text() == token


def test_a_database_with_corrupt_pages_is_refused_by_serve_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "corrupt.db"
    d = Daemon(db)
    for i in range(60):
        httpx.post(d.url + "/v1/experiments", headers=auth(d), json={"name": "n" * 900 + str(i), **SPACE})
    d.stop()
    with db.open("r+b") as f:
        f.seek(4096 * 3)
        f.write(b"\xa5" * 4096)
    r = serve_once(db)
    assert r.returncode != 0
    assert r.stderr.count("\n") == 1 and "corrupt" in r.stderr and "Traceback" not in r.stderr
    assert not Path(f"{db}-wal").exists() and not Path(f"{db}-shm").exists()


# -- the token file ------------------------------------------------------------------


def test_a_symlink_at_the_token_path_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me\n")
    db = tmp_path / "s.db"
    Path(f"{db}.token").symlink_to(target)
    r = serve_once(db)
    assert r.returncode != 0 and "symbolic link" in r.stderr and "nothing was written" in r.stderr
    assert target.read_text() == "keep me\n"


def test_a_precreated_token_file_is_refused_and_keeps_its_content_and_mode(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    token_file = Path(f"{db}.token")
    token_file.write_text("")
    token_file.chmod(0o644)
    r = serve_once(db)
    assert r.returncode != 0 and f"{token_file} already exists" in r.stderr
    assert token_file.read_text() == "" and stat.S_IMODE(token_file.stat().st_mode) == 0o644


def test_a_restart_of_an_existing_deployment_keeps_its_token_file(tmp_path: Path) -> None:
    d = Daemon(tmp_path / "r.db")
    token = token_of(d)
    d.stop()
    again = Daemon(d.db)
    try:
        r = httpx.get(again.url + "/v1/experiments", headers={"Authorization": f"Bearer {token}"})
    finally:
        code, out, _ = again.stop()
    assert r.status_code == 200 and code == 0 and out == "" and token_of(again) == token


def test_a_non_positive_connection_limit_is_refused_at_start(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "tauopt.cli", "serve", "--db", str(tmp_path / "x.db"), "--header-timeout", "0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2 and "--header-timeout must be positive" in r.stderr
    assert not (tmp_path / "x.db").exists()


# -- connections ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("guard") / "g.db", "--header-timeout", "1", "--max-connections", "8")
    yield d
    d.stop()


def connect(daemon: Daemon) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", daemon.port), timeout=10)
    return s


def read_until_closed(s: socket.socket) -> bytes:
    """Everything the server sends until it closes (socket timeout 10 s: a
    server that never closes fails the test instead of hanging it)."""
    chunks = []
    try:
        while chunk := s.recv(65536):
            chunks.append(chunk)
    except ConnectionResetError:
        pass
    return b"".join(chunks)


def test_a_connection_that_never_completes_its_headers_is_closed(guarded: Daemon) -> None:
    with connect(guarded) as silent, connect(guarded) as partial:
        partial.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")  # no blank line, ever
        assert read_until_closed(silent) == b""
        assert read_until_closed(partial) == b""


def test_a_kept_alive_connection_gets_the_deadline_again_for_its_next_request(guarded: Daemon) -> None:
    with connect(guarded) as s:
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        first = b""
        while not first.endswith(b"}"):  # the whole response (headers and JSON body) before the next request
            chunk = s.recv(65536)
            assert chunk, first
            first += chunk
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")
        rest = read_until_closed(s)
    assert first.startswith(b"HTTP/1.1 200") and rest == b""


def test_oversized_headers_and_too_many_headers_answer_400_and_close(guarded: Daemon) -> None:
    big = b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"
    many = b"GET /v1/health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(20_000)) + b"\r\n"
    answers = []
    for request in (big, many):
        with connect(guarded) as s:
            try:
                s.sendall(request)
            except (BrokenPipeError, ConnectionResetError):
                pass  # closed while we were still sending: also a refusal
            answers.append(read_until_closed(s))
    assert all(a == b"" or a.startswith(b"HTTP/1.1 400") for a in answers), answers
    ok = httpx.get(guarded.url + "/v1/health", headers={"X-Fine": "a" * 1000})
    assert ok.status_code == 200


def test_connections_beyond_the_cap_are_closed_at_once_and_service_resumes(guarded: Daemon) -> None:
    idle = [connect(guarded) for _ in range(8)]
    try:
        # Each idle one is accepted; the 9th is closed by the server (no request needed).
        with connect(guarded) as extra:
            extra.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
            refused = read_until_closed(extra)
    finally:
        for s in idle:
            s.close()
    assert refused == b""
    with httpx.Client() as client:
        for _ in range(50):  # until the server has seen the 8 closes
            try:
                if client.get(guarded.url + "/v1/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
        else:
            pytest.fail("the daemon did not serve again after the idle connections closed")


# -- names printed by the CLI -------------------------------------------------------------


def test_control_characters_in_names_are_printed_escaped(tmp_path: Path) -> None:
    d = Daemon(tmp_path / "names.db")
    hostile = "\x1b[2J\x1b[31mred\nforged row\u202e"
    try:
        r = httpx.post(d.url + "/v1/experiments", headers=auth(d), json={"name": hostile, **SPACE})
        made = tauopt("token", "create", "--db", str(d.db), "--name", hostile)
    finally:
        d.stop()
    exps = tauopt("experiments", "list", "--db", str(d.db))
    tokens = tauopt("token", "list", "--db", str(d.db))
    assert r.status_code == 201 and made.returncode == 0, (r.text, made.stderr)
    for out in (exps.stdout, tokens.stdout):
        assert "\x1b" not in out and "\u202e" not in out and "forged row" not in out.splitlines()[-1][:10]
        assert "\\x1b[2J" in out
    assert len(exps.stdout.splitlines()) == 2  # the header and one row: no forged line
