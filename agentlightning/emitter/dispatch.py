"""How emitters reach a tracer.

Inside a trace context the *active tracer* (see `agentlightning.tracer.active`) records the span, so it is tied to
the running rollout attempt and stored. Outside any trace context (or with `propagate=False`) the span fields are
still built and returned; the span then goes to the global OpenTelemetry SDK provider when the application installed
one (its own exporters see it, as in v0.2), and is otherwise only logged at debug level. Emitting never raises.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Optional

from agentlightning.env_var import LightningEnvVar, resolve_bool_env_var
from agentlightning.tracer.active import get_active_tracer
from agentlightning.tracer.base import Tracer
from agentlightning.tracer.dummy import DummyTracer
from agentlightning.types import SpanCoreFields, SpanRecordingContext

__all__ = ["emit_span", "open_operation", "resolve_tracer"]

logger = logging.getLogger("agentlightning.emitter")

_STANDALONE = DummyTracer()


def _global_sdk_provider() -> Any:
    """The global OpenTelemetry provider if it is an SDK provider (without importing the SDK if nobody did)."""
    if "opentelemetry.sdk.trace" not in sys.modules:
        return None
    from opentelemetry import trace as trace_api
    from opentelemetry.sdk.trace import TracerProvider

    provider = trace_api.get_tracer_provider()
    return provider if isinstance(provider, TracerProvider) else None


def resolve_tracer(propagate: bool) -> Optional[Tracer]:
    """The tracer an emitter should use: the active tracer when propagating, else None (standalone)."""
    return get_active_tracer() if propagate else None


def _debug_enabled() -> bool:
    try:
        return resolve_bool_env_var(LightningEnvVar.AGL_EMITTER_DEBUG)
    except ValueError as exc:
        logger.warning("%s; emitter debugging stays off", exc)
        return False


def emit_span(name: str, attributes: Mapping[str, Any], *, propagate: bool = True) -> SpanCoreFields:
    """Record a zero-length span named `name` with `attributes` and return its fields (never raises)."""
    if _debug_enabled():
        logger.info("Emitting span %r with attributes %s (propagate=%s)", name, dict(attributes), propagate)
    tracer = resolve_tracer(propagate)
    if tracer is not None:
        try:
            return tracer.create_span(name, attributes)
        except Exception:
            logger.exception("Tracer %r failed to record span %r; the span is not stored", tracer, name)
            return _STANDALONE.create_span(name, attributes)
    fields = _STANDALONE.create_span(name, attributes)
    if propagate:
        provider = _global_sdk_provider()
        if provider is not None:
            try:
                span = provider.get_tracer("agentlightning").start_span(name, attributes=fields.attributes)
                span.end()
            except Exception:
                logger.debug("Could not send span %r to the global OpenTelemetry provider", name, exc_info=True)
        logger.debug("No active tracer: span %r was built but is not tied to a rollout (%s)", name, fields.attributes)
    return fields


@contextmanager
def open_operation(
    name: str, attributes: Mapping[str, Any], *, propagate: bool = True
) -> Iterator[SpanRecordingContext]:
    """A span covering the block, recorded by the active tracer (or built standalone)."""
    tracer = resolve_tracer(propagate) or _STANDALONE
    if tracer is _STANDALONE and propagate:
        logger.debug("No active tracer: operation span %r is not tied to a rollout", name)
    with tracer.operation_context(name, attributes) as recording:
        yield recording
