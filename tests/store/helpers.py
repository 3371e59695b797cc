"""Small builders shared by the store tests."""

from __future__ import annotations

import os
import time
from typing import Any, Optional

from opentelemetry.sdk.resources import Resource as SdkResource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from agentlightning.types import Event, Link, OtelResource, Span, TraceStatus
from agentlightning.types import SpanContext as AglSpanContext


def make_span(
    rollout_id: str,
    attempt_id: str,
    sequence_id: int = 1,
    *,
    name: str = "test.span",
    span_id: Optional[str] = None,
    trace_id: Optional[str] = None,
    parent_id: Optional[str] = None,
    start_time: Optional[float] = None,
    attributes: Optional[dict[str, Any]] = None,
) -> Span:
    trace_id = trace_id or os.urandom(16).hex()
    span_id = span_id or os.urandom(8).hex()
    start = start_time if start_time is not None else time.time()
    return Span(
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        sequence_id=sequence_id,
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        name=name,
        status=TraceStatus(status_code="OK"),
        attributes=attributes if attributes is not None else {"key": "value"},
        events=[],
        links=[],
        start_time=start,
        end_time=start + 0.001,
        context=AglSpanContext(trace_id=trace_id, span_id=span_id, is_remote=False, trace_state={}),
        parent=None,
        resource=OtelResource(attributes={}, schema_url=""),
    )


def make_rich_span(rollout_id: str, attempt_id: str, sequence_id: int = 1) -> Span:
    """A span using every field: events, links, nested attributes, a parent and an extra field."""
    span = make_span(
        rollout_id,
        attempt_id,
        sequence_id,
        name="openai.chat.completion",
        parent_id="00000000000000aa",
        attributes={
            "gen_ai.prompt.0.content": "Hello",
            "prompt_token_ids": [1, 2, 3],
            "reward": 0.5,
            "flag": True,
            "unicode": "数学 ✓",
        },
    )
    data = span.model_dump()
    data["events"] = [Event(name="exception", attributes={"exception.type": "ValueError"}, timestamp=1.5).model_dump()]
    data["links"] = [
        Link(context=AglSpanContext(trace_id="ab" * 16, span_id="cd" * 8, is_remote=True, trace_state={"k": "v"}))
    ]
    data["parent"] = AglSpanContext(trace_id=span.trace_id, span_id="00000000000000aa", is_remote=False, trace_state={})
    data["status"] = TraceStatus(status_code="ERROR", description="boom")
    data["resource"] = OtelResource(attributes={"service.name": "agent"}, schema_url="https://example.com/schema")
    data["kind"] = "SpanKind.CLIENT"
    return Span.model_validate(data)


def make_readable_span(name: str = "otel.span", *, attributes: Optional[dict[str, Any]] = None) -> ReadableSpan:
    """A finished OpenTelemetry SDK span with fresh random ids."""
    context = SpanContext(
        trace_id=int.from_bytes(os.urandom(16), "big") or 1,
        span_id=int.from_bytes(os.urandom(8), "big") or 1,
        is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    start = time.time_ns()
    return ReadableSpan(
        name=name,
        context=context,
        parent=None,
        resource=SdkResource.create({"service.name": "test"}),
        attributes=attributes or {"test": "value"},
        events=(),
        links=(),
        kind=SpanKind.INTERNAL,
        status=Status(StatusCode.OK),
        start_time=start,
        end_time=start + 1_000_000,
    )
