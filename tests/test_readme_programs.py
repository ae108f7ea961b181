"""The README's quick start (extracted from the README itself) and every program
in examples/ run as real processes and exit 0 (issue 10 item 7: a GP fit thread
still inside torch at interpreter exit used to abort them with status 134)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_http_daemon import Daemon, token_of

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def quickstart() -> str:
    section = re.search(r"<!-- section:quickstart -->(.*?)<!-- /section:quickstart -->", README, re.S)
    assert section is not None, "README lost its quickstart markers"
    code = re.search(r"```python\n(.*?)```", section.group(1), re.S)
    assert code is not None, "the quick start has no python block"
    return code.group(1)


def run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("TAUOPT_")}
    full.update(PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=300)


def check_best(out: str) -> None:
    best = ast.literal_eval(out.strip().splitlines()[-1])
    assert set(best) == {"lr", "layers", "optimizer"} and 1e-4 <= best["lr"] <= 1e-1


@pytest.mark.parametrize("store", [None, "tauopt.db"])
def test_the_readme_quick_start_exits_0(tmp_path: Path, store: str | None) -> None:
    code = quickstart()
    if store is not None:
        code = code.replace('Client(driver="local")', f'Client(driver="local", store="{store}")', 1)
        assert store in code
    (tmp_path / "quickstart.py").write_text(code)
    r = run(["quickstart.py"], tmp_path)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert "terminate called" not in r.stderr
    check_best(r.stdout)
    if store is not None:
        assert (tmp_path / store).exists()


@pytest.mark.parametrize("name", ["backoff.py", "tagged_workers.py"])
def test_local_examples_exit_0(tmp_path: Path, name: str) -> None:
    r = run([str(ROOT / "examples" / name)], tmp_path)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])


def test_http_examples_exit_0_against_a_running_daemon(tmp_path: Path) -> None:
    d = Daemon(tmp_path / "served.db")
    try:
        env = {"TAUOPT_BASE_URL": d.url, "TAUOPT_TOKEN": token_of(d)}
        for name in ("parallel_workers.py", "parallel_workers_rest.py"):
            r = run([str(ROOT / "examples" / name), "--workers", "2", "--rounds", "3"], tmp_path, env)
            assert r.returncode == 0, (name, r.returncode, r.stderr[-2000:])
    finally:
        code, _, err = d.stop()
    assert code == 0, err
