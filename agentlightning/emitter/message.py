"""`emit_message`: record a free-text message as an `agentlightning.message` span."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Optional

from agentlightning.semconv import AGL_MESSAGE, LEGACY_MESSAGE_ATTRIBUTE, LightningSpanAttributes
from agentlightning.types import SpanCoreFields
from agentlightning.utils.otel import flatten_attributes

from .dispatch import emit_span

__all__ = ["emit_message", "get_message_value"]

logger = logging.getLogger("agentlightning.emitter")


def emit_message(
    message: str, attributes: Optional[Mapping[str, Any]] = None, *, propagate: bool = True
) -> Optional[SpanCoreFields]:
    """Record `message` (attribute `agentlightning.message.body`, and `message` for v0.2 readers).

    A non-string is logged as an error ("Message must be a string") and nothing is recorded.
    """
    if not isinstance(message, str):
        logger.error("Message must be a string, got %s: %r", type(message).__name__, message)
        return None
    span_attributes: dict[str, Any] = dict(flatten_attributes(attributes)) if attributes else {}
    span_attributes[LightningSpanAttributes.MESSAGE_BODY.value] = message
    span_attributes[LEGACY_MESSAGE_ATTRIBUTE] = message
    return emit_span(AGL_MESSAGE, span_attributes, propagate=propagate)


def get_message_value(span: Any) -> Optional[str]:
    """The text of a message span (v0.3 or v0.2 attribute), or None for other spans."""
    attributes = getattr(span, "attributes", None) or {}
    body = attributes.get(LightningSpanAttributes.MESSAGE_BODY.value)
    if body is None and getattr(span, "name", None) == AGL_MESSAGE:
        body = attributes.get(LEGACY_MESSAGE_ATTRIBUTE)
    return body if isinstance(body, str) else None
