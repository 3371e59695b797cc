"""`ReadOnlyGate`: ASGI middleware that lets only reads through, for servers that exist to look at a store.

`agl dashboard` serves a store's API next to the page; pointed at a production database, it must not become a way
to change it. Reads of the store API are GET requests (every search has a GET form), so the gate refuses every
other method with 405 and a message that says where writes belong.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["READ_METHODS", "ReadOnlyGate"]

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]


class ReadOnlyGate:
    """Pass GET, HEAD and OPTIONS requests to `app`; answer anything else with 405 Method Not Allowed."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] in READ_METHODS:
            await self.app(scope, receive, send)
            return
        detail = (
            f"{scope['method']} {scope['path']} is refused: this dashboard server is read-only. "
            "Serve the store with `agl store` to change it."
        )
        body = json.dumps({"detail": detail, "error_type": "ReadOnlyError"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 405,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"allow", b"GET, HEAD, OPTIONS"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
