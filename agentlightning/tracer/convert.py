"""Conversion of finished OpenTelemetry spans into stored `Span`s (ids checked, instrumentation attributes mapped).

This is the hot path of capture (every span of every rollout goes through it on the writer thread), so it builds
the models without re-validating data the OpenTelemetry SDK already validated (`model_construct`), and converts
the (shared) resource of a provider only once. The result equals `Span.from_opentelemetry` for SDK spans, with
sequence-valued attributes as lists instead of tuples.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import TYPE_CHECKING, Any, Optional

from agentlightning.types import Attributes, Event, Link, OtelResource, Span, SpanContext, TraceStatus
from agentlightning.types.tracer import convert_timestamp

if TYPE_CHECKING:
    from opentelemetry.sdk.resources import Resource as SdkResource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import SpanContext as OtelSpanContext

__all__ = ["span_from_readable"]

logger = logging.getLogger(__name__)

_ZERO_SPAN_ID = "0" * 16
_ZERO_TRACE_ID = "0" * 32

_resource_lock = threading.Lock()
_resource_cache: dict[int, tuple[Any, OtelResource]] = {}


_TOKEN_ID_KEYS = ("prompt_token_ids", "response_token_ids")


def _plain_attributes(source: Any) -> Attributes:
    """A dict copy of OpenTelemetry attributes with tuples turned into lists (their stored, JSON-like form)."""
    if not source:
        return {}
    return {key: list(value) if isinstance(value, tuple) else value for key, value in source.items()}


def _decode_token_ids(attributes: Attributes) -> None:
    """Token ids recorded as JSON text on the live span are stored as lists of ints."""
    for key in _TOKEN_ID_KEYS:
        value = attributes.get(key)
        if isinstance(value, str) and value.startswith("["):
            try:
                decoded = json.loads(value)
            except ValueError:
                continue
            if isinstance(decoded, list):
                attributes[key] = decoded


def _context(context: OtelSpanContext) -> SpanContext:
    trace_state = dict(context.trace_state.items()) if context.trace_state else {}
    return SpanContext.model_construct(
        trace_id=format(context.trace_id, "032x"),
        span_id=format(context.span_id, "016x"),
        is_remote=bool(context.is_remote),
        trace_state=trace_state,
    )


def _resource(resource: Optional[SdkResource]) -> OtelResource:
    if resource is None:
        return OtelResource.model_construct(attributes={}, schema_url="")
    key = id(resource)
    cached = _resource_cache.get(key)
    if cached is not None and cached[0] is resource:
        return cached[1]
    converted = OtelResource.model_construct(
        attributes=_plain_attributes(resource.attributes), schema_url=resource.schema_url or ""
    )
    with _resource_lock:
        if len(_resource_cache) > 64:
            _resource_cache.clear()
        _resource_cache[key] = (resource, converted)
    return converted


def span_from_readable(readable: ReadableSpan, rollout_id: str, attempt_id: str, sequence_id: int) -> Span:
    """Convert `readable` for storage under the given rollout attempt and sequence id.

    A span without valid ids (no context, or all-zero ids) is kept under freshly generated ids and logged as an
    error, so its content (a reward, say) is not lost. Attributes written by third-party instrumentors are mapped
    onto Agent Lightning's conventions (see `agentlightning.tracer.mapping`).
    """
    from agentlightning.tracer.mapping import normalize_span

    context = readable.context
    parent = readable.parent
    status = readable.status
    span = Span.model_construct(
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        sequence_id=sequence_id,
        trace_id=format(context.trace_id, "032x") if context is not None else _ZERO_TRACE_ID,
        span_id=format(context.span_id, "016x") if context is not None else _ZERO_SPAN_ID,
        parent_id=format(parent.span_id, "016x") if parent is not None else None,
        name=readable.name,
        status=TraceStatus.model_construct(status_code=status.status_code.name, description=status.description),
        attributes=_plain_attributes(readable.attributes),
        events=[
            Event.model_construct(
                name=event.name,
                attributes=_plain_attributes(event.attributes),
                timestamp=convert_timestamp(event.timestamp),
            )
            for event in readable.events
        ]
        if readable.events
        else [],
        links=[
            Link.model_construct(
                context=_context(link.context),
                attributes=_plain_attributes(link.attributes) if link.attributes else None,
            )
            for link in readable.links
        ]
        if readable.links
        else [],
        start_time=convert_timestamp(readable.start_time),
        end_time=convert_timestamp(readable.end_time),
        context=_context(context) if context is not None else None,
        parent=_context(parent) if parent is not None else None,
        resource=_resource(readable.resource),
    )
    _decode_token_ids(span.attributes)
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
