"""Span data model: the persisted form of everything an agent run emits.

Spans are stored as plain pydantic models so that every store backend can persist them without depending on the
OpenTelemetry SDK. `Span.from_opentelemetry` converts a finished SDK span; `Span.from_attributes` and
`Span.from_core_fields` build synthetic ones.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal, Optional, Protocol, Union, cast

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from opentelemetry import trace as trace_api
    from opentelemetry.sdk.resources import Resource as SdkResource
    from opentelemetry.sdk.trace import Event as SdkEvent
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import Link as SdkLink
    from opentelemetry.trace import Status as SdkStatus

__all__ = [
    "AttributeValue",
    "Attributes",
    "Event",
    "Link",
    "OtelResource",
    "Span",
    "SpanAttributeNames",
    "SpanContext",
    "SpanCoreFields",
    "SpanLike",  # noqa: F822 - resolved lazily by __getattr__
    "SpanNames",
    "SpanRecordingContext",
    "StatusCode",
    "TraceState",
    "TraceStatus",
]

AttributeValue = Union[str, bool, int, float, Sequence[str], Sequence[bool], Sequence[int], Sequence[float]]
Attributes = dict[str, AttributeValue]
TraceState = dict[str, str]
StatusCode = Literal["UNSET", "OK", "ERROR"]

VIRTUAL_SPAN_NAME = "agentlightning.virtual"


def convert_timestamp(timestamp: Optional[int]) -> Optional[float]:
    """Normalise an OpenTelemetry timestamp to seconds.

    Falsy values give None; values above 1e12 are nanoseconds; anything else is returned unchanged.
    """
    if not timestamp:
        return None
    if timestamp > 1e12:
        return timestamp / 1_000_000_000
    return timestamp  # type: ignore[return-value]


def extract_extra_fields(src: Any, excluded_fields: list[str]) -> dict[str, Any]:
    """Collect the attributes of an OpenTelemetry object that our models do not declare.

    Leading underscores are stripped from attribute names; names in `excluded_fields` (with or without one leading
    underscore) and names defined on the object's own class are skipped. The result is JSON-safe: values that cannot
    be serialised become strings.
    """
    excluded = set(excluded_fields)
    excluded.update("_" + name for name in excluded_fields)
    excluded.update(type(src).__dict__.keys())
    raw = getattr(src, "__dict__", None)
    if not isinstance(raw, dict):
        return {}
    extras: dict[str, Any] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or key in excluded:
            continue
        stripped = key.lstrip("_")
        if not stripped or stripped in excluded or stripped.startswith("_"):
            continue
        extras[stripped] = value
    if not extras:
        return {}
    try:
        return json.loads(json.dumps(extras, default=str))
    except (TypeError, ValueError):
        return {key: str(value) for key, value in extras.items()}


def _attributes(src: Any) -> Attributes:
    """A plain-dict copy of OpenTelemetry attributes ({} when missing)."""
    return cast(Attributes, dict(src)) if src else {}


def _format_trace_id(value: int) -> str:
    return format(value, "032x")


def _format_span_id(value: int) -> str:
    return format(value, "016x")


class SpanContext(BaseModel):
    """The identity of a span: trace id (32 hex chars), span id (16 hex chars) and propagation state."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    trace_id: str
    span_id: str
    is_remote: bool
    trace_state: TraceState

    @classmethod
    def from_opentelemetry(cls, src: trace_api.SpanContext) -> SpanContext:
        trace_state = dict(src.trace_state.items()) if src.trace_state else {}
        return cls(
            trace_id=_format_trace_id(src.trace_id),
            span_id=_format_span_id(src.span_id),
            is_remote=bool(src.is_remote),
            trace_state=trace_state,
            **extract_extra_fields(src, ["trace_id", "span_id", "is_remote", "trace_state"]),
        )


