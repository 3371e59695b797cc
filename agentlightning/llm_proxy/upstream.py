"""Talking to upstream model servers: one pooled aiohttp session, retries with backoff for transient failures."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Optional

from agentlightning.utils.retry import RetryAttempt, RetryError, RetryEvent, RetryPolicy, retry_async

from .models import Upstream

logger = logging.getLogger(__name__)

RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_AFTER = 10.0
"""The longest wait a Retry-After header can ask for."""


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
    """Sends requests to upstreams; retries connection errors, 429 and 5xx up to `num_retries` times (with capped
    exponential backoff, waiting at least what a Retry-After header asks, up to `MAX_RETRY_AFTER` seconds).

    Must be created on the event loop that uses it (aiohttp sessions belong to one loop).
    """

    def __init__(self, *, num_retries: int, timeout: float, connect_timeout: float = 10.0) -> None:
        import aiohttp

        self.num_retries = num_retries
        self.retry_policy = RetryPolicy(max_retries=num_retries, initial_delay=0.1, max_delay=5.0, jitter=0.2)
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

        async def post(attempt: RetryAttempt) -> UpstreamResponse:
            result.attempts = attempt.number
            response = UpstreamResponse(await self._session.post(url, data=payload, headers=headers))
            if response.status_code not in RETRYABLE_STATUSES or attempt.last:
                return response
            retry_after = response.headers.get("retry-after")
            await response.read()
            await response.close()
            raise _RetryableAnswer(response.status_code, _seconds(retry_after))

        def log_retry(event: RetryEvent) -> None:
            if isinstance(event.error, _RetryableAnswer):
                logger.warning("Upstream %s answered %d, attempt %d", url, event.error.status, event.attempt)
            else:
                logger.warning("Upstream %s unreachable (%r), attempt %d", url, event.error, event.attempt)

        try:
            result.response = await retry_async(
                post,
                self.retry_policy,
                what=f"POST {url}",
                retry_on=lambda exc: isinstance(
                    exc, (_RetryableAnswer, aiohttp.ClientError, asyncio.TimeoutError, OSError)
                ),
                wait_hint=lambda exc: exc.retry_after if isinstance(exc, _RetryableAnswer) else None,
                on_retry=log_retry,
            )
        except RetryError as exhausted:  # only connection failures get here: the last answer is always returned
            logger.warning("Upstream %s unreachable (%r), attempt %d", url, exhausted.cause, exhausted.attempts)
            result.error = exhausted.cause
        return result


class _RetryableAnswer(Exception):
    """A 429/5xx answer (already read and closed) that another try may fix; `retry_after` in seconds, if given."""

    def __init__(self, status: int, retry_after: Optional[float]) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.retry_after = retry_after


def _seconds(retry_after: Optional[str]) -> Optional[float]:
    """A Retry-After header given in seconds, capped at `MAX_RETRY_AFTER` (HTTP dates are ignored)."""
    if retry_after and retry_after.replace(".", "", 1).isdigit():
        return min(float(retry_after), MAX_RETRY_AFTER)
    return None
