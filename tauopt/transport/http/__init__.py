"""The HTTP door: the REST server (`create_app`).

`create_app` needs the server extra (fastapi, uvicorn) and is imported lazily.
The client side of this wire (`HttpDriver`, its transport and retry policy)
lives in `tauopt.client`; the door never imports it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from ._server import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
