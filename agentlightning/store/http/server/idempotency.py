"""Server-side replay of write responses keyed by the client's `Idempotency-Key` header.

A client that lost a response (a dropped connection, a timeout) sends the same request again with the same key.
The server then answers with the stored response instead of applying the write twice; a retry that arrives while
the first request is still running waits for its result. The cache is bounded in entries, bytes and age; the bytes
count each answer's body, its key and fingerprint and a fixed `ENTRY_OVERHEAD_BYTES` for its bookkeeping (an answer
to `update_attempt` costs about as much in bookkeeping as in body).

This cache is scoped to one server process; stores in a database shared by several processes keep their records in
that database instead (`shared_idempotency`).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional, Protocol

__all__ = ["ENTRY_OVERHEAD_BYTES", "CachedResponse", "IdempotencyCache", "IdempotencyConflict", "IdempotencyRecords"]

ENTRY_OVERHEAD_BYTES = 512
"""What one remembered answer costs besides the characters of its body, key and fingerprint (the entry, the response,
the string headers, the map's node), counted against `max_bytes` (about 400-450 bytes measured on CPython 3.11)."""


@dataclass(slots=True)
class CachedResponse:
    status: int
    body: bytes


class IdempotencyConflict(Exception):
    """The key was used before for a different request."""


class IdempotencyRecords(Protocol):
    """Where a server keeps the answers of keyed writes: this process (`IdempotencyCache`) or a shared database."""

    async def begin(self, key: str, fingerprint: tuple[str, str, str]) -> Optional[CachedResponse]: ...

    async def complete(self, key: str, response: CachedResponse) -> None: ...

    async def forget(self, key: str) -> None: ...


@dataclass(slots=True)
class _Entry:
    fingerprint: tuple[str, str, str]
    created: float
    response: Optional[CachedResponse] = None
    done: Optional[asyncio.Event] = None
    """Made only when a retry waits for the request still running, and dropped once the request ends: an event per
    remembered answer cost more memory than most answers (found by benchmarks/soak.py)."""

    def wake(self) -> None:
        if self.done is not None:
            self.done.set()
            self.done = None


def _cost(key: str, entry: _Entry) -> int:
    """The bytes an answered entry counts against `max_bytes`."""
    body = len(entry.response.body) if entry.response is not None else 0
    return body + len(key) + sum(len(part) for part in entry.fingerprint) + ENTRY_OVERHEAD_BYTES


class IdempotencyCache:
    """Remembers the responses of recent writes. All methods run on the server's event loop."""

    def __init__(
        self,
        *,
        max_entries: int = 100_000,
        max_bytes: int = 256 * 1024**2,
        ttl_seconds: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        if max_entries < 1 or max_bytes < 1 or ttl_seconds <= 0:
            raise ValueError("the idempotency cache limits must be positive")
        self._clock = clock
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.ttl_seconds = ttl_seconds
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def counted_bytes(self) -> int:
        """The bytes the remembered answers count against `max_bytes`."""
        return self._bytes

    async def begin(self, key: str, fingerprint: tuple[str, str, str]) -> Optional[CachedResponse]:
        """The stored response for a repeated key (waiting if the first request still runs), or None when this
        request must run; then `finish` or `abandon` must follow."""
        self._expire(self._clock())
        entry = self._entries.get(key)
        while entry is not None:
            if entry.fingerprint != fingerprint:
                raise IdempotencyConflict(
                    f"Idempotency-Key {key!r} was already used for a different request "
                    f"({entry.fingerprint[0]} {entry.fingerprint[1]})"
                )
            if entry.response is not None:
                return entry.response
            if entry.done is None:
                entry.done = asyncio.Event()
            await entry.done.wait()
            if entry.response is not None:
                return entry.response
            # The first request failed unexpectedly and was forgotten: run this one, unless another retry did.
            entry = self._entries.get(key)
        self._entries[key] = _Entry(fingerprint=fingerprint, created=self._clock())
        return None

    async def complete(self, key: str, response: CachedResponse) -> None:
        """`finish`, in the interface shared with the records kept in a database."""
        self.finish(key, response)

    async def forget(self, key: str) -> None:
        """`abandon`, in the interface shared with the records kept in a database."""
        self.abandon(key)

    def finish(self, key: str, response: CachedResponse) -> None:
        """Store the response of the request that ran for `key` and wake the retries waiting for it."""
        entry = self._entries.get(key)
        if entry is None:
            return
        entry.response = response
        # The age of a record counts from its answer: move it behind the others so that the oldest answers stay
        # at the head, where `_expire` looks.
        entry.created = self._clock()
        self._entries.move_to_end(key)
        self._bytes += _cost(key, entry)
        entry.wake()
        self._shrink()

    def abandon(self, key: str) -> None:
        """Forget a request that failed without a definite answer, so a retry runs it again."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            entry.wake()

    def _expire(self, now: float) -> None:
        """Drop the answers older than the TTL. Requests still running stay (and are stepped over: they may sit at
        the head for as long as they run, and `finish` moves them to the tail)."""
        expired: list[str] = []
        for key, entry in self._entries.items():
            if entry.response is None:
                continue
            if now - entry.created < self.ttl_seconds:
                break
            expired.append(key)
        for key in expired:
            self._drop(key)

    def _over_limits(self) -> bool:
        return len(self._entries) > self.max_entries or self._bytes > self.max_bytes

    def _shrink(self) -> None:
        """Drop the oldest finished entries until the cache is within its limits (O(1) when it already is)."""
        while self._over_limits():
            # The oldest finished entry: only requests still running are stepped over (a handful), never a list of
            # every key (that was O(entries) on every write once the cache was full: the soak's server stalled).
            oldest = next((key for key, entry in self._entries.items() if entry.response is not None), None)
            if oldest is None:
                return
            self._drop(oldest)

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key)
        if entry.response is not None:
            self._bytes -= _cost(key, entry)
