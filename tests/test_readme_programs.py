"""The documentation's marked snippets, extracted from the README and the site's
pages (docs/**/*.md) themselves and run as real processes, so the documentation
cannot rot; and every program in examples/ exits 0 (a GP fit thread still inside
torch at interpreter exit used to abort them with status 134).

A runnable block is marked `<!-- snippet: GROUP/FILE -->` on the line above its
fence; an expected output `<!-- output: GROUP/NAME -->`. Every marked snippet,
wherever it is, must be run by a test (`test_every_marked_snippet_is_run`): here,
or, for the integrations' snippets, in process in their own test modules (one Ray
and one keras backend per process), through `run_in_process`."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from test_http_daemon import Daemon, token_of

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
TEXTS = {path.relative_to(ROOT).as_posix(): path.read_text() for path in DOCUMENTS}
MARKED = re.compile(r"<!-- (snippet|output): (\S+) -->\n```[a-z]*\n(.*?)```", re.S)
RUN = {  # every marked snippet, and the test that runs it
    "quickstart/quickstart.py": "test_the_readme_quick_start_exits_0",
    "walkthrough/spec.json": "test_the_five_minute_walkthrough_runs_as_written",
    "walkthrough/worker.py": "test_the_five_minute_walkthrough_runs_as_written",
    "walkthrough/terminal-2.sh": "test_the_five_minute_walkthrough_runs_as_written",
    "walkthrough/terminal-3.sh": "test_the_five_minute_walkthrough_runs_as_written",
    "walkthrough/watch.sh": "test_the_five_minute_walkthrough_runs_as_written",
    "kerastuner/chief.sh": "test_the_kerastuner_example_runs_with_the_readme_commands",
    "kerastuner/worker.sh": "test_the_kerastuner_example_runs_with_the_readme_commands",
    # in the integration's own test module, in process (one Ray, one keras backend per process)
    "integrations/ray_tune.py": "test_integration_ray.py::test_the_readme_tune_program_runs_real_trials_and_tauopts_rule_stops_some",
    "integrations/keras_fit.py": "test_integration_keras.py::test_the_readme_keras_program_runs",
    "integrations/lightning_fit.py": "test_integration_lightning.py::test_the_readme_lightning_program_runs",
}


def marked(kind: str = "snippet") -> dict[str, str]:
    found: dict[str, str] = {}
    for text in TEXTS.values():
        for k, name, body in MARKED.findall(text):
            if k == kind:
                assert name not in found, f"two documentation blocks are marked {kind}: {name}"
                found[name] = body
    return found


def test_every_marked_snippet_is_run() -> None:
    assert set(marked()) == set(RUN), "a marked documentation snippet has no test here (add it to RUN and run it)"
    markers = sum(text.count("<!-- snippet:") for text in TEXTS.values())
    assert markers == len(RUN), "a snippet marker is not directly above a code fence"


def run_in_process(code: str, name: str) -> dict[str, Any]:
    """Run a README program in this process (its library already imported); its globals."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(code, f"README:{name}", "exec"), namespace)
    return namespace


