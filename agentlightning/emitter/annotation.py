"""`emit_annotation`: attach rewards, tags, links or metadata to a part of a rollout (`agentlightning.annotation`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Optional

from agentlightning.semconv import AGL_ANNOTATION
from agentlightning.types import SpanCoreFields
from agentlightning.utils.otel import flatten_attributes

from .dispatch import emit_span

__all__ = ["emit_annotation"]

logger = logging.getLogger("agentlightning.emitter")


def emit_annotation(annotation: Mapping[str, Any], propagate: bool = True) -> Optional[SpanCoreFields]:
    """Record an annotation span whose attributes are `annotation`, flattened.

    Conventional keys (see `agentlightning.semconv`): `agentlightning.reward` (a list of `{"name", "value"}`),
    `agentlightning.tag` (a list of strings), `agentlightning.link` (a list of `{"key_match", "value_match"}`).
    Values OpenTelemetry cannot hold are stored as JSON text (or their repr). A non-mapping or a mapping with
    non-string keys is logged as an error and nothing is recorded.
    """
    if not isinstance(annotation, Mapping):
        logger.error("Annotation must be a mapping of attribute names to values, got %s", type(annotation).__name__)
        return None
    bad_keys = [key for key in annotation if not isinstance(key, str) or not key]
    if bad_keys:
        logger.error("Annotation keys must be non-empty strings, got %r; nothing is recorded", bad_keys)
        return None
    try:
        attributes = flatten_attributes(annotation)
    except Exception as exc:
        logger.error("Annotation could not be flattened into span attributes (%s); nothing is recorded", exc)
        return None
    return emit_span(AGL_ANNOTATION, attributes, propagate=propagate)
