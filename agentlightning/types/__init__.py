"""Public data model of Agent Lightning: rollouts, attempts, spans, resources and query helpers."""

from __future__ import annotations

from typing import Any

from .core import (
    Attempt,
    AttemptedRollout,
    AttemptStatus,
    Dataset,
    EnqueueRolloutRequest,
    FilterField,
    FilterOptions,
    GenericResponse,
    Hook,
    PaginatedResult,
    ParallelWorkerBase,
    Rollout,
    RolloutConfig,
    RolloutLegacy,
    RolloutMode,
    RolloutStatus,
    SortOptions,
    Task,
    TaskIfAny,
    TaskInput,
    Triplet,
    Worker,
    WorkerStatus,
)
from .resources import (
    LLM,
    NamedResources,
    PromptTemplate,
    ProxyLLM,
    Resource,
    ResourcesUpdate,
    ResourceUnion,
)
from .tracer import (
    Attributes,
    AttributeValue,
    Event,
    Link,
    OtelResource,
    Span,
    SpanAttributeNames,
    SpanContext,
    SpanCoreFields,
    SpanNames,
    SpanRecordingContext,
    StatusCode,
    TraceState,
    TraceStatus,
)

# Names whose value needs the OpenTelemetry SDK; they are resolved on first access to keep imports fast.
_LAZY = {"SpanLike": "tracer", "RolloutRawResult": "core", "RolloutRawResultLegacy": "core"}

__all__ = [
    "LLM",
    "Attempt",
    "AttemptStatus",
    "AttemptedRollout",
    "AttributeValue",
    "Attributes",
    "Dataset",
    "EnqueueRolloutRequest",
    "Event",
    "FilterField",
    "FilterOptions",
    "GenericResponse",
    "Hook",
    "Link",
    "NamedResources",
    "OtelResource",
    "PaginatedResult",
    "ParallelWorkerBase",
    "PromptTemplate",
    "ProxyLLM",
    "Resource",
    "ResourceUnion",
    "ResourcesUpdate",
    "Rollout",
    "RolloutConfig",
    "RolloutLegacy",
    "RolloutMode",
    "RolloutRawResult",
    "RolloutRawResultLegacy",
    "RolloutStatus",
    "SortOptions",
    "Span",
    "SpanAttributeNames",
    "SpanContext",
    "SpanCoreFields",
    "SpanLike",
    "SpanNames",
    "SpanRecordingContext",
    "StatusCode",
    "Task",
    "TaskIfAny",
    "TaskInput",
    "TraceState",
    "TraceStatus",
    "Triplet",
    "Worker",
    "WorkerStatus",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        value = getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
