"""AsyncClient and Client: the same operations over any driver.

    driver="local"  an in-process Engine (memory, or SQLite with store=PATH)
    driver="http"   a tauopt daemon (base_url / TAUOPT_BASE_URL, token / TAUOPT_TOKEN)

The sync Client runs an AsyncClient on an event loop in a daemon thread (an
anyio blocking portal); every method is a `portal.call`, so one Client can be
shared by many threads. A Client never closed is closed at interpreter exit
and never holds the exit up.
"""

from __future__ import annotations

import logging
import math
import os
import queue
import threading
import weakref
from typing import Any, Callable

import anyio
from anyio.from_thread import BlockingPortal

from .errors import invalid

__all__ = ["AsyncClient", "Client", "OPERATIONS"]

OPERATIONS = (
    "create_experiment",
    "experiment",
    "experiments",
    "update_experiment",
    "archive_experiment",
    "suggest",
    "observe",
    "report",
    "reports",
    "suggestions",
    "suggestion",
    "close_suggestion",
    "close_all_suggestions",
    "observations",
    "best",
    "pareto_front",
)


log = logging.getLogger("tauopt.client")
_said_private: list[bool] = []  # the private-engine notice is logged once per process


def _pick_driver(driver: str | None, base_url: str | None) -> str:
    if driver is None:
        driver = "http" if (base_url or os.environ.get("TAUOPT_BASE_URL")) else "local"
        if driver == "local" and not _said_private:
            _said_private.append(True)
            log.warning(
                "Client() without a driver and without TAUOPT_BASE_URL runs a private in-process engine; "
                "set TAUOPT_BASE_URL (and TAUOPT_TOKEN) to reach a `tauopt serve` daemon, "
                "or pass driver='local' to say this is what you want"
            )
    if driver not in ("local", "http"):
        raise invalid(f"driver: {driver!r} is not one of ['local', 'http']")
    return driver


def check_deadline_s(deadline_s: Any) -> float | None:
    """deadline_s as a float (None: no deadline), or an invalid_request ApiError saying what is accepted."""
    if deadline_s is None:
        return None
    if isinstance(deadline_s, bool) or not isinstance(deadline_s, (int, float)) or not math.isfinite(deadline_s) or deadline_s < 0:
        raise invalid(
            f"deadline_s: {deadline_s!r} is not a finite number of seconds >= 0; "
            "pass e.g. deadline_s=30, or None for no deadline"
        )
    return float(deadline_s)


class AsyncClient:
    """`async with AsyncClient(driver="local") as client:` then `await client.suggest(...)`.

    Local options: store (None = memory, a path or sqlite:/// URL), durability,
    and any other Engine keyword. HTTP options: base_url, token, deadline_s
    (bounds every call, the transport's retries included), and any HttpDriver
    keyword. Every operation also takes `deadline_s=` for that call alone.
    """

    def __init__(self, driver: str | None = None, *, base_url: str | None = None, token: str | None = None, **options: Any) -> None:
        self.driver = _pick_driver(driver, base_url)
        self._base_url = base_url
        self._token = token
        self._options = options
        self._backend: Any = None

    async def __aenter__(self) -> "AsyncClient":
        if self.driver == "local":
            from .engine import Engine

            engine = Engine(self._options.pop("store", None), **self._options)
            await engine.__aenter__()
            self._backend = engine
        else:
            from .transport.http._client import HttpDriver

            self._backend = HttpDriver(base_url=self._base_url, token=self._token, **self._options)
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        backend, self._backend = self._backend, None
        if backend is None:
            return
        if self.driver == "local":
            await backend.__aexit__(None, None, None)
        else:
            await backend.aclose()

    close = aclose

    @property
    def engine(self) -> Any:
        """The in-process Engine of a local client (None for http)."""
        return self._backend if self.driver == "local" else None

    def _require(self) -> Any:
        if self._backend is None:
            raise RuntimeError("use the client as `async with AsyncClient(...) as client:` (it is not open)")
        return self._backend


def _async_op(name: str) -> Callable[..., Any]:
    async def op(self: AsyncClient, *args: Any, deadline_s: float | None = None, **kwargs: Any) -> Any:
        backend = self._require()
        call = getattr(backend, name)
        if self.driver == "local" or deadline_s is None:
            # In process there is no transport retry to bound: the engine answers at once.
            check_deadline_s(deadline_s)
            return await call(*args, **kwargs)
        with backend.deadline(deadline_s):
            return await call(*args, **kwargs)

    op.__name__ = name
    return op


def _sync_op(name: str) -> Callable[..., Any]:
    def op(self: "Client", *args: Any, **kwargs: Any) -> Any:
        portal = self._open_portal()
        return portal.call(lambda: getattr(self._client, name)(*args, **kwargs))

    op.__name__ = name
    return op


def _start_portal() -> tuple[BlockingPortal, threading.Thread]:
    ready: queue.Queue[BlockingPortal | BaseException] = queue.Queue()

    async def main() -> None:
        async with BlockingPortal() as portal:
            ready.put(portal)
            await portal.sleep_until_stopped()

    def run() -> None:
        try:
            anyio.run(main)
        except BaseException as exc:  # pragma: no cover - surfaced to the constructor
            ready.put(exc)

    thread = threading.Thread(target=run, name="tauopt-client-loop", daemon=True)
    thread.start()
    got = ready.get()
    if isinstance(got, BaseException):
        raise got
    return got, thread


def _shutdown(portal: BlockingPortal, cm: Any, thread: threading.Thread) -> None:
    try:
        cm.__exit__(None, None, None)
    except Exception:
        pass
    try:
        portal.call(portal.stop)
    except Exception:
        pass
    thread.join(timeout=10)


class Client:
    """The sync client: `Client(driver="local")` or `Client(driver="http", base_url=..., token=...)`.
    Same operations and errors as AsyncClient; safe to share between threads."""

    def __init__(self, driver: str | None = None, *, base_url: str | None = None, token: str | None = None, **options: Any) -> None:
        self._client = AsyncClient(driver, base_url=base_url, token=token, **options)
        self.driver = self._client.driver
        self._portal, thread = _start_portal()
        cm = self._portal.wrap_async_context_manager(self._client)
        try:
            cm.__enter__()
        except BaseException:
            self._portal.call(self._portal.stop)
            thread.join(timeout=10)
            raise
        self._finalizer = weakref.finalize(self, _shutdown, self._portal, cm, thread)

    def _open_portal(self) -> BlockingPortal:
        if not self._finalizer.alive:
            raise RuntimeError("this Client is closed")
        return self._portal

    def close(self) -> None:
        self._finalizer()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    @property
    def engine(self) -> Any:
        return self._client.engine

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run an async callable on the client's event loop (e.g. `client.call(client.engine.inspect, id)`)."""
        return self._open_portal().call(fn, *args)


for _name in OPERATIONS:
    setattr(AsyncClient, _name, _async_op(_name))
    setattr(Client, _name, _sync_op(_name))
