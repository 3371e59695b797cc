"""`TraceScope`: the state of one open trace context (which attempt it writes to and the spans it collected)."""

from __future__ import annotations

import contextvars
import threading
from typing import TYPE_CHECKING, Any, Optional

from agentlightning.types import Span

from .base import TraceTarget
from .convert import span_from_readable

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["CURRENT_SCOPE", "TraceScope"]


class TraceScope:
    """Spans collected by one trace context, in the order they ended.

    The scope is also the writer group of its spans: closing the context waits until the writer has stored them.
    """

    def __init__(self, name: Optional[str], target: TraceTarget, owner: Any) -> None:
        self.name = name
        self.target = target
        self.owner = owner
        self.closed = False
        self._lock = threading.Lock()
        self._readables: list[ReadableSpan] = []
        self._stored: dict[int, Span] = {}

    def add(self, readable: ReadableSpan) -> int:
        """Collect a finished span; returns its position."""
        with self._lock:
            self._readables.append(readable)
            return len(self._readables) - 1

    def record_stored(self, index: int, span: Span) -> None:
        """Remember the Span the store accepted for the span at `index` (it carries the real sequence id)."""
        self._stored[index] = span

    def readable_spans(self) -> list[ReadableSpan]:
        with self._lock:
            return list(self._readables)

    def to_spans(self) -> list[Span]:
        """The collected spans as stored Spans: store-assigned sequence ids where known, else their position."""
        with self._lock:
            readables = list(self._readables)
        rollout_id = self.target.rollout_id or ""
        attempt_id = self.target.attempt_id or ""
        spans: list[Span] = []
        for index, readable in enumerate(readables):
            stored = self._stored.get(index)
            if stored is None:
                stored = span_from_readable(readable, rollout_id, attempt_id, index + 1)
            spans.append(stored)
        return spans

    def __repr__(self) -> str:
        return f"TraceScope(name={self.name!r}, rollout_id={self.target.rollout_id!r}, attempt_id={self.target.attempt_id!r})"


CURRENT_SCOPE: contextvars.ContextVar[Optional[TraceScope]] = contextvars.ContextVar(
    "agentlightning_trace_scope", default=None
)
"""The trace scope of the running code (set by trace contexts; spans started here belong to it)."""
