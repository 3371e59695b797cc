"""Who may use the LLM proxy: the rule for exposing it, and the API-key check in front of every route.

The proxy adds the upstreams' credentials server-side, so a proxy others can reach is an open relay unless it asks
for a key. The rule is the store server's: on a loopback address no key is needed; on any other address an API key
is required unless the user explicitly accepts the risk (`insecure=True`).

The check is an ASGI middleware in front of routing. Every request needs the key — whatever its method (OPTIONS
included) and path — except `GET`/`HEAD /health`. A key is accepted as `Authorization: Bearer <key>` (the scheme in
any letter case, as OpenAI clients send it) or `x-api-key: <key>`; comparisons take constant time.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Optional

__all__ = ["API_KEY_ENV", "ProxyKeyMiddleware", "check_exposure"]

API_KEY_ENV = "AGL_PROXY_API_KEY"

_OPEN = frozenset({("GET", "/health"), ("HEAD", "/health")})

ASGIApp = Callable[[MutableMapping[str, Any], Any, Any], Awaitable[None]]


def check_exposure(bind_host: str, api_key: Optional[str], insecure: bool) -> None:
    """Refuse to serve on a non-loopback address without an API key (unless `insecure`).

    Raises:
        ValueError: naming the address and the ways out.
    """
    from agentlightning.store.http.server.server import is_loopback

    if not is_loopback(bind_host) and not api_key and not insecure:
        raise ValueError(
            f"Refusing to serve the LLM proxy on {bind_host!r} without an API key: anyone who can reach this address "
            f"could use the upstream models with the proxy's credentials. Pass api_key=... (or set {API_KEY_ENV}), "
            "bind 127.0.0.1, or pass insecure=True if the network is trusted."
        )


def _credentials(headers: Any) -> list[bytes]:
    found: list[bytes] = []
    for name, value in headers:
        if name == b"authorization":
            scheme, _, token = value.strip().partition(b" ")
            if scheme.lower() == b"bearer":
                found.append(token.strip())
        elif name == b"x-api-key":
            found.append(value.strip())
    return found


class ProxyKeyMiddleware:
    """Answers 401 (OpenAI error shape) to requests without the proxy's API key; see the module docstring."""

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        if not api_key:
            raise ValueError("api_key must not be empty")
        self.app = app
        self._expected = api_key.encode()

    def _authorized(self, scope: MutableMapping[str, Any]) -> bool:
        matched = False
        for given in _credentials(scope.get("headers", ())):
            matched = hmac.compare_digest(given, self._expected) or matched
        return matched

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self.app(scope, receive, send)
            return
        if kind == "http" and (scope.get("method", ""), scope.get("path", "")) in _OPEN:
            await self.app(scope, receive, send)
            return
        if self._authorized(scope):
            await self.app(scope, receive, send)
            return
        if kind != "http":  # websockets (the proxy serves none): refuse without a key
            await send({"type": "websocket.close", "code": 1008})
            return
        body = json.dumps(
            {
                "error": {
                    "message": "The LLM proxy needs its API key: send 'Authorization: Bearer <key>'",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_api_key",
                }
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="agentlightning-llm-proxy"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
