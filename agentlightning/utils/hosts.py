"""Keyless servers on loopback answer only requests addressed to this machine (a defence against DNS rebinding).

A server that binds 127.0.0.1 without an API key (the store server, the LLM proxy, `agl dashboard`, the inference
server) trusts that only programs on this machine can reach it. A web page open in the user's browser can reach it
anyway through DNS rebinding: the page's own host name is made to resolve to 127.0.0.1, and the browser then sends
the page's requests to the local server as requests to the page's own origin, free to read the answers. Those
requests still carry the page's host name in their `Host` header, so a server that answers only `Host` names of this
machine (`localhost`, `127.0.0.1` and the rest of 127.0.0.0/8, `[::1]`, with any port) cannot be read that way.

`LoopbackHostGuard` is that check, as ASGI middleware; `host_guard_needed` says when a server needs it (loopback
bind, no key). Names a user really reaches a local server by (an alias in /etc/hosts, a container name) are allowed
with the `AGL_ALLOWED_HOSTS` environment variable (comma-separated names; `*` turns the check off). A request
without a `Host` header (HTTP/1.0 tools) is not one a browser sends, and is let through.
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, Optional

__all__ = [
    "ALLOWED_HOSTS_ENV",
    "LOOPBACK_NAMES",
    "LoopbackHostGuard",
    "allowed_hosts",
    "guard_loopback",
    "host_guard_needed",
    "is_loopback",
]

ALLOWED_HOSTS_ENV = "AGL_ALLOWED_HOSTS"
LOOPBACK_NAMES = frozenset({"localhost"})
"""Loopback names besides IP literals (127.0.0.0/8 and ::1 are recognised as addresses)."""

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """True for names and addresses only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    name = host.strip().strip("[]").rstrip(".").lower()
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_guard_needed(bind_host: str, api_key: Optional[str]) -> bool:
    """Whether a server bound to `bind_host` with `api_key` must check Host headers: loopback and keyless."""
    return not api_key and is_loopback(bind_host)


def allowed_hosts(extra: Iterable[str] = ()) -> Optional[frozenset[str]]:
    """Host names allowed besides loopback ones: `extra` and AGL_ALLOWED_HOSTS; None when that variable is `*`."""
    configured = [name.strip().lower() for name in os.environ.get(ALLOWED_HOSTS_ENV, "").split(",") if name.strip()]
    if "*" in configured:
        return None
    return frozenset(configured) | frozenset(_host_name(name) for name in extra if name)


def _host_name(value: str) -> str:
    """The name of a Host header value: "Example.com:4747" -> "example.com", "[::1]:80" -> "::1"."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value[1:]
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


class LoopbackHostGuard:
    """Answer 403 to HTTP requests whose Host header names neither this machine nor one of `allowed` names."""

    def __init__(self, app: ASGIApp, allowed: Iterable[str] = ()) -> None:
        self.app = app
        self.allowed = frozenset(_host_name(name) for name in allowed)

    def permits(self, host_header: Optional[str]) -> bool:
        if host_header is None:
            return True
        name = _host_name(host_header)
        return is_loopback(name) or name in self.allowed

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        raw = next((value for key, value in scope.get("headers", ()) if key == b"host"), None)
        host = raw.decode("latin-1") if raw is not None else None
        if self.permits(host):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        detail = (
            f"Host {host!r} is refused: this server has no API key and answers only requests addressed to this "
            f"machine (localhost, 127.0.0.1, [::1]). To reach it by another name, set {ALLOWED_HOSTS_ENV}="
            f"{_host_name(host or '')} (comma-separated names) where it runs, or serve it with an API key."
        )
        body = json.dumps({"detail": detail, "error_type": "HostNotAllowedError"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 403,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


def guard_loopback(app: Any, bind_host: str, api_key: Optional[str], extra: Iterable[str] = ()) -> Any:
    """`app` behind LoopbackHostGuard when a server on `bind_host` with `api_key` needs it (see the module
    docstring), allowing the `extra` names (the name a server advertises) and AGL_ALLOWED_HOSTS; else `app`."""
    if not host_guard_needed(bind_host, api_key):
        return app
    names = allowed_hosts(extra)
    return app if names is None else LoopbackHostGuard(app, names)
