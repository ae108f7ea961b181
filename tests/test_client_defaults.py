"""Silent defaults speak (issue 20): Client() choosing a private in-process engine
says so once; driver="http" without a URL says what to set; a refused
connection is still httpx.ConnectError, naming the URL and asking whether
`tauopt serve` runs there."""

from __future__ import annotations

import logging
import subprocess
import sys

import httpx
import pytest

import tauopt
from tauopt import ApiError, Client
from tauopt.client import _base
from test_http_support import free_port


@pytest.fixture(autouse=True)
def no_tauopt_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TAUOPT_BASE_URL", "TAUOPT_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(_base, "_said_private", [])


def test_client_without_a_driver_logs_once_that_it_runs_a_private_engine(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tauopt.client"):
        with Client() as first, Client() as second:
            assert first.driver == second.driver == "local"
    said = [r for r in caplog.records if r.name == "tauopt.client"]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    assert "private in-process engine" in said[0].getMessage() and "TAUOPT_BASE_URL" in said[0].getMessage()


def test_an_explicit_local_driver_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tauopt.client"):
        with Client(driver="local"):
            pass
    assert not [r for r in caplog.records if r.name == "tauopt.client"]


def test_http_without_a_url_is_an_error_saying_what_to_set() -> None:
    with pytest.raises(ApiError) as caught:
        Client(driver="http", token="tau_x")
    assert caught.value.error_type == "invalid_request"
    assert "base_url=" in caught.value.message and "TAUOPT_BASE_URL" in caught.value.message


def test_a_refused_connection_is_a_connect_error_naming_the_url_and_asking_for_the_daemon() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with Client(driver="http", base_url=url, token="tau_x") as client:
        with pytest.raises(httpx.ConnectError) as caught:
            client.experiments()
    assert url in str(caught.value) and "is `tauopt serve` running there?" in str(caught.value)


def test_version_is_the_package_version_and_the_cli_prints_it() -> None:
    r = subprocess.run([sys.executable, "-m", "tauopt.cli", "--version"], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout) == (0, f"tauopt {tauopt.__version__}\n")
    from importlib.metadata import version

    assert tauopt.__version__ == version("tauopt")


def test_ctrl_c_while_a_sync_client_opens_stops_its_loop_at_once() -> None:
    """Ctrl-C (SIGINT) while Client() waits for its transport to open: the
    constructor raises KeyboardInterrupt and its event-loop thread ends with the
    interrupted task cancelled, instead of the process waiting on it at exit
    (`experiments list --watch` took 10 s to exit, 1 Ctrl-C in ~30)."""
    script = """
import os, signal, sys, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # also where the suite runs with SIGINT ignored
import anyio
from tauopt import Client, Engine

async def never(self):
    await anyio.sleep_forever()

Engine.__aenter__ = never  # the driver the Client opens
threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
t0 = time.monotonic()
try:
    Client(driver="local")
except KeyboardInterrupt:
    loops = [t for t in threading.enumerate() if t.name == "tauopt-client-loop"]
    print(f"interrupted {time.monotonic() - t0:.2f} {len(loops)}")
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    word, seconds, loops = r.stdout.split()
    assert word == "interrupted" and float(seconds) < 5 and loops == "0", r.stdout


def test_a_closed_client_refuses_calls_saying_so_and_lets_its_engine_go() -> None:
    client = Client(driver="local")
    assert client.engine is not None
    client.close()
    assert client.engine is None
    with pytest.raises(RuntimeError, match="this Client is closed"):
        client.experiments()
    with pytest.raises(RuntimeError, match="this Client is closed"):
        client.call(client.experiments)


def test_import_tauopt_loads_no_httpx_until_an_http_client_is_made() -> None:
    code = (
        "import sys, tauopt, tauopt.client\n"
        "before = 'httpx' in sys.modules\n"
        "tauopt.client.HttpDriver\n"
        "print(before, 'httpx' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["False", "True"], r.stdout + r.stderr
