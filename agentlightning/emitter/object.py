"""`emit_object`: record an arbitrary JSON-serialisable object as an `agentlightning.object` span."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from typing import Any, Optional

from agentlightning.semconv import AGL_OBJECT, LEGACY_OBJECT_ATTRIBUTE, LightningSpanAttributes
from agentlightning.types import SpanCoreFields
from agentlightning.utils.otel import flatten_attributes

from .dispatch import emit_span

__all__ = ["emit_object", "get_object_value"]

logger = logging.getLogger("agentlightning.emitter")

_LITERALS = (str, bool, int, float)


def _to_jsonable(value: Any) -> Any:
    """Pydantic models and dataclasses become plain data; anything else is returned unchanged."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def emit_object(
    object: Any, attributes: Optional[Mapping[str, Any]] = None, *, propagate: bool = True
) -> Optional[SpanCoreFields]:
    """Record `object`: plain str/int/float/bool values under `agentlightning.object.literal`, anything else as JSON
    text under `agentlightning.object.json`; `agentlightning.object.type` names the Python type and the v0.2
    attribute `object` always holds the JSON text.

    An object that cannot be serialised is logged as an error ("Object must be JSON serializable") and nothing is
    recorded.
    """
    try:
        text = json.dumps(_to_jsonable(object))
    except (TypeError, ValueError) as exc:
        logger.error("Object must be JSON serializable; got %s (%s)", type(object).__name__, exc)
        return None
    span_attributes: dict[str, Any] = dict(flatten_attributes(attributes)) if attributes else {}
    span_attributes[LightningSpanAttributes.OBJECT_TYPE.value] = type(object).__name__
    if isinstance(object, _LITERALS):
        span_attributes[LightningSpanAttributes.OBJECT_LITERAL.value] = object
    else:
        span_attributes[LightningSpanAttributes.OBJECT_JSON.value] = text
    span_attributes[LEGACY_OBJECT_ATTRIBUTE] = text
    return emit_span(AGL_OBJECT, span_attributes, propagate=propagate)


def get_object_value(span: Any) -> Any:
    """The object recorded by an object span (v0.3 or v0.2 attributes), or None."""
    attributes = getattr(span, "attributes", None) or {}
    if LightningSpanAttributes.OBJECT_LITERAL.value in attributes:
        return attributes[LightningSpanAttributes.OBJECT_LITERAL.value]
    text = attributes.get(LightningSpanAttributes.OBJECT_JSON.value)
    if text is None and getattr(span, "name", None) == AGL_OBJECT:
        text = attributes.get(LEGACY_OBJECT_ATTRIBUTE)
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        logger.error("Object span %r holds invalid JSON", getattr(span, "name", None))
        return None
