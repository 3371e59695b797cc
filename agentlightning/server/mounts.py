"""What a store server serves beside the store API: metrics, OTLP trace intake and the web dashboard.

Each mount is a `ServerMount` (`agentlightning.store.http.server.app`): it adds its routes to the app the store layer
built and returns the paths it serves without the API key. The store server gets them through the
`STORE_SERVER_MOUNTS` extension point, which the package root fills with `STORE_SERVER_MOUNTS` below.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from agentlightning.store.base import LightningStore
from agentlightning.store.http.errors import retry_after_seconds
from agentlightning.store.http.server.app import (
    METRICS_PATH,
    OTLP_TRACES_PATH,
    OTLP_UNSUPPORTED_PATHS,
    PROMETHEUS_PATH,
    ServerMount,
    ServerSettings,
    StoreApp,
)
from agentlightning.store.http.server.bodies import BodyError, read_body
from agentlightning.store.http.server.handlers import ServerLimits, error_answer, error_body, json_response

__all__ = ["STORE_SERVER_MOUNTS", "mount_dashboard", "mount_metrics", "mount_otlp"]

logger = logging.getLogger(__name__)


def mount_metrics(app: StoreApp, store: LightningStore, settings: ServerSettings) -> Iterable[str]:
    """Prometheus metrics at METRICS_PATH and PROMETHEUS_PATH (501 without prometheus_client or with
    `settings.metrics` off); request timings go to the metrics through `app.observe_request`."""
    metrics = _make_metrics(store) if settings.metrics else None
    if metrics is not None:
        app.observe_request = metrics.observe

    async def prometheus(request: Request) -> Response:
        request.scope["agl.operation"] = "metrics"
        if metrics is None:
            detail = "Metrics need the prometheus_client package: pip install 'agentlightning[server]'"
            return json_response(501, error_body(501, "NotImplementedError", detail))
        await metrics.refresh()
        body, content_type = metrics.render()
        return Response(content=body, media_type=content_type)

    app.add_route(METRICS_PATH, prometheus, methods=["GET"], include_in_schema=False)
    app.add_route(PROMETHEUS_PATH, prometheus, methods=["GET"], include_in_schema=False)
    return ()


def _make_metrics(store: LightningStore) -> Any:
    from agentlightning.store.http.server.metrics import StoreMetrics, prometheus_available

    if not prometheus_available():
        logger.info("prometheus_client is not installed; %s is disabled", METRICS_PATH)
        return None
    return StoreMetrics(store)


def mount_otlp(app: StoreApp, store: LightningStore, settings: ServerSettings) -> Iterable[str]:
    """The OTLP/HTTP trace receiver at OTLP_TRACES_PATH (protobuf or JSON); the other OTLP signals answer 501."""
    limits = settings.limits

    async def otlp_traces(request: Request) -> Response:
        request.scope["agl.operation"] = "otlp_traces"
        return await _ingest_traces(request, store, limits)

    async def otlp_unsupported(request: Request) -> Response:
        request.scope["agl.operation"] = "otlp_unsupported"
        detail = f"{request.url.path} is not supported by the LightningStore; only traces are ingested"
        return json_response(501, error_body(501, "NotImplementedError", detail))

    app.add_route(OTLP_TRACES_PATH, otlp_traces, methods=["POST"], include_in_schema=False)
    for path in OTLP_UNSUPPORTED_PATHS:
        app.add_route(path, otlp_unsupported, methods=["POST"], include_in_schema=False)
    return ()


async def _ingest_traces(request: Request, store: LightningStore, limits: ServerLimits) -> Response:
    headers = {key.decode("latin-1"): value.decode("latin-1") for key, value in request.scope["headers"]}
    try:
        body = await read_body(
            request.receive, headers, max_bytes=limits.max_body_bytes, timeout_seconds=limits.body_timeout_seconds
        )
    except BodyError as exc:
        return json_response(exc.status, error_body(exc.status, exc.error_type, exc.detail))
    try:
        from agentlightning.store.http.server import otlp
    except ImportError as exc:  # pragma: no cover - opentelemetry-proto ships with the server extra
        detail = f"OTLP ingest needs opentelemetry-proto ({exc}): pip install 'agentlightning[server]'"
        return json_response(501, error_body(501, "NotImplementedError", detail))
    try:
        decoded, as_json = otlp.decode_export_request(body, headers.get("content-type", ""))
    except otlp.OtlpDecodeError as exc:
        status = 415 if str(exc).startswith("Unsupported Content-Type") else 400
        return json_response(status, error_body(status, "InvalidArgumentError", str(exc)))
    try:
        result = await otlp.ingest_spans(store, decoded)
    except Exception as exc:  # the database is down or full: 503 or 507 naming it (OTLP exporters retry 503)
        status, payload = error_answer(exc, "otlp_traces")
        retry_after = retry_after_seconds(status)
        return json_response(status, payload, {"Retry-After": str(retry_after)} if retry_after else None)
    media_type = otlp.JSON if as_json else otlp.PROTOBUF
    return Response(content=otlp.encode_response(result, as_json), media_type=media_type)


def mount_dashboard(app: StoreApp, store: LightningStore, settings: ServerSettings) -> Iterable[str]:
    """The web dashboard at `/` when `settings.dashboard` (see docs/dashboard.md); its pages and assets are open."""
    if not settings.dashboard:
        return ()
    from agentlightning.dashboard.routes import mount_dashboard as mount

    return mount(app, auth="required" if settings.api_key else "none", store=store)


STORE_SERVER_MOUNTS: tuple[ServerMount, ...] = (mount_metrics, mount_otlp, mount_dashboard)
"""What every store server serves beside the store API, in the order the routes are added."""
