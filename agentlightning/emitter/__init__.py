"""Emitters: record rewards, messages, objects, exceptions, annotations and operations as spans.

Inside a tracer's trace context the spans are tied to the running rollout attempt and stored; elsewhere they are
built and returned (see `agentlightning.emitter.dispatch`). Emitters never raise on bad input: they log an error.
"""

from __future__ import annotations

from .annotation import emit_annotation
from .exception import emit_exception
from .message import emit_message, get_message_value
from .object import emit_object, get_object_value
from .operation import OperationContext, operation
from .reward import (
    emit_reward,
    find_final_reward,
    find_reward_spans,
    get_reward_value,
    get_rewards_from_span,
    is_reward_span,
    reward,
)

__all__ = [
    "OperationContext",
    "emit_annotation",
    "emit_exception",
    "emit_message",
    "emit_object",
    "emit_reward",
    "find_final_reward",
    "find_reward_spans",
    "get_message_value",
    "get_object_value",
    "get_reward_value",
    "get_rewards_from_span",
    "is_reward_span",
    "operation",
    "reward",
]
