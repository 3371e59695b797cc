"""Adapters: turn the spans of a rollout into training data (triplets) or conversations (messages)."""

from __future__ import annotations

from .base import Adapter, OtelTraceAdapter, TraceAdapter
from .diagnostics import TrajectoryDiagnosis
from .llm_proxy import LlmProxyTraceToTriplet
from .messages import OpenAIMessages, TraceToMessages
from .trace_tree import RewardMatchPolicy, TraceTree
from .triplet import TracerTraceToTriplet, TraceToTripletBase, Transition

__all__ = [
    "Adapter",
    "LlmProxyTraceToTriplet",
    "OpenAIMessages",
    "OtelTraceAdapter",
    "RewardMatchPolicy",
    "TraceAdapter",
    "TraceToMessages",
    "TraceToTripletBase",
    "TraceTree",
    "TracerTraceToTriplet",
    "TrajectoryDiagnosis",
    "Transition",
]
