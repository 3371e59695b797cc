"""Routing of store operations by path segments (a dict lookup instead of a linear scan of ~80 routes).

The dispatcher sits in front of the FastAPI app: requests for a store operation go straight to its endpoint; every
other request (health, metrics, OTLP, docs, unknown paths) continues to the app.

`operation_routes` is the alternative measured against it (`benchmarks/store_http.py --routing starlette`): the same
endpoints as routes of Starlette's own router, inside the FastAPI app, answering as the dispatcher does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Optional

from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from agentlightning.store.http.operations import API_PREFIX
from agentlightning.store.http.server.handlers import error_body

__all__ = ["OperationDispatcher", "OperationRoute", "RouteEntry", "operation_routes"]

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
        for method, path, endpoint in sorted(self.routes, key=_param_count):
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


async def _method_not_allowed(scope: Mapping[str, Any], send: Any) -> None:
    body = error_body(405, "MethodNotAllowed", f"{scope['method']} is not allowed on {scope['path']}")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 405, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class OperationRoute(Route):
    """A store operation as a route of Starlette's router, answering as the dispatcher does: to its one method only
    (Starlette would also take HEAD on a GET route), and to another method on its path with the dispatcher's 405."""

    def __init__(self, method: str, path: str, endpoint: ASGIApp) -> None:
        super().__init__(path, endpoint, methods=[method], include_in_schema=False)  # a class instance: raw ASGI
        self.methods = {method}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] in self.methods:
            await self.app(scope, receive, send)
        else:  # the router's partial match: this path, another method
            await _method_not_allowed(scope, send)


def operation_routes(routes: list[RouteEntry]) -> list[OperationRoute]:
    """The routes for Starlette's router, in the dispatcher's precedence: literal segments before `{param}` ones
    (the router takes the first route whose path and method match)."""
    return [OperationRoute(method, path, endpoint) for method, path, endpoint in sorted(routes, key=_param_count)]


def _param_count(route: RouteEntry) -> int:
    return route[1].count("{")
