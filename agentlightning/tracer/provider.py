"""The OpenTelemetry provider and span router Agent Lightning records with (the tracer's path of
`agentlightning.utils.otel_provider`, where they live so that the ground layer's `utils.otel` can reach them)."""

from __future__ import annotations

from agentlightning.utils.otel_provider import get_sdk_provider, register_processor, unregister_processor

__all__ = ["get_sdk_provider", "register_processor", "unregister_processor"]
