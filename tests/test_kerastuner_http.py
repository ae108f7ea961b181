"""The chief's search is visible over the HTTP API with --http-port: a token made
for the chief's database sees the (unowned) KerasTuner experiment."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_http_port_serves_the_chiefs_experiment_to_a_token(tmp_path: Path) -> None:
    db = tmp_path / "kt.db"
    space = tmp_path / "space.json"
    space.write_text(json.dumps([{"name": "units", "type": "int", "bounds": [8, 64], "step": 8}]))
    grpc_port, http_port = free_port(), free_port()
    env = {**os.environ, "KERASTUNER_ORACLE_IP": "127.0.0.1", "KERASTUNER_ORACLE_PORT": str(grpc_port), "KERASTUNER_TUNER_ID": "chief"}
    chief = subprocess.Popen(
        [sys.executable, "-m", "tauopt.cli", "kerastuner", "chief", "--objective", "score", "--direction", "min",
         "--max-trials", "4", "--db", str(db), "--project", "viewable", "--space", str(space), "--http-port", str(http_port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        line = chief.stdout.readline()  # type: ignore[union-attr]
        assert line, chief.stderr.read()  # type: ignore[union-attr]
        ready = json.loads(line)
        token = subprocess.run(
            [sys.executable, "-m", "tauopt.cli", "token", "create", "--db", str(db), "--name", "viewer"],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout.strip()  # fmt: skip
        headers = {"Authorization": f"Bearer {token}"}
        base = f"http://127.0.0.1:{http_port}/v1"
        listed = httpx.get(f"{base}/experiments", headers=headers, timeout=10)
        assert listed.status_code == 200
        assert [e["name"] for e in listed.json()] == ["viewable"]
        one = httpx.get(f"{base}/experiments/{ready['experiment_id']}", headers=headers, timeout=10).json()
        assert one["parameters"] == [{"name": "units", "type": "int", "bounds": [8, 64], "step": 8}]
        assert httpx.get(f"{base}/experiments", timeout=10).status_code == 401  # still behind auth
    finally:
        chief.send_signal(signal.SIGTERM)
        chief.communicate(timeout=30)
