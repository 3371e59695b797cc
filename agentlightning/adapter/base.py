"""Adapter base classes: an adapter turns one form of data (usually the spans of a rollout) into another."""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar

from agentlightning.types import Span

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    OtelSpans = list[ReadableSpan]
else:  # the SDK is not imported at runtime just for an annotation
    OtelSpans = list

__all__ = ["Adapter", "OtelTraceAdapter", "TraceAdapter"]

T_from = TypeVar("T_from")
T_to = TypeVar("T_to")


class Adapter(Generic[T_from, T_to]):
    """Callable converter: `adapter(source)` is `adapter.adapt(source)`."""

    def __call__(self, source: T_from, /) -> T_to:
        return self.adapt(source)

    def adapt(self, source: T_from, /) -> T_to:
        raise NotImplementedError(f"{type(self).__name__}.adapt is not implemented")


class OtelTraceAdapter(Adapter[OtelSpans, T_to], Generic[T_to]):
    """An adapter from OpenTelemetry SDK spans."""


class TraceAdapter(Adapter[list[Span], T_to], Generic[T_to]):
    """An adapter from stored spans (what trainers and algorithms pass to adapters)."""
