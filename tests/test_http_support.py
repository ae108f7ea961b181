"""Helpers for the HTTP tests: a real uvicorn server on an ephemeral 127.0.0.1
port, run in a thread (httpx's tests/conftest.py pattern). No tests here."""

from __future__ import annotations

import socket
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import anyio

import uvicorn

sys.path.append(str(Path(__file__).resolve().parent.parent / "benchmarks"))
from _bench_common import wait_health  # noqa: E402  # one wait for a daemon's health, the benchmarks' too

__all__ = ["ServerThread", "served_with_token", "free_port", "seed_credentials", "wait_health"]


class ServerThread:
    """Run an ASGI app on uvicorn in a daemon thread; `url` once started."""

    def __init__(self, app: Any, *, lifespan: str = "on", http: str = "auto", **options: Any) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        scheme = "https" if options.get("ssl_certfile") else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, lifespan=lifespan, log_level="warning", access_log=False, http=http, **options)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> "ServerThread":
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
        self.sock.close()


@contextmanager
def served_with_token(name: str = "me") -> Iterator[tuple[str, str]]:
    """A real server on a memory store holding one credential: (url, its token)."""
    import anyio

    from tauopt.engine._auth import new_credential
    from tauopt.store import MemoryStore
    from tauopt.transport.http._server import create_app

    store = MemoryStore()
    cred, token = new_credential(name)
    anyio.run(store.put_credential, cred)
    with ServerThread(create_app(db=store)) as running:
        yield running.url, token


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def seed_credentials(db: Path, *names: str, **limits: Any) -> dict[str, str]:
    """A credential per name in the SQLite store at `db` (created if missing): name -> token."""
    from tauopt.engine._auth import new_credential
    from tauopt.store._sqlite import SqliteStore

    tokens: dict[str, str] = {}

    async def seed() -> None:
        async with SqliteStore(db) as store:
            for name in names:
                cred, tokens[name] = new_credential(name, **limits)
                await store.put_credential(cred)

    anyio.run(seed)
    return tokens
