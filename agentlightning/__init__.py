"""Agent Lightning: train existing agents with prompt optimization and reinforcement learning."""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

# The public names are resolved on first use (module `__getattr__`), so `import agentlightning` loads only this file:
# a runner process, the CLI or a script that needs a few names does not pay for the store, the execution strategies,
# the algorithms and pydantic's model classes it never touches. The imports below are what type checkers and IDEs
# read; at run time `_EXPORTS` says where each name lives.
if TYPE_CHECKING:
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
    from .execution.ray import RayExecutionStrategy
    from .instrumentation import instrument_all, uninstrument_all
    from .litagent import (
        CommandAgent,
        FunctionalLitAgent,
        LitAgent,
        is_v0_1_rollout_api,
        llm_rollout,
        prompt_rollout,
        rollout,
    )
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
        LightningStoreClient,
        LightningStoreServer,
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
    from .tracer.agentops import AgentOpsTracer
    from .tracer.otel import OtelTracer
    from .tracer.processor import LightningSpanProcessor
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
        RolloutRawResult,
        RolloutRawResultLegacy,
        RolloutStatus,
        SortOptions,
        Span,
        SpanAttributeNames,
        SpanContext,
        SpanCoreFields,
        SpanLike,
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

from agentlightning.utils import extensions as _extensions
from agentlightning.version import __version__ as __version__

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
    "CommandAgent",
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

# Where each public name lives (module: names, space-separated).
_EXPORTS: dict[str, str] = {
    ".adapter": (
        "Adapter LlmProxyTraceToTriplet OpenAIMessages OtelTraceAdapter RewardMatchPolicy TraceAdapter "
        "TracerTraceToTriplet TraceToMessages TraceToTripletBase TraceTree TrajectoryDiagnosis Transition"
    ),
    ".algorithm": "APO GRPO VERL Algorithm Baseline FastAlgorithm FunctionalAlgorithm algo",
    ".emitter": (
        "OperationContext emit_annotation emit_exception emit_message emit_object emit_reward "
        "find_final_reward find_reward_spans get_message_value get_object_value get_reward_value "
        "get_rewards_from_span is_reward_span operation reward"
    ),
    ".env_var": (
        "LightningEnvVar resolve_bool_env_var resolve_int_env_var resolve_managed_store_flag resolve_str_env_var"
    ),
    ".execution": (
        "ClientServerExecutionStrategy ExecutionEvent ExecutionStrategy MultiprocessingEvent "
        "SharedMemoryExecutionStrategy ThreadingEvent"
    ),
    ".instrumentation": "instrument_all uninstrument_all",
    ".litagent": "CommandAgent FunctionalLitAgent LitAgent is_v0_1_rollout_api llm_rollout prompt_rollout rollout",
    ".llm_proxy": "LLMProxy ModelConfig get_active_llm_proxy set_active_llm_proxy",
    ".logging": "configure_logger",
    ".runner": "LitAgentRunner Runner StoreUnreachableError",
    ".store": (
        "AttemptNotFoundError InMemoryLightningStore InvalidArgumentError LightningStore "
        "LightningStoreCapabilities LightningStoreStatistics LightningStoreThreaded NoAttemptsError "
        "RolloutNotFoundError SpansEvictedError StoreError store_from_url LightningStoreClient "
        "LightningStoreServer"
    ),
    ".tracer": (
        "DummyTracer Tracer TraceTarget clear_active_tracer get_active_tracer set_active_tracer OtelTracer "
        "AgentOpsTracer LightningSpanProcessor"
    ),
    ".trainer": "Trainer build_component",
    ".types": (
        "LLM Attempt AttemptedRollout AttemptStatus Attributes AttributeValue Dataset EnqueueRolloutRequest "
        "Event FilterField FilterOptions GenericResponse Hook Link NamedResources OtelResource "
        "PaginatedResult ParallelWorkerBase PromptTemplate ProxyLLM Resource ResourcesUpdate ResourceUnion "
        "Rollout RolloutConfig RolloutLegacy RolloutMode RolloutStatus SortOptions Span SpanAttributeNames "
        "SpanContext SpanCoreFields SpanNames SpanRecordingContext StatusCode Task TaskIfAny TaskInput "
        "TraceState TraceStatus Triplet Worker WorkerStatus SpanLike RolloutRawResult RolloutRawResultLegacy"
    ),
    ".execution.ray": "RayExecutionStrategy",
}
_RENAMED = {"setup_logging": (".logging", "setup")}
_WHERE = {name: (module, name) for module, names in _EXPORTS.items() for name in names.split()} | _RENAMED


# The root sits above every layer it wires: it plugs the higher layers into the extension points of the lower ones,
# which never import them (docs/architecture.md, tests/test_layering.py). Nothing is imported until a point is used.
_extensions.install(_extensions.STORE_SERVER_MOUNTS, "agentlightning.server:STORE_SERVER_MOUNTS")
_extensions.install(_extensions.TRACER_INSTRUMENTATION, "agentlightning.instrumentation")


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (and a subpackage on attribute access: `agl.store`)."""
    where = _WHERE.get(name)
    if where is not None:
        module, attribute = where
        value = getattr(importlib.import_module(module, __name__), attribute)
        globals()[name] = value  # later lookups skip this function
        return value
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
