"""The ASGI application serving a LightningStore: routes from the operations table, OTLP ingest, health, metrics."""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Optional

from fastapi import FastAPI
from pydantic_core import to_json
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response

from agentlightning.store.base import LightningStore
from agentlightning.store.http.errors import retry_after_seconds
from agentlightning.store.http.operations import API_PREFIX, OPERATIONS
from agentlightning.store.http.server.bodies import BodyError, read_body
from agentlightning.store.http.server.claims import ClaimLedger
from agentlightning.store.http.server.dispatch import OperationDispatcher, RouteEntry
from agentlightning.store.http.server.handlers import (
    OperationHandler,
    ServerLimits,
    ShutdownSignal,
    error_answer,
    error_body,
    json_response,
)
from agentlightning.store.http.server.idempotency import IdempotencyCache, IdempotencyRecords
from agentlightning.store.http.server.middleware import ApiKeyMiddleware, TimingMiddleware

__all__ = [
    "HEALTH_PATH",
    "METRICS_PATH",
    "PROMETHEUS_PATH",
    "ServerSettings",
    "StoreApp",
    "create_app",
    "create_app_from_env",
]

logger = logging.getLogger(__name__)

HEALTH_PATH = f"{API_PREFIX}/health"
METRICS_PATH = f"{API_PREFIX}/metrics"
PROMETHEUS_PATH = "/v1/prometheus"
"""Where 0.3 served its metrics; the same answer as METRICS_PATH."""
OTLP_TRACES_PATH = "/v1/traces"
_HEALTH_READ_TIMEOUT = 5.0
_OTLP_UNSUPPORTED = ("/v1/metrics", "/v1/logs", "/v1/development/profiles")


@dataclass(frozen=True)
class ServerSettings:
    """Behaviour of a store server. `api_key=None` serves without authentication (loopback use only)."""

    api_key: Optional[str] = None
    limits: ServerLimits = field(default_factory=ServerLimits)
    idempotency_max_entries: int = 100_000
    idempotency_max_bytes: int = 256 * 1024**2
    idempotency_ttl_seconds: float = 600.0
    metrics: bool = True
    cors_allow_origins: Optional[tuple[str, ...]] = None
    dashboard: bool = True
    """Serve the web dashboard at `/` (see docs/dashboard.md)."""
    claim_ack_seconds: float = 300.0
    """A rollout claimed through this server whose attempt shows no sign of life (no heartbeat, span or status
    change) for this long is put back in the queue (its answer was probably lost with its client)."""
    allowed_hosts: Optional[tuple[str, ...]] = None
    """None: Host headers are not checked. A tuple: only requests addressed to this machine (localhost, 127.0.0.1,
    [::1]) or to one of these names are answered (`agentlightning.utils.hosts`; set by `LightningStoreServer` and
    `agl store` for a keyless server on loopback)."""


