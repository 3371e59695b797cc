"""Conversion of finished OpenTelemetry spans into stored `Span`s (ids checked, instrumentation attributes mapped)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, cast

from agentlightning.types import Attributes, Span
from agentlightning.types.tracer import SpanContext

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["span_from_readable"]

logger = logging.getLogger(__name__)

_ZERO_SPAN_ID = "0" * 16
_ZERO_TRACE_ID = "0" * 32


def span_from_readable(readable: ReadableSpan, rollout_id: str, attempt_id: str, sequence_id: int) -> Span:
    """Convert `readable` for storage under the given rollout attempt and sequence id.

    A span without valid ids (no context, or all-zero ids) is kept under freshly generated ids and logged as an
    error, so its content (a reward, say) is not lost. Attributes written by third-party instrumentors are mapped
    onto Agent Lightning's conventions (see `agentlightning.instrumentation.mapping`).
    """
    from agentlightning.instrumentation.mapping import normalize_span

    span = Span.from_opentelemetry(readable, rollout_id, attempt_id, sequence_id)
    if any(isinstance(value, tuple) for value in span.attributes.values()):
        # OpenTelemetry keeps sequences as tuples; stored spans use lists like their JSON form.
        span.attributes = cast(
            Attributes,
            {key: list(value) if isinstance(value, tuple) else value for key, value in span.attributes.items()},
        )
    if span.span_id == _ZERO_SPAN_ID or span.trace_id == _ZERO_TRACE_ID:
        span = _with_fresh_ids(span)
    scope = getattr(readable, "instrumentation_scope", None)
    return normalize_span(span, getattr(scope, "name", None))


def _with_fresh_ids(span: Span) -> Span:
    fresh = Span.from_attributes(attributes={})
    trace_id = span.trace_id if span.trace_id != _ZERO_TRACE_ID else fresh.trace_id
    logger.error(
        "Span %r of rollout %r has no valid span/trace id; storing it under generated ids %s/%s",
        span.name,
        span.rollout_id,
        trace_id,
        fresh.span_id,
    )
    context = SpanContext(trace_id=trace_id, span_id=fresh.span_id, is_remote=False, trace_state={})
    return span.model_copy(update={"trace_id": trace_id, "span_id": fresh.span_id, "context": context})
