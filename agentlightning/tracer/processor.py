"""`LightningSpanProcessor`: the OpenTelemetry span processor that collects a tracer's spans and hands them to the
store writer.

A span belongs to the trace scope that was current (a context variable) when it *started*; spans started in a
thread that lost the context variables are attributed to this processor's only open scope, if it has exactly one.
Spans started outside every scope of this processor are ignored, so several tracers (and other OpenTelemetry users)
can share one provider without seeing each other's spans. `on_end` only appends to a list and queues the span: the
conversion and the store calls happen on the writer's thread. Only sampled spans with a span context are kept.

Used on its own (v0.2 style: added to an application's provider, `with processor.with_context(store=...,
rollout_id=..., attempt_id=...)`), leaving the block waits until its spans are in the store, bounded by
`flush_timeout`; every store call of the writer is bounded by `store_timeout`, so a store that hangs becomes an
outage that is retried, never a writer stuck for good. Closing any scope first waits (at most `late_span_timeout`)
for spans that started in it and end late.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Optional, cast

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from agentlightning.semconv import AGL_ANNOTATION, AGL_REWARD

from .base import TraceTarget
from .convert import span_from_readable
from .scope import CURRENT_SCOPE, DETACHED, TraceScope
from .writer import SpanWriter

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import Span as SdkSpan

    from agentlightning.store.base import LightningStore
    from agentlightning.types import Span

__all__ = ["LightningSpanProcessor", "current_trace_scope"]

logger = logging.getLogger(__name__)

_URGENT_NAMES = frozenset({AGL_REWARD, AGL_ANNOTATION})

_processors: weakref.WeakSet[LightningSpanProcessor] = weakref.WeakSet()


def current_trace_scope() -> Optional[TraceScope]:
    """The trace scope that a span started here would belong to (the same rule as `on_start`), or None."""
    scope = CURRENT_SCOPE.get()
    if scope is DETACHED:
        return None
    if scope is not None:
        return scope
    open_scopes = [open_scope for processor in list(_processors) for open_scope in list(processor._open)]
    return open_scopes[0] if len(open_scopes) == 1 else None


class _BoundedStore:
    """The store calls the writer makes, each bounded by `timeout`: a call that hangs fails as an outage (retried
    with backoff by the writer) instead of blocking the writer for good. Everything else is the wrapped store's."""

    def __init__(self, store: LightningStore, timeout: float) -> None:
        self._store = store
        self._timeout = timeout

    async def _bounded(self, what: str, call: Any) -> Any:
        try:
            return await asyncio.wait_for(call, self._timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"the store did not answer {what} within {self._timeout:g} s") from None

    async def get_many_span_sequence_ids(self, rollout_attempt_ids: Sequence[tuple[str, str]]) -> Sequence[int]:
        return await self._bounded(
            "get_many_span_sequence_ids", self._store.get_many_span_sequence_ids(rollout_attempt_ids)
        )

    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        return await self._bounded("add_many_spans", self._store.add_many_spans(spans))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class LightningSpanProcessor(SpanProcessor):
    """Collects the spans of this processor's trace scopes and queues them for the store.

    Args:
        writer_factory: builds the SpanWriter the first time a scope writes to a store (default: a SpanWriter with
            default settings).
        disable_store_submission: collect spans but never send them to a store.
        request_token_ids: while one of this processor's scopes is current, zero-code capture asks OpenAI-compatible
            servers for token ids (see `agentlightning.instrumentation.token_ids`).
        store_timeout: seconds each store call of the writer may take before it counts as failed (and is retried).
        flush_timeout: seconds leaving `with_context` waits for its spans to reach the store.
        late_span_timeout: seconds closing a scope waits for spans that started in it and have not ended yet.
    """

    def __init__(
        self,
        writer_factory: Optional[Callable[[], SpanWriter]] = None,
        *,
        disable_store_submission: bool = False,
        request_token_ids: bool = True,
        store_timeout: float = 60.0,
        flush_timeout: float = 60.0,
        late_span_timeout: float = 1.0,
    ) -> None:
        if store_timeout <= 0 or flush_timeout < 0 or late_span_timeout < 0:
            raise ValueError("store_timeout must be positive; flush_timeout and late_span_timeout not negative")
        self.writer: Optional[SpanWriter] = None
        self._writer_factory = writer_factory or (lambda: SpanWriter(span_from_readable))
        self.disable_store_submission = disable_store_submission
        self.request_token_ids = request_token_ids
        self.store_timeout = store_timeout
        self.flush_timeout = flush_timeout
        self.late_span_timeout = late_span_timeout
        self._lock = threading.Lock()
        self._open: list[TraceScope] = []
        self._span_scopes: dict[int, TraceScope] = {}
        self._last_scope: Optional[TraceScope] = None
        self._warned_ambiguous = False
        self._legacy_tokens: list[tuple[TraceScope, contextvars.Token[Optional[TraceScope]]]] = []
        self._bounded_stores: weakref.WeakKeyDictionary[Any, _BoundedStore] = weakref.WeakKeyDictionary()
        _processors.add(self)

    def _bounded_store(self, store: LightningStore) -> LightningStore:
        """One stable bounded wrapper per store (the writer groups its calls by store object)."""
        with self._lock:
            try:
                bounded = self._bounded_stores.get(store)
                if bounded is None:
                    bounded = self._bounded_stores[store] = _BoundedStore(store, self.store_timeout)
            except TypeError:  # a store that cannot be weakly referenced: write to it unbounded
                return store
        return cast("LightningStore", bounded)

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
        scope.span_started(context.span_id, span.name)

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None:
            return
        scope = self._span_scopes.pop(context.span_id, None)
        if scope is None:
            return
        scope.span_ended(context.span_id)
        if not context.trace_flags.sampled:
            return
        index = scope.add(span)
        target = scope.target
        writer = self.writer
        if writer is None or self.disable_store_submission or not target.writes_to_store:
            return
        assert target.store is not None and target.rollout_id and target.attempt_id
        try:
            writer.submit(
                self._bounded_store(target.store),
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
        """Collect a fresh trace and write it to `store` under the given attempt while the block runs.

        Leaving the block waits for late spans (`late_span_timeout`) and until the spans are stored (`flush_timeout`);
        if the store is slow or down, an error is logged, the caller continues and the spans keep being retried.
        """
        scope, token = self.open_scope(None, TraceTarget(store, rollout_id, attempt_id))
        try:
            yield self
        finally:
            self.close_scope(scope, token)
            self.settle(scope, self.flush_timeout)

    def __enter__(self) -> LightningSpanProcessor:
        scope, token = self.open_scope(None, TraceTarget())
        self._legacy_tokens.append((scope, token))
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._legacy_tokens:
            scope, token = self._legacy_tokens.pop()
            self.close_scope(scope, token)
            self.settle(scope, 0.0)

    # ----------------------------------------------------------------------------------------- settling scopes
    def _report_late(self, scope: TraceScope) -> None:
        names = scope.open_span_names()
        if names:
            logger.warning(
                "Trace context of rollout %s closed while %d span(s) it started were still open (%s) after waiting "
                "%.1f s; they are stored when they end (late_span_timeout sets the wait)",
                scope.target.rollout_id,
                len(names),
                ", ".join(sorted(set(names))[:5]),
                self.late_span_timeout,
            )

    def _writer_of(self, scope: TraceScope) -> Optional[SpanWriter]:
        if self.disable_store_submission or not scope.target.writes_to_store:
            return None
        return self.writer

    def _report_unflushed(self, scope: TraceScope, timeout: float) -> None:
        logger.error(
            "Spans of rollout %s attempt %s were not all stored within %.1f s (store unavailable?); they stay queued "
            "and are retried in the background",
            scope.target.rollout_id,
            scope.target.attempt_id,
            timeout,
        )

    def settle(self, scope: TraceScope, flush_timeout: float) -> bool:
        """After `close_scope`: wait (bounded) for its late spans, then until its spans are stored.

        Returns False when the store did not take them all within `flush_timeout` (they stay queued).
        """
        if not scope.wait_for_open_spans(self.late_span_timeout):
            self._report_late(scope)
        writer = self._writer_of(scope)
        if writer is None:
            return True
        flushed = writer.flush(scope, timeout=flush_timeout)
        if not flushed:
            self._report_unflushed(scope, flush_timeout)
        return flushed

    async def settle_async(self, scope: TraceScope, flush_timeout: float) -> bool:
        """`settle` without blocking the event loop (late spans may end in tasks of this very loop)."""
        if not await scope.wait_for_open_spans_async(self.late_span_timeout):
            self._report_late(scope)
        writer = self._writer_of(scope)
        if writer is None:
            return True
        flushed = await writer.flush_async(scope, timeout=flush_timeout)
        if not flushed:
            self._report_unflushed(scope, flush_timeout)
        return flushed
