"""The Idempotency-Keys of writes whose outcome is unknown, kept so that sending the same request again is a retry.

A write whose retries ran out without an answer (the server was unreachable, or answered 502/503/504 to the last
try) may have been applied: the server can commit it and die, or lose the connection, before its answer arrives.
A caller who sends it again with a fresh key would apply it twice (an enqueue would create a second rollout). The
transport therefore remembers the key of such a write under a digest of the request (operation, URL, body); the next
identical request through the same client takes that key, and the server answers it with the first one's result if
the first one was applied (or applies it now if it was not). A key is handed out once; a request that again ends
without an answer puts its key back.

Entries are kept for `ttl_seconds` (the server's idempotency records live 600 s by default: after that a replay is
no longer possible anyway) and at most `max_entries` of them (the oldest go first).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Optional

__all__ = ["UnansweredWrites", "request_digest"]


def request_digest(operation: str, method: str, url: str, body: Optional[bytes]) -> str:
    """What identifies a request: its operation, method, URL and body."""
    digest = hashlib.blake2b(digest_size=16)
    for part in (operation.encode(), method.encode(), url.encode(), body or b""):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


class UnansweredWrites:
    """Keys of writes without an answer, by request digest. Thread-safe."""

    def __init__(
        self, *, ttl_seconds: float = 600.0, max_entries: int = 1024, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if ttl_seconds <= 0 or max_entries <= 0:
            raise ValueError("ttl_seconds and max_entries must be positive")
        self.ttl_seconds = ttl_seconds
        self.max_entries = max_entries
        self._clock = clock
        self._keys: OrderedDict[str, list[tuple[str, float]]] = OrderedDict()
        self._count = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return self._count

    def put(self, digest: str, key: str) -> None:
        """Remember `key` for the request `digest` (its outcome is unknown)."""
        with self._lock:
            self._expire()
            self._keys.setdefault(digest, []).append((key, self._clock()))
            self._keys.move_to_end(digest)
            self._count += 1
            while self._count > self.max_entries:
                oldest, keys = next(iter(self._keys.items()))
                keys.pop(0)
                self._count -= 1
                if not keys:
                    del self._keys[oldest]

    def take(self, digest: str) -> Optional[str]:
        """The key of an earlier identical request without an answer (handed out once), or None."""
        with self._lock:
            self._expire()
            keys = self._keys.get(digest)
            if not keys:
                return None
            key, _ = keys.pop(0)
            self._count -= 1
            if not keys:
                del self._keys[digest]
            return key

    def _expire(self) -> None:
        limit = self._clock() - self.ttl_seconds
        for digest in list(self._keys):
            keys = self._keys[digest]
            fresh = [entry for entry in keys if entry[1] >= limit]
            self._count -= len(keys) - len(fresh)
            if fresh:
                self._keys[digest] = fresh
            else:
                del self._keys[digest]