class TraceStatus(BaseModel):
    """Outcome of a span: "UNSET", "OK" or "ERROR" plus an optional description."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    status_code: StatusCode
    description: Optional[str] = None

    @classmethod
    def from_opentelemetry(cls, src: SdkStatus) -> TraceStatus:
        return cls(
            status_code=src.status_code.name,  # type: ignore[arg-type]
            description=src.description,
            **extract_extra_fields(src, ["status_code", "description"]),
        )


class Event(BaseModel):
    """A timestamped annotation inside a span (for example a recorded exception)."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    name: str
    attributes: Attributes
    timestamp: Optional[float] = None

    @classmethod
    def from_opentelemetry(cls, src: SdkEvent) -> Event:
        return cls(
            name=src.name,
            attributes=_attributes(src.attributes),
            timestamp=convert_timestamp(src.timestamp),
            **extract_extra_fields(src, ["name", "attributes", "timestamp"]),
        )


class Link(BaseModel):
    """A reference from one span to another span context."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    context: SpanContext
    attributes: Optional[Attributes] = None

    @classmethod
    def from_opentelemetry(cls, src: SdkLink) -> Link:
        return cls(
            context=SpanContext.from_opentelemetry(src.context),
            attributes=_attributes(src.attributes) if src.attributes else None,
            **extract_extra_fields(src, ["context", "attributes"]),
        )


class OtelResource(BaseModel):
    """The OpenTelemetry resource (process-level attributes) a span was produced under."""

    model_config = ConfigDict(defer_build=True)

    attributes: Attributes
    schema_url: str

    @classmethod
    def from_opentelemetry(cls, src: SdkResource) -> OtelResource:
        return cls(
            attributes=_attributes(src.attributes),
            schema_url=src.schema_url or "",
        )


class SpanCoreFields(BaseModel):
    """The part of a span an emitter decides: name, status, attributes and timing."""

    model_config = ConfigDict(defer_build=True)

    name: str
    status: TraceStatus = Field(default_factory=lambda: TraceStatus(status_code="OK"))
    attributes: Attributes = Field(default_factory=dict)
    start_time: Optional[float] = None
    end_time: Optional[float] = None


_SPAN_EXCLUDED_FIELDS = [
    "name",
    "context",
    "parent",
    "resource",
    "attributes",
    "events",
    "links",
    "start_time",
    "end_time",
    "status",
    "span_processor",
    "rollout_id",
    "attempt_id",
    "trace_id",
    "span_id",
    "parent_id",
]


def _random_trace_id() -> str:
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    return _format_trace_id(RandomIdGenerator().generate_trace_id())


def _random_span_id() -> str:
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    return _format_span_id(RandomIdGenerator().generate_span_id())


class Span(BaseModel):
    """A span as persisted by a LightningStore, tied to one rollout attempt and ordered by `sequence_id`."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    rollout_id: str
    attempt_id: str
    sequence_id: int
    trace_id: str
    span_id: str
    parent_id: Optional[str]
    name: str
    status: TraceStatus
    attributes: Attributes
    events: list[Event]
    links: list[Link]
    start_time: Optional[float]
    end_time: Optional[float]
    context: Optional[SpanContext]
    parent: Optional[SpanContext]
    resource: OtelResource

    @classmethod
    def from_opentelemetry(cls, src: ReadableSpan, rollout_id: str, attempt_id: str, sequence_id: int) -> Span:
        """Convert a finished OpenTelemetry SDK span."""
        context = src.get_span_context()
        trace_id = _format_trace_id(context.trace_id if context is not None else 0)
        span_id = _format_span_id(context.span_id if context is not None else 0)
        parent = src.parent
        return cls(
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            sequence_id=sequence_id,
            trace_id=trace_id,
            span_id=span_id,
            parent_id=_format_span_id(parent.span_id) if parent else None,
            name=src.name,
            status=TraceStatus.from_opentelemetry(src.status),
            attributes=_attributes(src.attributes),
            events=[Event.from_opentelemetry(event) for event in src.events] if src.events else [],
            links=[Link.from_opentelemetry(link) for link in src.links] if src.links else [],
            start_time=convert_timestamp(src.start_time),
            end_time=convert_timestamp(src.end_time),
            context=SpanContext.from_opentelemetry(context) if context is not None else None,
            parent=SpanContext.from_opentelemetry(parent) if parent else None,
            resource=OtelResource.from_opentelemetry(src.resource),
            **extract_extra_fields(src, _SPAN_EXCLUDED_FIELDS),
        )

    @classmethod
    def from_attributes(
        cls,
        *,
        attributes: Attributes,
        rollout_id: Optional[str] = None,
        attempt_id: Optional[str] = None,
        sequence_id: Optional[int] = None,
        name: Optional[str] = None,
        trace_id: Optional[str] = None,
        span_id: Optional[str] = None,
        parent_id: Optional[str] = None,
        start_time: Optional[float] = None,
        end_time: Optional[float] = None,
        resource: Optional[OtelResource] = None,
        status: Optional[TraceStatus] = None,
    ) -> Span:
        """Build a synthetic span; missing trace or span ids are generated."""
        trace_id = trace_id or _random_trace_id()
        span_id = span_id or _random_span_id()
        return cls(
            rollout_id=rollout_id or "",
            attempt_id=attempt_id or "",
            sequence_id=sequence_id or 0,
            trace_id=trace_id,
            span_id=span_id,
            parent_id=parent_id,
            name=name or VIRTUAL_SPAN_NAME,
            status=status or TraceStatus(status_code="OK"),
            attributes=attributes,
            events=[],
            links=[],
            start_time=start_time,
            end_time=end_time,
            context=SpanContext(trace_id=trace_id, span_id=span_id, is_remote=False, trace_state={}),
            parent=(
                SpanContext(trace_id=trace_id, span_id=parent_id, is_remote=False, trace_state={})
                if parent_id
                else None
            ),
            resource=resource or OtelResource(attributes={}, schema_url=""),
        )

    @classmethod
    def from_core_fields(
        cls,
        core: SpanCoreFields,
        *,
        rollout_id: Optional[str] = None,
        attempt_id: Optional[str] = None,
        sequence_id: Optional[int] = None,
    ) -> Span:
        """Build a span from emitter-level fields; the start time defaults to now."""
        start_time = core.start_time if core.start_time is not None else time.time()
        return cls.from_attributes(
            attributes=dict(core.attributes),
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            sequence_id=sequence_id,
            name=core.name,
            start_time=start_time,
            end_time=core.end_time,
            status=core.status,
        )


