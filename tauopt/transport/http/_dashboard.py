"""The dashboard's static files: GET / and GET /ui/<version>/<file>.

Plain HTML, JS and CSS from `static/` (no build step) plus `plotly.min.js`
read from the installed `plotly` Python package at startup (never committed,
no CDN: it works air-gapped). Asset URLs carry a content hash, so they are
cached for a year as immutable, while `/` is `no-cache` and always names the
current hashes. Assets go gzipped to a browser that accepts it (Plotly's 4.8 MB
is 1.4 MB so), compressed once per daemon on a worker thread. Every response of the dashboard carries a strict
Content-Security-Policy: scripts and styles from this origin only, no inline
code, no framing. The page itself talks only to the public /v1 API.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import anyio
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...errors import api_error

__all__ = ["dashboard_routes", "CSP", "plotly_js_path"]

_STATIC = Path(__file__).with_name("static")
_FILES = {"app.js": "text/javascript", "style.css": "text/css", "plotly-base.css": "text/css", "plotly.min.js": "text/javascript"}
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
_SECURITY = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def plotly_js_path() -> Path:
    """plotly.min.js as shipped by the installed `plotly` package."""
    try:
        import plotly
    except ImportError as exc:  # pragma: no cover - plotly is a server dependency
        raise RuntimeError("the dashboard needs the plotly package (pip install 'tauopt[server]')") from exc
    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


# plotly.js injects the CSS of bundled maps (maplibre) as an inline <style> unless an
# element with this id already exists; the CSP would refuse it (a console error), and
# the dashboard draws no maps, so index.html carries an empty placeholder of that id.
_INJECTED_STYLE = re.compile(rb'getElementById\("([0-9a-f]{16,64})"\)\)\{var \w+=document\.createElement\("style"\)')


@dataclass(frozen=True)
class _Assets:
    version: str
    index: bytes
    files: dict[str, bytes]


@lru_cache(maxsize=1)
def _assets() -> _Assets:
    files = {name: (plotly_js_path() if name == "plotly.min.js" else _STATIC / name).read_bytes() for name in _FILES}
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name])
    version = digest.hexdigest()[:12]
    placeholders = "".join(f'<template id="{m.decode()}"></template>' for m in _INJECTED_STYLE.findall(files["plotly.min.js"]))
    html = (_STATIC / "index.html").read_text().replace("{{version}}", version).replace("{{style_placeholders}}", placeholders)
    index = html.encode()
    return _Assets(version, index, files)


_gzipped: dict[str, bytes] = {}  # the assets of the current version, compressed once


def _gzip(name: str, body: bytes) -> bytes:
    _gzipped[name] = gzip.compress(body, compresslevel=6, mtime=0)
    return _gzipped[name]


def _accepts_gzip(accept_encoding: str) -> bool:
    for part in accept_encoding.lower().split(","):
        coding, _, params = part.partition(";")
        if coding.strip() == "gzip":
            return params.replace(" ", "") not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
    return False


def dashboard_routes() -> list[Route]:
    """GET / and GET /ui/<version>/<file> (not API operations: not in /openapi.json)."""

    async def index(request: Request) -> Response:
        return Response(_assets().index, media_type="text/html; charset=utf-8", headers={**_SECURITY, "Cache-Control": "no-cache"})

    async def asset(request: Request) -> Response:
        assets, version, name = _assets(), request.path_params["version"], request.path_params["name"]
        if name not in _FILES or version != assets.version:
            raise api_error("not_found", "no such dashboard file; reload the page at / for the current version")
        headers = {**_SECURITY, "Cache-Control": "public, max-age=31536000, immutable", "Vary": "Accept-Encoding"}
        body = assets.files[name]
        if _accepts_gzip(request.headers.get("accept-encoding", "")):
            cached = _gzipped.get(name)
            body = cached if cached is not None else await anyio.to_thread.run_sync(_gzip, name, body)
            headers["Content-Encoding"] = "gzip"
        return Response(body, media_type=_FILES[name] + "; charset=utf-8", headers=headers)

    return [
        Route("/", index, methods=["GET"], include_in_schema=False),
        Route("/ui/{version}/{name}", asset, methods=["GET"], include_in_schema=False),
    ]
