"""`tauopt serve` holds thousands of workers' connections: its open-files limit is
raised by itself, a worker's connection outlives an evaluation longer than uvicorn's
default 5 s keep-alive, and more workers than the old per-address cap (250) from one
address are all served (the capacity benchmark's small size, run for real); the
experiments-per-store benchmark's small size runs and draws its curves; and the
cold-ask tail benchmark's small size reports its worst asks."""

from __future__ import annotations

import json
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from test_http_daemon import Daemon

ROOT = Path(__file__).resolve().parent.parent
_LOW = 512  # the soft open-files limit the daemon is started with


def _low_open_files() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(_LOW, hard), hard))


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("capacity") / "tauopt.db", "--log-level", "info", preexec_fn=_low_open_files)
    yield d
    if d.proc.poll() is None:
        d.stop()


def _soft_open_files(pid: int) -> tuple[int, int]:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError("no open-files line")


def _request(sock: socket.socket, path: str) -> bytes:
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(65536)
        assert chunk, f"the server closed the connection: {answer!r}"
        answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    length = int(next(h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")))
    while len(body) < length:
        body += sock.recv(65536)
    return head.split(b"\r\n")[0]


def test_a_kept_alive_connection_idle_longer_than_uvicorns_default_5_s_is_still_served(daemon: Daemon) -> None:
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as sock:
        assert _request(sock, "/v1/health").endswith(b"200 OK")
        time.sleep(6)  # idle past uvicorn's default keep-alive, as a worker's connection is while it evaluates
        assert _request(sock, "/v1/health").endswith(b"200 OK")


@pytest.mark.skipif(
    not Path("/proc/self/limits").exists()
    or not _LOW < resource.getrlimit(resource.RLIMIT_NOFILE)[1] != resource.RLIM_INFINITY,
    reason="reads /proc; needs a finite hard open-files limit above the one the daemon starts with",
)
def test_serve_raises_its_open_files_limit_to_the_hard_limit_and_says_so(daemon: Daemon) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert _soft_open_files(daemon.proc.pid) == (hard, hard)
    rc, _, err = daemon.stop()
    assert rc == 0
    assert f"tauopt: open-files limit raised from {_LOW} to {hard} (hard limit {hard})" in err, err


def test_capacity_benchmark_serves_more_workers_than_the_old_per_address_cap_without_errors(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "capacity.py"), "--smoke", "--workdir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    (run,) = json.loads(out.stdout)["sizes"]
    assert run["workers"] == 300 and run["connected"] == 300, run
    assert run["errors"] == {} and run["pairs"] > 0, run  # no resets: throughput is the benchmark's to measure
    assert run["daemon"]["open_fds"] >= 300, run


def test_experiments_scale_benchmark_measures_a_small_store_and_draws_its_curves(tmp_path: Path) -> None:
    png = tmp_path / "scale.png"
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "experiments_scale.py"), "--smoke", "--workdir", str(tmp_path), "--png", str(png)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    (run,) = json.loads(out.stdout)["sizes"]
    assert run["experiments"] == 300 and run["listed_first_page"] == 300 and run["cold_asks"] == 20, run
    assert run["start_s"] > 0 and run["cold_ask_ms"]["p99"] > 0 and run["rss_idle_mb"] > 0, run
    assert run["metrics_scrape_ms"]["p50"] > 0 and run["kerastuner_project_resume_ms"]["p50"] > 0, run
    assert png.stat().st_size > 0


def test_cold_ask_tail_benchmark_reports_the_worst_asks_with_what_overlapped_them(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "cold_ask_tail.py"), "--experiments", "300", "--cold", "20", "--worst", "2",
         "--workdir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    run = json.loads(out.stdout)
    assert (run["experiments"], run["cold_asks"]) == (300, 20), run
    ms = run["cold_ask_ms"]
    assert 0 < ms["p50"] <= ms["p99"] <= ms["max"], run
    assert run["cpu_ms_per_ask"] > 0 and len(run["load_average"]) == 2, run
    assert len(run["worst"]) == 2 and run["worst"][0]["ms"] >= run["worst"][1]["ms"], run
    for ask in run["worst"]:
        assert ask["gc_ms"] >= 0, ask
        # a cold ask reads its experiment from the store: at least that job overlaps it,
        # named by its connection and job
        assert ask["store_jobs"] and all(":" in name and took >= 0 for name, took in ask["store_jobs"]), ask


@pytest.mark.anyio
async def test_a_daemon_freezes_what_it_made_at_start_so_full_collections_skip_it() -> None:
    """`tauopt serve`'s app (freeze_at_start) moves its start-up objects out of the
    collector's reach once started: a full collection no longer walks them (the pause
    is measured by benchmarks/experiments_scale.py's cold asks)."""
    import gc

    from tauopt import Engine
    from tauopt.transport.http._server import create_app

    gc.unfreeze()
    try:
        async with Engine(pool=None) as engine:
            app = create_app(engine, freeze_at_start=True)
            async with app.router.lifespan_context(app):
                assert gc.get_freeze_count() > 1000  # the libraries, the app, the engine
            gc.unfreeze()
            plain = create_app(engine)  # embedded in someone else's process: left alone
            async with plain.router.lifespan_context(plain):
                assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
