"""Turning span fields the runner builds (a numeric result's reward) into an OpenTelemetry span, so that the store
can allocate its sequence id in the same call that stores it (`add_otel_span`: one request over HTTP)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from agentlightning.types import SpanCoreFields

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["readable_span_from_fields"]

_random = random.SystemRandom()


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


def readable_span_from_fields(fields: SpanCoreFields) -> ReadableSpan:
    """A finished OpenTelemetry span with the name, attributes, status and times of `fields` (new random ids)."""
    import time

    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

    context = SpanContext(
        trace_id=_random.getrandbits(128) or 1,
        span_id=_random.getrandbits(64) or 1,
        is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    start = fields.start_time if fields.start_time is not None else time.time()
    end = fields.end_time if fields.end_time is not None else start
    return ReadableSpan(
        name=fields.name,
        context=context,
        attributes=dict(fields.attributes),
        start_time=_ns(start),
        end_time=_ns(end),
        status=Status(StatusCode[fields.status.status_code], fields.status.description),
        resource=Resource.get_empty(),
    )
