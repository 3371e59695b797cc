"""httpx as the store client's HTTP library, for the client comparisons of `store_http.py` (`--client httpx`).

The store client's transport talks to a session with `request` (an async context manager), `send`, `get`, `close`
and `closed` (`store/http/client/lite.py`'s `LiteSession`, or aiohttp's session for https://). `HttpxSession` gives
an `httpx.AsyncClient` that interface, and `use_httpx(client)` makes a `LightningStoreClient` open one per event loop
instead of its own session (`_AGL_HTTP_CLIENT=httpx` asks for it). Benchmark-only: httpx's connection errors are not among the errors the transport
retries, which a benchmark against a local server never meets.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Optional

import httpx

__all__ = ["HttpxResponse", "HttpxSession", "use_httpx"]


@dataclass
class HttpxResponse:
    """The whole answer, read: what the transport takes from a response."""

    status: int
    headers: httpx.Headers
    body: bytes

    async def read(self) -> bytes:
        return self.body


class HttpxSession:
    """Keep-alive connections through one `httpx.AsyncClient`, for one event loop."""

    def __init__(self, headers: dict[str, str], *, connect_timeout: float, read_timeout: float) -> None:
        self._connect_timeout = connect_timeout
        self._client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(connect=connect_timeout, read=read_timeout, write=None, pool=None),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=None, keepalive_expiry=30.0),
        )

    @property
    def closed(self) -> bool:
        return self._client.is_closed

    async def close(self) -> None:
        await self._client.aclose()

    @asynccontextmanager
    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Optional[dict[str, str]] = None,
        data: Optional[bytes] = None,
        read_timeout: Optional[float] = None,
    ) -> AsyncIterator[HttpxResponse]:
        yield await self.send(method, url, headers=headers, data=data, read_timeout=read_timeout)

    def get(self, url: str) -> AbstractAsyncContextManager[HttpxResponse]:
        return self.request("GET", url)

    async def send(
        self,
        method: str,
        url: str,
        *,
        headers: Optional[dict[str, str]] = None,
        data: Optional[bytes] = None,
        read_timeout: Optional[float] = None,
    ) -> HttpxResponse:
        options: dict[str, Any] = {"headers": headers, "content": data}
        if read_timeout is not None:
            options["timeout"] = httpx.Timeout(connect=self._connect_timeout, read=read_timeout, write=None, pool=None)
        response = await self._client.request(method, url, **options)
        return HttpxResponse(response.status_code, response.headers, response.content)


def use_httpx(client: Any) -> None:
    """Make `client` (a `LightningStoreClient`) send through httpx: one `HttpxSession` per event loop."""
    transport = client._transport

    def new_session() -> HttpxSession:
        # The headers and timeouts of the transport's own sessions.
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if transport._api_key:
            headers["Authorization"] = f"Bearer {transport._api_key}"
        return HttpxSession(
            headers, connect_timeout=transport._connection_timeout, read_timeout=transport._request_timeout
        )

    transport._new_session = new_session
    transport._pool._factory = new_session
