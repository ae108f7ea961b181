"""BaseClient: what AsyncClient and Client share, as httpx's BaseClient is for its two clients.

The base picks and opens the driver, says when a client without a driver runs
a private engine, and runs one operation on the open driver within the call's
`deadline_s` (`_call`). Each client writes every operation out with its own
signature (IDEs and type checkers read them) and a one-line body that hands the
driver's method to `_call`: AsyncClient awaits it, Client runs it on its event
loop thread. The operations' docstrings are written once, in
`tauopt.operations.Operations`; `operation_docs` gives them to both clients.
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager
from typing import Any, Awaitable, Callable, ParamSpec, TypeVar

from ..limits import check_deadline_s
from ..operations import OPERATIONS, Operations
from ._drivers import driver_name, open_driver

__all__ = ["BaseClient", "operation_docs"]

P = ParamSpec("P")
T = TypeVar("T")
C = TypeVar("C", bound=type)

log = logging.getLogger("tauopt.client")
_said_private: list[bool] = []  # the private-engine notice is logged once per process


def _say_private_engine() -> None:
    """A client with no driver and no TAUOPT_BASE_URL: say once that it is not a daemon."""
    if not _said_private:
        _said_private.append(True)
        log.warning(
            "Client() without a driver and without TAUOPT_BASE_URL runs a private in-process engine; "
            "set TAUOPT_BASE_URL (and TAUOPT_TOKEN) to reach a `tauopt serve` daemon, "
            "or pass driver='local' to say this is what you want"
        )


def operation_docs(cls: C) -> C:
    """Give every operation written out in `cls`'s body the protocol's docstring; a client
    that leaves an operation out fails at import, naming it."""
    for name in OPERATIONS:
        method = vars(cls).get(name)
        if method is None:
            raise TypeError(f"{cls.__name__} does not write out the operation {name!r} (tauopt.operations)")
        method.__doc__ = getattr(Operations, name).__doc__
    return cls


class BaseClient:
    """The driver a client talks through, chosen by name or URL (`tauopt.client.register_driver`)."""

    def __init__(self, driver: str | None = None, *, base_url: str | None = None, token: str | None = None, **options: Any) -> None:
        self.driver, base_url = driver_name(driver, base_url)
        if driver is None and self.driver == "local":
            _say_private_engine()
        if self.driver != "local":
            options = dict(options, base_url=base_url, token=token)
        self._options = options
        self._ops: Operations | None = None

    def _open_driver(self) -> AbstractAsyncContextManager[Operations]:
        """The driver, unopened: an async context manager whose enter gives the Operations."""
        return open_driver(self.driver, self._options)

    @property
    def engine(self) -> Any:
        """The in-process Engine of a local client (None for http)."""
        return self._ops if self.driver == "local" else None

    def _require(self) -> Operations:
        if self._ops is None:
            raise RuntimeError("use the client as `async with AsyncClient(...) as client:` (it is not open)")
        return self._ops

    async def _call(self, deadline_s: float | None, op: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """`op` (a method of the open driver) within the call's deadline: over HTTP it bounds
        the retries too; in process there is no retry to bound, so it is only checked."""
        if deadline_s is None:
            return await op(*args, **kwargs)
        if self.driver == "local":
            check_deadline_s(deadline_s)
            return await op(*args, **kwargs)
        with self._require().deadline(deadline_s):  # type: ignore[attr-defined]
            return await op(*args, **kwargs)
