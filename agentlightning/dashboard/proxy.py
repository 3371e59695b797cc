"""The `agl dashboard` server for a remote store server: the page, plus a read-only relay of `/v1/agl` to the store.

The browser talks only to the server the page came from (the page's security policy allows nothing else), so the
relay is what lets a dashboard on this machine read a store server elsewhere without that server allowing
cross-origin requests. Only GET requests are relayed; the browser's `Authorization` header is passed through
untouched, so the store server still decides who may read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Optional

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .readonly import ReadOnlyGate
from .routes import mount_dashboard

if TYPE_CHECKING:
    import aiohttp

__all__ = ["API_PREFIX", "create_proxy_app", "store_root"]

API_PREFIX = "/v1/agl"
_FORWARDED_REQUEST_HEADERS = ("authorization", "accept")
_FORWARDED_RESPONSE_HEADERS = ("content-type", "www-authenticate", "retry-after", "x-agl-server-time")


def store_root(url: str) -> str:
    """The store server's root URL (`http://host:port`), accepting a URL that already ends in /v1/agl."""
    root = url.rstrip("/")
    if root.endswith(API_PREFIX):
        root = root[: -len(API_PREFIX)]
    return root


def _exact_url(target: str) -> Any:
    """`target` as a URL aiohttp sends exactly as written (the path's percent-escapes are the browser's: kept)."""
    from yarl import URL

    return URL(target, encoded=True)


def _error(status: int, error_type: str, detail: str) -> Response:
    body = json.dumps({"detail": detail, "error_type": error_type}).encode()
    return Response(content=body, status_code=status, media_type="application/json")


class _Relay:
    def __init__(self, root: str, timeout_seconds: float) -> None:
        self.root = root
        self.timeout_seconds = timeout_seconds
        self._session: Optional[aiohttp.ClientSession] = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            import aiohttp

            timeout = aiohttp.ClientTimeout(total=self.timeout_seconds)
            self._session = aiohttp.ClientSession(timeout=timeout)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def forward(self, request: Request) -> Response:
        import aiohttp

        raw_path = request.scope.get("raw_path") or request.url.path.encode()
        target = self.root + raw_path.decode("latin-1")
        if request.url.query:
            target += "?" + request.url.query
        headers = {name: request.headers[name] for name in _FORWARDED_REQUEST_HEADERS if name in request.headers}
        try:
            async with self.session().request(
                request.method, _exact_url(target), headers=headers, allow_redirects=False
            ) as answer:
                body = await answer.read()
        except asyncio.TimeoutError:
            return _error(504, "StoreTimeoutError", f"The store server at {self.root} did not answer in time")
        except aiohttp.ClientError as exc:
            detail = f"Cannot reach the store server at {self.root}: {exc or type(exc).__name__}"
            return _error(502, "StoreUnreachableError", detail)
        kept = {name: answer.headers[name] for name in _FORWARDED_RESPONSE_HEADERS if name in answer.headers}
        return Response(content=body, status_code=answer.status, headers=kept)


def create_proxy_app(store_url: str, *, timeout_seconds: float = 30.0) -> Any:
    """An ASGI app serving the dashboard at `/` and relaying GET `/v1/agl/...` to the store server at `store_url`."""
    relay = _Relay(store_root(store_url), timeout_seconds)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await relay.close()

    app = Starlette(
        routes=[Route(API_PREFIX + "/{path:path}", relay.forward, methods=["GET", "HEAD"])], lifespan=lifespan
    )
    mount_dashboard(app, auth="probe")
    return ReadOnlyGate(app)
