"""Agent Lightning: train existing agents with prompt optimization and reinforcement learning."""

from __future__ import annotations

from typing import Any

from .llm_proxy import LLMProxy, ModelConfig, get_active_llm_proxy, set_active_llm_proxy
from .store import (
    AttemptNotFoundError,
    InMemoryLightningStore,
    InvalidArgumentError,
    LightningStore,
    LightningStoreCapabilities,
    LightningStoreStatistics,
    LightningStoreThreaded,
    NoAttemptsError,
    RolloutNotFoundError,
    SpansEvictedError,
    StoreError,
    store_from_url,
)
from .types import (
    LLM,
    Attempt,
    AttemptedRollout,
    AttemptStatus,
    Attributes,
    AttributeValue,
    Dataset,
    EnqueueRolloutRequest,
    Event,
    FilterField,
    FilterOptions,
    GenericResponse,
    Hook,
    Link,
    NamedResources,
    OtelResource,
    PaginatedResult,
    ParallelWorkerBase,
    PromptTemplate,
    ProxyLLM,
    Resource,
    ResourcesUpdate,
    ResourceUnion,
    Rollout,
    RolloutConfig,
    RolloutLegacy,
    RolloutMode,
    RolloutStatus,
    SortOptions,
    Span,
    SpanAttributeNames,
    SpanContext,
    SpanCoreFields,
    SpanNames,
    SpanRecordingContext,
    StatusCode,
    Task,
    TaskIfAny,
    TaskInput,
    TraceState,
    TraceStatus,
    Triplet,
    Worker,
    WorkerStatus,
)

__version__ = "0.3.0"

__all__ = [
    "LLM",
    "Attempt",
    "AttemptNotFoundError",
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
    "InMemoryLightningStore",
    "InvalidArgumentError",
    "LLMProxy",
    "LightningStore",
    "LightningStoreCapabilities",
    "LightningStoreClient",
    "LightningStoreServer",
    "LightningStoreStatistics",
    "LightningStoreThreaded",
    "Link",
    "ModelConfig",
    "NamedResources",
    "NoAttemptsError",
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
    "RolloutNotFoundError",
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
    "SpansEvictedError",
    "StatusCode",
    "StoreError",
    "Task",
    "TaskIfAny",
    "TaskInput",
    "TraceState",
    "TraceStatus",
    "Triplet",
    "Worker",
    "WorkerStatus",
    "get_active_llm_proxy",
    "set_active_llm_proxy",
    "store_from_url",
]

_LAZY_TYPES = {"SpanLike", "RolloutRawResult", "RolloutRawResultLegacy"}


def __getattr__(name: str) -> Any:
    # Aliases that need the OpenTelemetry SDK are resolved on first use to keep this import fast.
    if name in _LAZY_TYPES:
        from . import types

        return getattr(types, name)
    if name in ("LightningStoreClient", "LightningStoreServer"):
        from . import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
