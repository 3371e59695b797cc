"""`TraceScope`: the state of one open trace context (which attempt it writes to and the spans it collected).

Also `detached_from_traces()` / `untraced_asgi(app)`: code run under them (a server that lives in the same process
as a rollout's trace context, such as the LLM proxy) never has its spans attributed to a rollout, even though its
thread did not inherit any trace context (spans of such threads otherwise go to the single open context).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Optional

from agentlightning.types import Span

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


CURRENT_SCOPE: contextvars.ContextVar[Optional[TraceScope]] = contextvars.ContextVar(
    "agentlightning_trace_scope", default=None
)
"""The trace scope of the running code (set by trace contexts; spans started here belong to it)."""


DETACHED = TraceScope("detached", TraceTarget(), owner=None)
"""The scope of code that must never be traced into a rollout (no processor owns it, so every one ignores it)."""


@contextmanager
def detached_from_traces() -> Iterator[None]:
    """Spans started in this block (and in tasks and threads that inherit its context) belong to no rollout."""
    token = CURRENT_SCOPE.set(DETACHED)
    try:
        yield
    finally:
        CURRENT_SCOPE.reset(token)


_ASGIApp = Callable[[MutableMapping[str, Any], Any, Any], Awaitable[None]]


def untraced_asgi(app: _ASGIApp) -> _ASGIApp:
    """Wrap an ASGI app so that nothing it does (requests, lifespan, background tasks) is traced into a rollout.

    Web frameworks (FastAPI's native telemetry, ASGI instrumentors) create spans for every request; when the server
    runs in the same process as an open trace context those spans would otherwise land in the rollout.
    """

    async def detached_app(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        with detached_from_traces():
            await app(scope, receive, send)

    return detached_app
