"""The chief's search is visible over the HTTP API with --http-port: a token made
for the chief's database sees the (unowned) KerasTuner experiment."""

from __future__ import annotations

import json
import os
import re
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


def start_chief(tmp_path: Path, project: str) -> tuple[subprocess.Popen[str], Path, int, int, str]:
    """A chief with --http-port on a one-parameter space: (process, db, gRPC port, HTTP port, its ready line)."""
    db = tmp_path / "kt.db"
    space = tmp_path / "space.json"
    space.write_text(json.dumps([{"name": "units", "type": "int", "bounds": [8, 64], "step": 8}]))
    grpc_port, http_port = free_port(), free_port()
    env = {**os.environ, "KERASTUNER_ORACLE_IP": "127.0.0.1", "KERASTUNER_ORACLE_PORT": str(grpc_port), "KERASTUNER_TUNER_ID": "chief"}
    chief = subprocess.Popen(
        [sys.executable, "-m", "tauopt.cli", "kerastuner", "chief", "--objective", "score", "--direction", "min",
         "--max-trials", "4", "--db", str(db), "--project", project, "--space", str(space), "--http-port", str(http_port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    line = chief.stdout.readline()  # type: ignore[union-attr]
    if not line:
        chief.kill()
        raise AssertionError(chief.stderr.read())  # type: ignore[union-attr]
    return chief, db, grpc_port, http_port, line


def test_http_port_serves_the_chiefs_experiment_to_a_token(tmp_path: Path) -> None:
    chief, db, _, http_port, line = start_chief(tmp_path, "viewable")
    try:
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
        page = httpx.get(f"http://127.0.0.1:{http_port}/", timeout=10)  # the same dashboard as `tauopt serve`'s
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        scripts = [src for src in re.findall(r'src="(/ui/[0-9a-f]{12}/[\w.-]+)"', page.text)]
        assert {src.rsplit("/", 1)[1] for src in scripts} == {"app.js", "plotly.min.js"}
        assert all(httpx.get(f"http://127.0.0.1:{http_port}{src}", timeout=10).status_code == 200 for src in scripts)
    finally:
        chief.send_signal(signal.SIGTERM)
        chief.communicate(timeout=30)


def _sample(text: str, name: str, **labels: str) -> float:
    want = "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}" if labels else ""
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        if key == name + want or (labels and key.startswith(name + "{") and _labels(key) == labels):
            return float(value)
    return 0.0


def _labels(key: str) -> dict[str, str]:
    inner = key[key.index("{") + 1 : -1]
    return dict((kv.split("=", 1)[0], kv.split("=", 1)[1].strip('"')) for kv in inner.split(",") if kv)


def test_the_chiefs_grpc_requests_are_counted_in_the_metrics_its_http_port_serves(tmp_path: Path) -> None:
    import grpc

    from tauopt.transport.grpc._generated import service_pb2 as pb
    from tauopt.transport.grpc._generated import service_pb2_grpc as pb_grpc

    chief, _, grpc_port, http_port, _ = start_chief(tmp_path, "counted")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            stub = pb_grpc.OracleStub(channel)
            stub.GetSpace(pb.GetSpaceRequest(), timeout=20)
            trial = stub.CreateTrial(pb.CreateTrialRequest(tuner_id="worker0"), timeout=20).trial
            assert trial.trial_id
            try:
                stub.GetTrial(pb.GetTrialRequest(trial_id="not a trial id!"), timeout=20)
                raise AssertionError("a malformed trial id was accepted")
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT
        text = httpx.get(f"http://127.0.0.1:{http_port}/metrics", timeout=10).text
        assert _sample(text, "tauopt_grpc_requests_total", method="GetSpace", code="OK") == 1
        assert _sample(text, "tauopt_grpc_requests_total", method="CreateTrial", code="OK") == 1
        assert _sample(text, "tauopt_grpc_requests_total", method="GetTrial", code="INVALID_ARGUMENT") == 1
        assert _sample(text, "tauopt_grpc_request_seconds_count", method="CreateTrial") == 1
        assert _sample(text, "tauopt_asks_total", door="grpc", outcome="ok") == 1  # CreateTrial is the chief's ask
        assert _sample(text, "tauopt_asks_total", door="http", outcome="ok") == 0
        methods = {_labels(k.rpartition(" ")[0])["method"] for k in text.splitlines() if k.startswith("tauopt_grpc_requests_total{")}
        assert methods <= {"GetSpace", "UpdateSpace", "CreateTrial", "UpdateTrial", "EndTrial", "GetBestTrials", "GetTrial", "other"}
    finally:
        chief.send_signal(signal.SIGTERM)
        chief.communicate(timeout=30)


def test_rpc_labels_stay_bounded_whatever_the_method_or_code() -> None:
    from tauopt.transport._metrics import Metrics

    m = Metrics()
    for i in range(50):
        m.record_rpc(f"/evil.Service/M{i}", f"code {i}", f"outcome {i}!", 0.001)
    m.record_rpc("EndTrial", "OK", "ok", 0.002)
    from prometheus_client import generate_latest

    text = generate_latest(m.registry).decode()
    assert _sample(text, "tauopt_grpc_requests_total", method="other", code="UNKNOWN") == 50
    assert _sample(text, "tauopt_observations_total", door="grpc", outcome="ok") == 1
    assert len([ln for ln in text.splitlines() if ln.startswith("tauopt_grpc_requests_total{")]) == 2
