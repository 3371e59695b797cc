"""ASGI middleware of the store server: API-key check, request timing (metrics and `Server-Timing`), and CORS."""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable
from typing import Any, Optional

from agentlightning.store.core import clock
from agentlightning.store.http.server.handlers import error_body

__all__ = ["KEYLESS_HEADER", "SERVER_TIME_HEADER", "ApiKeyMiddleware", "TimingMiddleware"]

ASGIApp = Callable[..., Any]


def _header(scope: dict[str, Any], name: bytes) -> Optional[bytes]:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value
    return None


async def _send_error(send: Any, status: int, error_type: str, detail: str, headers: list[tuple[bytes, bytes]]) -> None:
    body = error_body(status, error_type, detail)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


class ApiKeyMiddleware:
    """Requires `Authorization: Bearer <key>` on every HTTP request except the open paths (health, CORS preflight).

    The comparison takes the same time whatever the key, so the key cannot be guessed byte by byte.
    """

    def __init__(self, app: ASGIApp, api_key: str, open_paths: frozenset[str]) -> None:
        if not api_key:
            raise ValueError("api_key must not be empty")
        self.app = app
        self._expected = b"Bearer " + api_key.encode()
        self._open_paths = open_paths

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in self._open_paths or scope["method"] == "OPTIONS":
            await self.app(scope, receive, send)
            return
        given = _header(scope, b"authorization")
        if given is None or not hmac.compare_digest(given, self._expected):
            detail = "Missing API key" if given is None else "Invalid API key"
            await _send_error(
                send,
                401,
                "StoreUnauthorizedError",
                f"{detail}: send the header 'Authorization: Bearer <key>'",
                [(b"www-authenticate", b'Bearer realm="agentlightning"')],
            )
            return
        await self.app(scope, receive, send)


SERVER_TIME_HEADER = b"x-agl-server-time"
"""Response header carrying the store's clock (seconds since the epoch) when the response started: the dashboard
measures ages (heartbeats, running attempts) against it, so a browser whose clock is off does not misjudge them."""


KEYLESS_HEADER = (b"x-agl-auth", b"none")
"""Response header of a server that requires no API key: a client configured with a key warns that it is not
checked (a key meant for another server, or a server started without its key)."""


class TimingMiddleware:
    """Measures each request until its response starts; reports it to `observe(operation, method, status,
    seconds)` and in a `Server-Timing: app;dur=<ms>` header, next to the store's clock (`X-AGL-Server-Time`) and,
    when `keyless`, the `X-AGL-Auth: none` header."""

    def __init__(
        self, app: ASGIApp, observe: Optional[Callable[[str, str, int, float], None]] = None, keyless: bool = False
    ) -> None:
        self.app = app
        self._observe = observe
        self._keyless = keyless

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def timed_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                elapsed = time.perf_counter() - started
                headers = list(message.get("headers", ()))
                headers.append((b"server-timing", f"app;dur={elapsed * 1000:.3f}".encode()))
                headers.append((SERVER_TIME_HEADER, f"{clock.now():.3f}".encode()))
                if self._keyless:
                    headers.append(KEYLESS_HEADER)
                message = {**message, "headers": headers}
                if self._observe is not None:
                    operation = scope.get("agl.operation", "unmatched")  # bounded label set
                    self._observe(operation, scope["method"], int(message["status"]), elapsed)
            await send(message)

        await self.app(scope, receive, timed_send)
