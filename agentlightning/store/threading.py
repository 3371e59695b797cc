"""`LightningStoreThreaded`: serialises calls to a store that is not thread-safe.

Calls from any thread or task run one at a time. Waiting for the lock suspends the waiting task, never its thread,
so a wrapped store that really suspends (I/O) cannot freeze the event loop of another thread, such as a store
server's. Stores that declare themselves thread-safe are called directly. `wait_for_rollouts` on a serialised store
polls the store under the lock (`timeout=0` checks) instead of holding the lock for the whole wait.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Optional

from agentlightning.store.base import LightningStore, LightningStoreCapabilities
from agentlightning.store.core.concurrency import AsyncCrossLoopLock
from agentlightning.store.core.validation import check_timeout
from agentlightning.store.delegating import DelegatingStore
from agentlightning.store.forwarding import call_store
from agentlightning.types import Rollout

__all__ = ["LightningStoreThreaded"]


_WAIT_POLL_MIN = 0.01
_WAIT_POLL_MAX = 0.25


class LightningStoreThreaded(DelegatingStore):
    """Wraps `store` so that threads (each with its own event loop) can share it."""

    def __init__(self, store: LightningStore) -> None:
        self.store = store
        self._lock = AsyncCrossLoopLock()

    def __getstate__(self) -> dict[str, Any]:
        return {"store": self.store}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.store = state["store"]
        self._lock = AsyncCrossLoopLock()

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        inner = dict(self.store.capabilities)
        inner.update(thread_safe=True, async_safe=True)
        return LightningStoreCapabilities(**inner)  # type: ignore[typeddict-item]

    @property
    def is_remote(self) -> bool:
        return self.store.is_remote

    @asynccontextmanager
    async def _serialized(self) -> AsyncIterator[None]:
        if self.store.capabilities.get("thread_safe"):
            yield
            return
        async with self._lock:
            yield

    def otlp_traces_endpoint(self) -> str:
        return self.store.otlp_traces_endpoint()

    async def close(self) -> None:
        await self.store.close()

    async def _forward(self, operation: str, arguments: dict[str, Any]) -> Any:
        async with self._serialized():
            return await call_store(self.store, operation, arguments)

    async def wait_for_rollouts(self, *, rollout_ids: list[str], timeout: Optional[float] = None) -> list[Rollout]:
        if self.store.capabilities.get("thread_safe"):
            return await self.store.wait_for_rollouts(rollout_ids=rollout_ids, timeout=timeout)
        check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        known: Optional[list[str]] = None
        delay = _WAIT_POLL_MIN
        while True:
            async with self._lock:
                finished = await self.store.wait_for_rollouts(rollout_ids=rollout_ids, timeout=0)
                if known is None:  # unknown ids are ignored, as by a direct store
                    known = [
                        rollout_id
                        for rollout_id in dict.fromkeys(rollout_ids)
                        if await self.store.get_rollout_by_id(rollout_id) is not None
                    ]
            done = {rollout.rollout_id for rollout in finished}
            if all(rollout_id in done for rollout_id in known):
                return finished
            if deadline is not None and time.monotonic() >= deadline:
                return finished
            wait = delay if deadline is None else min(delay, max(deadline - time.monotonic(), 0.0))
            await asyncio.sleep(wait)
            delay = min(delay * 2, _WAIT_POLL_MAX)
