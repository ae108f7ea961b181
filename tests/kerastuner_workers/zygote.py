"""Starts KerasTuner worker processes with keras, torch and keras_tuner already imported.

    python zygote.py KERAS_HOME

Importing them costs each worker seconds of CPU; this process imports them once
and forks a worker per request, so every worker is still its own process running
an unmodified KerasTuner (tests/test_kerastuner_interop.py drives it). A request is a
JSON line on stdin: {"script", "argv", "env", "out"}; the answer is a line
{"pid"}. The child runs `script` as __main__ with that argv and environment, its
stdout and stderr in `out`; when it is reaped its exit status is written to
`out`.exit (negative: the signal that ended it). When stdin closes (the tests
ended, or died) every child still running is killed and this process exits.
"""

from __future__ import annotations

import json
import os
import runpy
import select
import signal
import sys
import traceback

os.environ.update(KERAS_BACKEND="torch", KERAS_HOME=sys.argv[1], OMP_NUM_THREADS="1")

import keras  # noqa: E402,F401
import keras_tuner  # noqa: E402,F401
from keras_tuner.src.distribute import oracle_client  # noqa: E402,F401


def run_child(request: dict) -> None:
    """In the forked child: become the worker, never return."""
    code = 1
    try:
        fd = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.setpgid(0, 0)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.environ.update(request["env"])
        sys.argv = [request["script"], *request["argv"]]
        sys.path[0] = os.path.dirname(request["script"])
        try:
            runpy.run_path(request["script"], run_name="__main__")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if not isinstance(exc.code, (int, type(None))):
                print(exc.code, file=sys.stderr)
        except BaseException:  # noqa: BLE001 - reported as a worker's traceback is
            traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def main() -> int:
    children: dict[int, str] = {}
    buffered = b""
    while True:
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            out = children.pop(pid)
            code = os.waitstatus_to_exitcode(status)
            with open(out + ".exit.tmp", "w") as f:
                f.write(str(code))
            os.replace(out + ".exit.tmp", out + ".exit")
        readable, _, _ = select.select([0], [], [], 0.05)
        if not readable:
            continue
        chunk = os.read(0, 65536)
        if not chunk:
            for pid in children:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
            os._exit(0)  # an interpreter's exit with torch loaded takes seconds
        buffered += chunk
        while b"\n" in buffered:
            line, buffered = buffered.split(b"\n", 1)
            request = json.loads(line)
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:
                run_child(request)
            children[pid] = request["out"]
            print(json.dumps({"pid": pid}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
