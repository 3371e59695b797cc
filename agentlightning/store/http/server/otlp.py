"""OTLP/HTTP trace ingest (`POST /v1/traces`): any OpenTelemetry exporter can feed the store.

Both OTLP encodings are accepted: binary protobuf (`application/x-protobuf`) and JSON (`application/json`, with
hex-encoded trace and span ids as the OTLP specification says); either may be gzip-compressed. Each span names
its rollout and attempt with the attributes `agentlightning.rollout_id` and `agentlightning.attempt_id` (on the
span or on its resource) and may carry `agentlightning.span_sequence_id`; the store allocates missing sequence
ids. Spans without ids, or naming an unknown rollout or attempt, are rejected and reported as a partial success;
the others are stored. Needs the `opentelemetry-proto` package (the `server` extra).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from agentlightning.store.base import LightningStore
from agentlightning.store.errors import AttemptNotFoundError, InvalidArgumentError, RolloutNotFoundError
from agentlightning.types import Event, Link, OtelResource, Span, SpanContext, SpanNames, TraceStatus
from agentlightning.types.tracer import convert_timestamp

__all__ = ["OtlpDecodeError", "TraceIngestResult", "decode_export_request", "encode_response", "ingest_spans"]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"

_STATUS_CODES = {0: "UNSET", 1: "OK", 2: "ERROR"}
_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200


class OtlpDecodeError(ValueError):
    """The body is not a valid OTLP trace export request."""


@dataclass
class TraceIngestResult:
    accepted: int = 0
    rejected: int = 0
    errors: list[str] = field(default_factory=list)

    def reject(self, count: int, message: str) -> None:
        self.rejected += count
        if len(self.errors) < 5:
            self.errors.append(message)


@dataclass
class _Pending:
    """A decoded span and the ids it named; sequence_id None means "allocate one"."""

    span: Span
    sequence_id: Optional[int]


def _any_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_any_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return json.dumps({item.key: _any_value(item.value) for item in value.kvlist_value.values}, default=str)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    return getattr(value, kind)


def _attributes(items: Iterable[Any]) -> dict[str, Any]:
    return {item.key: _any_value(item.value) for item in items}


def _trace_state(text: str) -> dict[str, str]:
    state: dict[str, str] = {}
    for member in text.split(","):
        key, sep, value = member.strip().partition("=")
        if sep and key:
            state[key] = value
    return state


def _is_remote(flags: int) -> bool:
    return bool(flags & _HAS_IS_REMOTE and flags & _IS_REMOTE)


def _hex_to_base64(value: Any) -> Any:
    if not isinstance(value, str) or not value:
        return value
    try:
        return base64.b64encode(bytes.fromhex(value)).decode()
    except ValueError:
        raise OtlpDecodeError(f"Invalid hex id in OTLP JSON: {value[:64]!r}") from None


def _json_ids_to_base64(data: Any) -> Any:
    """OTLP/JSON writes ids as hex; protobuf's JSON mapping expects base64."""
    if isinstance(data, dict):
        return {
            key: _hex_to_base64(value)
            if key in ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")
            else _json_ids_to_base64(value)
            for key, value in data.items()
        }
    if isinstance(data, list):
        return [_json_ids_to_base64(item) for item in data]
    return data


def decode_export_request(body: bytes, content_type: str) -> tuple[Any, bool]:
    """The ExportTraceServiceRequest in `body` and whether it was JSON. Raises OtlpDecodeError."""
    from google.protobuf import json_format
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    media_type = content_type.split(";", 1)[0].strip().lower()
    request = ExportTraceServiceRequest()
    if media_type == PROTOBUF:
        try:
            request.ParseFromString(body)
        except (DecodeError, ValueError) as exc:
            raise OtlpDecodeError(f"Invalid OTLP protobuf body: {exc}") from None
        return request, False
    if media_type == JSON:
        try:
            data = json.loads(body or b"{}")
            if not isinstance(data, dict):
                raise OtlpDecodeError("An OTLP JSON body must be an object")
            json_format.ParseDict(_json_ids_to_base64(data), request, ignore_unknown_fields=True)
        except (json_format.ParseError, ValueError, TypeError) as exc:
            if isinstance(exc, OtlpDecodeError):
                raise
            raise OtlpDecodeError(f"Invalid OTLP JSON body: {exc}") from None
        return request, True
    raise OtlpDecodeError(f"Unsupported Content-Type {content_type!r}: use {PROTOBUF} or {JSON}")


def encode_response(result: TraceIngestResult, as_json: bool) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    response = ExportTraceServiceResponse()
    if result.rejected:
        response.partial_success.rejected_spans = result.rejected
        response.partial_success.error_message = "; ".join(result.errors)
    if as_json:
        from google.protobuf import json_format

        return json.dumps(json_format.MessageToDict(response)).encode()
    return response.SerializeToString()


def _id_attribute(span_attributes: dict[str, Any], resource_attributes: dict[str, Any], name: str) -> Any:
    value = span_attributes.get(name)
    return value if value is not None else resource_attributes.get(name)


