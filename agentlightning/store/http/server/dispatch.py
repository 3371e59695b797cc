"""Routing of store operations by path segments (a dict lookup instead of a linear scan of ~80 routes).

The dispatcher sits in front of the FastAPI app: requests for a store operation go straight to its endpoint; every
other request (health, metrics, OTLP, docs, unknown paths) continues to the app.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

from agentlightning.store.http.operations import API_PREFIX
from agentlightning.store.http.server.handlers import error_body

__all__ = ["OperationDispatcher", "RouteEntry"]

ASGIApp = Callable[..., Any]
RouteEntry = tuple[str, str, ASGIApp]
"""(HTTP method, full path template such as /v1/agl/rollouts/{rollout_id}, ASGI endpoint)."""

_PREFIX = API_PREFIX + "/"


def _pattern(path: str) -> tuple[Optional[str], ...]:
    """Path segments after the prefix: a literal string, or None for a `{param}` segment."""
    return tuple(None if part.startswith("{") else part for part in path[len(_PREFIX) :].split("/"))


def _names(path: str) -> tuple[str, ...]:
    return tuple(part[1:-1] for part in path[len(_PREFIX) :].split("/") if part.startswith("{"))


class OperationDispatcher:
    """ASGI middleware: dispatches store operations by (segment count, first segment); literal segments win."""

    def __init__(self, app: ASGIApp, routes: list[RouteEntry]) -> None:
        self.app = app
        self.routes = list(routes)
        self._shapes: dict[tuple[int, str], list[tuple[str, tuple[Optional[str], ...], tuple[str, ...], ASGIApp]]] = {}
        for method, path, endpoint in sorted(self.routes, key=lambda route: route[1].count("{")):
            pattern = _pattern(path)
            key = (len(pattern), pattern[0] or "")
            self._shapes.setdefault(key, []).append((method, pattern, _names(path), endpoint))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path: str = scope.get("path", "")
        if scope["type"] == "http" and path.startswith(_PREFIX):
            segments = path[len(_PREFIX) :].split("/")
            candidates = self._shapes.get((len(segments), segments[0]))
            if candidates:
                method_mismatch = False
                for method, pattern, names, endpoint in candidates:
                    values = _match(pattern, segments)
                    if values is None:
                        continue
                    if method != scope["method"]:
                        method_mismatch = True
                        continue
                    scope["path_params"] = dict(zip(names, values, strict=True))
                    await endpoint(scope, receive, send)
                    return
                if method_mismatch:
                    await _method_not_allowed(scope, send)
                    return
        await self.app(scope, receive, send)


def _match(pattern: tuple[Optional[str], ...], segments: list[str]) -> Optional[list[str]]:
    values: list[str] = []
    for expected, segment in zip(pattern, segments, strict=True):
        if expected is None:
            if not segment:
                return None
            values.append(segment)
        elif expected != segment:
            return None
    return values


async def _method_not_allowed(scope: dict[str, Any], send: Any) -> None:
    body = error_body(405, "MethodNotAllowed", f"{scope['method']} is not allowed on {scope['path']}")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 405, "headers": headers})
    await send({"type": "http.response.body", "body": body})
