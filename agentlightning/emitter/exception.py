"""`emit_exception`: record an exception as an `agentlightning.exception` span (OpenTelemetry `exception.*`
attributes plus an exception event; the span status is deliberately left unset)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Optional

from agentlightning.semconv import AGL_EXCEPTION
from agentlightning.types import SpanCoreFields
from agentlightning.utils.otel import flatten_attributes, format_exception_attributes

from .dispatch import open_operation

__all__ = ["emit_exception"]

logger = logging.getLogger("agentlightning.emitter")


def emit_exception(
    exception: BaseException, attributes: Optional[Mapping[str, Any]] = None, *, propagate: bool = True
) -> Optional[SpanCoreFields]:
    """Record `exception`. Anything that is not an exception is logged as an error and nothing is recorded."""
    if not isinstance(exception, BaseException):
        logger.error("Expected an BaseException instance, got %s: %r", type(exception).__name__, exception)
        return None
    span_attributes: dict[str, Any] = dict(flatten_attributes(attributes)) if attributes else {}
    span_attributes.update(format_exception_attributes(exception))
    try:
        with open_operation(AGL_EXCEPTION, span_attributes, propagate=propagate) as recording:
            recording.record_exception(exception)
        return recording.get_recorded_span()
    except Exception:
        logger.exception("Could not record exception %r", exception)
        return None
