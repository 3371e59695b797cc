"""How Agent Lightning plugs into OpenTelemetry without fighting other libraries over the global provider.

One process-wide span processor (the router) is added to the tracer provider, once; every tracer's
`LightningSpanProcessor` registers with the router and unregisters on teardown, so nothing accumulates in the
provider however many tracers come and go.

Which provider:
- No global provider set yet: Agent Lightning installs an SDK `TracerProvider` as the global provider.
- A global SDK `TracerProvider` exists (set by the application, AgentOps, ...): the router is added to it; the
  application's own processors and exporters keep working and see the same spans.
- A global provider that is not the SDK's (a custom implementation or the no-op provider): spans created through it
  cannot be observed. Agent Lightning then uses a private SDK provider for its own spans (emitters, operations) and
  logs a warning: instrumented libraries keep reporting to the application's provider.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace import Span as SdkSpan

__all__ = ["get_sdk_provider", "register_processor", "unregister_processor"]

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_router: Any = None
_attached: list[Any] = []
_private_provider: Optional[TracerProvider] = None


def _make_router() -> Any:
    from opentelemetry.sdk.trace import SpanProcessor

    class _Router(SpanProcessor):
        """Forwards span events to the registered processors (copy-on-write tuple: no lock on the hot path)."""

        def __init__(self) -> None:
            self.processors: tuple[SpanProcessor, ...] = ()

        def on_start(self, span: SdkSpan, parent_context: Optional[Context] = None) -> None:
            for processor in self.processors:
                processor.on_start(span, parent_context=parent_context)

        def on_end(self, span: ReadableSpan) -> None:
            for processor in self.processors:
                processor.on_end(span)

        def shutdown(self) -> None:
            for processor in self.processors:
                processor.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return all(processor.force_flush(timeout_millis) for processor in self.processors)

    return _Router()


def get_sdk_provider() -> TracerProvider:
    """The SDK provider Agent Lightning's spans are created with (see the module docstring), router attached."""
    global _router, _private_provider
    from opentelemetry import trace as trace_api
    from opentelemetry.sdk.trace import TracerProvider

    with _lock:
        if _router is None:
            _router = _make_router()
        provider = trace_api.get_tracer_provider()
        if isinstance(provider, trace_api.ProxyTracerProvider):
            trace_api.set_tracer_provider(TracerProvider())
            provider = trace_api.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            if _private_provider is None:
                logger.warning(
                    "The global OpenTelemetry tracer provider is %s, not an SDK TracerProvider: Agent Lightning "
                    "records its own spans with a private provider, but cannot see spans of instrumented libraries",
                    type(provider).__name__,
                )
                _private_provider = TracerProvider()
            provider = _private_provider
        if not any(attached is provider for attached in _attached):
            provider.add_span_processor(_router)
            _attached.append(provider)
        return provider


def register_processor(processor: SpanProcessor) -> None:
    """Route span events to `processor` (attaching the router to the provider if needed)."""
    get_sdk_provider()
    with _lock:
        if processor not in _router.processors:
            _router.processors = (*_router.processors, processor)


def unregister_processor(processor: SpanProcessor) -> None:
    """Stop routing span events to `processor`."""
    with _lock:
        if _router is not None:
            _router.processors = tuple(p for p in _router.processors if p is not processor)
