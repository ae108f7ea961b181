"""The HTTP door: the REST server (`create_app`) and its client (`HttpDriver`).

`create_app` needs the server extra (fastapi, uvicorn) and is imported lazily,
so importing the client never loads fastapi.
"""

from __future__ import annotations

from typing import Any

from ._client import HttpDriver

__all__ = ["HttpDriver", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from ._server import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
