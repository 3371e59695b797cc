"""Agent Lightning: train existing agents with prompt optimization and reinforcement learning."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .adapter import (
    Adapter,
    LlmProxyTraceToTriplet,
    OpenAIMessages,
    OtelTraceAdapter,
    RewardMatchPolicy,
    TraceAdapter,
    TracerTraceToTriplet,
    TraceToMessages,
    TraceToTripletBase,
    TraceTree,
    TrajectoryDiagnosis,
    Transition,
)
from .algorithm import APO, GRPO, VERL, Algorithm, Baseline, FastAlgorithm, FunctionalAlgorithm, algo
from .emitter import (
    OperationContext,
    emit_annotation,
    emit_exception,
    emit_message,
    emit_object,
    emit_reward,
    find_final_reward,
    find_reward_spans,
    get_message_value,
    get_object_value,
    get_reward_value,
    get_rewards_from_span,
    is_reward_span,
    operation,
    reward,
)
from .env_var import (
    LightningEnvVar,
    resolve_bool_env_var,
    resolve_int_env_var,
    resolve_managed_store_flag,
    resolve_str_env_var,
)
from .execution import (
    ClientServerExecutionStrategy,
    ExecutionEvent,
    ExecutionStrategy,
    MultiprocessingEvent,
    SharedMemoryExecutionStrategy,
    ThreadingEvent,
)
from .instrumentation import instrument_all, uninstrument_all
from .litagent import FunctionalLitAgent, LitAgent, is_v0_1_rollout_api, llm_rollout, prompt_rollout, rollout
from .llm_proxy import LLMProxy, ModelConfig, get_active_llm_proxy, set_active_llm_proxy
from .logging import configure_logger
from .logging import setup as setup_logging
from .runner import LitAgentRunner, Runner, StoreUnreachableError
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
from .tracer import (
    DummyTracer,
    Tracer,
    TraceTarget,
    clear_active_tracer,
    get_active_tracer,
    set_active_tracer,
)
from .trainer import Trainer, build_component
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

if TYPE_CHECKING:
    from .tracer.agentops import AgentOpsTracer
    from .tracer.otel import OtelTracer
    from .tracer.processor import LightningSpanProcessor

__version__ = "0.3.0"

__all__ = [
    "APO",
    "GRPO",
    "LLM",
    "VERL",
    "Adapter",
    "AgentOpsTracer",
    "Algorithm",
    "Attempt",
    "AttemptNotFoundError",
    "AttemptStatus",
    "AttemptedRollout",
    "AttributeValue",
    "Attributes",
    "Baseline",
    "ClientServerExecutionStrategy",
    "Dataset",
    "DummyTracer",
    "EnqueueRolloutRequest",
    "Event",
    "ExecutionEvent",
    "ExecutionStrategy",
    "FastAlgorithm",
    "FilterField",
    "FilterOptions",
    "FunctionalAlgorithm",
    "FunctionalLitAgent",
    "GenericResponse",
    "Hook",
    "InMemoryLightningStore",
    "InvalidArgumentError",
    "LLMProxy",
    "LightningEnvVar",
    "LightningSpanProcessor",
    "LightningStore",
    "LightningStoreCapabilities",
    "LightningStoreClient",
    "LightningStoreServer",
    "LightningStoreStatistics",
    "LightningStoreThreaded",
    "Link",
    "LitAgent",
    "LitAgentRunner",
    "LlmProxyTraceToTriplet",
    "ModelConfig",
    "MultiprocessingEvent",
    "NamedResources",
    "NoAttemptsError",
    "OpenAIMessages",
    "OperationContext",
    "OtelResource",
    "OtelTraceAdapter",
    "OtelTracer",
    "PaginatedResult",
    "ParallelWorkerBase",
    "PromptTemplate",
    "ProxyLLM",
    "RayExecutionStrategy",
    "Resource",
    "ResourceUnion",
    "ResourcesUpdate",
    "RewardMatchPolicy",
    "Rollout",
    "RolloutConfig",
    "RolloutLegacy",
    "RolloutMode",
    "RolloutNotFoundError",
    "RolloutRawResult",
    "RolloutRawResultLegacy",
    "RolloutStatus",
    "Runner",
    "SharedMemoryExecutionStrategy",
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
    "StoreUnreachableError",
    "Task",
    "TaskIfAny",
    "TaskInput",
    "ThreadingEvent",
    "TraceAdapter",
    "TraceState",
    "TraceStatus",
    "TraceTarget",
    "TraceToMessages",
    "TraceToTripletBase",
    "TraceTree",
    "Tracer",
    "TracerTraceToTriplet",
    "Trainer",
    "TrajectoryDiagnosis",
    "Transition",
    "Triplet",
    "Worker",
    "WorkerStatus",
    "algo",
    "build_component",
    "clear_active_tracer",
    "configure_logger",
    "emit_annotation",
    "emit_exception",
    "emit_message",
    "emit_object",
    "emit_reward",
    "find_final_reward",
    "find_reward_spans",
    "get_active_llm_proxy",
    "get_active_tracer",
    "get_message_value",
    "get_object_value",
    "get_reward_value",
    "get_rewards_from_span",
    "instrument_all",
    "is_reward_span",
    "is_v0_1_rollout_api",
    "llm_rollout",
    "operation",
    "prompt_rollout",
    "resolve_bool_env_var",
    "resolve_int_env_var",
    "resolve_managed_store_flag",
    "resolve_str_env_var",
    "reward",
    "rollout",
    "set_active_llm_proxy",
    "set_active_tracer",
    "setup_logging",
    "store_from_url",
    "uninstrument_all",
]

_LAZY_TYPES = {"SpanLike", "RolloutRawResult", "RolloutRawResultLegacy"}
_LAZY_TRACERS = {"OtelTracer", "AgentOpsTracer", "LightningSpanProcessor"}


def __getattr__(name: str) -> Any:
    # Names that need the OpenTelemetry SDK are resolved on first use to keep this import fast.
    if name in _LAZY_TYPES:
        from . import types

        return getattr(types, name)
    if name in _LAZY_TRACERS:
        from . import tracer

        return getattr(tracer, name)
    if name == "RayExecutionStrategy":
        from .execution.ray import RayExecutionStrategy

        return RayExecutionStrategy
    if name in ("LightningStoreClient", "LightningStoreServer"):
        from . import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
