"""Hands the proxy's call records to the shared span writer (`agentlightning.tracer.writer.SpanWriter`).

Each record becomes its span once, with the trace and span ids drawn when the call arrived; the writer keeps that
span through every retry, so the store's duplicate check drops a repeat of a write that had committed. Records that
already have a sequence id (allocated when the request arrived) keep it; the others get one from the store when
they are written. Queue bound, spill file, retry policy and counters are the shared writer's.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Optional

from agentlightning.store.base import LightningStore
from agentlightning.tracer.batch import SpanWriterStats
from agentlightning.tracer.writer import SpanWriter

from .record import CallRecord

__all__ = ["CallRecordWriter"]

logger = logging.getLogger(__name__)


class CallRecordWriter:
    """The proxy's side of a `SpanWriter` bound to one store. `writer_options` go to `SpanWriter`."""

    def __init__(self, store: LightningStore, **writer_options: Any) -> None:
        self.store = store
        writer_options.setdefault("flush_interval", 0.05)
        writer_options.setdefault("name", "agl-proxy-span-writer")
        self.writer = SpanWriter(None, **writer_options)

    def submit(self, record: CallRecord) -> None:
        """Queue the span of a finished call (never waits for the store)."""
        span = record.to_span(record.sequence_id or 0)
        self.writer.submit(self.store, record.rollout_id, record.attempt_id, span)

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Wait (from any thread) until every record submitted so far is stored or given up."""
        return self.writer.flush(timeout=timeout)

    async def flush_async(self, timeout: Optional[float] = None) -> bool:
        return await self.writer.flush_async(timeout=timeout)

    async def stop(self, timeout: float = 10.0) -> None:
        """Flush (at most `timeout` seconds) and stop the writer thread."""
        if not await asyncio.to_thread(self.writer.close, timeout):
            logger.error("LLM proxy: %d call record(s) could not be written to the store", self.stats().pending)

    def stats(self) -> SpanWriterStats:
        return self.writer.stats()
