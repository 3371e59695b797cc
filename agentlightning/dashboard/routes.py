"""HTTP routes that serve the dashboard's page and files from any Starlette/FastAPI app (the store server, or the
`agl dashboard` server), and, next to a store, the whole-run aggregates the Overview charts (`progress.py`) and the
run's drift rate (`drift.py`). The routes are exact paths, so nothing outside `static/` can be reached through them."""

from __future__ import annotations

import json
from typing import Any, Optional

from starlette.requests import Request
from starlette.responses import Response

from .assets import Asset, AuthHint, load_assets, security_headers

__all__ = ["DRIFT_PATH", "PROGRESS_PATH", "mount_dashboard"]

PROGRESS_PATH = "/v1/agl/dashboard/progress"
"""Whole-run aggregates of a store's finished rollouts (GET, `?buckets=N` time buckets, 1 to 500, default 60)."""
_MAX_BUCKETS = 500
DRIFT_PATH = "/v1/agl/dashboard/drift"
"""The drift rate of the newest finished rollouts with LLM calls (GET, `?rollouts=N`, 1 to 500, default 100)."""
_MAX_DRIFT_ROLLOUTS = 500


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


def _json(status: int, body: Any) -> Response:
    return Response(content=json.dumps(body).encode(), status_code=status, media_type="application/json")


def _count_param(request: Request, name: str, default: int, maximum: int) -> tuple[int, Optional[Response]]:
    """The whole number `name` of the query (1 to `maximum`), or a 400 answer naming what was wrong."""
    raw = request.query_params.get(name, str(default))
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= maximum:
        detail = f"{name} must be a whole number from 1 to {maximum}, got {raw!r}"
        return value, _json(400, {"detail": detail, "error_type": "InvalidArgumentError"})
    return value, None


def _progress_endpoint(store: Any) -> Any:
    from .progress import RunProgress

    progress = RunProgress(store)

    async def serve(request: Request) -> Response:
        request.scope["agl.operation"] = "dashboard_progress"
        buckets, error = _count_param(request, "buckets", 60, _MAX_BUCKETS)
        return error or _json(200, await progress.snapshot(buckets))

    return serve


def _drift_endpoint(store: Any) -> Any:
    from .drift import RunDrift

    drift = RunDrift(store)

    async def serve(request: Request) -> Response:
        request.scope["agl.operation"] = "dashboard_drift"
        rollouts, error = _count_param(request, "rollouts", 100, _MAX_DRIFT_ROLLOUTS)
        return error or _json(200, await drift.snapshot(rollouts))

    return serve


def mount_dashboard(app: Any, *, auth: AuthHint, store: Optional[Any] = None) -> frozenset[str]:
    """Add GET routes for the page (`/`) and its files (`/dashboard/...`) to the Starlette app `app`, and, with a
    `store`, the whole-run aggregates at PROGRESS_PATH and the run's drift rate at DRIFT_PATH (which an API key
    protects like the rest of the API).

    Returns the paths of the page and its files, which an API-key check must leave open: the files hold no data,
    and the page asks for the key itself.
    """
    assets = load_assets(auth)
    for path, asset in assets.items():
        app.add_route(path, _endpoint(asset), methods=["GET", "HEAD"], include_in_schema=False)
    if store is not None:
        app.add_route(PROGRESS_PATH, _progress_endpoint(store), methods=["GET"], include_in_schema=False)
        app.add_route(DRIFT_PATH, _drift_endpoint(store), methods=["GET"], include_in_schema=False)
    return frozenset(assets)
