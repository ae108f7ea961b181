"""Schemathesis (fuzzing and stateful phases, one worker, bounded) against a
real `tauopt serve`: no 5xx, every response matches /openapi.json, and the
spec lets the fuzzer reach every operation: no "repeatedly returned 404"
(links chain create -> suggest -> observe/get/close) and no "mostly rejected
generated data" (request schemas state what validation enforces)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from test_http_daemon import Daemon, tauopt

SCHEMATHESIS = str(Path(sys.executable).with_name("schemathesis"))
CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"
# Links only as the spec declares them (inferred ones pair ids of different experiments); longer scenarios.
CONFIG = "[phases.stateful]\nmax-steps = 12\n\n[phases.stateful.inference]\nalgorithms = []\n"


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[subprocess.CompletedProcess[str]]:
    tmp = tmp_path_factory.mktemp("fuzz")
    db = tmp / "fuzz.db"
    made = tauopt("token", "create", "--db", str(db), "--name", "fuzz", "--suggestions-per-day", "1000000",
                  "--max-active-experiments", "1000000", "--create")
    assert made.returncode == 0, made.stderr
    (tmp / "schemathesis.toml").write_text(CONFIG)
    daemon = Daemon(db)
    try:
        run = subprocess.run(
            [SCHEMATHESIS, "--config-file", str(tmp / "schemathesis.toml"), "run", daemon.url + "/openapi.json",
             "-H", f"Authorization: Bearer {made.stdout.strip()}", "--workers", "1", "--phases", "fuzzing,stateful",
             "--max-time", "40", "--max-examples", "25", "--request-timeout", "10", "--seed", "20261201",
             "--checks", CHECKS, "--no-color"],
            capture_output=True, text=True, timeout=120, cwd=tmp, env=dict(os.environ, NO_COLOR="1"),
        )
    finally:
        code, _, err = daemon.stop()
    assert code == 0, err
    yield run


def report(run: subprocess.CompletedProcess[str]) -> str:
    return run.stdout[-6000:] + run.stderr[-2000:]


def test_fuzzing_every_operation_finds_no_5xx_and_no_response_off_its_schema(fuzzed: subprocess.CompletedProcess[str]) -> None:
    assert fuzzed.returncode == 0, report(fuzzed)
    assert "Tested: 22" in fuzzed.stdout, report(fuzzed)  # 14, plus summary, workers, importance (issue 14), report and list reports (issue 19), pareto_front (issue 18), the report log, columnar observations
    # "(?<!\d)": "10 covered" is not "0 covered"
    assert not re.search(r"(?<!\d)0 covered", fuzzed.stdout) and "API Links:" in fuzzed.stdout, report(fuzzed)


@pytest.mark.xfail(
    strict=False,
    reason="not done (issue 10 item 6): a 40 s run still warns on DELETE .../suggestions/{sid} (404) and "
    "POST /v1/experiments (lo < hi cannot be said in JSON Schema)",
)
@pytest.mark.parametrize("warning", ["repeatedly returned 404", "mostly rejected generated data"])
def test_the_fuzzer_reaches_every_operation_with_data_it_accepts(fuzzed: subprocess.CompletedProcess[str], warning: str) -> None:
    assert warning not in fuzzed.stdout, report(fuzzed)
