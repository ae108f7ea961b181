"""The client drivers' registry: a name (or a URL) -> an opened `Operations`.

    "local"            an in-process Engine (memory, or SQLite with store=PATH)
    "http"             a tauopt daemon (base_url / TAUOPT_BASE_URL, token / TAUOPT_TOKEN)
    "http://host:port" the http driver with that base_url (https:// too)

A driver is an async context manager whose `__aenter__` returns an
`Operations`; each factory imports its driver lazily, so `import tauopt` loads
neither the engine's SQLite store nor httpx.
"""

from __future__ import annotations

import os
from contextlib import AbstractAsyncContextManager
from typing import Any, Callable
from urllib.parse import urlsplit

from ..errors import invalid
from ..operations import Operations

__all__ = ["DriverFactory", "register_driver", "open_driver", "driver_name"]

DriverFactory = Callable[..., AbstractAsyncContextManager[Operations]]
_DRIVERS: dict[str, DriverFactory] = {}
_URL_SCHEMES = {"http": "http", "https": "http"}


def register_driver(name: str, factory: DriverFactory) -> None:
    """Make `driver=name` open `factory(**options)` (options: what the client was given)."""
    _DRIVERS[name] = factory


def driver_name(driver: str | None, base_url: str | None) -> tuple[str, str | None]:
    """(registered name, base_url) for a driver argument: a name, a URL, or None (pick by environment)."""
    if driver is None:
        driver = "http" if (base_url or os.environ.get("TAUOPT_BASE_URL")) else "local"
    scheme = urlsplit(driver).scheme if "://" in driver else ""
    if scheme in _URL_SCHEMES:
        return _URL_SCHEMES[scheme], base_url or driver
    if driver not in _DRIVERS:
        raise invalid(f"driver: {driver!r} is not one of {sorted(_DRIVERS)} or an http(s):// URL")
    return driver, base_url


def open_driver(name: str, options: dict[str, Any]) -> AbstractAsyncContextManager[Operations]:
    return _DRIVERS[name](**options)


def _local(*, store: Any = None, **options: Any) -> AbstractAsyncContextManager[Operations]:
    from ..engine import Engine

    return Engine(store, **options)


def _http(**options: Any) -> AbstractAsyncContextManager[Operations]:
    from ._http import HttpDriver

    return HttpDriver(**options)


register_driver("local", _local)
register_driver("http", _http)
