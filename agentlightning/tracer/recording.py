"""`SpanRecordingContext` implementations: what an open span lets its user record before it ends."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Optional

from agentlightning.types import Attributes, SpanCoreFields, StatusCode, TraceStatus
from agentlightning.utils.otel import flatten_attributes, format_exception_attributes

if TYPE_CHECKING:
    from opentelemetry.trace import Span as OtelSpan

__all__ = ["CoreFieldsRecordingContext", "OtelRecordingContext", "sanitize_attributes"]


def sanitize_attributes(attributes: Optional[Mapping[str, Any]]) -> Attributes:
    """Flatten nested values and coerce the rest into OpenTelemetry attribute values."""
    if not attributes:
        return {}
    return flatten_attributes(attributes)


class CoreFieldsRecordingContext:
    """Records into plain `SpanCoreFields` (no OpenTelemetry involved); used by `DummyTracer`."""

    def __init__(self, name: str, attributes: Optional[Mapping[str, Any]] = None, start_time: Optional[float] = None):
        self._fields = SpanCoreFields(
            name=name,
            attributes=sanitize_attributes(attributes),
            start_time=start_time if start_time is not None else time.time(),
            status=TraceStatus(status_code="UNSET"),
        )

    def record_exception(self, exception: BaseException) -> None:
        self._fields.attributes.update(format_exception_attributes(exception))

    def record_attributes(self, attributes: Mapping[str, Any]) -> None:
        self._fields.attributes.update(sanitize_attributes(attributes))

    def record_status(self, status_code: StatusCode, description: Optional[str] = None) -> None:
        self._fields.status = TraceStatus(status_code=status_code, description=description)

    def finish(self, end_time: Optional[float] = None) -> SpanCoreFields:
        """Stamp the end time (now by default) and return the recorded fields."""
        self._fields.end_time = end_time if end_time is not None else time.time()
        return self._fields

    def get_recorded_span(self) -> SpanCoreFields:
        return self._fields.model_copy(deep=True)


class OtelRecordingContext:
    """Records onto a live OpenTelemetry span and mirrors what was recorded as `SpanCoreFields`."""

    def __init__(self, span: OtelSpan, name: str, attributes: Attributes, start_time: float) -> None:
        self._span = span
        self._fields = SpanCoreFields(
            name=name, attributes=dict(attributes), start_time=start_time, status=TraceStatus(status_code="UNSET")
        )

    @property
    def span(self) -> OtelSpan:
        return self._span

    def record_exception(self, exception: BaseException) -> None:
        attributes = format_exception_attributes(exception)
        self._span.record_exception(exception)
        self._span.set_attributes(attributes)
        self._fields.attributes.update(attributes)

    def record_attributes(self, attributes: Mapping[str, Any]) -> None:
        flat = sanitize_attributes(attributes)
        self._span.set_attributes(flat)
        self._fields.attributes.update(flat)

    def record_status(self, status_code: StatusCode, description: Optional[str] = None) -> None:
        from opentelemetry.trace import Status
        from opentelemetry.trace import StatusCode as OtelStatusCode

        self._span.set_status(Status(OtelStatusCode[status_code], description))
        self._fields.status = TraceStatus(status_code=status_code, description=description)

    def finish(self, end_time: Optional[float] = None) -> SpanCoreFields:
        """End the OpenTelemetry span and return the recorded fields."""
        end = end_time if end_time is not None else time.time()
        self._span.end(end_time=int(end * 1_000_000_000))
        self._fields.end_time = end
        return self._fields

    def get_recorded_span(self) -> SpanCoreFields:
        return self._fields.model_copy(deep=True)
