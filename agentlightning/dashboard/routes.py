"""HTTP routes that serve the dashboard's page and files from any Starlette/FastAPI app (the store server, or the
`agl dashboard` server). The routes are exact paths, so nothing outside `static/` can be reached through them."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .assets import Asset, AuthHint, load_assets, security_headers

__all__ = ["mount_dashboard"]


def _endpoint(asset: Asset) -> Any:
    headers = security_headers(asset)

    async def serve(request: Request) -> Response:
        request.scope["agl.operation"] = "dashboard"  # one bounded label in the store's request metrics
        if asset.etag in request.headers.get("if-none-match", ""):
            return Response(status_code=304, headers={"etag": asset.etag, "cache-control": "no-cache"})
        body = b"" if request.method == "HEAD" else asset.body
        response = Response(content=body, headers=headers)
        if request.method == "HEAD":
            response.headers["content-length"] = str(len(asset.body))
        return response

    return serve


def mount_dashboard(app: Any, *, auth: AuthHint) -> frozenset[str]:
    """Add GET routes for the page (`/`) and its files (`/dashboard/...`) to the Starlette app `app`.

    Returns the paths added, which an API-key check must leave open: the files hold no data, and the page asks
    for the key itself.
    """
    assets = load_assets(auth)
    for path, asset in assets.items():
        app.add_route(path, _endpoint(asset), methods=["GET", "HEAD"], include_in_schema=False)
    return frozenset(assets)
