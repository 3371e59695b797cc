"""`LightningSpanProcessor`: the OpenTelemetry span processor that collects a tracer's spans and hands them to the
store writer.

A span belongs to the trace scope that was current (a context variable) when it *started*; spans started in a
thread that lost the context variables are attributed to this processor's only open scope, if it has exactly one.
Spans started outside every scope of this processor are ignored, so several tracers (and other OpenTelemetry users)
can share one provider without seeing each other's spans. `on_end` only appends to a list and queues the span: the
conversion and the store calls happen on the writer's thread.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Optional

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from agentlightning.semconv import AGL_ANNOTATION, AGL_REWARD

from .base import TraceTarget
from .convert import span_from_readable
from .scope import CURRENT_SCOPE, TraceScope
from .writer import SpanWriter

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import Span as SdkSpan

    from agentlightning.store.base import LightningStore

__all__ = ["LightningSpanProcessor"]

logger = logging.getLogger(__name__)

_URGENT_NAMES = frozenset({AGL_REWARD, AGL_ANNOTATION})


class LightningSpanProcessor(SpanProcessor):
    """Collects the spans of this processor's trace scopes and queues them for the store.

    Args:
        writer_factory: builds the SpanWriter the first time a scope writes to a store (default: a SpanWriter with
            default settings).
        disable_store_submission: collect spans but never send them to a store.
    """

    def __init__(
        self,
        writer_factory: Optional[Callable[[], SpanWriter]] = None,
        *,
        disable_store_submission: bool = False,
    ) -> None:
        self.writer: Optional[SpanWriter] = None
        self._writer_factory = writer_factory or (lambda: SpanWriter(span_from_readable))
        self.disable_store_submission = disable_store_submission
        self._lock = threading.Lock()
        self._open: list[TraceScope] = []
        self._span_scopes: dict[int, TraceScope] = {}
        self._last_scope: Optional[TraceScope] = None
        self._warned_ambiguous = False
        self._legacy_tokens: list[tuple[TraceScope, contextvars.Token[Optional[TraceScope]]]] = []

    # ------------------------------------------------------------------------------------------------ scopes
    def ensure_writer(self) -> SpanWriter:
        """The store writer, created on first use."""
        with self._lock:
            if self.writer is None:
                self.writer = self._writer_factory()
            return self.writer

    def close_writer(self, timeout: Optional[float] = 30.0) -> None:
        """Flush and stop the store writer (a later store scope starts a new one)."""
        with self._lock:
            writer, self.writer = self.writer, None
        if writer is not None:
            writer.close(timeout=timeout)

    def open_scope(
        self, name: Optional[str], target: TraceTarget
    ) -> tuple[TraceScope, contextvars.Token[Optional[TraceScope]]]:
        """Start a new trace scope and make it current in the calling context."""
        if target.writes_to_store and not self.disable_store_submission:
            self.ensure_writer()
        scope = TraceScope(name, target, self)
        with self._lock:
            self._open.append(scope)
            self._last_scope = scope
        return scope, CURRENT_SCOPE.set(scope)

    def close_scope(self, scope: TraceScope, token: Optional[contextvars.Token[Optional[TraceScope]]]) -> None:
        """End `scope`: it is no longer current and receives no new spans (spans it started may still end)."""
        scope.closed = True
        with self._lock:
            if scope in self._open:
                self._open.remove(scope)
        if token is not None:
            try:
                CURRENT_SCOPE.reset(token)
            except ValueError:  # closed from another context (e.g. another task): just clear it there
                if CURRENT_SCOPE.get() is scope:
                    CURRENT_SCOPE.set(None)

    @property
    def last_scope(self) -> Optional[TraceScope]:
        return self._last_scope

    # -------------------------------------------------------------------------------------- span processor API
    def on_start(self, span: SdkSpan, parent_context: Optional[Context] = None) -> None:
        context = span.context
        if context is None:
            return
        scope = CURRENT_SCOPE.get()
        if scope is None or scope.owner is not self:
            if scope is not None:
                return
            open_scopes = self._open
            if len(open_scopes) != 1:
                if open_scopes and not self._warned_ambiguous:
                    self._warned_ambiguous = True
                    logger.warning(
                        "Span %r started outside any trace context while %d contexts are open: it cannot be tied to "
                        "a rollout and is ignored. Run such code with the context propagated (asyncio.to_thread, "
                        "contextvars.copy_context().run) to capture it. (Logged once.)",
                        span.name,
                        len(open_scopes),
                    )
                return
            scope = open_scopes[0]
        self._span_scopes[context.span_id] = scope

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None:
            return
        scope = self._span_scopes.pop(context.span_id, None)
        if scope is None or not context.trace_flags.sampled:
            return
        index = scope.add(span)
        target = scope.target
        writer = self.writer
        if writer is None or self.disable_store_submission or not target.writes_to_store:
            return
        assert target.store is not None and target.rollout_id and target.attempt_id
        try:
            writer.submit(
                target.store,
                target.rollout_id,
                target.attempt_id,
                span,
                group=scope,
                urgent=span.name in _URGENT_NAMES,
                on_written=functools.partial(scope.record_stored, index),
            )
        except Exception:  # on_end must never raise into the instrumented code
            logger.exception("Could not queue span %r for the store", span.name)

    def shutdown(self) -> None:
        """Nothing to release: the writer belongs to the tracer."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Wait (up to the timeout) until every queued span reached the store."""
        if self.writer is None:
            return True
        return self.writer.flush(timeout=timeout_millis / 1000)

    # ---------------------------------------------------------------------------------------- v0.2 interface
    def spans(self) -> list[ReadableSpan]:
        """The spans collected by the current scope (or the most recent one)."""
        scope = CURRENT_SCOPE.get()
        if scope is None or scope.owner is not self:
            scope = self._last_scope
        return scope.readable_spans() if scope is not None else []

    @contextmanager
    def with_context(self, store: LightningStore, rollout_id: str, attempt_id: str) -> Iterator[LightningSpanProcessor]:
        """Collect a fresh trace and write it to `store` under the given attempt while the block runs."""
        scope, token = self.open_scope(None, TraceTarget(store, rollout_id, attempt_id))
        try:
            yield self
        finally:
            self.close_scope(scope, token)

    def __enter__(self) -> LightningSpanProcessor:
        scope, token = self.open_scope(None, TraceTarget())
        self._legacy_tokens.append((scope, token))
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._legacy_tokens:
            scope, token = self._legacy_tokens.pop()
            self.close_scope(scope, token)