class SpanRecordingContext(Protocol):
    """What an open span lets its user record before it ends."""

    def record_exception(self, exception: BaseException) -> None: ...

    def record_attributes(self, attributes: Mapping[str, Any]) -> None: ...

    def record_status(self, status_code: StatusCode, description: Optional[str] = None) -> None: ...

    def get_recorded_span(self) -> SpanCoreFields: ...


class SpanNames(str, Enum):
    """Names of the spans Agent Lightning emits itself."""

    REWARD = "agentlightning.reward"
    MESSAGE = "agentlightning.message"
    OBJECT = "agentlightning.object"
    EXCEPTION = "agentlightning.exception"
    VIRTUAL = VIRTUAL_SPAN_NAME
    ROLLOUT_ID = "agentlightning.rollout_id"
    ATTEMPT_ID = "agentlightning.attempt_id"
    SPAN_SEQUENCE_ID = "agentlightning.span_sequence_id"


class SpanAttributeNames(str, Enum):
    """Attribute keys used by the message and object spans."""

    MESSAGE = "message"
    OBJECT = "object"


def __getattr__(name: str) -> Any:
    # `SpanLike` mentions the OpenTelemetry SDK span; build it on first use to keep `import agentlightning` fast.
    if name == "SpanLike":
        from opentelemetry.sdk.trace import ReadableSpan

        value = Union[ReadableSpan, Span]
        globals()["SpanLike"] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