def _sequence_id(value: Any) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidArgumentError(f"{SpanNames.SPAN_SEQUENCE_ID.value} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise InvalidArgumentError(f"{SpanNames.SPAN_SEQUENCE_ID.value} must be an integer, got {value!r}")


def _convert(request: Any, result: TraceIngestResult) -> list[_Pending]:
    pending: list[_Pending] = []
    for resource_spans in request.resource_spans:
        resource_attributes = _attributes(resource_spans.resource.attributes)
        resource = OtelResource(attributes=resource_attributes, schema_url=resource_spans.schema_url or "")
        for scope_spans in resource_spans.scope_spans:
            for raw in scope_spans.spans:
                attributes = _attributes(raw.attributes)
                rollout_id = _id_attribute(attributes, resource_attributes, SpanNames.ROLLOUT_ID.value)
                attempt_id = _id_attribute(attributes, resource_attributes, SpanNames.ATTEMPT_ID.value)
                if (
                    not isinstance(rollout_id, str)
                    or not isinstance(attempt_id, str)
                    or not rollout_id
                    or not attempt_id
                ):
                    result.reject(
                        1,
                        f"span {raw.name!r} has no {SpanNames.ROLLOUT_ID.value} / {SpanNames.ATTEMPT_ID.value} "
                        "attribute",
                    )
                    continue
                try:
                    sequence_id = _sequence_id(
                        _id_attribute(attributes, resource_attributes, SpanNames.SPAN_SEQUENCE_ID.value)
                    )
                    span = _span(raw, attributes, resource, rollout_id, attempt_id, sequence_id or 0)
                except (InvalidArgumentError, ValueError) as exc:
                    result.reject(1, f"span {raw.name!r}: {exc}")
                    continue
                pending.append(_Pending(span, sequence_id))
    return pending


def _span(
    raw: Any, attributes: dict[str, Any], resource: OtelResource, rollout_id: str, attempt_id: str, sequence_id: int
) -> Span:
    trace_id = raw.trace_id.hex().rjust(32, "0")
    span_id = raw.span_id.hex().rjust(16, "0")
    parent_id = raw.parent_span_id.hex() if raw.parent_span_id else None
    trace_state = _trace_state(raw.trace_state)
    return Span(
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        sequence_id=sequence_id,
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        name=raw.name,
        status=TraceStatus(
            status_code=_STATUS_CODES.get(raw.status.code, "UNSET"),  # type: ignore[arg-type]
            description=raw.status.message or None,
        ),
        attributes=attributes,
        events=[
            Event(
                name=event.name,
                attributes=_attributes(event.attributes),
                timestamp=convert_timestamp(event.time_unix_nano),
            )
            for event in raw.events
        ],
        links=[
            Link(
                context=SpanContext(
                    trace_id=link.trace_id.hex(),
                    span_id=link.span_id.hex(),
                    is_remote=_is_remote(link.flags),
                    trace_state=_trace_state(link.trace_state),
                ),
                attributes=_attributes(link.attributes) or None,
            )
            for link in raw.links
        ],
        start_time=convert_timestamp(raw.start_time_unix_nano),
        end_time=convert_timestamp(raw.end_time_unix_nano),
        context=SpanContext(trace_id=trace_id, span_id=span_id, is_remote=False, trace_state=trace_state),
        parent=SpanContext(trace_id=trace_id, span_id=parent_id, is_remote=_is_remote(raw.flags), trace_state={})
        if parent_id
        else None,
        resource=resource,
    )


async def _store(store: LightningStore, batch: Sequence[_Pending]) -> int:
    """Allocate missing sequence ids and store the batch in one operation; the number of spans added."""
    missing = [item for item in batch if item.sequence_id is None]
    if missing:
        ids = await store.get_many_span_sequence_ids([(item.span.rollout_id, item.span.attempt_id) for item in missing])
        for item, sequence_id in zip(missing, ids, strict=True):
            item.span.sequence_id = int(sequence_id)
            item.sequence_id = int(sequence_id)
    await store.add_many_spans([item.span for item in batch])
    return len(batch)


async def ingest_spans(store: LightningStore, request: Any) -> TraceIngestResult:
    """Store the spans of a decoded export request. Spans of unknown rollouts/attempts are rejected, not fatal."""
    result = TraceIngestResult()
    pending = _convert(request, result)
    if not pending:
        return result
    try:
        result.accepted += await _store(store, pending)
        return result
    except (RolloutNotFoundError, AttemptNotFoundError, InvalidArgumentError):
        pass  # find the culprits group by group
    groups: dict[tuple[str, str], list[_Pending]] = {}
    for item in pending:
        groups.setdefault((item.span.rollout_id, item.span.attempt_id), []).append(item)
    for group in groups.values():
        try:
            result.accepted += await _store(store, group)
        except (RolloutNotFoundError, AttemptNotFoundError, InvalidArgumentError) as exc:
            result.reject(len(group), str(exc))
    return result
