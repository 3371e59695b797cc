"""`OtelTracer`: a tracer on the OpenTelemetry SDK that writes spans to a LightningStore without blocking the agent.

Usage (v0.3 form)::

    tracer = OtelTracer()
    tracer.init_worker(0, store)
    async with tracer.trace_context("rollout", rollout_id=rid, attempt_id=aid):
        await agent(...)          # spans created here are stored under (rid, aid)
    spans = tracer.get_last_trace()

The v0.2 form `trace_context(store=..., rollout_id=..., attempt_id=...)` works too. Leaving the context first waits
for spans that started inside it and have not ended yet (at most `late_span_timeout` seconds: some frameworks close
their spans lazily), then until the writer stored the context's spans (at most `flush_timeout` seconds; if the store
is down the spans stay queued and keep being retried in the background).

By itself the tracer records spans created through OpenTelemetry in the process (Agent Lightning's emitters and any
instrumented library). `OtelTracer(instrument=True)` also turns on zero-code capture of LLM calls and agent
frameworks (`agentlightning.instrumentation.instrument_all`) for the lifetime of the worker; `instrument="auto"` (the
Trainer's default) does the same for each installed framework when the agent first imports it, so the
instrumentors of frameworks the agent does not use are never imported.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, Literal, Optional, Union

from agentlightning.types import Span, SpanCoreFields, SpanRecordingContext, TraceStatus
from agentlightning.utils import extensions

from .active import enter_active_tracer, exit_active_tracer
from .base import Tracer, TraceTarget
from .convert import span_from_readable
from .processor import LightningSpanProcessor
from .provider import get_sdk_provider, register_processor, unregister_processor
from .recording import OtelRecordingContext, sanitize_attributes
from .writer import SpanWriter, SpanWriterStats

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Tracer as OtelApiTracer

    from agentlightning.instrumentation import LazyInstrumentation
    from agentlightning.store.base import LightningStore

__all__ = ["OtelTracer"]

logger = logging.getLogger(__name__)


def _instrumentation() -> Any:
    """`agentlightning.instrumentation`, which sits above the tracer: the package root installs it at an extension
    point (`agentlightning.utils.extensions`), so the tracer never imports it."""
    return extensions.load(extensions.TRACER_INSTRUMENTATION)


def _ns(seconds: Optional[float]) -> Optional[int]:
    return None if seconds is None else int(seconds * 1_000_000_000)


class OtelTracer(Tracer):
    """Records OpenTelemetry spans per rollout attempt and writes them to the store in batches.

    Args:
        instrument: also enable zero-code instrumentation while the worker is initialised: True for every installed
            framework (`instrument_all()`), "auto" for every installed framework once it is imported
            (`LazyInstrumentation`), or the names of the integrations that must be instrumented (an integration
            that cannot attach then raises `InstrumentationError`).
        flush_timeout: seconds a closing trace context waits for its spans to reach the store.
        max_buffered_spans: spans kept in memory before spilling to disk (see `SpanWriter`).
        max_batch_size: spans per store call.
        flush_interval: seconds a partial batch may wait for more spans.
        retry_initial_delay / retry_max_delay: backoff bounds while the store is unavailable.
        late_span_timeout: seconds a closing trace context waits for spans that started inside it and have not
            ended yet (frameworks that close their spans lazily); spans still open then are stored when they end.
        request_token_ids: with zero-code capture on, ask OpenAI-compatible servers for token ids (vLLM's
            `return_token_ids`) on every chat/completions call made inside a trace context (`AGL_REQUEST_TOKEN_IDS=0`
            turns it off process-wide).
        store_timeout: seconds each store call of the writer may take before it counts as failed and is retried.
        spill_dir / max_spill_bytes: where spans that do not fit in memory wait, and the cap on that file.
        max_retries: tries after the first for a span the store answers with a server error before it is given up.
    """

    def __init__(
        self,
        *,
        instrument: Union[bool, Literal["auto"], Sequence[str]] = False,
        flush_timeout: float = 30.0,
        max_buffered_spans: int = 10_000,
        max_batch_size: int = 512,
        flush_interval: float = 0.2,
        retry_initial_delay: float = 0.25,
        retry_max_delay: float = 10.0,
        late_span_timeout: float = 1.0,
        request_token_ids: bool = True,
        store_timeout: float = 60.0,
        spill_dir: Optional[str] = None,
        max_spill_bytes: int = 256 * 1024 * 1024,
        max_retries: int = 5,
    ) -> None:
        super().__init__()
        if isinstance(instrument, str) and instrument != "auto":
            raise ValueError(
                f'instrument must be True, False, "auto" or a list of integration names, got {instrument!r}'
            )
        self._instrument_on_init = instrument
        self.flush_timeout = flush_timeout
        self.late_span_timeout = late_span_timeout
        self.request_token_ids = request_token_ids
        self.store_timeout = store_timeout
        self._writer_options: dict[str, Any] = {
            "max_buffered_spans": max_buffered_spans,
            "max_batch_size": max_batch_size,
            "flush_interval": flush_interval,
            "retry_initial_delay": retry_initial_delay,
            "retry_max_delay": retry_max_delay,
            "spill_dir": spill_dir,
            "max_spill_bytes": max_spill_bytes,
            "max_retries": max_retries,
        }
        self._provider: Optional[TracerProvider] = None
        self._otel_tracer: Optional[OtelApiTracer] = None
        self._processor: Optional[LightningSpanProcessor] = None
        self._instrumented = False
        self._lazy: Optional[LazyInstrumentation] = None

    def __getstate__(self) -> dict[str, Any]:
        # Threads, providers and processors stay in the process that created them; a copy starts uninitialised.
        state = self.__dict__.copy()
        for key in ("_provider", "_otel_tracer", "_processor"):
            state[key] = None
        state["_instrumented"] = False
        state["_lazy"] = None
        state["_store"] = None
        return state

    # ------------------------------------------------------------------------------------------------ lifecycle
    def init_worker(self, worker_id: int, store: Optional[LightningStore] = None) -> None:  # type: ignore[override]
        if self._processor is not None:
            logger.error("OtelTracer.init_worker called twice (worker %s); keeping the first initialisation", worker_id)
            if store is not None:
                self._store = store
            return
        super().init_worker(worker_id, store)
        self._provider = get_sdk_provider()
        self._otel_tracer = self._provider.get_tracer("agentlightning")
        self._processor = LightningSpanProcessor(
            lambda: SpanWriter(span_from_readable, **self._writer_options),
            request_token_ids=self.request_token_ids,
            store_timeout=self.store_timeout,
            flush_timeout=self.flush_timeout,
            late_span_timeout=self.late_span_timeout,
        )
        register_processor(self._processor)
        if self._instrument_on_init == "auto":
            lazy: LazyInstrumentation = _instrumentation().LazyInstrumentation()
            lazy.start()
            self._lazy = lazy
        elif self._instrument_on_init:
            try:
                _instrumentation().instrument_all(self._integrations())  # undoes its own partial work when it fails
            except BaseException:
                self.teardown_worker(worker_id)
                raise
            self._instrumented = True

    def _integrations(self) -> Optional[list[str]]:
        option = self._instrument_on_init
        return None if isinstance(option, (bool, str)) else list(option)

    def teardown_worker(self, worker_id: int) -> None:  # type: ignore[override]
        if self._processor is not None:
            unregister_processor(self._processor)
            self._processor.close_writer(timeout=self.flush_timeout)
        if self._instrumented:
            _instrumentation().uninstrument_all(self._integrations())
            self._instrumented = False
        if self._lazy is not None:
            self._lazy.stop()
            self._lazy = None
        self._processor = None
        self._otel_tracer = None
        self._provider = None
        super().teardown_worker(worker_id)

    @property
    def processor(self) -> LightningSpanProcessor:
        """The span processor of this worker (RuntimeError before `init_worker`)."""
        if self._processor is None:
            raise RuntimeError("OtelTracer is not initialized: call init_worker(worker_id, store) first")
        return self._processor

    @property
    def _writer(self) -> Optional[SpanWriter]:
        return self._processor.writer if self._processor is not None else None

    def writer_stats(self) -> Optional[SpanWriterStats]:
        """Counters of the store writer (None before the first trace context with a store)."""
        writer = self._writer
        return writer.stats() if writer is not None else None

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Wait until every queued span reached the store; False if `timeout` passed first."""
        writer = self._writer
        return writer.flush(timeout=timeout) if writer is not None else True

    # -------------------------------------------------------------------------------------------------- contexts
    @contextmanager
    def _open(self, name: Optional[str], target: TraceTarget) -> Iterator[tuple[LightningSpanProcessor, Any]]:
        processor = self.processor
        enter_active_tracer(self)
        scope, token = processor.open_scope(name, target)
        try:
            yield processor, scope
        finally:
            processor.close_scope(scope, token)
            exit_active_tracer(self)

    @asynccontextmanager
    async def trace_context(
        self,
        name: Optional[str] = None,
        *,
        store: Optional[LightningStore] = None,
        rollout_id: Optional[str] = None,
        attempt_id: Optional[str] = None,
    ) -> AsyncIterator[LightningSpanProcessor]:
        target = self.resolve_target(store=store, rollout_id=rollout_id, attempt_id=attempt_id)
        processor, scope = self.processor, None
        try:
            with self._open(name, target) as (processor, scope):
                yield processor
        finally:
            if scope is not None:
                await processor.settle_async(scope, self.flush_timeout)

    @contextmanager
    def _trace_context_sync(
        self,
        name: Optional[str] = None,
        *,
        store: Optional[LightningStore] = None,
        rollout_id: Optional[str] = None,
        attempt_id: Optional[str] = None,
    ) -> Iterator[LightningSpanProcessor]:
        target = self.resolve_target(store=store, rollout_id=rollout_id, attempt_id=attempt_id)
        processor, scope = self.processor, None
        try:
            with self._open(name, target) as (processor, scope):
                yield processor
        finally:
            if scope is not None:
                processor.settle(scope, self.flush_timeout)

    def get_last_trace(self) -> list[Span]:
        scope = self.processor.last_scope
        return scope.to_spans() if scope is not None else []

    # ------------------------------------------------------------------------------------------------------ spans
    def _tracer(self) -> OtelApiTracer:
        if self._otel_tracer is None:
            raise RuntimeError("OtelTracer is not initialized: call init_worker(worker_id, store) first")
        return self._otel_tracer

    def create_span(
        self,
        name: str,
        attributes: Optional[Mapping[str, Any]] = None,
        timestamp: Optional[float] = None,
        status: Optional[TraceStatus] = None,
    ) -> SpanCoreFields:
        from opentelemetry.trace import Status, StatusCode

        moment = timestamp if timestamp is not None else time.time()
        flat = sanitize_attributes(attributes)
        span = self._tracer().start_span(name, attributes=flat, start_time=_ns(moment))
        if status is not None:
            span.set_status(Status(StatusCode[status.status_code], status.description))
        span.end(end_time=_ns(moment))
        return SpanCoreFields(
            name=name,
            attributes=flat,
            start_time=moment,
            end_time=moment,
            status=status or TraceStatus(status_code="UNSET"),
        )

    @contextmanager
    def operation_context(
        self,
        name: str,
        attributes: Optional[Mapping[str, Any]] = None,
        start_time: Optional[float] = None,
        end_time: Optional[float] = None,
    ) -> Iterator[SpanRecordingContext]:
        from opentelemetry import trace as trace_api

        start = start_time if start_time is not None else time.time()
        flat = sanitize_attributes(attributes)
        span = self._tracer().start_span(name, attributes=flat, start_time=_ns(start))
        recording = OtelRecordingContext(span, name, flat, start)
        with trace_api.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
            try:
                yield recording
            except BaseException as exc:
                recording.record_exception(exc)
                recording.record_status("ERROR", f"{type(exc).__name__}: {exc}")
                raise
            finally:
                recording.finish(end_time)
