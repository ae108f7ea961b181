"""A wheel built from the tree works where it is installed, not only in this checkout.

`python -m build` makes the sdist and, from it, the wheel (so a file missing from
either shows here). The wheel is installed, not editable, into a fresh venv
whose only other entry on `sys.path` is this venv's site-packages, for the
dependencies: the build and the test stay offline, and every file of tauopt
that runs comes from the wheel. From that venv: `tauopt --version`, `tauopt
serve` answering the dashboard and its static files, the README's quick start,
and a KerasTuner chief with a real worker.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from typing import Iterator

import httpx
import pytest

import tauopt
from test_http_support import free_port, wait_health
from test_readme_programs import quickstart

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "tests" / "kerastuner_workers" / "worker.py"
_LEFT_OUT = shutil.ignore_patterns(".venv", ".git", "__pycache__", "build", "dist", "*.egg-info", "*.png", ".hypothesis")


def _run(args: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=240, **kw)  # type: ignore[call-overload]
    assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dist/ with the sdist and the wheel, built from a copy of the tree."""
    tmp = tmp_path_factory.mktemp("build")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=_LEFT_OUT)
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp / "dist"), str(src)])
    return tmp / "dist"


@pytest.fixture(scope="module")
def venv(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed; the dependencies come from this venv."""
    home = tmp_path_factory.mktemp("venv") / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(home)])
    site = Path(_run([str(home / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    # a plain path line: this venv's .pth files (the editable tauopt among them) are not run
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (wheel,) = built.glob("tauopt-*.whl")
    _run([sys.executable, "-m", "pip", "--python", str(home / "bin" / "python"), "install", "--quiet", "--no-deps", "--no-index", str(wheel)])
    return home


def _env(**more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAUOPT_") and k != "PYTHONPATH"}
    env.update(more)
    return env


def test_the_sdist_and_the_wheel_carry_the_dashboard_the_protos_and_the_type_marker(built: Path) -> None:
    (wheel,) = built.glob("tauopt-*.whl")
    (sdist,) = built.glob("tauopt-*.tar.gz")
    assert wheel.name.startswith(f"tauopt-{tauopt.__version__}-") and sdist.name == f"tauopt-{tauopt.__version__}.tar.gz"
    names = set(zipfile.ZipFile(wheel).namelist())
    static = ROOT / "tauopt" / "transport" / "http" / "static"
    for f in static.iterdir():
        assert f"tauopt/transport/http/static/{f.name}" in names, f"{f.name} is not in the wheel"
    for proto in ("keras_tuner.proto", "service.proto", "keras_tuner_pb2.pyi"):
        assert f"tauopt/transport/grpc/_generated/{proto}" in names
    assert "tauopt/py.typed" in names


def test_the_installed_wheel_imports_from_its_venv_and_names_its_version(venv: Path) -> None:
    where = _run([str(venv / "bin" / "python"), "-c", "import tauopt; print(tauopt.__file__)"], env=_env(), cwd=venv)
    assert where.stdout.strip().startswith(str(venv)), f"tauopt came from {where.stdout.strip()}, not the wheel"
    shown = _run([str(venv / "bin" / "tauopt"), "--version"], env=_env(), cwd=venv)
    assert shown.stdout.strip() == f"tauopt {tauopt.__version__}"


@pytest.fixture(scope="module")
def served(venv: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [str(venv / "bin" / "tauopt"), "serve", "--db", str(venv.parent / "t.db"), "--port", str(port), "--pool", "thread", "--log-level", "warning"],
        env=_env(), cwd=venv.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_health(url, proc, timeout_s=60)
        yield url
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err[-3000:]


def test_the_installed_daemon_serves_the_dashboard_and_its_static_files(served: str) -> None:
    page = httpx.get(served + "/", timeout=10)
    assert page.status_code == 200 and "<html" in page.text.lower()
    assets = [a for a in ("app.js", "style.css", "plotly-base.css") if a in page.text]
    assert assets, "the dashboard page names none of its static files"
    for line in page.text.split('"'):
        if line.startswith("/ui/"):
            assert httpx.get(served + line, timeout=10).status_code == 200, line


def test_the_readme_quick_start_runs_on_the_installed_wheel(venv: Path, tmp_path: Path) -> None:
    (tmp_path / "quickstart.py").write_text(quickstart())
    done = _run([str(venv / "bin" / "python"), "quickstart.py"], env=_env(), cwd=tmp_path)
    assert done.stdout.strip(), "the quick start printed nothing"


@pytest.mark.slow
def test_a_real_kerastuner_worker_runs_against_the_installed_chief(venv: Path, tmp_path: Path) -> None:
    if importlib.util.find_spec("keras_tuner") is None:
        pytest.skip("keras-tuner is not installed (make venv installs it)")
    port = free_port()
    oracle = {"KERASTUNER_ORACLE_IP": "127.0.0.1", "KERASTUNER_ORACLE_PORT": str(port)}
    chief = subprocess.Popen(
        [str(venv / "bin" / "tauopt"), "kerastuner", "chief", "--objective", "score", "--direction", "min",
         "--max-trials", "2", "--db", str(tmp_path / "chief.db"), "--seed", "7"],
        env=_env(**oracle, KERASTUNER_TUNER_ID="chief"), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert chief.stdout is not None
        ready = chief.stdout.readline()
        assert ready and json.loads(ready)["event"] == "ready", chief.communicate(timeout=10)[1][-3000:]
        results = tmp_path / "tuner0.jsonl"
        _run(
            [str(venv / "bin" / "python"), str(WORKER), str(results), "normal"],
            env=_env(**oracle, KERASTUNER_TUNER_ID="tuner0", KERAS_BACKEND="torch", KERAS_HOME=str(tmp_path / "keras"), OMP_NUM_THREADS="1"),
            cwd=tmp_path,
        )
        out, err = chief.communicate(timeout=60)
    finally:
        if chief.poll() is None:
            chief.kill()
            chief.communicate()
    assert chief.returncode == 0, err[-3000:]
    trials = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(trials) == 2 and all(t["status"] == "COMPLETED" for t in trials), trials
    assert '"event": "exit"' in out