def readme_program_on_a_store(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """Run README program `name` in process on a SQLite store (to read back after it
    closed its client), check it printed best assignments; the store's path."""
    code, db = marked()[name], tmp_path / "tauopt.db"
    assert code.count('Client(driver="local")') == 1
    run_in_process(code.replace('Client(driver="local")', f'Client(driver="local", store={str(db)!r})'), name)
    best = ast.literal_eval(capsys.readouterr().out.strip().splitlines()[-1])
    assert isinstance(best, dict) and best
    return db


def quickstart() -> str:
    return marked()["quickstart/quickstart.py"]


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _token_pattern(token: str) -> str:
    """A shown token as a pattern: ids and numbers (counts, times, values) vary run to run."""
    if re.fullmatch(r"[0-9a-f]{16}", token):
        return r"[0-9a-f]{16}"
    parts = _NUMBER.split(token)
    return _NUMBER.pattern.join(re.escape(p) for p in parts)


def assert_looks_like(shown: str, actual: str) -> None:
    """`actual` has the README's lines, word for word, but for ids and numbers."""
    want, got = shown.strip().splitlines(), actual.strip().splitlines()
    assert len(got) == len(want), f"README shows {len(want)} lines, the run printed:\n{actual}"
    for w, g in zip(want, got):
        pattern = r"\s+".join(_token_pattern(t) for t in w.split())
        assert re.fullmatch(pattern, g.strip()), f"README: {w!r}\nprinted: {g!r}"


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
    assert_looks_like(marked("output")["quickstart/quickstart"], r.stdout)
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


def shell(script: str, cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["bash", "-euc", script], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finished(proc: subprocess.Popen[str], what: str) -> str:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, (what, proc.returncode, err[-3000:])
    return out


def test_the_five_minute_walkthrough_runs_as_written(tmp_path: Path) -> None:
    """Steps 1-6 of the walkthrough: `tauopt serve` (what `make serve` runs) on the
    README's ./tauopt.db, its spec and worker files, terminals 2 and 3 at once,
    then the watch commands, whose output must look like the README's."""
    blocks, outputs = marked(), marked("output")
    # `. .venv/bin/activate` of this checkout's interpreter: tauopt and python on the PATH
    activate = tmp_path / ".venv" / "bin" / "activate"
    activate.parent.mkdir(parents=True)
    activate.write_text(f'export PATH="{Path(sys.executable).parent}:$PATH"\n')
    for name in ("spec.json", "worker.py"):
        (tmp_path / name).write_text(blocks[f"walkthrough/{name}"])
    d = Daemon(tmp_path / "tauopt.db")
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TAUOPT_")}
        env["PYTHONPATH"] = str(ROOT)
        local = {n: blocks[f"walkthrough/{n}"].replace("http://127.0.0.1:8080", d.url) for n in ("terminal-2.sh", "terminal-3.sh", "watch.sh")}
        assert all(d.url in script for script in local.values()), "the walkthrough no longer names the daemon's URL"
        second = shell(local["terminal-2.sh"], tmp_path, env)
        deadline = time.monotonic() + 120
        while not (tmp_path / "experiment.id").read_text().strip() if (tmp_path / "experiment.id").exists() else True:
            assert second.poll() is None, second.communicate()
            assert time.monotonic() < deadline, "terminal 2 did not create the experiment"
            time.sleep(0.1)
        third = shell(local["terminal-3.sh"], tmp_path, env)
        outs = [finished(second, "terminal 2"), finished(third, "terminal 3")]
        for out in outs:
            assert_looks_like(outputs["walkthrough/worker"], out)
        counts = [int(re.search(r"observed (\d+)", out).group(1)) for out in outs]  # type: ignore[union-attr]
        assert all(counts) and 20 <= sum(counts) <= 21, counts  # both worked; the budget was reached
        shown = finished(shell(local["watch.sh"], tmp_path, env), "watch")
        assert_looks_like(outputs["walkthrough/watch"], shown)
        assert "completed" in shown.splitlines()[1]
    finally:
        code, out, err = d.stop()
    assert code == 0, err
    assert out.strip() == str((tmp_path / "tauopt.db.token").resolve()), "step 1: serve prints the token file's path"


@pytest.mark.slow
def test_the_kerastuner_example_runs_with_the_readme_commands(tmp_path: Path) -> None:
    """The README's chief command, then its worker command twice (tuner0, tuner1),
    on examples/kerastuner_search.py: the chief exits 0 after 6 trials, and marks
    its experiment completed (the exit line reports it)."""
    from test_kerastuner_interop import free_port  # skips the module without keras-tuner

    blocks = marked()
    port = str(free_port())
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAUOPT_")}
    env.update(PYTHONPATH=str(ROOT), PATH=f"{Path(sys.executable).parent}:{env['PATH']}", KERAS_HOME=str(tmp_path / "keras"), OMP_NUM_THREADS="1")
    chief_cmd = blocks["kerastuner/chief.sh"].replace("KERASTUNER_ORACLE_PORT=8000", f"KERASTUNER_ORACLE_PORT={port}")
    chief = subprocess.Popen(["bash", "-euc", chief_cmd], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert chief.stdout is not None
        ready = chief.stdout.readline()
        assert '"event": "ready"' in ready, chief.stderr.read() if chief.stderr else ""
        workers = []
        for tuner in ("tuner0", "tuner1"):
            cmd = blocks["kerastuner/worker.sh"].replace("KERASTUNER_ORACLE_PORT=8000", f"KERASTUNER_ORACLE_PORT={port}")
            cmd = cmd.replace("KERASTUNER_TUNER_ID=tuner0", f"KERASTUNER_TUNER_ID={tuner}")
            workers.append(shell(cmd, ROOT, dict(env, KT_DIR=str(tmp_path / tuner))))
        outs = [finished(w, "worker") for w in workers]
        assert [o.strip() for o in outs] == ["worker tuner0 done", "worker tuner1 done"]
        out, err = chief.communicate(timeout=60)
    finally:
        if chief.poll() is None:
            chief.kill()
            chief.communicate()
    assert chief.returncode == 0, err[-3000:]
    exit_line = [line for line in out.splitlines() if '"event": "exit"' in line]
    assert exit_line and '"completed": 6' in exit_line[0], out
    assert "marked completed" in err
