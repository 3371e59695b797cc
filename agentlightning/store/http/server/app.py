"""The ASGI application serving a LightningStore: routes from the operations table and health.

What else a store server serves (metrics, OTLP intake, the dashboard) is added by mounts (`ServerSettings.mounts`);
by default the ones of the assembly package `agentlightning.server`, installed at an extension point by the package
root, so that the store never imports the layers above it."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Optional

from fastapi import FastAPI
from pydantic_core import to_json
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response

from agentlightning.store.base import LightningStore
from agentlightning.store.http.operations import API_PREFIX, OPERATIONS
from agentlightning.store.http.server.claims import ClaimLedger
from agentlightning.store.http.server.dispatch import OperationDispatcher, RouteEntry, operation_routes
from agentlightning.store.http.server.handlers import (
    OperationHandler,
    ServerLimits,
    ShutdownSignal,
    error_body,
    json_response,
)
from agentlightning.store.http.server.idempotency import IdempotencyCache, IdempotencyRecords
from agentlightning.store.http.server.middleware import ApiKeyMiddleware, TimingMiddleware
from agentlightning.utils import extensions

__all__ = [
    "HEALTH_PATH",
    "METRICS_PATH",
    "OTLP_TRACES_PATH",
    "PROMETHEUS_PATH",
    "ServerMount",
    "ServerSettings",
    "StoreApp",
    "create_app",
    "create_app_from_env",
    "installed_mounts",
]

logger = logging.getLogger(__name__)

HEALTH_PATH = f"{API_PREFIX}/health"
METRICS_PATH = f"{API_PREFIX}/metrics"
PROMETHEUS_PATH = "/v1/prometheus"
"""Where 0.3 served its metrics; the same answer as METRICS_PATH."""
OTLP_TRACES_PATH = "/v1/traces"
OTLP_UNSUPPORTED_PATHS = ("/v1/metrics", "/v1/logs", "/v1/development/profiles")
"""OTLP signals a store does not take: answered 501."""
_HEALTH_READ_TIMEOUT = 5.0
_ROUTING_ENV = "AGL_STORE_ROUTING"
"""Private, for measurement only (`benchmarks/store_http.py --routing`, which sets it for its server process):
"starlette" routes the store operations through Starlette's router instead of the dispatcher. Not a setting."""


ServerMount = Callable[["StoreApp", LightningStore, "ServerSettings"], Iterable[str]]
"""Adds routes (or an observer) to a store server's app; returns the paths it serves without the API key."""


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
    mounts: Optional[tuple[ServerMount, ...]] = None
    """What the server serves beside the store API and /health. None: the installed mounts (`installed_mounts()`:
    metrics, OTLP intake and the dashboard, from `agentlightning.server`); () serves the store API only."""
    allowed_hosts: Optional[tuple[str, ...]] = None
    """None: Host headers are not checked. A tuple: only requests addressed to this machine (localhost, 127.0.0.1,
    [::1]) or to one of these names are answered (`agentlightning.utils.hosts`; set by `LightningStoreServer` and
    `agl store` for a keyless server on loopback)."""


class StoreApp(FastAPI):
    """A FastAPI app with `front_middleware` (class, kwargs) pairs wrapped around its whole stack, outermost first,
    and `observe_request`, the timing middleware's observer."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.front_middleware: list[tuple[Any, dict[str, Any]]] = []
        self.observe_request: Optional[Callable[[str, str, int, float], None]] = None
        """Told of each request (operation, method, status, seconds) by the timing middleware; set by a mount."""

    def build_middleware_stack(self) -> Any:
        app = super().build_middleware_stack()
        for cls, options in reversed(self.front_middleware):
            app = cls(app, **options)
        return app


def create_app(
    store: LightningStore, settings: Optional[ServerSettings] = None, *, _routing: Optional[str] = None
) -> StoreApp:
    """An ASGI app serving `store` under /v1/agl (see docs/http.md).

    `_routing` (private, for measurement): "dispatcher" (the default) routes the store operations with the
    `OperationDispatcher` in front of FastAPI; "starlette" registers them as routes of the FastAPI app's own router,
    answering the same. None reads AGL_STORE_ROUTING (set by `benchmarks/store_http.py --routing` only)."""
    settings = settings or ServerSettings()
    routing = _routing or os.environ.get(_ROUTING_ENV) or "dispatcher"
    if routing not in ("dispatcher", "starlette"):
        raise ValueError(f"Unknown store routing {routing!r}: 'dispatcher' or 'starlette'")
    from agentlightning.store.http.openapi import build_openapi
    from agentlightning.version import __version__

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

    _add_health_route(app, store)
    open_paths = frozenset({HEALTH_PATH})
    for mount in settings.mounts if settings.mounts is not None else installed_mounts():
        open_paths |= frozenset(mount(app, store, settings))
    app.add_exception_handler(StarletteHTTPException, _http_exception)  # type: ignore[arg-type]

    if routing == "starlette":
        # Ahead of health, docs and the mounts' routes, as the dispatcher is ahead of them. The dispatcher answers 404
        # to a store path with a trailing slash, which the router would redirect to the path without; not
        # redirecting also answers 404 to health or docs with a trailing slash (redirected with the dispatcher).
        app.router.routes[0:0] = operation_routes(routes)
        app.router.redirect_slashes = False

    # The key check, timing and the operation dispatcher run in front of FastAPI's own middleware and router:
    # store operations never pay for them (but with the "starlette" routing). Outermost first.
    app.front_middleware.append((TimingMiddleware, {"observe": app.observe_request, "keyless": not settings.api_key}))
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
    if routing == "dispatcher":
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


def installed_mounts() -> tuple[ServerMount, ...]:
    """The mounts a store server serves by default: those installed at the `STORE_SERVER_MOUNTS` extension point
    (by the package root: metrics, OTLP intake and the dashboard of the assembly package `agentlightning.server`)."""
    if not extensions.installed(extensions.STORE_SERVER_MOUNTS):
        return ()
    return tuple(extensions.load(extensions.STORE_SERVER_MOUNTS))


def _add_health_route(app: FastAPI, store: LightningStore) -> None:
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

    app.add_route(HEALTH_PATH, health, methods=["GET"], include_in_schema=False)


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
