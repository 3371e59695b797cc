"""`TraceScope`: the state of one open trace context (which attempt it writes to and the spans it collected).

Also `detached_from_traces()` / `untraced_asgi(app)` (from `agentlightning.utils.untraced`): code run under them (a
server that lives in the same process as a rollout's trace context, such as the LLM proxy) never has its spans
attributed to a rollout.
"""

from __future__ import annotations

import contextvars
import threading
from typing import TYPE_CHECKING, Any, Optional

from agentlightning.types import Span
from agentlightning.utils import untraced as _untraced
from agentlightning.utils.untraced import detached_from_traces, untraced_asgi

from .base import TraceTarget
from .convert import span_from_readable

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["CURRENT_SCOPE", "DETACHED", "TraceScope", "detached_from_traces", "untraced_asgi"]


class TraceScope:
    """Spans collected by one trace context, in the order they ended.

    The scope is also the writer group of its spans: closing the context waits until the writer has stored them. It
    counts the spans that started in it and have not ended yet, so that closing can wait for spans that end late
    (`wait_for_open_spans`).
    """

    def __init__(self, name: Optional[str], target: TraceTarget, owner: Any) -> None:
        self.name = name
        self.target = target
        self.owner = owner
        self.closed = False
        self._lock = threading.Condition()
        self._readables: list[ReadableSpan] = []
        self._stored: dict[int, Span] = {}
        self._open_spans: dict[int, str] = {}  # span id -> name, of spans started here and not ended yet

    # ------------------------------------------------------------------------------------------- open spans
    def span_started(self, span_id: int, name: str) -> None:
        with self._lock:
            self._open_spans[span_id] = name

    def span_ended(self, span_id: int) -> None:
        with self._lock:
            if self._open_spans.pop(span_id, None) is not None and not self._open_spans:
                self._lock.notify_all()

    def open_span_names(self) -> list[str]:
        """Names of the spans that started in this scope and have not ended yet."""
        with self._lock:
            return list(self._open_spans.values())

    def wait_for_open_spans(self, timeout: float) -> bool:
        """Block until every span started in this scope has ended (False when `timeout` passed first)."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._open_spans, timeout=max(timeout, 0.0))

    async def wait_for_open_spans_async(self, timeout: float) -> bool:
        """`wait_for_open_spans` without blocking the event loop: late spans often end in a task of this very loop
        (an async generator closed by the loop's finalizer, a stream released by a callback)."""
        import asyncio
        import time

        deadline = time.monotonic() + max(timeout, 0.0)
        pause = 0.0
        while True:
            with self._lock:
                if not self._open_spans:
                    return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            await asyncio.sleep(min(pause, remaining))
            pause = min(max(pause * 2, 0.001), 0.02)

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


CURRENT_SCOPE: contextvars.ContextVar[Optional[TraceScope]] = _untraced.CURRENT_SCOPE
"""The trace scope of the running code (set by trace contexts; spans started here belong to it). The variable lives
in `agentlightning.utils.untraced`, which marks code detached from traces (`DETACHED`, a scope no processor owns)."""

DETACHED: Any = _untraced.DETACHED
"""The scope of code that must never be traced into a rollout (no processor owns it, so every one ignores it)."""
