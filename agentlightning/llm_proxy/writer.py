"""Writes the proxy's call records to the store in batches, off the request path, retrying on failures.

Records that already have a sequence id (allocated when the request arrived) are written as they are; the others
(the store was unreachable at that moment) get one now. A record is dropped only when the store says its rollout or
attempt does not exist; transient failures are retried with capped exponential backoff until the proxy stops.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Optional

from agentlightning.store.base import LightningStore
from agentlightning.store.errors import AttemptNotFoundError, InvalidArgumentError, RolloutNotFoundError

from .record import CallRecord

logger = logging.getLogger(__name__)

_PERMANENT_ERRORS = (RolloutNotFoundError, AttemptNotFoundError, InvalidArgumentError)


class SpanWriter:
    """A queue of call records drained by one task on the proxy's event loop."""

    def __init__(self, store: LightningStore, *, batch_size: int = 256, max_backoff: float = 5.0) -> None:
        self.store = store
        self.batch_size = batch_size
        self.max_backoff = max_backoff
        self._queue: asyncio.Queue[CallRecord] = asyncio.Queue()
        self._task: Optional[asyncio.Task[None]] = None
        self._pending = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.written = 0
        self.dropped = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="agl-proxy-span-writer")

    def submit(self, record: CallRecord) -> None:
        self._pending += 1
        self._idle.clear()
        self._queue.put_nowait(record)

    async def flush(self) -> None:
        """Wait until every submitted record is written (or dropped for good)."""
        await self._idle.wait()

    async def stop(self, timeout: float = 10.0) -> None:
        try:
            await asyncio.wait_for(self.flush(), timeout)
        except asyncio.TimeoutError:
            logger.error(
                "LLM proxy: %d call record(s) could not be written to the store before shutdown", self._pending
            )
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def _run(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < self.batch_size and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            await self._write_with_retries(batch)
            self._pending -= len(batch)
            if self._pending == 0:
                self._idle.set()

    async def _write_with_retries(self, batch: list[CallRecord]) -> None:
        """Write a batch, retrying transient failures. A batch the store rejects for good (a record of an unknown
        rollout or attempt) is split: the good records are written, the bad ones dropped with an error."""
        try:
            await self._retry_transient(batch)
        except _PERMANENT_ERRORS as exc:
            if len(batch) > 1:
                for record in batch:
                    await self._write_with_retries([record])
                return
            self.dropped += 1
            logger.error(
                "LLM proxy: dropping the record of a call for rollout %s / attempt %s: %s",
                batch[0].rollout_id,
                batch[0].attempt_id,
                exc,
            )

    async def _retry_transient(self, batch: list[CallRecord]) -> None:
        delay = 0.05
        while True:
            try:
                await self._write(batch)
                return
            except (asyncio.CancelledError, *_PERMANENT_ERRORS):
                raise
            except Exception as exc:
                logger.warning("LLM proxy: writing %d span(s) failed (%s); retrying in %.2f s", len(batch), exc, delay)
                await asyncio.sleep(delay * (1 + random.random() * 0.2))
                delay = min(delay * 2, self.max_backoff)

    async def _write(self, batch: list[CallRecord]) -> None:
        missing = [record for record in batch if record.sequence_id is None]
        if missing:
            numbers = await self.store.get_many_span_sequence_ids([(r.rollout_id, r.attempt_id) for r in missing])
            for record, number in zip(missing, numbers, strict=True):
                record.sequence_id = number
        spans = [record.to_span(record.sequence_id or 0) for record in batch]
        await self.store.add_many_spans(spans)
        self.written += len(batch)
