"""Tracers: record what an agent does as spans tied to a rollout attempt.

`Tracer` (abstract), `OtelTracer` (OpenTelemetry SDK, batched store writes), `DummyTracer` (no backend),
`AgentOpsTracer` (OtelTracer plus the AgentOps SDK, offline; needs the `agentops` extra) and the active-tracer
functions used by the emitters. Classes that need the OpenTelemetry SDK are imported on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .active import clear_active_tracer, get_active_tracer, set_active_tracer
from .base import Tracer, TraceTarget
from .dummy import DummyTracer

if TYPE_CHECKING:
    from .agentops import AgentOpsTracer
    from .otel import OtelTracer
    from .processor import LightningSpanProcessor
    from .writer import SpanWriter, SpanWriterStats

__all__ = [
    "AgentOpsTracer",
    "DummyTracer",
    "LightningSpanProcessor",
    "OtelTracer",
    "SpanWriter",
    "SpanWriterStats",
    "TraceTarget",
    "Tracer",
    "clear_active_tracer",
    "get_active_tracer",
    "set_active_tracer",
]

_LAZY = {
    "OtelTracer": ".otel",
    "AgentOpsTracer": ".agentops",
    "LightningSpanProcessor": ".processor",
    "SpanWriter": ".writer",
    "SpanWriterStats": ".writer",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