class StoreApp(FastAPI):
    """A FastAPI app with `front_middleware` (class, kwargs) pairs wrapped around its whole stack, outermost first."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.front_middleware: list[tuple[Any, dict[str, Any]]] = []

    def build_middleware_stack(self) -> Any:
        app = super().build_middleware_stack()
        for cls, options in reversed(self.front_middleware):
            app = cls(app, **options)
        return app


def create_app(store: LightningStore, settings: Optional[ServerSettings] = None) -> StoreApp:
    """An ASGI app serving `store` under /v1/agl (see docs/http.md)."""
    settings = settings or ServerSettings()
    from agentlightning import __version__
    from agentlightning.store.http.openapi import build_openapi

    app = StoreApp(
        title="LightningStore Server",
        version=__version__,
        openapi_url=f"{API_PREFIX}/openapi.json",
        docs_url=f"{API_PREFIX}/docs",
        redoc_url=None,
    )
    app.openapi = build_openapi  # type: ignore[method-assign]
    from agentlightning.store.http.server.shared_idempotency import shared_records_for

    # Stores in a database other processes share keep the records there, so every server process sees them.
    cache: IdempotencyRecords = shared_records_for(
        store, ttl_seconds=settings.idempotency_ttl_seconds
    ) or IdempotencyCache(
        max_entries=settings.idempotency_max_entries,
        max_bytes=settings.idempotency_max_bytes,
        ttl_seconds=settings.idempotency_ttl_seconds,
    )
    shutdown = ShutdownSignal()
    claims = ClaimLedger(store, ack_seconds=settings.claim_ack_seconds)
    routes: list[RouteEntry] = []
    for op in OPERATIONS:
        handler = OperationHandler(op, store, settings.limits, cache, shutdown, claims)
        routes.append((op.method, op.route, handler.rest))
        if op.query_route is not None:
            routes.append(("GET", API_PREFIX + op.query_route, handler.query))
        routes.append(("POST", op.ops_route, handler.ops))

    metrics = _make_metrics(store) if settings.metrics else None
    _add_service_routes(app, store, settings.limits, metrics)
    open_paths = frozenset({HEALTH_PATH})
    if settings.dashboard:
        from agentlightning.dashboard.routes import mount_dashboard

        open_paths |= mount_dashboard(app, auth="required" if settings.api_key else "none", store=store)
    app.add_exception_handler(StarletteHTTPException, _http_exception)  # type: ignore[arg-type]

    # The key check, timing and the operation dispatcher run in front of FastAPI's own middleware and router:
    # store operations never pay for them. Outermost first.
    observe = metrics.observe if metrics is not None else None
    app.front_middleware.append((TimingMiddleware, {"observe": observe, "keyless": not settings.api_key}))
    if settings.cors_allow_origins:
        from starlette.middleware.cors import CORSMiddleware

        origins = list(settings.cors_allow_origins)
        cors = {
            "allow_origins": origins,
            "allow_credentials": "*" not in origins,
            "allow_methods": ["GET", "POST", "OPTIONS"],
            "allow_headers": ["*"],
        }
        app.front_middleware.append((CORSMiddleware, cors))
    if settings.api_key:
        app.front_middleware.append((ApiKeyMiddleware, {"api_key": settings.api_key, "open_paths": open_paths}))
    app.front_middleware.append((OperationDispatcher, {"routes": routes}))
    if settings.allowed_hosts is not None:
        from agentlightning.utils.hosts import LoopbackHostGuard

        app.front_middleware.insert(0, (LoopbackHostGuard, {"allowed": settings.allowed_hosts}))
    app.state.store = store
    app.state.idempotency = cache
    app.state.claims = claims
    app.state.operation_routes = routes
    app.state.shutdown = shutdown
    return app


def _make_metrics(store: LightningStore) -> Any:
    from agentlightning.store.http.server.metrics import StoreMetrics, prometheus_available

    if not prometheus_available():
        logger.info("prometheus_client is not installed; %s is disabled", METRICS_PATH)
        return None
    return StoreMetrics(store)


def _add_service_routes(app: FastAPI, store: LightningStore, limits: ServerLimits, metrics: Any) -> None:
    async def health(request: Request) -> Response:
        """ok only while the store answers a cheap read (a store that cannot open is not healthy)."""
        request.scope["agl.operation"] = "health"
        try:
            await asyncio.wait_for(store.get_latest_resources(), _HEALTH_READ_TIMEOUT)
            problem = getattr(store, "write_problem", None)  # reads work, writes may not (a full disk)
        except Exception as exc:
            problem = exc
        if problem is not None:
            reason = "did not answer in time" if isinstance(problem, asyncio.TimeoutError) else str(problem)
            detail = f"The store cannot serve: {reason}"
            body = to_json({"status": "unavailable", "detail": detail, "error_type": type(problem).__name__})
            return json_response(503, body, {"Retry-After": "1"})
        return json_response(200, b'{"status":"ok"}')

    async def prometheus(request: Request) -> Response:
        request.scope["agl.operation"] = "metrics"
        if metrics is None:
            detail = "Metrics need the prometheus_client package: pip install 'agentlightning[server]'"
            return json_response(501, error_body(501, "NotImplementedError", detail))
        await metrics.refresh()
        body, content_type = metrics.render()
        return Response(content=body, media_type=content_type)

    async def otlp_traces(request: Request) -> Response:
        request.scope["agl.operation"] = "otlp_traces"
        return await _ingest_traces(request, store, limits)

    async def otlp_unsupported(request: Request) -> Response:
        request.scope["agl.operation"] = "otlp_unsupported"
        detail = f"{request.url.path} is not supported by the LightningStore; only traces are ingested"
        return json_response(501, error_body(501, "NotImplementedError", detail))

    app.add_route(HEALTH_PATH, health, methods=["GET"], include_in_schema=False)
    app.add_route(METRICS_PATH, prometheus, methods=["GET"], include_in_schema=False)
    app.add_route(PROMETHEUS_PATH, prometheus, methods=["GET"], include_in_schema=False)
    app.add_route(OTLP_TRACES_PATH, otlp_traces, methods=["POST"], include_in_schema=False)
    for path in _OTLP_UNSUPPORTED:
        app.add_route(path, otlp_unsupported, methods=["POST"], include_in_schema=False)


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


async def _http_exception(request: Request, exc: StarletteHTTPException) -> Response:
    kinds = {404: "NotFound", 405: "MethodNotAllowed"}
    detail = exc.detail if isinstance(exc.detail, str) else "HTTP error"
    if exc.status_code == 404:
        detail = f"No route {request.method} {request.url.path}"
    body = error_body(exc.status_code, kinds.get(exc.status_code, "HTTPError"), detail)
    return json_response(exc.status_code, body, dict(exc.headers or {}))


def create_app_from_env() -> StoreApp:
    """App factory for multi-process serving (`agl store --workers N`): each worker opens the store named by
    AGL_STORE_BACKEND and reads its settings from the AGL_STORE_* variables set by the CLI."""
    from agentlightning.store.url import store_from_url

    url = os.environ.get("AGL_STORE_BACKEND")
    if not url:
        raise RuntimeError("AGL_STORE_BACKEND is not set; start multi-worker servers with `agl store`")
    limits = ServerLimits(
        max_body_bytes=int(os.environ.get("AGL_STORE_MAX_BODY_BYTES", ServerLimits.max_body_bytes)),
        max_wait_seconds=float(os.environ.get("AGL_STORE_MAX_WAIT_SECONDS", ServerLimits.max_wait_seconds)),
    )
    api_key = os.environ.get("AGL_STORE_API_KEY") or None
    settings = ServerSettings(
        api_key=api_key,
        limits=limits,
        allowed_hosts=loopback_host_names(os.environ.get(BIND_HOST_ENV, "127.0.0.1"), api_key),
    )
    app = create_app(store_from_url(url), settings)
    from agentlightning.store.http.server.heap import freeze_startup_heap

    freeze_startup_heap()  # each worker process: full collections then skip the imported libraries
    return app


BIND_HOST_ENV = "AGL_STORE_BIND_HOST"
"""The address `agl store --workers N` binds, for the workers' Host check."""


def loopback_host_names(bind_host: str, api_key: Optional[str]) -> Optional[tuple[str, ...]]:
    """`ServerSettings.allowed_hosts` for a server on `bind_host` with `api_key`: the extra names a keyless
    loopback server answers (AGL_ALLOWED_HOSTS), or None when Host headers need no check."""
    from agentlightning.utils.hosts import allowed_hosts, host_guard_needed

    if not host_guard_needed(bind_host, api_key):
        return None
    names = allowed_hosts()
    return None if names is None else tuple(sorted(names))
