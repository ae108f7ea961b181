"""The client side: everything a worker loads to talk to an engine, in one package.

    _client.py     AsyncClient, Client: every operation written out, over one driver
    _base.py       BaseClient, what both clients share (the driver, a call's deadline)
    _drivers.py    the driver registry: "local" (an in-process Engine), "http", URLs
    _http.py       HttpDriver: the operations over a daemon's REST API (failover
                   across base URLs, the retry loop)
    _retry.py      the retry policy, pure functions
    _transport.py  H11Transport, the httpx transport under HttpDriver (_sockets.py:
                   its byte pipes)

It imports the protocol, the models, the errors and the limits, never a door:
the HTTP server (`tauopt.transport.http`) and the client share only the wire.
`HttpDriver` is imported on first use, so `import tauopt` loads no httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._client import AsyncClient, Client
from ._drivers import DriverFactory, driver_name, open_driver, register_driver

if TYPE_CHECKING:
    from ._http import HttpDriver

__all__ = ["AsyncClient", "Client", "DriverFactory", "HttpDriver", "driver_name", "open_driver", "register_driver"]


def __getattr__(name: str) -> Any:
    if name == "HttpDriver":
        from ._http import HttpDriver

        return HttpDriver
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
