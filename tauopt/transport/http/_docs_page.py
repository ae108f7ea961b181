"""GET /docs: Swagger UI over /openapi.json, loaded from a CDN at one pinned version.

Each file is pinned by version and by subresource integrity (the SHA-384 of the
file as the npm package `swagger-ui-dist` ships it, which the CDN serves
unchanged), so a changed file is refused by the browser rather than run on this
origin; and the page's Content-Security-Policy lets it load those two files, run
its own one inline script (by hash) and call this origin, nothing else. The page
needs network access to the CDN; the API and the dashboard do not.
"""

from __future__ import annotations

import base64
import hashlib
import json

from starlette.responses import HTMLResponse

__all__ = ["swagger_page", "SWAGGER_UI_VERSION"]

SWAGGER_UI_VERSION = "5.17.14"
_CDN = f"https://cdn.jsdelivr.net/npm/swagger-ui-dist@{SWAGGER_UI_VERSION}/"
_JS = (_CDN + "swagger-ui-bundle.js", "sha384-wmyclcVGX/WhUkdkATwhaK1X1JtiNrr2EoYJ+diV3vj4v6OC5yCeSu+yW13SYJep")
_CSS = (_CDN + "swagger-ui.css", "sha384-wxLW6kwyHktdDGr6Pv1zgm/VGJh99lfUbzSn6HNHBENZlCN7W602k9VkGdxuFvPn")


def swagger_page(openapi_url: str, title: str) -> HTMLResponse:
    init = (
        f"SwaggerUIBundle({{url: {json.dumps(openapi_url)}, dom_id: '#swagger-ui', layout: 'BaseLayout', "
        "deepLinking: true, showExtensions: true, showCommonExtensions: true, "
        "presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset]});"
    )
    digest = base64.b64encode(hashlib.sha256(init.encode()).digest()).decode()
    csp = (
        f"default-src 'none'; script-src {_JS[0]} 'sha256-{digest}'; style-src {_CSS[0]} 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
    html = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{_escape(title)}</title>
<link rel="stylesheet" href="{_CSS[0]}" integrity="{_CSS[1]}" crossorigin="anonymous"></head>
<body><div id="swagger-ui"></div>
<script src="{_JS[0]}" integrity="{_JS[1]}" crossorigin="anonymous"></script>
<script>{init}</script>
</body></html>
"""
    return HTMLResponse(html, headers={"Content-Security-Policy": csp, "Referrer-Policy": "no-referrer"})


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
