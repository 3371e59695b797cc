"""Where the span writer's spans wait before their store request, and when a request is due.

Submitted spans enter `incoming` while fewer than `max_buffered` spans are in memory and nothing is spilled;
otherwise they go to the spill file (`spill.py`), in arrival order, and come back as memory frees up. The writer
thread converts incoming spans and moves them to `ready`; a batch of up to `max_batch` ready spans is due when it
is full, urgent (a reward span), hurried (a flush or close) or older than `flush_interval`. Not locked on its own:
the writer calls it with its lock held.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable
from typing import Optional

from .batch import PendingSpan, SpanConverter, SpanWriterStats
from .spill import SpilledSpans, SpillFull

__all__ = ["SpanQueue"]

logger = logging.getLogger("agentlightning.tracer.writer")


class SpanQueue:
    """The spans of a writer in memory (`in_memory` counts them wherever they are until finished) and spilled."""

    def __init__(
        self,
        spill: SpilledSpans,
        converter: Optional[SpanConverter],
        stats: SpanWriterStats,
        *,
        max_buffered: int,
        max_batch: int,
        flush_interval: float,
    ) -> None:
        self.spill = spill
        self._converter = converter
        self._stats = stats
        self._max_buffered = max_buffered
        self._max_batch = max_batch
        self._flush_interval = flush_interval
        self.incoming: deque[PendingSpan] = deque()  # submitted, not converted yet (producers append)
        self._ready: deque[PendingSpan] = deque()  # converted, waiting for a batch (writer thread only)
        self._ready_since: Optional[float] = None
        self.in_memory = 0  # spans in memory anywhere (incoming, ready, held, retry groups, in flight)
        self.urgent = False

    # ------------------------------------------------------------------------------------------------- producers
    def has_room(self) -> bool:
        """A new span may stay in memory (the memory queue has room and nothing waits in the spill file)."""
        return self.in_memory < self._max_buffered and self.spill.count == 0

    @property
    def full(self) -> bool:
        return self.in_memory >= self._max_buffered

    def push(self, item: PendingSpan) -> None:
        self.incoming.append(item)
        self.in_memory += 1

    def wants_writer(self) -> bool:
        """Enough spans arrived for a full batch (the writer is woken for it)."""
        return len(self.incoming) >= self._max_batch

    def spill_item(self, item: PendingSpan) -> Optional[str]:
        """Put `item` in the spill file; None when it went there, else why it could not."""
        try:
            span = item.span
            if span is None:
                assert item.readable is not None and self._converter is not None
                span = self._converter(item.readable, item.rollout_id, item.attempt_id, 0)
            self.spill.put(item, span)
            self._stats.spilled += 1
            if self._stats.spilled == 1 or self._stats.spilled % 1000 == 0:
                logger.warning(
                    "Span buffer is full (%d spans in memory); %d spans spilled to %s so far",
                    self._max_buffered,
                    self._stats.spilled,
                    self.spill.file.directory or "the temporary directory",
                )
            return None
        except Exception as exc:  # cap reached, disk full, unserialisable attribute, ...
            return str(exc) if isinstance(exc, SpillFull) else f"spilling failed: {exc!r}"

    # ---------------------------------------------------------------------------------------------- writer thread
    def take_incoming(self) -> list[PendingSpan]:
        fresh = list(self.incoming)
        self.incoming.clear()
        return fresh

    def add_ready(self, items: Iterable[PendingSpan]) -> None:
        """Queue converted spans (those not finished meanwhile), then refill memory from the spill file."""
        self._ready.extend(item for item in items if not item.done)
        while self.spill.count and self.in_memory < self._max_buffered:
            self.in_memory += 1
            self._ready.append(self.spill.take())

    def next_batch(self, now: float, *, hurry: bool) -> list[PendingSpan]:
        """The next batch of ready spans if one is due (`hurry`: a flush or close waits), else an empty list."""
        if not self._ready:
            return []
        if self._ready_since is None:
            self._ready_since = now
        due = (
            len(self._ready) >= self._max_batch
            or self.urgent
            or hurry
            or now - self._ready_since >= self._flush_interval
        )
        if not due:
            return []
        batch = [self._ready.popleft() for _ in range(min(self._max_batch, len(self._ready)))]
        self._ready_since = now if self._ready else None
        if not self._ready and not self.incoming:
            self.urgent = False
        return batch

    def drained(self) -> bool:
        """Nothing waits for a batch, in memory or in the spill file."""
        return not self._ready and not self.spill.count

    def wait_time(self, now: float) -> float:
        """How long until the ready spans form a due batch (the flush interval when none are ready)."""
        wait = self._flush_interval if self._flush_interval > 0 else 1.0
        if self._ready and self._ready_since is not None:
            wait = max(0.0, min(wait, self._flush_interval - (now - self._ready_since)))
        return wait

    def finished(self) -> None:
        """One span in memory is done."""
        self.in_memory -= 1
