"""`LightningStoreThreaded`: serialises calls to a store that is not thread-safe.

Calls from any thread or task run one at a time. Waiting for the lock suspends the waiting task, never its thread,
so a wrapped store that really suspends (I/O) cannot freeze the event loop of another thread, such as a store
server's. Stores that declare themselves thread-safe are called directly. `wait_for_rollouts` on a serialised store
polls the store under the lock (`timeout=0` checks) instead of holding the lock for the whole wait.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, Optional, Union

from agentlightning.types import (
    Attempt,
    AttemptedRollout,
    EnqueueRolloutRequest,
    NamedResources,
    ResourcesUpdate,
    Rollout,
    RolloutConfig,
    Span,
    TaskInput,
    Worker,
)

from .base import UNSET, LightningStore, LightningStoreCapabilities, LightningStoreStatistics, Unset
from .locks import AsyncCrossLoopLock
from .validation import check_timeout

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["LightningStoreThreaded"]


_WAIT_POLL_MIN = 0.01
_WAIT_POLL_MAX = 0.25


class LightningStoreThreaded(LightningStore):
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

    async def statistics(self) -> LightningStoreStatistics:
        async with self._serialized():
            return await self.store.statistics()

    async def start_rollout(
        self,
        input: TaskInput,
        mode: Optional[Literal["train", "val", "test"]] = None,
        resources_id: Optional[str] = None,
        config: Optional[RolloutConfig] = None,
        metadata: Optional[dict[str, Any]] = None,
        worker_id: Optional[str] = None,
    ) -> AttemptedRollout:
        async with self._serialized():
            if worker_id is None:
                return await self.store.start_rollout(input, mode, resources_id, config, metadata)
            return await self.store.start_rollout(input, mode, resources_id, config, metadata, worker_id)

    async def enqueue_rollout(
        self,
        input: TaskInput,
        mode: Optional[Literal["train", "val", "test"]] = None,
        resources_id: Optional[str] = None,
        config: Optional[RolloutConfig] = None,
        metadata: Optional[dict[str, Any]] = None,
    ) -> Rollout:
        async with self._serialized():
            return await self.store.enqueue_rollout(input, mode, resources_id, config, metadata)

    async def enqueue_many_rollouts(self, rollouts: Sequence[EnqueueRolloutRequest]) -> Sequence[Rollout]:
        async with self._serialized():
            return await self.store.enqueue_many_rollouts(rollouts)

    async def dequeue_rollout(self, worker_id: Optional[str] = None) -> Optional[AttemptedRollout]:
        async with self._serialized():
            if worker_id is None:
                return await self.store.dequeue_rollout()
            return await self.store.dequeue_rollout(worker_id=worker_id)

    async def dequeue_many_rollouts(
        self, *, limit: int = 1, worker_id: Optional[str] = None
    ) -> Sequence[AttemptedRollout]:
        async with self._serialized():
            return await self.store.dequeue_many_rollouts(limit=limit, worker_id=worker_id)

    async def start_attempt(self, rollout_id: str, worker_id: Optional[str] = None) -> AttemptedRollout:
        async with self._serialized():
            if worker_id is None:
                return await self.store.start_attempt(rollout_id)
            return await self.store.start_attempt(rollout_id, worker_id)

    async def query_rollouts(self, **kwargs: Any) -> Sequence[Rollout]:  # type: ignore[override]
        async with self._serialized():
            return await self.store.query_rollouts(**kwargs)

    async def get_rollout_by_id(self, rollout_id: str) -> Optional[Rollout]:
        async with self._serialized():
            return await self.store.get_rollout_by_id(rollout_id)

    async def update_rollout(
        self,
        rollout_id: str,
        input: Union[TaskInput, Unset] = UNSET,
        mode: Union[Optional[Literal["train", "val", "test"]], Unset] = UNSET,
        resources_id: Union[Optional[str], Unset] = UNSET,
        status: Union[Any, Unset] = UNSET,
        config: Union[RolloutConfig, Unset] = UNSET,
        metadata: Union[Optional[dict[str, Any]], Unset] = UNSET,
    ) -> Rollout:
        async with self._serialized():
            return await self.store.update_rollout(
                rollout_id=rollout_id,
                input=input,
                mode=mode,
                resources_id=resources_id,
                status=status,
                config=config,
                metadata=metadata,
            )

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

    async def query_attempts(self, rollout_id: str, **kwargs: Any) -> Sequence[Attempt]:  # type: ignore[override]
        async with self._serialized():
            return await self.store.query_attempts(rollout_id, **kwargs)

    async def get_latest_attempt(self, rollout_id: str) -> Optional[Attempt]:
        async with self._serialized():
            return await self.store.get_latest_attempt(rollout_id)

    async def update_attempt(
        self,
        rollout_id: str,
        attempt_id: Union[str, Literal["latest"]],
        status: Union[Any, Unset] = UNSET,
        worker_id: Union[str, Unset] = UNSET,
        last_heartbeat_time: Union[float, Unset] = UNSET,
        metadata: Union[Optional[dict[str, Any]], Unset] = UNSET,
    ) -> Attempt:
        async with self._serialized():
            return await self.store.update_attempt(
                rollout_id=rollout_id,
                attempt_id=attempt_id,
                status=status,
                worker_id=worker_id,
                last_heartbeat_time=last_heartbeat_time,
                metadata=metadata,
            )

    async def add_span(self, span: Span) -> Optional[Span]:
        async with self._serialized():
            return await self.store.add_span(span)

    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        async with self._serialized():
            return await self.store.add_many_spans(spans)

    async def add_otel_span(
        self,
        rollout_id: str,
        attempt_id: str,
        readable_span: ReadableSpan,
        sequence_id: Optional[int] = None,
    ) -> Optional[Span]:
        async with self._serialized():
            return await self.store.add_otel_span(rollout_id, attempt_id, readable_span, sequence_id)

    async def get_next_span_sequence_id(self, rollout_id: str, attempt_id: str) -> int:
        async with self._serialized():
            return await self.store.get_next_span_sequence_id(rollout_id, attempt_id)

    async def get_many_span_sequence_ids(self, rollout_attempt_ids: Sequence[tuple[str, str]]) -> Sequence[int]:
        async with self._serialized():
            return await self.store.get_many_span_sequence_ids(rollout_attempt_ids)

    async def query_spans(  # type: ignore[override]
        self, rollout_id: str, attempt_id: Union[str, Literal["latest"], None] = None, **kwargs: Any
    ) -> Sequence[Span]:
        async with self._serialized():
            return await self.store.query_spans(rollout_id, attempt_id, **kwargs)

    async def add_resources(self, resources: NamedResources) -> ResourcesUpdate:
        async with self._serialized():
            return await self.store.add_resources(resources)

    async def update_resources(self, resources_id: str, resources: NamedResources) -> ResourcesUpdate:
        async with self._serialized():
            return await self.store.update_resources(resources_id, resources)

    async def get_resources_by_id(self, resources_id: str) -> Optional[ResourcesUpdate]:
        async with self._serialized():
            return await self.store.get_resources_by_id(resources_id)

    async def get_latest_resources(self) -> Optional[ResourcesUpdate]:
        async with self._serialized():
            return await self.store.get_latest_resources()

    async def query_resources(self, **kwargs: Any) -> Sequence[ResourcesUpdate]:  # type: ignore[override]
        async with self._serialized():
            return await self.store.query_resources(**kwargs)

    async def query_workers(self, **kwargs: Any) -> Sequence[Worker]:  # type: ignore[override]
        async with self._serialized():
            return await self.store.query_workers(**kwargs)

    async def get_worker_by_id(self, worker_id: str) -> Optional[Worker]:
        async with self._serialized():
            return await self.store.get_worker_by_id(worker_id)

    async def update_worker(self, worker_id: str, heartbeat_stats: Union[dict[str, Any], Unset] = UNSET) -> Worker:
        async with self._serialized():
            return await self.store.update_worker(worker_id, heartbeat_stats)
