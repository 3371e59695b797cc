"""Talking to upstream model servers: one pooled httpx client, retries with backoff for transient failures."""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from typing import Any, Optional

from .models import Upstream

logger = logging.getLogger(__name__)

RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass
class UpstreamResult:
    """A finished upstream exchange: the response (open for streaming) or the error that ended the retries."""

    response: Any = None  # httpx.Response
    error: Optional[BaseException] = None
    attempts: int = 0


class UpstreamClient:
    """Sends requests to upstreams; retries connection errors, 429 and 5xx up to `num_retries` times."""

    def __init__(self, *, num_retries: int, timeout: float, connect_timeout: float = 10.0) -> None:
        import httpx

        self.num_retries = num_retries
        self._httpx = httpx
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=connect_timeout),
            limits=httpx.Limits(max_connections=512, max_keepalive_connections=64),
        )

    async def close(self) -> None:
        await self._client.aclose()

    async def send(self, upstream: Upstream, path: str, body: dict[str, Any], *, stream: bool) -> UpstreamResult:
        """POST `body` to `upstream.api_base + path`. For `stream=True` the successful response is left open."""
        httpx = self._httpx
        headers = {"content-type": "application/json"}
        if upstream.api_key:
            headers["authorization"] = f"Bearer {upstream.api_key}"
        url = f"{upstream.api_base}{path}"
        result = UpstreamResult()
        delay = 0.1
        for attempt in range(self.num_retries + 1):
            result.attempts = attempt + 1
            try:
                request = self._client.build_request("POST", url, json=body, headers=headers)
                response = await self._client.send(request, stream=stream)
            except (httpx.TransportError, httpx.TimeoutException) as exc:
                result.error, result.response = exc, None
                logger.warning("Upstream %s unreachable (%s), attempt %d", url, exc, attempt + 1)
            else:
                if response.status_code not in RETRYABLE_STATUSES or attempt == self.num_retries:
                    result.response, result.error = response, None
                    return result
                retry_after = response.headers.get("retry-after")
                await response.aread()
                await response.aclose()
                logger.warning("Upstream %s answered %d, attempt %d", url, response.status_code, attempt + 1)
                result.response = None
                if retry_after and retry_after.replace(".", "", 1).isdigit():
                    delay = max(delay, min(float(retry_after), 10.0))
            if attempt < self.num_retries:
                await asyncio.sleep(delay * (1 + 0.25 * random.random()))
                delay = min(delay * 2, 5.0)
        return result
