"""Server-side replay of write responses keyed by the client's `Idempotency-Key` header.

A client that lost a response (a dropped connection, a timeout) sends the same request again with the same key.
The server then answers with the stored response instead of applying the write twice; a retry that arrives while
the first request is still running waits for its result. The cache is bounded in entries, bytes and age.

Keys are scoped to one server process: with several worker processes a retry that reaches another worker is not
recognised (see docs/http.md).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Optional

__all__ = ["CachedResponse", "IdempotencyCache", "IdempotencyConflict"]


@dataclass
class CachedResponse:
    status: int
    body: bytes


class IdempotencyConflict(Exception):
    """The key was used before for a different request."""


@dataclass
class _Entry:
    fingerprint: tuple[str, str, int]
    created: float
    done: asyncio.Event = field(default_factory=asyncio.Event)
    response: Optional[CachedResponse] = None


class IdempotencyCache:
    """Remembers the responses of recent writes. All methods run on the server's event loop."""

    def __init__(self, *, max_entries: int = 100_000, max_bytes: int = 256 * 1024**2, ttl_seconds: float = 600.0):
        if max_entries < 1 or max_bytes < 1 or ttl_seconds <= 0:
            raise ValueError("the idempotency cache limits must be positive")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.ttl_seconds = ttl_seconds
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    async def begin(self, key: str, fingerprint: tuple[str, str, int]) -> Optional[CachedResponse]:
        """The stored response for a repeated key (waiting if the first request still runs), or None when this
        request must run; then `finish` or `abandon` must follow."""
        self._expire(time.monotonic())
        entry = self._entries.get(key)
        while entry is not None:
            if entry.fingerprint != fingerprint:
                raise IdempotencyConflict(
                    f"Idempotency-Key {key!r} was already used for a different request "
                    f"({entry.fingerprint[0]} {entry.fingerprint[1]})"
                )
            if entry.response is not None:
                return entry.response
            await entry.done.wait()
            if entry.response is not None:
                return entry.response
            # The first request failed unexpectedly and was forgotten: run this one, unless another retry did.
            entry = self._entries.get(key)
        self._entries[key] = _Entry(fingerprint=fingerprint, created=time.monotonic())
        return None

    def finish(self, key: str, response: CachedResponse) -> None:
        """Store the response of the request that ran for `key` and wake the retries waiting for it."""
        entry = self._entries.get(key)
        if entry is None:
            return
        entry.response = response
        self._bytes += len(response.body)
        entry.done.set()
        self._shrink()

    def abandon(self, key: str) -> None:
        """Forget a request that failed without a definite answer, so a retry runs it again."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            entry.done.set()

    def _expire(self, now: float) -> None:
        while self._entries:
            key, entry = next(iter(self._entries.items()))
            if now - entry.created < self.ttl_seconds or entry.response is None:
                break
            self._drop(key)

    def _over_limits(self) -> bool:
        return len(self._entries) > self.max_entries or self._bytes > self.max_bytes

    def _shrink(self) -> None:
        """Drop the oldest finished entries until the cache is within its limits (O(1) when it already is)."""
        if not self._over_limits():
            return
        for key in [key for key, entry in self._entries.items() if entry.response is not None]:
            self._drop(key)
            if not self._over_limits():
                return

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key)
        if entry.response is not None:
            self._bytes -= len(entry.response.body)
