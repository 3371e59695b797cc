"""Talking to upstream model servers: one pooled aiohttp session, retries with backoff for transient failures."""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Optional

from .models import Upstream

logger = logging.getLogger(__name__)

RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})


class UpstreamResponse:
    """An upstream answer, open until `close()` (streamed bodies are read with `iter_chunks()`)."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self.status_code: int = raw.status
        self.headers = raw.headers

    async def read(self) -> bytes:
        return await self._raw.read()

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        async for chunk in self._raw.content.iter_any():
            yield chunk

    async def close(self) -> None:
        self._raw.release()


@dataclass
class UpstreamResult:
    """A finished upstream exchange: the response (open) or the error that ended the retries."""

    response: Optional[UpstreamResponse] = None
    error: Optional[BaseException] = None
    attempts: int = 0


class UpstreamClient:
    """Sends requests to upstreams; retries connection errors, 429 and 5xx up to `num_retries` times.

    Must be created on the event loop that uses it (aiohttp sessions belong to one loop).
    """

    def __init__(self, *, num_retries: int, timeout: float, connect_timeout: float = 10.0) -> None:
        import aiohttp

        self.num_retries = num_retries
        self._aiohttp = aiohttp
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout, sock_read=timeout),
            connector=aiohttp.TCPConnector(limit=512, keepalive_timeout=60),
            auto_decompress=True,
        )

    async def close(self) -> None:
        await self._session.close()

    async def send(self, upstream: Upstream, path: str, body: dict[str, Any]) -> UpstreamResult:
        """POST `body` to `upstream.api_base + path`; the successful response is left open for the caller."""
        aiohttp = self._aiohttp
        headers = {"content-type": "application/json"}
        if upstream.api_key:
            headers["authorization"] = f"Bearer {upstream.api_key}"
        url = f"{upstream.api_base}{path}"
        payload = json.dumps(body, separators=(",", ":")).encode()
        result = UpstreamResult()
        delay = 0.1
        for attempt in range(self.num_retries + 1):
            result.attempts = attempt + 1
            try:
                raw = await self._session.post(url, data=payload, headers=headers)
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
                result.error, result.response = exc, None
                logger.warning("Upstream %s unreachable (%r), attempt %d", url, exc, attempt + 1)
            else:
                response = UpstreamResponse(raw)
                if response.status_code not in RETRYABLE_STATUSES or attempt == self.num_retries:
                    result.response, result.error = response, None
                    return result
                retry_after = response.headers.get("retry-after")
                await response.read()
                await response.close()
                logger.warning("Upstream %s answered %d, attempt %d", url, response.status_code, attempt + 1)
                result.response = None
                if retry_after and retry_after.replace(".", "", 1).isdigit():
                    delay = max(delay, min(float(retry_after), 10.0))
            if attempt < self.num_retries:
                await asyncio.sleep(delay * (1 + 0.25 * random.random()))
                delay = min(delay * 2, 5.0)
        return result
